"""The sweep's report: every variant in a table, throughput against p99 with the Pareto front,
and the winner against the default config. Pure renderers plus one writer."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write
from tritonkit.perf.sweep.outcome import STATUS_MEASURED, VariantOutcome
from tritonkit.perf.sweep.result import SweepResult
from tritonkit.perf.sweep.search import pareto_front

__all__ = ["remote_lines", "render_sweep_markdown", "render_sweep_plot", "write_sweep_report"]

REPORT_FILE = "report.md"
PLOT_FILE = "sweep.png"


def _num(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def variant_rows(result: SweepResult) -> list[list[str]]:
    """One row per grid variant: id, what it is, status, best load, infer/s, p99 ms, confirmations, note."""
    outcomes = {o.variant.id: o for o in result.search.outcomes}
    winner = result.search.winner
    rows: list[list[str]] = []
    for variant in result.grid:
        outcome = outcomes.get(variant.id)
        mark = " ★" if winner is not None and winner.variant.id == variant.id else ""
        decision = result.search.decisions.get(variant.id)
        if outcome is None:
            bound = result.search.pruned.get(variant.id)
            note = decision.reason if decision is not None else (
                f"cannot beat the best: at most {_num(bound)} infer/s" if bound is not None else "not measured")
            rows.append([variant.id + mark, variant.describe(), "pruned" if bound is not None else "skipped",
                         "–", "–", "–", "–", note.replace("|", "/")])
            continue
        score = outcome.score()
        note = outcome.reason if outcome.status != STATUS_MEASURED else outcome.stop_reason.replace("_", " ")
        if decision is not None and decision.action == "measured":
            note = decision.reason + (f"; {note}" if note else "")
        if outcome.status == STATUS_MEASURED and score is None:
            note = "no step met the SLA" + (f" ({note})" if note else "")
        memory_mb, utilization = outcome.gpu_peak()
        if memory_mb is not None:
            note += f"; GPU peak {memory_mb:,.0f} MiB" + (f", {100 * utilization:.0f} % busy" if utilization else "")
        if outcome.skipped_loads:
            note += f"; skipped loads {', '.join(f'{x:g}' for x in outcome.skipped_loads)} (below the best)"
        if outcome.unmeasured_loads:
            note += (f"; loads {', '.join(f'{x:g}' for x in outcome.unmeasured_loads)} not measured "
                     "(measured from the top down)")
        rows.append([
            variant.id + mark, variant.describe(), outcome.status.replace("_", " "),
            _num(score.load, 0) if score else "–",
            _num(score.throughput_per_s) if score else "–",
            _num(score.p99_ms, 2) if score else "–",
            str(len(outcome.confirmations)) if outcome.confirmations else "–",
            note.replace("|", "/"),
        ])
    return rows


def remote_lines(facts: dict[str, Any] | None, remote: dict[str, Any] | None) -> list[str]:
    """A sweep by URL (one model or several): the server's own facts, and what was left on it."""
    lines: list[str] = []
    if facts is not None:
        lines.append(f"- server: {facts.get('name', 'triton')} {facts.get('version', '?')} at {facts.get('url')}, "
                     f"not started by tritonkit; model control {facts.get('model_control')}; extensions: "
                     f"{', '.join(facts.get('extensions', [])) or 'none'}")
        for model in facts.get("models", []):
            lines.append(f"- {model.get('name')} as the server served it before the sweep: "
                         f"{model.get('runtime') or model.get('backend') or '?'}"
                         + (f", {model['instances']}" if model.get("instances") else ""))
    if remote is not None:
        if remote.get("applied"):
            lines.append(f"- the winner was applied (left loaded on the server); the previous config is in "
                         f"`{remote.get('journal')}` (put it back: `{remote.get('restore_command')}`)")
        else:
            lines.append(f"- the served config was loaded back after the sweep (journal `{remote.get('journal')}`, "
                         f"{remote.get('journal_status')})")
        failed = remote.get("others_failed")
        if failed is not None:
            lines.append(f"- other clients' failed requests, from the server's failure counters: {failed['in_steps']} "
                         f"in the measured steps, {failed['in_changes']} in the {failed['changes']} variant changes "
                         f"and the restore (reloads in place, never an unload; {failed['uncounted']} not counted)"
                         + "".join(f"; {w['failed']} in {w['where']}" for w in failed["where"]))
        if remote.get("winner_config"):
            lines.append(f"- the winner's config: `{remote['winner_config']}` (the server's repository is untouched)")
        for model, path in (remote.get("winner_configs") or {}).items():
            lines.append(f"- {model}'s winning config: `{path}` (the server's repository is untouched)")
        if remote.get("alone"):
            lines.append(f"- alone phase: {remote['alone']}")
    return lines


