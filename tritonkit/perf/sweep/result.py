"""What a sweep measured, decided and wrote (:class:`SweepResult`), and what it did as it went
(:class:`SweepEvent`): the values the runner returns and the report renders, in a module both import.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from tritonkit.perf.judge.verdict import Exit
from tritonkit.perf.measure.runtime import ServedRuntime
from tritonkit.perf.sweep.outcome import STATUS_FAILED, STATUS_LOAD_FAILED, STATUS_MEASURED, VariantOutcome
from tritonkit.perf.sweep.search import SearchResult
from tritonkit.perf.sweep.variants import Variant
from tritonkit.perf.sweep.writeback import WriteBack

__all__ = ["Exit", "SweepEvent", "SweepOutcome", "SweepResult", "margins_text", "required_text"]


@dataclass(frozen=True)
class SweepEvent:
    """Something the sweep did, as it happens. ``kind``: ``server``, ``start`` (a variant begins),
    ``measured``, ``resumed``, ``load_failed``, ``failed``, ``guess``, ``propose`` (why the next
    variant is measured), ``pruned`` (by its bound), ``skipped`` (by the model), ``confirm``,
    ``written``. ``done``/``left`` count variants finished and still possibly measured;
    ``eta_s`` is an upper estimate (pruning only shortens it)."""

    kind: str
    message: str
    variant: str | None = None
    done: int = 0
    left: int = 0
    eta_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@runtime_checkable
class SweepOutcome(Protocol):
    """What every sweep returns — on one machine or by URL (:class:`SweepResult`), several models
    together (``JointResult``), on a cluster (``ClusterSweepResult``), an engine's (``EngineSweepResult``):
    its :class:`Exit` status, one sentence, and the JSON document ``--json`` prints."""

    @property
    def exit_code(self) -> int: ...

    def headline(self) -> str: ...

    def to_dict(self) -> dict[str, Any]: ...


def margins_text(margins: Mapping[str, float]) -> str:
    """Each SLA bound's margin to its limit, as a fraction of it: ``"p99<=50ms 38 %, …"``."""
    return ", ".join(f"{term} {100 * m:.0f} %" for term, m in margins.items())


def required_text(required: float) -> str:
    """``" (at least 20 % required)"`` for a required headroom, ``""`` for none."""
    return f" (at least {100 * required:g} % required)" if required else ""


