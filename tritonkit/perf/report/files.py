"""Put a perf run's report on disk, each file atomically::

    run-folder/
      report.md               tables + links to the plots
      report.html             self-contained: the same tables, plots embedded as PNG data URIs
      plots/latency_vs_throughput.png
      plots/latency_breakdown.png
      plots/throughput_vs_load.png
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.measure.result import PerfResult
from tritonkit.perf.report._tables import REPORT_MARKER
from tritonkit.perf.report.html import render_html
from tritonkit.perf.report.markdown import render_markdown
from tritonkit.perf.report.plots import render_plots

__all__ = ["ReportFiles", "check_report_folder", "write_report"]

_REPORT_NAMES = ("report.md", "report.html")


@dataclass(frozen=True)
class ReportFiles:
    """Where :func:`write_report` put each file."""

    markdown: Path
    html: Path
    plots: dict[str, Path]


def _ours(path: Path) -> bool:
    """A report tritonkit wrote: it carries the marker (or sits beside a run's result.json)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if REPORT_MARKER in text:
        return True
    # Reports written before the marker existed: a run folder (with its result.json) owns them.
    return (path.parent / "result.json").is_file() and text.lstrip().startswith(("# Perf report:", "<!DOCTYPE"))


def check_report_folder(folder: str | os.PathLike[str]) -> None:
    """Refuse (``ConfigError``) a folder whose report.md / report.html a person wrote.

    tritonkit rewrites its own reports on every run into a folder; a file of the same name that
    it did not write is left alone, and nothing is written beside it either.
    """
    target = Path(folder)
    foreign = [target / name for name in _REPORT_NAMES if (target / name).is_file() and not _ours(target / name)]
    if foreign:
        names = " and ".join(str(p) for p in foreign)
        raise ConfigError(
            f"{names} {'was' if len(foreign) == 1 else 'were'} not written by tritonkit: "
            "refusing to overwrite it; nothing was run or written",
            hint="choose another --out folder (or leave --out out for a fresh timestamped one), "
            "or move that file away",
        )


def write_report(result: PerfResult, folder: str | os.PathLike[str], verdict: Verdict | None) -> ReportFiles:
    """Write ``report.md``, ``report.html`` and ``plots/*.png`` into ``folder`` atomically.

    ``verdict`` is the run's verdict (``None`` for a run without an SLA). A report.md or
    report.html there that tritonkit did not write is refused (see :func:`check_report_folder`).
    """
    target = Path(folder)
    check_report_folder(target)
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the report folder {target}: {exc.strerror}") from exc
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
