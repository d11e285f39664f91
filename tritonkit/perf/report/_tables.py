"""Shared pieces of every rendering of a perf run: number formatting and the report's tables.

Each renderer (Markdown, HTML, terminal) lays these rows out in its own syntax, so the figures
in ``report.md`` and ``report.html`` cannot disagree.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence

from tritonkit.perf.judge.sla import format_metric
from tritonkit.perf.judge.verdict import CheckResult, StepVerdict, Verdict
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.metric_registry import METRICS

#: Written into every report.md / report.html, so a later run knows the file is its own to replace
#: (and never overwrites a report a person wrote in that folder).
REPORT_MARKER = "tritonkit perf report: rewritten by every run into this folder"

#: The plots every report has, by file stem, with their captions.
PLOT_NAMES: dict[str, str] = {
    "latency_vs_throughput": "Latency percentiles against throughput",
    "latency_breakdown": "Where a request spends its time, per step (mean, ms)",
    "throughput_vs_load": "Throughput against offered load, with the SLA",
}

# The stacked components of a request's latency, bottom to top, with a colour each.
BREAKDOWN = (
    ("queue", "server queue", "#d62728"),
    ("compute_input", "compute input", "#9467bd"),
    ("compute_infer", "compute infer", "#1f77b4"),
    ("compute_output", "compute output", "#17becf"),
    ("network", "network + server send/recv", "#ff7f0e"),
    ("client", "client send + recv", "#7f7f7f"),
)


def reproduce_line(command: Sequence[str]) -> str:
    """The command a report prints under "Reproduce", quoted for a POSIX shell (``shlex.join``):
    a path holding ``$(…)``, spaces or quotes is pasted back as the same arguments, never run."""
    return shlex.join(command)


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if value == int(value) and abs(value) >= 10:
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def load_label(kind: str) -> str:
    return "concurrency" if kind == "concurrency" else "request rate (req/s)"


def us_to_ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def breakdown_ms(step: StepResult) -> dict[str, float]:
    """Mean time per request in each component, in ms (absent components are 0)."""
    server, client = step.server, step.client
    parts = {
        "queue": us_to_ms(server.queue_us),
        "compute_input": us_to_ms(server.compute_input_us),
        "compute_infer": us_to_ms(server.compute_infer_us),
        "compute_output": us_to_ms(server.compute_output_us),
        "network": us_to_ms(client.network_server_us),
        "client": None
        if client.send_us is None and client.recv_us is None
        else ((client.send_us or 0.0) + (client.recv_us or 0.0)) / 1000.0,
    }
    return {k: (v or 0.0) for k, v in parts.items()}


def step_status(step: StepResult, verdict: Verdict | None) -> StepVerdict | None:
    if verdict is None:
        return None
    for judged in verdict.steps:
        if judged.load == step.load_value:
            return judged
    return None


def metadata_rows(result: PerfResult) -> list[tuple[str, str]]:
    m = result.metadata
    rows = [
        ("model", m.model + (f" (version {m.model_version})" if m.model_version else "")),
        ("server", f"{m.url} ({m.protocol})"),
        *([("served by", m.runtime.describe())] if m.runtime is not None else []),
        ("started (UTC)", m.started_utc),
        ("finished (UTC)", m.finished_utc or "–"),
        ("load generator", f"{m.tool} {m.tool_version or ''}".strip()),
        ("batch size", str(m.batch_size)),
    ]
    if m.measurement_interval_ms:
        rows.append(("measurement window", f"{m.measurement_interval_ms} ms"))
    if m.generator_host or m.generator_cpu_count:
        host = m.generator_host or "?"
        rows.append(("generator host", f"{host}, {m.generator_cpu_count or '?'} cores"))
    if result.clients:  # several perf_analyzer clients at once (perf run --cluster), their requests merged
        rows.append(("load generators", f"{len(result.clients)} clients at once: " + ", ".join(
            f"node {str(c.get('node_id', '?'))[:8]} ({c.get('address') or c.get('host') or '?'}, "
            f"{c.get('requests', 0)} requests)" for c in result.clients)))
    if result.warmup is not None:
        w = result.warmup
        rows.append(
            ("warm-up (not recorded)", f"{w.load_mode} {fmt(w.load_value)} for {fmt(w.duration_s)} s")
        )
    rows.append(("ladder ended", result.stop_reason))
    return rows


# The registry's metrics shown per step, in column order (their headers come from the registry).
_STEP_COLUMNS = ("throughput", "p50", "p90", "p95", "p99", "mean", "queue", "errors")


def band(step: StepResult, name: str) -> str:
    """Figure ``name``'s 95 % interval of ``step`` as ``low – high`` (``–`` without one)."""
    found = step.interval(name)
    return "–" if found is None else f"{fmt(found[0])} – {fmt(found[1])}"


def margin_cell(judged: StepVerdict | None) -> str:
    """The step's margin to its tightest bound: ``p99<=50ms: +12 ms (+24%)``."""
    check = judged.margin_check if judged is not None else None
    if check is None or check.margin is None:
        return "–"
    c = check.constraint
    headroom = f" ({check.headroom * 100:+.0f}%)" if check.headroom is not None else ""
    sign = "+" if check.margin >= 0 else "-"
    return f"{c}: {sign}{format_metric(c.metric, abs(check.margin))}{headroom}"


