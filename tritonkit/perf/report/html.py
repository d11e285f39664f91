"""``report.html``: the Markdown report's content, self-contained, plots embedded as PNG data URIs.

The page is laid out by the Jinja2 template ``templates/report.html.j2`` (autoescaped); this
module only gathers the values it shows, from the same rows the Markdown report uses.
"""

from __future__ import annotations

import base64
import re
from functools import cache
from typing import Any

import jinja2
import markupsafe

from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.measure.result import PerfResult
from tritonkit.perf.report import _tables as tables

__all__ = ["render_html", "render_page"]

_TEMPLATE = "report.html.j2"


@cache
def _environment() -> jinja2.Environment:
    environment = jinja2.Environment(
        loader=jinja2.PackageLoader("tritonkit.perf.report", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,  # a misspelt field fails the render, not the reader
        keep_trailing_newline=True,
    )
    environment.filters["inline"] = _inline
    return environment


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`]+)`")


def _inline(text: str) -> markupsafe.Markup:
    """The text a report shares with its Markdown twin, escaped, with ``**bold**`` and ```code``` kept."""
    escaped = str(markupsafe.escape(text))
    return markupsafe.Markup(_CODE.sub(r"<code>\1</code>", _BOLD.sub(r"<strong>\1</strong>", escaped)))


def _context(result: PerfResult, verdict: Verdict | None, plots: dict[str, bytes] | None) -> dict[str, Any]:
    m = result.metadata
    knee_table = None
    closest_miss = None
    if verdict is not None and verdict.knee is not None:
        knee_table = {
            "header": ["constraint", "limit", f"measured at the knee ({tables.fmt(verdict.knee.load)})", "headroom"],
            "rows": [tables.check_cells(c) for c in verdict.knee.checks],
        }
    elif verdict is not None and verdict.binding is not None:
        closest_miss = tables.check_sentence(verdict.binding)
    steps = None
    if result.steps:
        header, rows = tables.step_rows(result, verdict)
        steps = {"header": header, "rows": rows}
    return {
        "model": m.model,
        "verdict": None
        if verdict is None
        else {"status": verdict.status, "label": tables.sla_label(verdict.status), "exit_code": verdict.exit_code,
              "summary": verdict.summary()},
        "knee_table": knee_table,
        "closest_miss": closest_miss,
        "metadata": [list(r) for r in tables.metadata_rows(result)],
        "steps": steps,
        "notes": tables.notes_of(result),
        "noise": tables.noise_lines(result),
        "runs": dict(zip(("header", "rows"), tables.run_rows(result), strict=True)) if result.repeats > 1 else None,
        "plots": [
            {"caption": caption, "data": base64.b64encode(plots[name]).decode("ascii")}
            for name, caption in tables.PLOT_NAMES.items()
            if plots and name in plots
        ],
        "command": tables.reproduce_line(m.command) if m.command else None,
        "marker": tables.REPORT_MARKER,
    }


def render_html(result: PerfResult, verdict: Verdict | None, plots: dict[str, bytes] | None = None) -> str:
    """A self-contained HTML report; ``plots`` (from ``render_plots``) are embedded inline.

    ``verdict`` is ``None`` for a run without an SLA.
    """
    return render_page(_TEMPLATE, _context(result, verdict, plots))


def render_page(template: str, context: dict[str, Any]) -> str:
    """Render one of the package's report templates (autoescaped, strict about missing fields)."""
    return _environment().get_template(template).render(context)