@dataclass
class SweepResult:
    """What :func:`run_sweep` measured, decided and wrote."""

    model: str
    repo: Path | None  # None: swept on a running server by URL, with no local repository
    out_dir: Path
    sla_text: str
    load_text: str
    p99_limit_ms: float | None
    exhaustive: bool
    grid: list[Variant]
    search: SearchResult
    write_back: WriteBack | None
    wall_s: float
    resumed: list[str]
    server_version: str
    report_path: Path | None = None
    plot_path: Path | None = None
    warnings: list[str] = field(default_factory=list)
    server_start_s: float = 0.0
    target: str | None = None
    #: What served the swept model in every variant (backend, engine and versions).
    runtime: ServedRuntime | None = None
    #: The Ray node every variant was measured on, when swept on a cluster (``node_id``, ``host``, …).
    node: dict[str, Any] | None = None
    #: The margin every SLA bound had to keep for a step to count (``SweepSettings.headroom``).
    headroom_required: float = 0.0
    #: A running server's own facts (:class:`~tritonkit.server.facts.ServerFacts`), when swept by URL.
    server_facts: dict[str, Any] | None = None
    #: A sweep by URL: its journal, whether the winner was applied or the served config put back.
    remote: dict[str, Any] | None = None

    @property
    def headroom(self) -> dict[str, float]:
        """The winner's margin to each scaled SLA bound at its chosen load, as a fraction of the
        limit (``{"p99<=50ms": 0.38}``), the least any of its measurements there kept; empty
        without a winner."""
        score = self.search.winner.score() if self.search.winner else None
        return dict(score.headroom) if score is not None else {}

    def headroom_text(self) -> str:
        """``"headroom p99<=50ms 38 %"`` (every bound, and the margin required), or ``""``."""
        margins = self.headroom
        return f"headroom {margins_text(margins)}{required_text(self.headroom_required)}" if margins else ""

    @property
    def failed(self) -> list[VariantOutcome]:
        """Variants that could not be measured (a step did not complete): the answer lacks them."""
        return [o for o in self.search.outcomes if o.status == STATUS_FAILED]

    @property
    def commits(self) -> bool:
        """The commit rule of every host and load source: the winner is written back (or applied)
        when it is decided (:attr:`~tritonkit.perf.sweep.search.SearchResult.decided`: the config
        served is not in its tie) and nothing failed."""
        return self.search.decided and not self.failed

    def holds(self) -> str:
        """What the repository holds after the sweep, in words: the winner written, or its config as
        it was and why (the commit rule, :attr:`commits`)."""
        wb, winner = self.write_back, self.search.winner
        if wb is not None and winner is not None:
            return f"the winner {winner.variant.id}" + ("" if wb.backup_path is not None else " (it held it already)")
        why = ("a variant could not be measured" if self.failed else "no variant meets the SLA" if winner is None
               else "the config served is in the winner's tie" if not self.search.decided else "write-back was off")
        return f"its config as it was ({why}; nothing written)"

    @property
    def exit_code(self) -> int:
        """0 a variant meets the SLA and every variant tried was measured; 1 none does; 2 a variant
        could not be measured (the winner may be missing from the answer) or nothing could."""
        if self.failed:
            return Exit.UNMEASURED
        if self.search.winner is not None:
            return Exit.OK
        if any(o.status == STATUS_MEASURED for o in self.search.outcomes):
            return Exit.SLA_MISSED
        return Exit.UNMEASURED

    def time_breakdown(self) -> dict[str, float]:
        """Where the wall time went, in seconds: the server's start, then per phase summed over the
        variants measured in this run (see :attr:`VariantOutcome.timings_s`), and the rest."""
        totals: dict[str, float] = {"server_start": round(self.server_start_s, 2)}
        for outcome in self.search.outcomes:
            if outcome.variant.id in self.resumed:
                continue
            for phase, seconds in outcome.timings_s.items():
                totals[phase] = totals.get(phase, 0.0) + seconds
        accounted = sum(v for k, v in totals.items() if k != "windows")
        totals["other"] = totals.get("other", 0.0) + max(0.0, self.wall_s - accounted)
        return {k: round(v, 2) for k, v in totals.items()}

    def breakdown_text(self) -> str:
        """The breakdown as one line: ``server start 3.1 s, loads 4.0 s, …``."""
        names = {"server_start": "server start", "load": "model loads", "warmup": "warm-ups",
                 "steps": "perf_analyzer steps", "windows": "of which measurement windows ≥",
                 "retries": "unstable-step retries", "checks": "ladder checks", "confirm": "re-measurements",
                 "unload": "unloads", "other": "other (search, reports)"}
        parts = [f"{names.get(k, k)} {v:.1f} s" for k, v in self.time_breakdown().items() if v > 0 or k == "steps"]
        return "time: " + ", ".join(parts)

    @property
    def ratio_to_default(self) -> float | None:
        """Winner's throughput within the SLA / the default config's (``None`` if either is missing)."""
        winner = self.search.winner.score() if self.search.winner else None
        default = self.search.default.score() if self.search.default else None
        if winner is None or default is None or default.throughput_per_s <= 0:
            return None
        return winner.throughput_per_s / default.throughput_per_s

    def counts(self) -> dict[str, int]:
        statuses = [o.status for o in self.search.outcomes]
        skipped = sum(d.action == "skipped" for d in self.search.decisions.values())
        return {"measured": statuses.count(STATUS_MEASURED), "load_failed": statuses.count(STATUS_LOAD_FAILED),
                "failed": statuses.count(STATUS_FAILED), "pruned": len(self.search.pruned), "skipped": skipped}

    def headline(self) -> str:
        """One sentence: what wins, how much load it carries within the SLA, and against the default."""
        unit = "concurrency" if not self.load_text.startswith("request rate") else "request rate"
        default = self.search.default.score() if self.search.default else None
        default_text = (f"the default config carries {default.throughput_per_s:,.1f} infer/s"
                        if default else "the default config meets the SLA at no load measured")
        winner = self.search.winner
        score = winner.score() if winner else None
        failed = ""
        if self.failed:
            failed = (f" {len(self.failed)} variant(s) could not be measured ("
                      + "; ".join(f"{o.variant.id}: {o.reason or o.stop_reason}" for o in self.failed)
                      + "): nothing was written; re-run into the same folder to measure them again.")
        if winner is None or score is None:
            return f"No variant meets the SLA {self.sla_text}; {default_text}.{failed}"
        ratio = self.ratio_to_default
        on = f" on {self.target}" if self.target and self.target != self.model else ""
        versus = f" — {ratio:.2f}× the default" if ratio is not None else f"; {default_text}"
        margins = f", {self.headroom_text()}" if self.headroom else ""
        noise = f" {self.search.noise_note[:1].upper()}{self.search.noise_note[1:]}." if self.search.noise_note else ""
        return (f"Winner {winner.variant.id} ({winner.variant.describe()}): {score.throughput_per_s:,.1f} infer/s "
                f"within the SLA {self.sla_text} at {unit} {score.load:g}{on}, p99 {score.p99_ms:.2f} ms{margins}"
                f"{versus}" + (f" ({default_text})." if ratio is not None else ".") + noise + failed)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``--json``, and ``sweep.json``)."""
        winner = self.search.winner
        score = winner.score() if winner else None
        default = self.search.default.score() if self.search.default else None
        return {
            "exit_code": self.exit_code,
            "model": self.model,
            "target": self.target or self.model,
            "repo": str(self.repo) if self.repo is not None else None,
            "out_dir": str(self.out_dir),
            "sla": self.sla_text,
            "load": self.load_text,
            "exhaustive": self.exhaustive,
            "wall_s": round(self.wall_s, 2),
            "server_version": self.server_version,
            "runtime": self.runtime.to_dict() if self.runtime is not None else None,
            "winner": None if winner is None else {**winner.variant.to_dict(), **(score.to_dict() if score else {})},
            "default": None if default is None else default.to_dict(),
            "ratio_to_default": self.ratio_to_default,
            "tied": [o.variant.id for o in self.search.tied],
            "tie_within_noise": self.search.noise_note or None,
            "headroom": self.headroom or None,
            "headroom_required": self.headroom_required,
            "first_guess": self.search.guess.id if self.search.guess else None,
            "pruned": dict(self.search.pruned),
            "decisions": {variant: d.to_dict() for variant, d in self.search.decisions.items()},
            "fitted_model": self.search.model_text or None,
            "resumed": list(self.resumed),
            "counts": self.counts(),
            "failed": {o.variant.id: o.reason for o in self.failed},
            "warnings": list(self.warnings),
            "time_breakdown_s": self.time_breakdown(),
            "write_back": self.write_back.to_dict() if self.write_back else None,
            "report": str(self.report_path) if self.report_path else None,
            "plot": str(self.plot_path) if self.plot_path else None,
            "variants": [{**o.to_dict(), "runtime": self.runtime.to_dict() if self.runtime is not None else None}
                         for o in self.search.outcomes],
            **({"node": dict(self.node)} if self.node is not None else {}),
            **({"server": dict(self.server_facts)} if self.server_facts is not None else {}),
            **({"remote": dict(self.remote)} if self.remote is not None else {}),
        }
