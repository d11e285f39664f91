"""Reporting: render a (:class:`PerfResult`, :class:`Verdict`) pair; never re-parse a dict.

* :mod:`.markdown` → ``report.md``; :mod:`.html` → ``report.html`` (Jinja2 template
  ``templates/report.html.j2``); :mod:`.plots` → PNGs; :mod:`.files` writes them all
  (:func:`write_report`);
* :mod:`.terminal`: what ``tritonkit perf`` prints (readable on a terminal, ``key=value`` lines
  when piped).
"""

from __future__ import annotations

from tritonkit.perf.report._tables import PLOT_NAMES
from tritonkit.perf.report.files import ReportFiles, write_report
from tritonkit.perf.report.html import render_html
from tritonkit.perf.report.markdown import render_markdown
from tritonkit.perf.report.plots import render_plots

__all__ = ["PLOT_NAMES", "ReportFiles", "render_html", "render_markdown", "render_plots", "write_report"]
