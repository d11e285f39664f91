"""``report.md``: metadata, verdict, one row per step, notes, links to the plots, the command."""

from __future__ import annotations

from collections.abc import Sequence

from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.measure.result import PerfResult
from tritonkit.perf.report._tables import (
    PLOT_NAMES,
    REPORT_MARKER,
    check_cells,
    check_sentence,
    fmt,
    metadata_rows,
    noise_lines,
    notes_of,
    reproduce_line,
    run_rows,
    sla_label,
    step_rows,
)

__all__ = ["render_markdown"]


def md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(cell: str) -> str:
        return cell.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(esc(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return lines


def _verdict_lines(verdict: Verdict | None) -> list[str]:
    if verdict is None:
        return ["No SLA was given: the steps below are measurements only."]
    lines = [f"**{sla_label(verdict.status)}** (exit code {verdict.exit_code}): {verdict.summary()}", ""]
    if verdict.knee is not None:
        header = ["constraint", "limit", f"measured at the knee ({fmt(verdict.knee.load)})", "headroom"]
        lines += md_table(header, [check_cells(c) for c in verdict.knee.checks])
    elif verdict.binding is not None:
        lines += [f"Closest miss: {check_sentence(verdict.binding)}."]
    return lines


def render_markdown(result: PerfResult, verdict: Verdict | None, *, plots_dir: str = "plots") -> str:
    """The Markdown report: metadata, verdict, one row per step, notes, and links to the plots.

    ``verdict`` is ``None`` for a run without an SLA.
    """
    m = result.metadata
    lines = [f"# Perf report: {m.model}", "", "## Verdict", "", *_verdict_lines(verdict), ""]
    lines += ["## Run", "", *md_table(["", ""], [list(r) for r in metadata_rows(result)]), ""]
    lines += ["## Steps", ""]
    if result.steps:
        header, rows = step_rows(result, verdict)
        lines += md_table(header, rows)
        lines += [
            "",
            "Latencies are end to end as the client saw them; queue is the server's mean queue time.",
        ]
    else:
        lines.append("No step was measured.")
    lines += ["", "## Noise and the machine", "", *noise_lines(result)]
    if result.repeats > 1:
        header, rows = run_rows(result)
        lines += ["", *md_table(header, rows)]
    notes = notes_of(result)
    if notes:
        lines += ["", "## Notes", "", *[f"- {n}" for n in notes]]
    if result.steps:
        lines += ["", "## Plots", ""]
        lines += [f"![{caption}]({plots_dir}/{name}.png)" for name, caption in PLOT_NAMES.items()]
    if m.command:
        lines += ["", "## Reproduce", "", "```", reproduce_line(m.command), "```"]
    lines += ["", f"<!-- {REPORT_MARKER} -->"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- plots
