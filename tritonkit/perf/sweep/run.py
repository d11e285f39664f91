"""One sweep end to end: read the model's config → grid → one server → search → write back → report.

:func:`run_sweep` is what ``tritonkit perf sweep`` and the demo call. Everything cheap is
checked before the server starts (the config, the SLA, the grid, perf_analyzer's presence, a
sweep folder holding results of other settings). The server is stopped however the sweep
ends; a Ctrl-C re-raises ``KeyboardInterrupt`` after that, with every finished variant saved.
"""

from __future__ import annotations

import hashlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.perf import SLA, LadderPlan, PerfSpec, parse_sla
from tritonkit.perf.sweep.driver import VariantMeter
from tritonkit.perf.sweep.live import LiveModel
from tritonkit.perf.sweep.report import write_sweep_report
from tritonkit.perf.sweep.search import (
    STATUS_FAILED,
    STATUS_LOAD_FAILED,
    STATUS_MEASURED,
    SearchResult,
    SearchSettings,
    VariantOutcome,
    search,
)
from tritonkit.perf.sweep.store import SweepStore
from tritonkit.perf.sweep.variants import Variant, apply_variant, variant_grid
from tritonkit.perf.sweep.writeback import WriteBack, write_winner
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import CONFIG_FILENAME, Hardware, read_config, render_config
from tritonkit.server import TritonServer

__all__ = ["EXIT_NONE_MEETS", "EXIT_OK", "EXIT_UNMEASURED", "SweepEvent", "SweepGrid", "SweepResult", "run_sweep"]

EXIT_OK, EXIT_NONE_MEETS, EXIT_UNMEASURED = 0, 1, 2


@dataclass(frozen=True)
class SweepGrid:
    """The axes to sweep; an axis left ``None`` keeps the model's own value (see :func:`variant_grid`)."""

    instances: Sequence[int] | None = None
    max_batch_sizes: Sequence[int] | None = None
    windows_us: Sequence[int | None] | None = None
    preferred: Sequence[Sequence[int]] | None = None


@dataclass(frozen=True)
class SweepEvent:
    """Something the sweep did, as it happens. ``kind``: ``server``, ``start`` (a variant begins),
    ``measured``, ``resumed``, ``load_failed``, ``failed``, ``guess``, ``pruned``, ``confirm``,
    ``written``. ``done``/``left`` count variants finished and still possibly measured;
    ``eta_s`` is an upper estimate (pruning only shortens it)."""

    kind: str
    message: str
    variant: str | None = None
    done: int = 0
    left: int = 0
    eta_s: float | None = None
    data: dict[str, Any] = field(default_factory=dict)


