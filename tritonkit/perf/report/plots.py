"""The report's plots, drawn with matplotlib's Agg canvas directly (never ``pyplot``).

Rendering needs no display and changes no global backend state of the caller.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Literal

from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.measure.result import PerfResult, StepResult
from tritonkit.perf.metric_registry import LATENCY_STATS
from tritonkit.perf.report._tables import BREAKDOWN, PLOT_NAMES, breakdown_ms, fmt, load_label, step_status

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["new_figure", "png_bytes", "render_plots"]


def new_figure(width_in: float = 7.0, height_in: float = 4.2) -> Figure:
    """A figure on its own Agg canvas (the LLM report's plots are drawn on these too)."""
    # Imported here: matplotlib costs a second to import, and only reports need it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width_in, height_in), dpi=100)
    FigureCanvasAgg(figure)
    return figure


def _new_figure() -> tuple[Figure, Axes]:
    figure = new_figure()
    return figure, figure.add_subplot(1, 1, 1)


def png_bytes(figure: Figure) -> bytes:
    """``figure`` laid out and rendered as PNG."""
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _sla_limit(verdict: Verdict | None, metric: str) -> float | None:
    if verdict is None:
        return None
    constraint = verdict.sla.constraint(metric)
    return None if constraint is None else constraint.value


def _finished(figure: Figure, ax: Axes, plot: str, xlabel: str, ylabel: str, *,
              grid_axis: Literal["both", "x", "y"] = "both", legend: bool = True) -> bytes:
    """``figure`` as PNG, its axes labelled and titled with ``plot``'s name (:data:`PLOT_NAMES`)."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(PLOT_NAMES[plot])
    ax.grid(True, axis=grid_axis, alpha=0.3)
    if legend:
        ax.legend(fontsize="small")
    return png_bytes(figure)


def _plot_latency_vs_throughput(steps: list[StepResult], verdict: Verdict | None) -> bytes:
    figure, ax = _new_figure()
    measured = sorted((s for s in steps if s.latency is not None and s.throughput_per_s is not None),
                      key=lambda s: s.load_value)
    x = [s.throughput_per_s or 0.0 for s in measured]
    for name, style in (("p50", "o-"), ("p95", "s-"), ("p99", "^-")):
        y = [getattr(s.latency, f"{name}_ms") for s in measured]
        ax.plot(x, y, style, label=f"{name} latency")
    for name in LATENCY_STATS:
        limit = _sla_limit(verdict, name)
        if limit is not None:
            ax.axhline(limit, color="red", linestyle="--", linewidth=1, label=f"SLA {name} ≤ {fmt(limit)} ms")
    unstable = [s for s in measured if not s.stable]
    if unstable:
        # A noisy step's p99 with the spread of its windows (its 95 % interval), where it has one.
        bands = [s.interval("p99") for s in unstable]
        p99s = [s.latency.p99_ms if s.latency else 0.0 for s in unstable]
        ax.errorbar(
            [s.throughput_per_s or 0.0 for s in unstable], p99s,
            yerr=[[p - (b[0] if b else p) for p, b in zip(p99s, bands, strict=True)],
                  [(b[1] if b else p) - p for p, b in zip(p99s, bands, strict=True)]],
            fmt="x", color="black", markersize=10, capsize=3,
            label="noisy step (p99, 95% interval)",
        )
    return _finished(figure, ax, "latency_vs_throughput", "throughput (infer/s)", "latency (ms)")


def _plot_breakdown(steps: list[StepResult]) -> bytes:
    figure, ax = _new_figure()
    ordered = sorted(steps, key=lambda s: s.load_value)
    labels = [fmt(s.load_value) for s in ordered]
    positions = list(range(len(ordered)))
    bottoms = [0.0] * len(ordered)
    parts = [breakdown_ms(s) for s in ordered]
    for key, label, colour in BREAKDOWN:
        heights = [p[key] for p in parts]
        if any(h > 0 for h in heights):
            ax.bar(positions, heights, bottom=bottoms, label=label, color=colour)
            bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
    ax.set_xticks(positions)
    ax.set_xticklabels(labels)
    drawn = any(b > 0 for b in bottoms)
    if not drawn:
        ax.text(0.5, 0.5, "no server-side breakdown reported", ha="center", va="center", transform=ax.transAxes)
    kind = ordered[0].load_mode if ordered else "concurrency"
    return _finished(figure, ax, "latency_breakdown", load_label(kind), "mean time per request (ms)",
                     grid_axis="y", legend=drawn)


def _plot_throughput_vs_load(steps: list[StepResult], verdict: Verdict | None) -> bytes:
    figure, ax = _new_figure()
    ordered = sorted((s for s in steps if s.throughput_per_s is not None), key=lambda s: s.load_value)
    x = [s.load_value for s in ordered]
    ax.plot(x, [s.throughput_per_s or 0.0 for s in ordered], "o-", label="throughput")
    if verdict is not None:
        for status, color, label in (("pass", "green", "meets SLA"), ("fail", "red", "misses SLA")):
            marked = [s for s in ordered if (j := step_status(s, verdict)) is not None and j.status == status]
            if marked:
                ax.plot([s.load_value for s in marked], [s.throughput_per_s or 0.0 for s in marked], "o",
                        color=color, label=label)
        floor = _sla_limit(verdict, "throughput")
        if floor is not None:
            ax.axhline(floor, color="red", linestyle="--", linewidth=1, label=f"SLA throughput ≥ {fmt(floor)}/s")
        if verdict.knee is not None:
            ax.axvline(verdict.knee.load, color="green", linestyle=":", linewidth=1,
                       label=f"knee ({fmt(verdict.knee.load)})")
    _load_axis(ax, x)
    kind = ordered[0].load_mode if ordered else "concurrency"
    return _finished(figure, ax, "throughput_vs_load", load_label(kind), "throughput (infer/s)")


def _load_axis(ax: Axes, loads: list[float]) -> None:
    """A doubling ladder (1, 2, 4, … or 50, 100, 200, …) reads best on a log-2 axis."""
    if loads and min(loads) > 0 and max(loads) / min(loads) >= 8:
        from matplotlib.ticker import FixedLocator, NullLocator, ScalarFormatter

        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_locator(FixedLocator(sorted(set(loads))))
        ax.xaxis.set_minor_locator(NullLocator())
        ax.xaxis.set_major_formatter(ScalarFormatter())


def render_plots(result: PerfResult, verdict: Verdict | None) -> dict[str, bytes]:
    """PNG bytes for each plot in :data:`PLOT_NAMES`; empty when no step was measured.

    ``verdict`` (``None`` for a run without an SLA) adds the SLA lines and the knee.
    """
    steps = list(result.steps)
    if not steps:
        return {}
    return {
        "latency_vs_throughput": _plot_latency_vs_throughput(steps, verdict),
        "latency_breakdown": _plot_breakdown(steps),
        "throughput_vs_load": _plot_throughput_vs_load(steps, verdict),
    }


