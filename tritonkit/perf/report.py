"""Reports of a perf run: ``report.md`` for terminals and reviews, ``report.html`` with plots.

Rendering is pure (a :class:`~tritonkit.perf.result.RunResult` and its
:class:`~tritonkit.perf.sla.Verdict` in, text or PNG bytes out); :func:`write_report` puts the
files on disk atomically::

    run-folder/
      report.md               tables + links to the plots
      report.html             self-contained: the same tables, plots embedded as PNG data URIs
      plots/latency_vs_throughput.png
      plots/latency_breakdown.png
      plots/throughput_vs_load.png

Plots are drawn with matplotlib's Agg canvas directly (never ``pyplot``), so rendering needs
no display and changes no global backend state of the caller.
"""

from __future__ import annotations

import base64
import html
import io
import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.perf.result import RunResult, StepResult
from tritonkit.perf.sla import format_metric
from tritonkit.perf.verdict import CheckResult, StepVerdict, Verdict

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = [
    "PLOT_NAMES",
    "ReportFiles",
    "render_html",
    "render_markdown",
    "render_plots",
    "stored_verdict",
    "write_report",
]

#: The plots every report has, by file stem, with their captions.
PLOT_NAMES: dict[str, str] = {
    "latency_vs_throughput": "Latency percentiles against throughput",
    "latency_breakdown": "Where a request spends its time, per step (mean, ms)",
    "throughput_vs_load": "Throughput against offered load, with the SLA",
}

# The stacked components of a request's latency, bottom to top, with a colour each.
_BREAKDOWN = (
    ("queue", "server queue", "#d62728"),
    ("compute_input", "compute input", "#9467bd"),
    ("compute_infer", "compute infer", "#1f77b4"),
    ("compute_output", "compute output", "#17becf"),
    ("network", "network + server send/recv", "#ff7f0e"),
    ("client", "client send + recv", "#7f7f7f"),
)


@dataclass(frozen=True)
class ReportFiles:
    """Where :func:`write_report` put each file."""

    markdown: Path
    html: Path
    plots: dict[str, Path]


def stored_verdict(result: RunResult) -> Verdict | None:
    """The verdict kept in ``result.verdict``, or ``None`` when the run had no SLA."""
    if not result.verdict:
        return None
    return Verdict.from_dict(result.verdict)


# --------------------------------------------------------------------------- numbers


