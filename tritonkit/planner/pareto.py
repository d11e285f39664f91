"""The search's report as Markdown or a plot (the text table is :meth:`DeploymentSearch.render_text`).

The curve is output tokens/s per GPU (what a deployment costs) against tokens/s per user (what a
user sees): moving along it trades one for the other; a point below it is beaten on both.
"""

from __future__ import annotations

from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.errors import ConfigError
from tritonkit.planner.search import DeploymentSearch

__all__ = ["plot_pareto", "render_search_markdown"]


def render_search_markdown(search: DeploymentSearch) -> str:
    """The search's table in Markdown (:meth:`DeploymentSearch.render_markdown`)."""
    return search.render_markdown()


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