@dataclass
class SweepResult:
    """What :func:`run_sweep` measured, decided and wrote."""

    model: str
    repo: Path
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

    @property
    def exit_code(self) -> int:
        """0 a variant meets the SLA, 1 none does, 2 nothing could be measured."""
        if self.search.winner is not None:
            return EXIT_OK
        if any(o.status == STATUS_MEASURED for o in self.search.outcomes):
            return EXIT_NONE_MEETS
        return EXIT_UNMEASURED

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
        return {"measured": statuses.count(STATUS_MEASURED), "load_failed": statuses.count(STATUS_LOAD_FAILED),
                "failed": statuses.count(STATUS_FAILED), "pruned": len(self.search.pruned)}

    def headline(self) -> str:
        """One sentence: what wins, how much load it carries within the SLA, and against the default."""
        unit = "concurrency" if not self.load_text.startswith("request rate") else "request rate"
        default = self.search.default.score() if self.search.default else None
        default_text = (f"the default config carries {default.throughput_per_s:,.1f} infer/s"
                        if default else "the default config meets the SLA at no load measured")
        winner = self.search.winner
        score = winner.score() if winner else None
        if winner is None or score is None:
            return f"No variant meets the SLA {self.sla_text}; {default_text}."
        ratio = self.ratio_to_default
        versus = f" — {ratio:.2f}× the default" if ratio is not None else f"; {default_text}"
        return (f"Winner {winner.variant.id} ({winner.variant.describe()}): {score.throughput_per_s:,.1f} infer/s "
                f"within the SLA {self.sla_text} at {unit} {score.load:g}, p99 {score.p99_ms:.2f} ms{versus}"
                + (f" ({default_text})." if ratio is not None else "."))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (``--json``, and ``sweep.json``)."""
        winner = self.search.winner
        score = winner.score() if winner else None
        default = self.search.default.score() if self.search.default else None
        return {
            "exit_code": self.exit_code,
            "model": self.model,
            "repo": str(self.repo),
            "out_dir": str(self.out_dir),
            "sla": self.sla_text,
            "load": self.load_text,
            "exhaustive": self.exhaustive,
            "wall_s": round(self.wall_s, 2),
            "server_version": self.server_version,
            "winner": None if winner is None else {**winner.variant.to_dict(), **(score.to_dict() if score else {})},
            "default": None if default is None else default.to_dict(),
            "ratio_to_default": self.ratio_to_default,
            "tied": [o.variant.id for o in self.search.tied],
            "first_guess": self.search.guess.id if self.search.guess else None,
            "pruned": dict(self.search.pruned),
            "resumed": list(self.resumed),
            "counts": self.counts(),
            "write_back": self.write_back.to_dict() if self.write_back else None,
            "report": str(self.report_path) if self.report_path else None,
            "plot": str(self.plot_path) if self.plot_path else None,
            "variants": [o.to_dict() for o in self.search.outcomes],
        }


def _config_key(base: mc.ModelConfig) -> str:
    """A digest of ``base`` without the swept knobs: writing a winner back keeps the key, so a
    re-run after it reuses the results; any other edit to the config invalidates them."""
    neutral = apply_variant(base, Variant(1, base.max_batch_size, 0))
    neutral.max_batch_size = 0
    if neutral.HasField("dynamic_batching"):
        neutral.dynamic_batching.max_queue_delay_microseconds = 0
        del neutral.dynamic_batching.preferred_batch_size[:]
    return hashlib.sha256(render_config(neutral).encode()).hexdigest()[:16]


def _plan(concurrency: str | Sequence[float] | None, request_rate: str | Sequence[float] | None,
          step_window_ms: int, warmup_s: float, max_trials: int) -> LadderPlan:
    plan = LadderPlan.from_duration(3 * step_window_ms / 1000.0, concurrency=concurrency, request_rate=request_rate,
                                    max_trials=max_trials, warmup_s=warmup_s)
    # Once the SLA breaks, more load only breaks it harder: one break ends a variant's ladder.
    # Patience 2: with a zero window a second request only waits for the first, so throughput can
    # stall for one doubling of concurrency before batches start to fill.
    # Short windows on a shared machine wobble more than perf_analyzer's default 10 %: accept 20 %,
    # and let an unstable step pass to the next load rather than end the variant (the leaders
    # are re-measured anyway).
    return replace(plan, step_window_ms=step_window_ms, stop_after_sla_breaks=1, plateau_patience=2,
                   stability_percentage=20.0, continue_after_unstable=True, total_timeout_s=600.0)


def run_sweep(
    repo: str | os.PathLike[str],
    model: str,
    *,
    sla: str | SLA,
    grid: SweepGrid | None = None,
    concurrency: str | Sequence[float] | None = None,
    request_rate: str | Sequence[float] | None = None,
    step_window_ms: int = 500,
    warmup_s: float = 0.5,
    max_trials: int = 5,
    exhaustive: bool = False,
    out: str | os.PathLike[str] | None = None,
    results_root: str | os.PathLike[str] = "results",
    write_back: bool = True,
    tie_tolerance: float = 0.05,
    noise_allowance: float = 0.10,
    spec: PerfSpec | None = None,
    server: TritonServer | None = None,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> SweepResult:
    """Sweep ``model`` of ``repo`` over ``grid`` within ``sla`` and return the result.

    ``concurrency``/``request_rate`` are the ladder's levels (as in ``perf run``; default
    concurrency ``1:8``); each step measures three ``step_window_ms`` windows after a ``warmup_s``
    warm-up per variant. ``out`` defaults to ``<results_root>/<UTC>-<model>-sweep``; re-running into
    the same ``out`` reuses finished variants. ``spec`` supplies perf_analyzer options (input data,
    shapes; its model and URL are replaced). ``server``: an already running server with explicit
    model control to use instead of starting one (it is not stopped). ``write_back=False`` leaves
    the repository untouched.
    """
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    repo_path = Path(repo)
    config_path = repo_path / model / CONFIG_FILENAME
    if not config_path.is_file():
        raise ConfigError(f"no {CONFIG_FILENAME} for model '{model}' in {repo_path}",
                          hint=f"pass the repository folder and a model folder inside it ({config_path} is missing)")
    base = read_config(config_path)
    parsed = (parse_sla(sla) if isinstance(sla, str) else sla).with_zero_errors()
    axes = grid or SweepGrid()
    variants = variant_grid(base, instances=axes.instances, max_batch_sizes=axes.max_batch_sizes,
                            windows_us=axes.windows_us, preferred=axes.preferred)
    plan = _plan(concurrency, request_rate, step_window_ms, warmup_s, max_trials)
    locate_perf_analyzer()  # MissingComponentError now, before any server starts
    if server is not None and server.model_control != "explicit":
        raise ConfigError("the sweep needs a server with explicit model control",
                          hint="start it with model_control='explicit' (tritonkit serve --explicit)")
    out_dir = Path(out) if out is not None else Path(results_root) / (
        time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + f"-{model}-sweep")
    store = SweepStore(out_dir)
    load_text = f"{plan.mode.replace('_', ' ')} " + ", ".join(f"{v:g}" for v in plan.levels)
    store.begin({"model": model, "config": _config_key(base), "sla": str(parsed), "mode": plan.mode,
                 "levels": list(plan.levels), "step_window_ms": plan.step_window_ms, "warmup_s": plan.warmup_s,
                 "max_trials": plan.max_trials})
    finished_before = set(store.finished())
    hardware = Hardware.detect()
    p99 = parsed.constraint("p99")
    settings = SearchSettings(
        exhaustive=exhaustive, tie_tolerance=tie_tolerance, noise_allowance=noise_allowance,
        max_concurrency=max(plan.levels) if plan.mode == "concurrency" else None,
        levels=tuple(plan.levels), load_mode=plan.mode,
        p99_limit_ms=p99.value if p99 is not None else None,
        cpu_cores=hardware.cpu_cores, gpus=len(hardware.gpus),
    )

    own_server = server is None
    live_server = server or TritonServer(repo_path, model_control="explicit", log_path=out_dir / "tritonserver.log")
    resumed: list[str] = []
    progress = _Progress(emit, total=len(variants))
    try:
        if own_server:
            live_server.start()
        version = live_server.version()
        emit(SweepEvent("server", f"tritonserver {version} on {live_server.grpc_url} (explicit model control); "
                        f"{len(variants)} variants, sweep folder {out_dir}"))
        template = spec or PerfSpec(model=model, url=live_server.grpc_url)
        meter = VariantMeter(
            live=LiveModel(live_server, model), base=base, spec=replace(template, model=model, url=live_server.grpc_url),
            plan=plan, sla=parsed, store=store, say=lambda text: emit(SweepEvent("note", text)),
        )

        def measure(variant: Variant, loads: tuple[float, ...]) -> VariantOutcome:
            reused = variant.knobs_id in finished_before
            if not reused:
                progress.start(variant, loads)
            outcome = meter.measure(variant, loads)
            if reused:
                resumed.append(variant.id)
            progress.finished(outcome, reused)
            return outcome

        def notify(kind: str, data: dict[str, Any]) -> None:
            progress.decision(kind, data)

        result = search(variants, measure, meter.confirm, settings, notify=notify)
    finally:
        if own_server:
            live_server.stop()

    written: WriteBack | None = None
    if write_back and result.winner is not None:
        written = write_winner(repo_path, model, apply_variant(base, result.winner.variant))
        if written.backup_path is not None:
            emit(SweepEvent("written", f"winner written to {written.config_path}; previous config kept as "
                            f"{written.backup_path} (restore: {written.restore_command})",
                            variant=result.winner.variant.id, data=written.to_dict()))
    sweep = SweepResult(
        model=model, repo=repo_path, out_dir=out_dir, sla_text=str(parsed), load_text=load_text,
        p99_limit_ms=settings.p99_limit_ms, exhaustive=exhaustive, grid=variants, search=result,
        write_back=written, wall_s=time.monotonic() - started, resumed=resumed, server_version=version,
    )
    sweep.report_path, sweep.plot_path = write_sweep_report(sweep)
    store.write_summary(sweep.to_dict())
    return sweep


class _Progress:
    """Turns measurements and search decisions into :class:`SweepEvent` s with an ETA."""

    def __init__(self, emit: Callable[[SweepEvent], None], total: int) -> None:
        self.emit = emit
        self.total = total
        self.done = 0
        self.pruned = 0
        self.durations: list[float] = []

    def _left(self) -> int:
        return max(0, self.total - self.done - self.pruned)

    def _eta(self) -> float | None:
        if not self.durations:
            return None
        return sum(self.durations) / len(self.durations) * self._left()

    def start(self, variant: Variant, loads: tuple[float, ...]) -> None:
        at = f" at load {', '.join(f'{x:g}' for x in loads)}" if loads else ""
        self.emit(SweepEvent("start", f"measuring {variant.id} ({variant.describe()}){at}", variant=variant.id,
                             done=self.done, left=self._left(), eta_s=self._eta()))

    def finished(self, outcome: VariantOutcome, reused: bool) -> None:
        self.done += 1
        if not reused and outcome.duration_s > 0:
            self.durations.append(outcome.duration_s)
        v = outcome.variant
        score = outcome.score()
        if reused:
            kind, text = "resumed", f"{v.id}: finished in an earlier run, reused"
        elif outcome.status == STATUS_LOAD_FAILED:
            kind, text = "load_failed", f"{v.id}: the server refused it: {outcome.reason}"
        elif outcome.status == STATUS_FAILED:
            kind, text = "failed", f"{v.id}: could not be measured: {outcome.reason or outcome.stop_reason}"
        elif score is None:
            kind, text = "measured", f"{v.id}: no step met the SLA ({outcome.stop_reason.replace('_', ' ')})"
        else:
            kind, text = "measured", (f"{v.id}: {score.throughput_per_s:,.1f} infer/s within the SLA at load "
                                      f"{score.load:g}, p99 {score.p99_ms:.2f} ms ({outcome.duration_s:.1f} s)")
        data = {"status": outcome.status, "duration_s": round(outcome.duration_s, 2)}
        if score is not None:
            data.update(score.to_dict())
        self.emit(SweepEvent(kind, text, variant=v.id, done=self.done, left=self._left(), eta_s=self._eta(), data=data))

    def decision(self, kind: str, data: dict[str, Any]) -> None:
        variant = str(data.get("variant", ""))
        if kind == "pruned":
            self.pruned += 1
            text = (f"{variant}: pruned, it cannot carry more than {data['bound_per_s']:,.1f} infer/s "
                    f"(best so far {data['best_per_s']:,.1f})")
        elif kind == "guess":
            text = f"first guess from the measured cost and the hardware: {variant}"
        else:
            text = f"re-measuring {variant} at its best load (a leader must hold up twice)"
        self.emit(SweepEvent(kind, text, variant=variant, done=self.done, left=self._left(), eta_s=self._eta(),
                             data=dict(data)))