def _fmt(value: float | None, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if value == int(value) and abs(value) >= 10:
        return f"{int(value)}"
    return f"{value:.{digits}g}"


def _load_label(kind: str) -> str:
    return "concurrency" if kind == "concurrency" else "request rate (req/s)"


def _ms(us: float | None) -> float | None:
    return None if us is None else us / 1000.0


def _breakdown_ms(step: StepResult) -> dict[str, float]:
    """Mean time per request in each component, in ms (absent components are 0)."""
    server, client = step.server, step.client
    parts = {
        "queue": _ms(server.queue_us),
        "compute_input": _ms(server.compute_input_us),
        "compute_infer": _ms(server.compute_infer_us),
        "compute_output": _ms(server.compute_output_us),
        "network": _ms(client.network_server_us),
        "client": None
        if client.send_us is None and client.recv_us is None
        else ((client.send_us or 0.0) + (client.recv_us or 0.0)) / 1000.0,
    }
    return {k: (v or 0.0) for k, v in parts.items()}


def _step_status(step: StepResult, verdict: Verdict | None) -> StepVerdict | None:
    if verdict is None:
        return None
    for judged in verdict.steps:
        if judged.load == step.load_value:
            return judged
    return None


# --------------------------------------------------------------------------- markdown


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines


def _metadata_rows(result: RunResult) -> list[tuple[str, str]]:
    m = result.metadata
    rows = [
        ("model", m.model + (f" (version {m.model_version})" if m.model_version else "")),
        ("server", f"{m.url} ({m.protocol})"),
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
    if result.warmup is not None:
        w = result.warmup
        rows.append(
            ("warm-up (not recorded)", f"{w.load_mode} {_fmt(w.load_value)} for {_fmt(w.duration_s)} s")
        )
    rows.append(("ladder ended", result.stop_reason))
    return rows


def _step_rows(result: RunResult, verdict: Verdict | None) -> tuple[list[str], list[list[str]]]:
    kind = result.steps[0].load_mode if result.steps else "concurrency"
    header = [
        _load_label(kind),
        "throughput (infer/s)",
        "p50 (ms)",
        "p90 (ms)",
        "p95 (ms)",
        "p99 (ms)",
        "mean (ms)",
        "queue (ms)",
        "errors",
        "generator CPU (% of cores)",
        "SLA",
    ]
    rows = []
    for step in sorted(result.steps, key=lambda s: s.load_value):
        lat = step.latency
        judged = _step_status(step, verdict)
        sla_cell = "–" if judged is None else judged.status.upper()
        if judged is not None and judged.failed:
            sla_cell += " (" + ", ".join(str(c.constraint) for c in judged.failed) + ")"
        if not step.stable:
            sla_cell += " (unstable)"
        rows.append(
            [
                _fmt(step.load_value),
                _fmt(step.throughput_per_s, 4),
                _fmt(lat.p50_ms if lat else None),
                _fmt(lat.p90_ms if lat else None),
                _fmt(lat.p95_ms if lat else None),
                _fmt(lat.p99_ms if lat else None),
                _fmt(lat.mean_ms if lat else None),
                _fmt(_ms(step.server.queue_us)),
                str(step.error_count),
                _fmt(step.generator_cpu_pct_of_cores),
                sla_cell,
            ]
        )
    return header, rows


def _verdict_lines(verdict: Verdict | None) -> list[str]:
    if verdict is None:
        return ["No SLA was given: the steps below are measurements only."]
    lines = [f"**{verdict.status.upper()}** (exit code {verdict.exit_code}): {verdict.summary()}", ""]
    if verdict.knee is not None:
        header = ["constraint", "limit", f"measured at the knee ({_fmt(verdict.knee.load)})", "headroom"]
        lines += _md_table(header, [_check_cells(c) for c in verdict.knee.checks])
    elif verdict.binding is not None:
        lines += [f"Closest miss: {_check_sentence(verdict.binding)}."]
    return lines


def _check_cells(check: CheckResult) -> list[str]:
    c = check.constraint
    measured = "–" if check.measured is None else format_metric(c.metric, check.measured)
    headroom = "–" if check.headroom is None else f"{check.headroom * 100:+.1f}%"
    return [str(c), f"{c.op} {c.format_value()}", measured, headroom]


def _check_sentence(check: CheckResult) -> str:
    c = check.constraint
    measured = "not measured" if check.measured is None else format_metric(c.metric, check.measured)
    return f"{c} (measured {measured})"


def _notes(result: RunResult) -> list[str]:
    notes = []
    for step in sorted(result.steps, key=lambda s: s.load_value):
        label = f"{step.load_mode} {_fmt(step.load_value)}"
        if not step.stable:
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


def render_markdown(result: RunResult, verdict: Verdict | None = None, *, plots_dir: str = "plots") -> str:
    """The Markdown report: metadata, verdict, one row per step, notes, and links to the plots.

    ``verdict`` defaults to the one stored in ``result`` (none when the run had no SLA).
    """
    verdict = verdict or stored_verdict(result)
    m = result.metadata
    lines = [f"# Perf report: {m.model}", "", "## Verdict", "", *_verdict_lines(verdict), ""]
    lines += ["## Run", "", *_md_table(["", ""], [list(r) for r in _metadata_rows(result)]), ""]
    lines += ["## Steps", ""]
    if result.steps:
        header, rows = _step_rows(result, verdict)
        lines += _md_table(header, rows)
        lines += [
            "",
            "Latencies are end to end as the client saw them; queue is the server's mean queue time.",
        ]
    else:
        lines.append("No step was measured.")
    notes = _notes(result)
    if notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    if result.steps:
        lines += ["", "## Plots", ""]
        lines += [f"![{caption}]({plots_dir}/{name}.png)" for name, caption in PLOT_NAMES.items()]
    if m.command:
        lines += ["", "## Reproduce", "", "```", " ".join(m.command), "```"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- plots


def _new_figure() -> tuple[Figure, Axes]:
    # Imported here: matplotlib costs a second to import, and only reports need it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.2), dpi=100)
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot(1, 1, 1)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _sla_limit(verdict: Verdict | None, metric: str) -> float | None:
    if verdict is None:
        return None
    constraint = verdict.sla.constraint(metric)
    return None if constraint is None else constraint.value


def _plot_latency_vs_throughput(steps: list[StepResult], verdict: Verdict | None) -> bytes:
    figure, ax = _new_figure()
    measured = sorted(
        (s for s in steps if s.latency is not None and s.throughput_per_s is not None),
        key=lambda s: s.load_value,
    )
    x = [s.throughput_per_s or 0.0 for s in measured]
    for name, style in (("p50", "o-"), ("p95", "s-"), ("p99", "^-")):
        y = [getattr(s.latency, f"{name}_ms") for s in measured]
        ax.plot(x, y, style, label=f"{name} latency")
    for name in ("p50", "p90", "p95", "p99", "mean"):
        limit = _sla_limit(verdict, name)
        if limit is not None:
            ax.axhline(
                limit, color="red", linestyle="--", linewidth=1, label=f"SLA {name} ≤ {_fmt(limit)} ms"
            )
    unstable = [s for s in measured if not s.stable]
    if unstable:
        ax.plot(
            [s.throughput_per_s or 0.0 for s in unstable],
            [s.latency.p99_ms if s.latency else 0.0 for s in unstable],
            "x",
            color="black",
            markersize=10,
            label="unstable step",
        )
    ax.set_xlabel("throughput (infer/s)")
    ax.set_ylabel("latency (ms)")
    ax.set_title(PLOT_NAMES["latency_vs_throughput"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _png(figure)


def _plot_breakdown(steps: list[StepResult]) -> bytes:
    figure, ax = _new_figure()
    ordered = sorted(steps, key=lambda s: s.load_value)
    labels = [_fmt(s.load_value) for s in ordered]
    positions = list(range(len(ordered)))
    bottoms = [0.0] * len(ordered)
    parts = [_breakdown_ms(s) for s in ordered]
    for key, label, colour in _BREAKDOWN:
        heights = [p[key] for p in parts]
        if any(h > 0 for h in heights):
            ax.bar(positions, heights, bottom=bottoms, label=label, color=colour)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_xticks(positions)
    ax.set_xticklabels(labels)
    kind = ordered[0].load_mode if ordered else "concurrency"
    ax.set_xlabel(_load_label(kind))
    ax.set_ylabel("mean time per request (ms)")
    ax.set_title(PLOT_NAMES["latency_breakdown"])
    ax.grid(True, axis="y", alpha=0.3)
    if any(b > 0 for b in bottoms):
        ax.legend(fontsize="small")
    else:
        ax.text(
            0.5, 0.5, "no server-side breakdown reported", ha="center", va="center", transform=ax.transAxes
        )
    return _png(figure)


def _plot_throughput_vs_load(steps: list[StepResult], verdict: Verdict | None) -> bytes:
    figure, ax = _new_figure()
    ordered = sorted((s for s in steps if s.throughput_per_s is not None), key=lambda s: s.load_value)
    x = [s.load_value for s in ordered]
    ax.plot(x, [s.throughput_per_s or 0.0 for s in ordered], "o-", label="throughput")
    if verdict is not None:
        passing = [s for s in ordered if (j := _step_status(s, verdict)) is not None and j.status == "pass"]
        failing = [s for s in ordered if (j := _step_status(s, verdict)) is not None and j.status == "fail"]
        if passing:
            ax.plot(
                [s.load_value for s in passing],
                [s.throughput_per_s or 0.0 for s in passing],
                "o",
                color="green",
                label="meets SLA",
            )
        if failing:
            ax.plot(
                [s.load_value for s in failing],
                [s.throughput_per_s or 0.0 for s in failing],
                "o",
                color="red",
                label="misses SLA",
            )
        floor = _sla_limit(verdict, "throughput")
        if floor is not None:
            ax.axhline(
                floor, color="red", linestyle="--", linewidth=1, label=f"SLA throughput ≥ {_fmt(floor)}/s"
            )
        if verdict.knee is not None:
            ax.axvline(
                verdict.knee.load,
                color="green",
                linestyle=":",
                linewidth=1,
                label=f"knee ({_fmt(verdict.knee.load)})",
            )
    _load_axis(ax, x)
    kind = ordered[0].load_mode if ordered else "concurrency"
    ax.set_xlabel(_load_label(kind))
    ax.set_ylabel("throughput (infer/s)")
    ax.set_title(PLOT_NAMES["throughput_vs_load"])
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="small")
    return _png(figure)


def _load_axis(ax: Axes, loads: list[float]) -> None:
    """A doubling ladder (1, 2, 4, … or 50, 100, 200, …) reads best on a log-2 axis."""
    if loads and min(loads) > 0 and max(loads) / min(loads) >= 8:
        from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(set(loads))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())


def render_plots(result: RunResult, verdict: Verdict | None = None) -> dict[str, bytes]:
    """PNG bytes for each plot in :data:`PLOT_NAMES`; empty when no step was measured.

    ``verdict`` (default: the one stored in ``result``) adds the SLA lines and the knee.
    """
    verdict = verdict or stored_verdict(result)
    steps = list(result.steps)
    if not steps:
        return {}
    return {
        "latency_vs_throughput": _plot_latency_vs_throughput(steps, verdict),
        "latency_breakdown": _plot_breakdown(steps),
        "throughput_vs_load": _plot_throughput_vs_load(steps, verdict),
    }


# --------------------------------------------------------------------------- html

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 70em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f4f4f4; }
td:first-child, th:first-child { text-align: left; }
.pass { color: #1a7f37; font-weight: bold; } .fail { color: #cf222e; font-weight: bold; }
.unmeasured { color: #9a6700; font-weight: bold; }
figure { margin: 1.5em 0; } img { max-width: 100%; }
pre { background: #f6f8fa; padding: 0.8em; overflow-x: auto; }
"""


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(
    result: RunResult, verdict: Verdict | None = None, plots: dict[str, bytes] | None = None
) -> str:
    """A self-contained HTML report; ``plots`` (from :func:`render_plots`) are embedded inline.

    ``verdict`` defaults to the one stored in ``result``.
    """
    verdict = verdict or stored_verdict(result)
    m = result.metadata
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>Perf report: {esc(m.model)}</title><style>{_CSS}</style></head><body>",
        f"<h1>Perf report: {esc(m.model)}</h1>",
        "<h2>Verdict</h2>",
    ]
    if verdict is None:
        parts.append("<p>No SLA was given: the steps below are measurements only.</p>")
    else:
        parts.append(
            f'<p><span class="{verdict.status}">{esc(verdict.status.upper())}</span> '
            f"(exit code {verdict.exit_code}): {esc(verdict.summary())}</p>"
        )
        if verdict.knee is not None:
            header = ["constraint", "limit", f"measured at the knee ({_fmt(verdict.knee.load)})", "headroom"]
            parts.append(_html_table(header, [_check_cells(c) for c in verdict.knee.checks]))
        elif verdict.binding is not None:
            parts.append(f"<p>Closest miss: {esc(_check_sentence(verdict.binding))}.</p>")
    parts += ["<h2>Run</h2>", _html_table(["", ""], [list(r) for r in _metadata_rows(result)])]
    parts.append("<h2>Steps</h2>")
    if result.steps:
        header, rows = _step_rows(result, verdict)
        parts.append(_html_table(header, rows))
    else:
        parts.append("<p>No step was measured.</p>")
    notes = _notes(result)
    if notes:
        parts += ["<h2>Notes</h2><ul>", *[f"<li>{esc(n)}</li>" for n in notes], "</ul>"]
    if plots:
        parts.append("<h2>Plots</h2>")
        for name, caption in PLOT_NAMES.items():
            if name in plots:
                data = base64.b64encode(plots[name]).decode("ascii")
                parts.append(
                    f'<figure><img alt="{esc(caption)}" src="data:image/png;base64,{data}">'
                    f"<figcaption>{esc(caption)}</figcaption></figure>"
                )
    if m.command:
        parts += ["<h2>Reproduce</h2>", f"<pre>{esc(' '.join(m.command))}</pre>"]
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- files


def write_report(
    result: RunResult, folder: str | os.PathLike[str], verdict: Verdict | None = None
) -> ReportFiles:
    """Write ``report.md``, ``report.html`` and ``plots/*.png`` into ``folder`` atomically.

    ``verdict`` defaults to the one stored in ``result`` (none when the run had no SLA).
    """
    target = Path(folder)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the report folder {target}: {exc.strerror}") from exc
    verdict = verdict or stored_verdict(result)
    plots = render_plots(result, verdict)
    plot_paths: dict[str, Path] = {}
    if plots:
        plots_dir = target / "plots"
        plots_dir.mkdir(exist_ok=True)
        for name, data in plots.items():
            plot_paths[name] = plots_dir / f"{name}.png"
            atomic_write(plot_paths[name], data)
    markdown = target / "report.md"
    page = target / "report.html"
    atomic_write(markdown, render_markdown(result, verdict))
    atomic_write(page, render_html(result, verdict, plots))
    return ReportFiles(markdown, page, plot_paths)