def render_sweep_markdown(result: SweepResult) -> str:
    """The report as Markdown (pure)."""
    search = result.search
    lines = [f"# Sweep: {result.model}", ""]
    counts = result.counts()
    lines.append(f"- SLA: `{result.sla_text}`; load: {result.load_text}")
    lines.append(f"- grid: {len(result.grid)} variants; measured {counts['measured']}, pruned by their bound "
                 f"{counts['pruned']}, skipped by the model {counts['skipped']}, "
                 f"refused by the server {counts['load_failed']}, failed {counts['failed']}"
                 + (f"; reused from an earlier run: {len(result.resumed)}" if result.resumed else ""))
    lines.append(f"- search: {'exhaustive' if result.exhaustive else 'pruned search'}"
                 + (f", first guess {search.guess.id}" if search.guess else "")
                 + f"; wall time {result.wall_s:.1f} s; tritonserver {result.server_version}")
    if result.runtime is not None:
        source = f" (version from {result.runtime.version_source})" if result.runtime.version_source else ""
        lines.append(f"- every variant served by {result.runtime.describe()}{source}")
    lines.append(f"- {result.breakdown_text()}")
    if result.node is not None:  # swept on a node of a Ray cluster (tritonkit.perf.cluster)
        lines.append(f"- measured on node {result.node.get('node_id', '?')} ({result.node.get('where', '?')}): "
                     "every variant on this one node, the winner judged against those alone")
    lines += remote_lines(result.server_facts, result.remote)
    if search.model_text:
        lines.append(f"- the model, fitted to everything measured: {search.model_text}")
    lines += [f"- warning: {text}" for text in result.warnings]
    lines += ["", "## Result", "", result.headline()]
    if len(search.tied) > 1:
        lines.append("")
        within = "the tolerance or the noise" if search.noise_note else "the tolerance"
        lines.append(f"Tied within {within} (a tie goes to the lower p99, then fewer instances): "
                     + ", ".join(o.variant.id for o in search.tied) + ".")
    wb = result.write_back
    if wb is not None:
        lines.append("")
        if wb.backup_path is None:
            lines.append(f"`{wb.config_path}` already holds the winner; nothing was written.")
        else:
            lines.append(f"The winner was written to `{wb.config_path}`; the previous config is kept as "
                         f"`{wb.backup_path}`. Restore it with `{wb.restore_command}`.")
    lines += ["", "## Variants", "",
              "| variant | configuration | status | best load | throughput (infer/s) | p99 (ms) | re-measured | note |",
              "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |"]
    lines += ["| " + " | ".join(row) + " |" for row in variant_rows(result)]
    lines += ["", "★ the winner. Throughput and p99 are at the variant's best load within the SLA, averaged with "
              "any re-measurements.", "", "## Throughput against p99", "", f"![throughput vs p99]({PLOT_FILE})", ""]
    return "\n".join(lines)


def _points(outcome: VariantOutcome) -> list[tuple[float, float]]:
    return [(s.p99_ms, s.throughput_per_s) for s in outcome.steps if s.errors == 0]


def render_sweep_plot(result: SweepResult) -> bytes:
    """Every measured step as (p99, throughput), one colour per variant, the Pareto front over all of
    them, the SLA's p99 limit, the winner and the default marked. PNG bytes (matplotlib's Agg canvas)."""
    # Imported here: matplotlib costs a second to import, and only the report needs it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(8.0, 5.0), dpi=100)
    FigureCanvasAgg(figure)
    ax = figure.add_subplot(1, 1, 1)
    measured = [o for o in result.search.outcomes if o.steps]
    everything: list[tuple[float, float]] = []
    for outcome in measured:
        points = sorted(_points(outcome), key=lambda p: p[1])
        everything += points
        ax.plot([p[0] for p in points], [p[1] for p in points], "o-", markersize=4, linewidth=0.8, alpha=0.6,
                label=outcome.variant.id)
    front = pareto_front(everything)
    if front:
        ax.step([p[0] for p in front], [p[1] for p in front], where="post", color="black", linewidth=2,
                label="Pareto front")
    marks: list[tuple[VariantOutcome | None, str, str]] = [
        (result.search.winner, "*", "winner"), (result.search.default, "D", "default")]
    for marked, style, name in marks:
        score = marked.score() if marked is not None else None
        if marked is not None and score is not None:
            ax.plot([score.p99_ms], [score.throughput_per_s], style, markersize=14,
                    color="red" if name == "winner" else "grey", markeredgecolor="black",
                    label=f"winner: {marked.variant.id}" if name == "winner"
                    else f"default config ({marked.variant.knobs_id})")
    if result.p99_limit_ms is not None:
        ax.axvline(result.p99_limit_ms, color="red", linestyle="--", linewidth=1,
                   label=f"SLA p99 ≤ {result.p99_limit_ms:g} ms")
    ax.set_xlabel("p99 latency (ms)")
    ax.set_ylabel("throughput (infer/s)")
    ax.set_title(f"{result.model}: every variant's load steps")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize="x-small", ncol=2)
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def write_sweep_report(result: SweepResult, folder: Path | None = None) -> tuple[Path, Path]:
    """Write ``report.md`` and ``sweep.png`` into ``folder`` (default: the sweep folder)."""
    target = Path(folder or result.out_dir)
    plot = atomic_write(target / PLOT_FILE, render_sweep_plot(result))
    report = atomic_write(target / REPORT_FILE, render_sweep_markdown(result))
    return report, plot
