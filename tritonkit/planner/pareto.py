"""The search's report: best, runner-up and the Pareto curve, as a text table, Markdown or a plot.

The curve is output tokens/s per GPU (what a deployment costs) against tokens/s per user (what a
user sees): moving along it trades one for the other; a point below it is beaten on both.
"""

from __future__ import annotations

from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.planner.search import Candidate, DeploymentSearch

__all__ = ["plot_pareto", "render_search_markdown", "render_search_text"]

_COLUMNS = ("deployment", "tok/s/user", "tok/s/GPU", "TTFT ms", "SLA", "fleet at target")


def _row(c: Candidate) -> tuple[str, ...]:
    return (c.label(), f"{c.tokens_per_s_per_user:.1f}", f"{c.tokens_per_s_per_gpu:,.0f}", f"{c.ttft_ms:,.0f}",
            "meets" if c.meets_sla else "misses", c.fleet_text())


def _rows(search: DeploymentSearch) -> list[tuple[str, tuple[str, ...]]]:
    rows: list[tuple[str, tuple[str, ...]]] = []
    if search.best is not None:
        rows.append(("best", _row(search.best)))
    if search.runner_up is not None:
        rows.append(("runner-up", _row(search.runner_up)))
    rows.extend(("pareto", _row(c)) for c in search.pareto)
    return rows


def render_search_text(search: DeploymentSearch) -> str:
    """A plain-text table: the best, the runner-up, then the Pareto curve (fastest per user first)."""
    rows = _rows(search)
    header = ("", *_COLUMNS)
    table = [header, *[(kind, *cells) for kind, cells in rows]]
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    out = [f"[search: {len(search.candidates)} deployments scored, "
           f"{sum(c.meets_sla for c in search.candidates)} meet the SLA]"]
    for i, r in enumerate(table):
        out.append("  " + "  ".join(cell.ljust(widths[j]) if j in (0, 1, 6) else cell.rjust(widths[j])
                                    for j, cell in enumerate(r)).rstrip())
        if i == 0:
            out.append("  " + "  ".join("-" * w for w in widths))
    return "\n".join(out) + "\n"


def render_search_markdown(search: DeploymentSearch) -> str:
    """The same table in Markdown."""
    lines = ["| | " + " | ".join(_COLUMNS) + " |", "|---|" + "---|" * len(_COLUMNS)]
    lines += [f"| {kind} | " + " | ".join(cells) + " |" for kind, cells in _rows(search)]
    return "\n".join(lines) + "\n"


def plot_pareto(search: DeploymentSearch, path: str | Path, *, title: str = "") -> Path:
    """Plot every candidate (tokens/s per user × tokens/s per GPU), the Pareto curve and the best;
    the format follows the suffix (``.png``, ``.svg``, ``.pdf``). Needs matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError("--plot needs matplotlib, which is not installed",
                          hint="pip install matplotlib, or leave out --plot") from exc
    target = Path(path)
    suffix = target.suffix.lower().lstrip(".") or "png"
    if suffix not in ("png", "svg", "pdf"):
        raise ConfigError(f"--plot {target}: cannot write a .{suffix} plot", hint="name a .png, .svg or .pdf file")
    fig, ax = plt.subplots(figsize=(8, 5))
    for meets, colour, name in ((True, "#76b900", "meets the SLA"), (False, "#bbbbbb", "misses the SLA")):
        pts = [c for c in search.candidates if c.meets_sla == meets]
        ax.scatter([c.tokens_per_s_per_user for c in pts], [c.tokens_per_s_per_gpu for c in pts], s=10, c=colour,
                   label=name)
    front = sorted(search.pareto, key=lambda c: c.tokens_per_s_per_user)
    ax.plot([c.tokens_per_s_per_user for c in front], [c.tokens_per_s_per_gpu for c in front], "k-", lw=1,
            label="Pareto curve")
    if search.best is not None:
        ax.scatter([search.best.tokens_per_s_per_user], [search.best.tokens_per_s_per_gpu], marker="*", s=160,
                   c="#d62728", label=f"best: {search.best.label()}", zorder=3)
    ax.set_xlabel("output tokens/s per user")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(title or "Deployments searched")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format=suffix, bbox_inches="tight")
    plt.close(fig)
    return atomic_write(target, buffer.getvalue())
