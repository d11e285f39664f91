"""The LLM load test's report: metric definitions, per-step table, failures, recovery, time line.

``render_llm_markdown(result, verdict)`` is pure text; ``render_timeline_png(step)`` draws one
step's requests (TTFT and latency by send time) above the server's pending requests, the
client's in-flight requests and the server's queue time, on one time line (matplotlib's Agg
canvas, never ``pyplot``). ``write_llm_report`` writes ``llm_report.md`` and one PNG per step.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit._fs import atomic_write
from tritonkit.perf.llm.metrics import Distribution
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.metric_registry import METRICS, PER_REQUEST_TIMES

if TYPE_CHECKING:
    from tritonkit.perf.judge.verdict import Verdict

__all__ = ["METRIC_DEFINITIONS", "render_llm_markdown", "render_timeline_png", "write_llm_report"]

#: What each reported metric means (GenAI-Perf's definitions), printed in every report; the
#: SLA metrics' definitions are the registry's (``tritonkit.perf.metric_registry``).
METRIC_DEFINITIONS: tuple[tuple[str, str], ...] = (
    ("TTFT", "time to first token: " + PER_REQUEST_TIMES["ttft"][2]),
    ("ITL", "inter-token latency: " + PER_REQUEST_TIMES["itl"][2]),
    ("request latency", "last response (the end of the stream) − request sent"),
    ("output tokens/s", METRICS["tokens_per_s"].definition),
    ("requests/s", "answered requests / the same span"),
    ("per-user tokens/s", METRICS["user_tokens_per_s"].definition),
    ("ISL / OSL", "input / output sequence length in tokens (output counted from the responses' token ids)"),
    ("goodput", METRICS["goodput"].definition),
    ("recovery", "after the load (a spike's burst, or the whole shape) ends: time until the server's pending "
                 "requests and queue time are back at their level before the load"),
    ("client deadline", "a request slower than the client's deadline counts as a client time-out"),
)


def _f(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def _pair(dist: Distribution | None) -> str:
    return "–" if dist is None else f"{dist.p50:.1f} / {dist.p99:.1f}"


def _label(step: LLMStep) -> str:
    return f"c{step.load_value:g}" if step.load_mode == "concurrency" else f"{step.load_mode} ({step.load_value:g} req)"


def render_llm_markdown(result: LLMResult, verdict: Verdict | None = None, *, plots: dict[str, str] | None = None) -> str:
    """The report as Markdown; ``plots`` maps a step label to its PNG's file name."""
    lines = [
        f"# LLM load test: {result.model}",
        "",
        f"- server: `{result.url}`, streaming: {'on' if result.streaming else 'off'}, request layout: {result.layout}",
        f"- prompts: {result.prompt_source}; started {result.started_utc}, finished {result.finished_utc}",
    ]
    if result.client_deadline_ms is not None:
        lines.append(f"- client deadline: {result.client_deadline_ms:g} ms")
    lines += [f"- note: {n}" for n in result.notes]
    if verdict is not None:
        lines += ["", f"**Verdict: {verdict.status.upper()}** — {verdict.summary()}"]
    lines += [
        "",
        "## Results",
        "",
        "| load | requests | TTFT p50 / p99 ms | ITL p50 / p99 ms | latency p50 / p99 ms | output tok/s | req/s "
        "| per-user tok/s p50 | ISL / OSL mean | goodput /s | failures |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for step in result.steps:
        m = step.metrics
        failures = "none" if not step.failures.total else f"{step.failures.hit} ×{step.failures.total}"
        if m is None:
            lines.append(f"| {_label(step)} | 0 | – | – | – | – | – | – | – | – | {failures} |")
            continue
        goodput = "–" if m.goodput_per_s is None else f"{m.goodput_per_s:.2f} ({m.good_count}/{m.answered_count})"
        lens = f"{_f(m.input_tokens.mean if m.input_tokens else None)} / {_f(m.output_tokens.mean if m.output_tokens else None)}"
        lines.append(
            f"| {_label(step)} | {m.answered_count} | {_pair(m.ttft_ms)} | {_pair(m.itl_ms)} | {_pair(m.latency_ms)} "
            f"| {_f(m.output_token_throughput_per_s)} | {_f(m.request_throughput_per_s, 2)} "
            f"| {_f(m.per_user_tokens_per_s.p50 if m.per_user_tokens_per_s else None)} | {lens} | {goodput} | {failures} |"
        )
    slos = {m.goodput_slo.describe() for s in result.steps if (m := s.metrics) and m.goodput_slo}
    if slos:
        lines += ["", f"Goodput objectives (per request): {'; '.join(sorted(slos))}."]
    for step in result.steps:
        lines += _step_details(step, (plots or {}).get(_label(step)))
    lines += ["", "## Definitions", ""]
    lines += [f"- **{name}**: {text}" for name, text in METRIC_DEFINITIONS]
    return "\n".join(lines) + "\n"


def _step_details(step: LLMStep, plot: str | None) -> list[str]:
    out = ["", f"## {_label(step)}", ""]
    out.append(f"perf_analyzer ran {step.wall_s:.1f} s, using {_f(step.generator_cpu_pct)} % of one core.")
    if step.metrics is not None:
        out += [f"- {note}" for note in step.metrics.notes]
    if step.failures.total:
        counts = ", ".join(f"{k} {v}" for k, v in step.failures.counts.items() if v)
        out += ["", f"**Failures: {counts}** — this run hit **{step.failures.hit}**."]
        out += [f"- {e}" for e in step.failures.evidence]
    if step.recovery is not None:
        r = step.recovery
        value = f"**{r.recovery_s:.2f} s**" if r.recovery_s is not None else f"**not recovered** ({r.note})"
        out += [
            "",
            f"Recovery after the load ended at {r.load_end_s:.2f} s: {value} "
            f"(baseline: ≤ {max(r.baseline_pending, 1.0):g} pending, queue ≤ {r.baseline_queue_ms:.1f} ms + slack; "
            f"peak: {_f(r.peak_pending, 0)} pending, {_f(r.peak_queue_ms)} ms queue).",
        ]
    if step.drift is not None and step.drift.windows:
        out += ["", "Latency drift over the run (by send time):", "",
                "| window | requests | latency p50 ms | latency p99 ms | TTFT p99 ms |", "| --- | ---: | ---: | ---: | ---: |"]
        for w in step.drift.windows:
            out.append(f"| {w.start_s:.1f}–{w.end_s:.1f} s | {w.request_count} | {_f(w.latency_p50_ms)} "
                       f"| {_f(w.latency_p99_ms)} | {_f(w.ttft_p99_ms)} |")
        out.append(f"\nFirst → last window: p99 latency {_f(step.drift.p99_change_pct)} %, "
                   f"TTFT p99 {_f(step.drift.ttft_p99_change_pct)} %.")
    out += [f"- warning: {w}" for w in step.warnings]
    if plot:
        out += ["", f"![time line]({plot})"]
    return out


def render_timeline_png(step: LLMStep) -> bytes | None:
    """Requests and server state on one time line; ``None`` when the step has neither."""
    if not step.requests and not step.timeline:
        return None
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8.0, 5.5), dpi=100)
    FigureCanvasAgg(figure)
    top, bottom = figure.subplots(2, 1, sharex=True)
    sent = [r[0] for r in step.requests]
    top.plot(sent, [r[2] for r in step.requests], ".", label="request latency (ms)")
    top.plot(sent, [r[1] for r in step.requests], "x", label="TTFT (ms)")
    top.set_ylabel("ms")
    top.legend(loc="upper left", fontsize="small")
    times = [p.t_s for p in step.timeline]
    bottom.step(times, [p.pending or 0 for p in step.timeline], where="post", label="server pending")
    bottom.step(times, [p.in_flight for p in step.timeline], where="post", label="client in flight")
    bottom.set_ylabel("requests")
    bottom.set_xlabel("seconds from the first request")
    queue_axis = bottom.twinx()
    queue_axis.plot(times, [p.queue_ms if p.queue_ms is not None else float("nan") for p in step.timeline],
                    "r--", label="server queue (ms)")
    queue_axis.set_ylabel("queue ms")
    for phase in step.phases:
        if phase.get("name") in ("burst",):
            for axis in (top, bottom):
                axis.axvspan(phase["start_s"], phase["end_s"], color="orange", alpha=0.15)
    if step.recovery is not None and step.recovery.recovery_s is not None:
        bottom.axvline(step.recovery.load_end_s + step.recovery.recovery_s, color="green", linestyle=":",
                       label="recovered")
    handles, labels = bottom.get_legend_handles_labels()
    extra_handles, extra_labels = queue_axis.get_legend_handles_labels()
    bottom.legend(handles + extra_handles, labels + extra_labels, loc="upper right", fontsize="small")
    top.set_title(_label(step))
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_llm_report(result: LLMResult, folder: str | os.PathLike[str], verdict: Verdict | None = None) -> Path:
    """Write ``llm_report.md`` and ``llm_timeline_<label>.png`` per step into ``folder``; return the Markdown path."""
    target = Path(folder)
    plots: dict[str, str] = {}
    for index, step in enumerate(result.steps):
        png = render_timeline_png(step)
        if png is not None:
            name = f"llm_timeline_{index + 1}_{step.load_mode}.png"
            atomic_write(target / name, png)
            plots[_label(step)] = name
    return atomic_write(target / "llm_report.md", render_llm_markdown(result, verdict, plots=plots))