def sla_label(status: str) -> str:
    """A verdict status as the reports write it."""
    return "INSIDE THE NOISE" if status == "noise" else status.upper()


def step_rows(result: PerfResult, verdict: Verdict | None) -> tuple[list[str], list[list[str]]]:
    kind = result.steps[0].load_mode if result.steps else "concurrency"
    basis = "runs" if result.repeats > 1 else "windows"
    header = [
        load_label(kind),
        *(str(METRICS[name].column) for name in _STEP_COLUMNS),
        f"throughput 95% interval ({basis})",
        f"p99 95% interval ({basis}, ms)",
        "margin to the SLA",
        "generator CPU (% of cores)",
        "other processes (cores)",
        "SLA",
    ]
    rows = []
    for step in sorted(result.steps, key=lambda s: s.load_value):
        lat = step.latency
        judged = step_status(step, verdict)
        sla_cell = "–" if judged is None else sla_label(judged.status)
        if judged is not None:
            # The row shows what was measured: a broken bound needs only its name, another criterion its sentence.
            broken = ", ".join(str(c.constraint) for c in (*judged.failed, *judged.inside_noise))
            why = [broken] * bool(broken) + list(judged.misses) + list(judged.unsure)
            sla_cell += f" ({'; '.join(why)})" if why else ""
        if step.noisy:
            sla_cell += " (noisy)"
        elif not step.stable:
            sla_cell += " (unstable)"
        rows.append(
            [
                fmt(step.load_value),
                fmt(step.throughput_per_s, 4),
                fmt(lat.p50_ms if lat else None),
                fmt(lat.p90_ms if lat else None),
                fmt(lat.p95_ms if lat else None),
                fmt(lat.p99_ms if lat else None),
                fmt(lat.mean_ms if lat else None),
                fmt(us_to_ms(step.server.queue_us)),
                str(step.error_count),
                band(step, "throughput"),
                band(step, "p99"),
                margin_cell(judged),
                fmt(step.generator_cpu_pct_of_cores),
                fmt(step.machine.other_cores if step.machine else None),
                sla_cell,
            ]
        )
    return header, rows


def check_cells(check: CheckResult) -> list[str]:
    c = check.constraint
    measured = "–" if check.measured is None else format_metric(c.metric, check.measured)
    headroom = "–" if check.headroom is None else f"{check.headroom * 100:+.1f}%"
    return [str(c), f"{c.op} {c.format_value()}", measured, headroom]


def check_sentence(check: CheckResult) -> str:
    return check.describe()


def notes_of(result: PerfResult) -> list[str]:
    notes = []
    for step in sorted(result.steps, key=lambda s: s.load_value):
        label = f"{step.load_mode} {fmt(step.load_value)}"
        if step.noisy:
            notes.append(f"{label}: {step.unstable_note or 'noisy: its windows disagreed'}")
        elif not step.stable:
            notes.append(
                f"{label}: unstable measurement" + (f" ({step.unstable_note})" if step.unstable_note else "")
            )
        if step.error_count:
            notes.append(
                f"{label}: {step.error_count} failed request(s)"
                + (f": {step.error_note}" if step.error_note else "")
            )
        if step.attempts > 1:
            notes.append(f"{label}: measured in {step.attempts} attempts")
        notes += [f"{label}: {w}" for w in step.warnings]
    return notes


def noise_lines(result: PerfResult) -> list[str]:
    """What the figures' intervals mean and what the machine was doing, for the report's
    "Noise and the machine" section (every line a sentence)."""
    lines: list[str] = []
    if result.repeats > 1:
        lines.append(f"The ladder ran {result.repeats} times; each figure is the median over the runs and its "
                     "95 % interval is a Student-t interval over them: the spread from run to run.")
    else:
        lines.append("Each figure's 95 % interval is a Student-t interval over the step's counted measurement "
                     "windows: the spread within this one run. Run-to-run drift (another server start, other "
                     "neighbours) is not in it: `perf run --repeat N` measures that.")
    noisy = [fmt(s.load_value) for s in result.steps if s.noisy]
    if noisy:
        lines.append(f"Noisy steps (their windows disagreed; figures are their windows' medians): {', '.join(noisy)}.")
    loads = [s.machine for s in result.steps if s.machine is not None]
    others = [m.other_cores for m in loads if m.other_cores is not None]
    if others:
        cores = loads[0].cores
        lines.append(f"Other processes on the load generator's host used {min(others):.2f}–{max(others):.2f} "
                     f"of its {cores} core(s) during the steps.")
    limited = [fmt(s.load_value) for s in result.steps if s.machine is not None and s.machine.generator_limited]
    if limited:
        lines.append(f"perf_analyzer itself may have been the limit at: {', '.join(limited)}.")
    return lines


def run_rows(result: PerfResult) -> tuple[list[str], list[list[str]]]:
    """For a repeated ladder: each load's figures in every run (throughput, p99), then their spread."""
    header = ["load", "run", "throughput (infer/s)", "p99 (ms)", "noisy"]
    rows: list[list[str]] = []
    for step in sorted(result.steps, key=lambda s: s.load_value):
        for run in step.runs:
            rows.append([fmt(step.load_value), str(run.run), fmt(run.throughput_per_s, 4), fmt(run.p99_ms),
                         "yes" if run.noisy else ""])
    return header, rows
