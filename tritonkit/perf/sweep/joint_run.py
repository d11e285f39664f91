"""Run a joint sweep of several models end to end (see :mod:`tritonkit.perf.sweep.joint`).

Example::

    settings = SweepSettings(sla="p99<=50ms", grid=SweepGrid(instances=[1, 2], max_batch_sizes=[4]),
                             concurrency="2,4,8", shares={"a": 2, "b": 1})
    result = run_joint_sweep("model_repository", ["a", "b"], settings)
    print(result.headline(), result.exit_code)
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.joint import JointMeter, JointOutcome, better, joint_shares, write_joint_report
from tritonkit.perf.sweep.joint_store import JointStore
from tritonkit.perf.sweep.live import LiveModel, ModelHost
from tritonkit.perf.sweep.outcome import TIE_TOLERANCE, reuse_or_reject
from tritonkit.perf.sweep.report import remote_lines
from tritonkit.perf.sweep.result import Exit, SweepEvent, SweepResult, margins_text, required_text
from tritonkit.perf.sweep.runner import AUTO_COMPLETE_OFF, config_key, quick_load_args, search_on_server
from tritonkit.perf.sweep.runner import _os_errors as os_errors
from tritonkit.perf.sweep.search import ties_with
from tritonkit.perf.sweep.settings import SweepSettings
from tritonkit.perf.sweep.store import SweepStore, sweep_locks
from tritonkit.perf.sweep.variants import Variant, apply_variant
from tritonkit.perf.sweep.writeback import PendingWriteBack, WriteBack, plan_write_back
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import CONFIG_FILENAME, model_folder, read_config
from tritonkit.server import TritonServer

__all__ = ["JointResult", "grids_of", "joint_record", "search_jointly", "plan_joint_write_backs", "read_bases",
           "run_joint_sweep", "sweep_alone"]

#: How many of a model's best alone variants the joint search tries (besides its default).
CANDIDATES_PER_MODEL = 3


@dataclass
class JointResult:
    """What :func:`run_joint_sweep` measured: every model's default together, each model's alone
    winner together, the joint winner, and every joint configuration tried."""

    models: list[str]
    shares: dict[str, float]
    out_dir: Path
    defaults: JointOutcome
    alone: dict[str, SweepResult]
    alone_together: JointOutcome | None
    winner: JointOutcome | None
    tried: list[JointOutcome]
    wall_s: float
    write_backs: dict[str, WriteBack] = field(default_factory=dict)
    report_path: Path | None = None
    resumed: list[str] = field(default_factory=list)
    load_text: str = "total concurrency"
    #: The margin every SLA bound had to keep for a step to count (``SweepSettings.headroom``).
    headroom_required: float = 0.0
    #: A sweep by URL: the server's own facts, what was left on it, and what it said (other clients' traffic).
    server_facts: dict[str, Any] | None = None
    remote: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)
    tie_tolerance: float = TIE_TOLERANCE

    @property
    def commits(self) -> bool:
        """The commit rule of every sweep (:attr:`~tritonkit.perf.sweep.search.SearchResult.decided`)
        for several models: a joint winner, nothing failed, and every model's default together (the
        configs served) not in its tie."""
        win, served = (self.winner.best() if self.winner else None), self.defaults.best()
        if self.exit_code != Exit.OK or self.winner is None or win is None:
            return False
        if all(v.is_default for v in self.winner.variants.values()):
            return False
        return served is None or not ties_with(win.throughput_per_s, served.throughput_per_s, self.tie_tolerance)

    @property
    def headroom(self) -> dict[str, dict[str, float]]:
        """Each model's margin to each of its scaled SLA bounds at the joint winner's load, as a
        fraction of the limit (``{"a": {"p99<=50ms": 0.38}}``), as the judge computed them; empty
        without a winner."""
        best = self.winner.best() if self.winner else None
        return {m: dict(p.headroom) for m, p in best.points.items() if p.headroom} if best else {}

    def headroom_text(self) -> str:
        """``"headroom a p99<=50ms 38 %; b p99<=80ms 12 %"`` (and the margin required), or ``""``."""
        margins = self.headroom
        if not margins:
            return ""
        per_model = "; ".join(f"{model} {margins_text(terms)}" for model, terms in margins.items())
        return f"headroom {per_model}{required_text(self.headroom_required)}"

    @property
    def failed(self) -> list[JointOutcome]:
        return [o for o in self.tried if o.failed]

    @property
    def exit_code(self) -> int:
        """0 a joint configuration meets every SLA (and nothing failed), 1 none does, 2 could not measure."""
        if self.failed or any(r.failed for r in self.alone.values()):
            return Exit.UNMEASURED
        if self.winner is not None and self.winner.best() is not None:
            return Exit.OK
        return Exit.SLA_MISSED if any(o.steps for o in self.tried) else Exit.UNMEASURED

    def _ratio(self, other: JointOutcome | None) -> float | None:
        win = self.winner.best() if self.winner else None
        ref = other.best() if other else None
        if win is None or ref is None or ref.throughput_per_s <= 0:
            return None
        return win.throughput_per_s / ref.throughput_per_s

    def headline(self) -> str:
        best = self.winner.best() if self.winner else None
        if self.winner is None or best is None:
            return "No joint configuration meets every model's SLA." + (
                f" {len(self.failed)} could not be measured." if self.failed else "")
        parts = ", ".join(f"{m} {v.knobs_id}" for m, v in self.winner.variants.items())
        versus = [f"{r:.2f}× every model's default" for r in [self._ratio(self.defaults)] if r is not None]
        versus += [f"{r:.2f}× the alone winners together" for r in [self._ratio(self.alone_together)] if r is not None]
        margins = self.headroom_text()
        return (f"Joint winner {parts}: {best.throughput_per_s:,.1f} infer/s in all at {self.load_text} "
                f"{best.total:g}" + (f" — {', '.join(versus)}" if versus else "")
                + (f"; {margins}" if margins else "") + ".")

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code, "models": self.models, "shares": self.shares, "out_dir": str(self.out_dir),
            "wall_s": round(self.wall_s, 2),
            "winner": self.winner.to_dict() if self.winner else None,
            "defaults": self.defaults.to_dict(),
            "alone_together": self.alone_together.to_dict() if self.alone_together else None,
            "alone": {m: r.to_dict() for m, r in self.alone.items()},
            "ratio_to_defaults": self._ratio(self.defaults),
            "ratio_to_alone_together": self._ratio(self.alone_together),
            "headroom": self.headroom, "headroom_required": self.headroom_required,
            "tried": [o.to_dict() for o in self.tried],
            "resumed": list(self.resumed),
            "write_back": {m: wb.to_dict() for m, wb in self.write_backs.items()},
            "report": str(self.report_path) if self.report_path else None,
            **({"server": dict(self.server_facts)} if self.server_facts is not None else {}),
            **({"remote": dict(self.remote)} if self.remote is not None else {}),
            **({"warnings": list(self.warnings)} if self.warnings else {}),
        }

    def render_markdown(self) -> str:
        lines = [f"# Joint sweep: {', '.join(self.models)}", "",
                 "- traffic shares: " + ", ".join(f"{m} {100 * s:.0f} %" for m, s in self.shares.items()),
                 f"- wall time {self.wall_s:.1f} s; {len(self.tried)} joint configurations measured",
                 *remote_lines(self.server_facts, self.remote), *[f"- warning: {w}" for w in self.warnings], "",
                 "## Result", "", self.headline(), "",
                 "| configuration | " + " | ".join(f"{m} (infer/s, p99 ms)" for m in self.models)
                 + f" | total infer/s | at {self.load_text} |",
                 "| --- | " + " | ".join("---" for _ in self.models) + " | ---: | ---: |"]
        rows = [self.defaults, *([self.alone_together] if self.alone_together else []),
                *[o for o in self.tried if o not in (self.defaults, self.alone_together)]]
        for outcome in rows:
            best = outcome.best()
            mark = " ★" if outcome is self.winner else ""
            cells = []
            for model in self.models:
                point = best.points.get(model) if best else None
                cells.append(f"{outcome.variants[model].knobs_id}: "
                             + (f"{point.throughput_per_s:,.1f}, {point.p99_ms:.2f}" if point else "–"))
            total = f"{best.throughput_per_s:,.1f}" if best else ("failed: " + outcome.reason if outcome.failed
                                                                   else "no step met every SLA")
            lines.append(f"| {outcome.name}{mark} | " + " | ".join(cells)
                         + f" | {total.replace('|', '/')} | {best.total if best else '–'} |")
        lines += ["", "★ the joint winner; each model at its share of the load, all at once.", ""]
        return "\n".join(lines)


def _alone_settings(settings: SweepSettings, model: str, out: Path, share: float) -> SweepSettings:
    """The single-model sweep of ``model`` alone: its own SLA, its share of the total load."""
    plan = settings.ladder_plan()
    if plan.mode == "request_rate":
        rates = sorted({level * share for level in plan.levels})
        return replace(settings, sla=settings.parsed_sla(model), concurrency=None, request_rate=rates, out=out,
                       write_back=False, shares=None, model_slas=None)
    levels = sorted({max(1.0, float(round(level * share))) for level in plan.levels})
    return replace(settings, sla=settings.parsed_sla(model), concurrency=levels, out=out, write_back=False,
                   shares=None, model_slas=None)


def read_bases(repo_path: Path, models: Sequence[str]) -> dict[str, mc.ModelConfig]:
    """Each model's own config; ``ConfigError`` for a model with none in the repository."""
    bases = {}
    for model in models:
        path = model_folder(repo_path, model) / CONFIG_FILENAME
        if not path.is_file():
            raise ConfigError(f"no {CONFIG_FILENAME} for model '{model}' in {repo_path}",
                              hint="pass the repository folder and model folders inside it")
        bases[model] = read_config(path)
    return bases


def grids_of(bases: Mapping[str, mc.ModelConfig], settings: SweepSettings,
             swept: Sequence[str] | None = None) -> dict[str, list[Variant]]:
    """Each model's variants as ``settings.grid`` says, pins applied; a grid no sweep can use, or a
    pin naming a model the joint sweep does not sweep, is refused here (``ConfigError``).
    ``swept``: every model of the joint sweep, when ``bases`` holds only some of them (one
    model's alone phase on a cluster node)."""
    models = list(swept) if swept is not None else list(bases)
    settings.grid.validate(models)
    unknown = sorted(settings.grid.composing_pins(models))
    if unknown:
        raise ConfigError(f"--pin names {', '.join(unknown)}, which this joint sweep does not sweep",
                          hint=f"pin a knob of one of the models swept: {', '.join(models)}")
    return {m: settings.grid.variants(base, m) for m, base in bases.items()}


def sweep_alone(repo_path: Path, model: str, base: mc.ModelConfig, grid: list[Variant], settings: SweepSettings,
                models: Sequence[str], shares: Mapping[str, float], out_dir: Path, server: ModelHost | None,
                emit: Callable[[SweepEvent], None], *,
                live_model: Callable[[ModelHost, str], LiveModel] = LiveModel) -> SweepResult:
    """The alone phase of a joint sweep for ``model``: swept with the others unloaded (or, on a server
    the sweep did not start, loaded and idle), at its share of the load, by its own SLA, into
    ``out_dir/alone-<model>``; on ``server``, or on a server of its own when ``server`` is ``None``
    (another machine of a cluster)."""
    one = _alone_settings(settings, model, out_dir / f"alone-{model}", shares[model])
    store = SweepStore(one.out_dir(model))
    store.begin({"model": model, "alone_in": list(models), "sla": str(one.sla)})
    return search_on_server(repo_path, model, base, grid, one, store, server, emit, time.monotonic(), None,
                            live_model=live_model)


def plan_joint_write_backs(repo_path: Path, bases: Mapping[str, mc.ModelConfig],
                           result: JointResult) -> dict[str, PendingWriteBack]:
    """Each model's winner to write back, planned (``result.write_backs`` filled in); none unless the
    commit rule holds (:attr:`JointResult.commits`)."""
    pending: dict[str, PendingWriteBack] = {}
    if result.commits and result.winner is not None:
        for model, variant in result.winner.variants.items():
            pending[model] = plan_write_back(repo_path, model, apply_variant(bases[model], variant))
            result.write_backs[model] = pending[model].planned
    return pending


def _resumable(meter: JointMeter, store: JointStore, resumed: list[str],
               say: Callable[[str], None]) -> Callable[[str, Mapping[str, Variant]], JointOutcome]:
    """``meter.measure`` that first reuses a configuration finished in an earlier run into the same
    folder (a corrupt one is set aside, said, and measured again) and saves each one it measures."""

    def measure(name: str, variants: Mapping[str, Variant]) -> JointOutcome:
        key = JointOutcome(name, dict(variants)).key()
        if key in meter.measured:
            return meter.measured[key]
        stored = reuse_or_reject(lambda: store.load(variants), lambda: store.reject(variants), name, say)
        if stored is not None:
            stored.name, stored.variants = name, dict(variants)
            meter.measured[key] = stored
            resumed.append(name)
            say(f"{name}: finished in an earlier run, reused")
            return stored
        store.discard(variants)  # what an interrupted or failed run of it left
        outcome = meter.measure(name, variants)
        store.save(outcome)
        return outcome

    return measure


@dataclass
class JointFound:
    """What :func:`search_jointly` measured, before it is a :class:`JointResult`."""

    defaults: JointOutcome
    alone: dict[str, SweepResult]
    together: JointOutcome
    winner: JointOutcome
    resumed: list[str]

    def result(self, meter: JointMeter, started: float) -> JointResult:
        return JointResult(models=meter.models, shares=meter.shares, out_dir=meter.folder, defaults=self.defaults,
                           alone=self.alone, alone_together=self.together,
                           winner=self.winner if self.winner.best() else None, tried=list(meter.measured.values()),
                           wall_s=time.monotonic() - started, resumed=self.resumed,
                           load_text=f"total {meter.plan.mode.replace('_', ' ')}",
                           headroom_required=meter.settings.headroom, tie_tolerance=meter.settings.tie_tolerance)


def joint_record(bases: Mapping[str, mc.ModelConfig], shares: Mapping[str, float], slas: Mapping[str, Any],
                 settings: SweepSettings, **more: Any) -> dict[str, Any]:
    """The settings a joint sweep's results depend on (``sweep.json``; a re-run must match them):
    the models, shares, SLAs and configs, then the one fingerprint (:meth:`SweepSettings.record`)."""
    return {"models": list(bases), "shares": dict(shares), "slas": {m: str(sla) for m, sla in slas.items()},
            "configs": {m: config_key(base) for m, base in bases.items()}, **more, **settings.record()}


def search_jointly(meter: JointMeter, repo_path: Path, bases: Mapping[str, mc.ModelConfig],
                   grids: Mapping[str, list[Variant]], emit: Callable[[SweepEvent], None], *,
                   swept_alone: Mapping[str, SweepResult] | None = None,
                   before_alone: Callable[[str], str] | None = None) -> JointFound:
    """The joint search on ``meter``'s server: every model's default together, each model alone, the
    alone winners together, then each model's best alone variants with the others held.
    ``before_alone``: called before a model is swept alone; it readies the others and says how
    (default: they are unloaded)."""
    models, settings, say, out_dir = meter.models, meter.settings, meter.say, meter.folder
    resumed: list[str] = []
    measure = _resumable(meter, JointStore(out_dir), resumed, say)
    defaults = measure("every model's default", {m: grids[m][0] for m in models})
    alone: dict[str, SweepResult] = {}
    for model in models:
        if swept_alone is not None and model in swept_alone:
            alone[model] = swept_alone[model]
            say(f"{model} alone: swept elsewhere, {alone[model].headline()}")
            continue
        others = before_alone(model) if before_alone is not None else "the others unloaded"
        say(f"sweeping {model} alone ({others}), at its share of the load")
        alone[model] = sweep_alone(repo_path, model, bases[model], grids[model], settings, models, meter.shares,
                                   out_dir, meter.server, emit, live_model=meter.live_model)
        resumed += [f"{model} alone: {v}" for v in alone[model].resumed]
    current = {m: (r.search.winner.variant if r.search.winner else grids[m][0]) for m, r in alone.items()}
    together = measure("the alone winners together", current)
    winner = together if better(together, defaults, settings.tie_tolerance) else defaults
    for model in models:
        ranked = sorted((o for o in alone[model].search.outcomes if o.score() is not None),
                        key=lambda o: -(o.score() or o.steps[0]).throughput_per_s)
        candidates = [o.variant for o in ranked[:CANDIDATES_PER_MODEL]] + [grids[model][0]]
        for variant in candidates:
            trial = {**winner.variants, model: variant}
            outcome = measure(f"{model} → {variant.knobs_id}", trial)
            if better(outcome, winner, settings.tie_tolerance):
                winner = outcome
    return JointFound(defaults, alone, together, winner, resumed)


def run_joint_sweep(
    repo: str | os.PathLike[str],
    models: Sequence[str],
    settings: SweepSettings,
    *,
    on_event: Callable[[SweepEvent], None] | None = None,
    swept_alone: Mapping[str, SweepResult] | None = None,
) -> JointResult:
    """Tune ``models`` of ``repo`` together on one server under their joint load (module docstring of
    :mod:`tritonkit.perf.sweep.joint`); each model's winner is written back after the report.

    ``swept_alone``: models already swept alone elsewhere (:func:`sweep_alone` on another machine of
    a cluster, see :mod:`tritonkit.perf.cluster`); they are not swept alone here, and their alone
    outcomes only choose the candidates the joint search measures on this server."""
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    settings.validate()
    repo_path = Path(repo)
    models = list(models)
    shares = joint_shares(models, settings.shares)
    bases = read_bases(repo_path, models)
    grids = grids_of(bases, settings)
    slas = {m: settings.parsed_sla(m) for m in models}
    locate_perf_analyzer()
    out_dir = settings.out_dir("-".join(models))
    say: Callable[[str], None] = lambda text: emit(SweepEvent("note", text))  # noqa: E731
    with contextlib.ExitStack() as stack:
        stack.enter_context(sweep_locks(out_dir, [model_folder(repo_path, m) for m in models],
                                        f"perf sweep {' '.join(models)}", say=say))
        # Only the swept models are loaded on this server, so their configs alone decide.
        load_args = quick_load_args(repo_path, bases)
        if load_args:
            say(f"{AUTO_COMPLETE_OFF} (every swept model)")
        stack.enter_context(os_errors("write the joint sweep's results", out_dir))
        server = stack.enter_context(TritonServer(repo_path, model_control="explicit",
                                                  log_path=out_dir / "tritonserver.log", extra_args=load_args,
                                                  server_bin=settings.server_bin, backend_dir=settings.backend_dir))
        SweepStore(out_dir).begin(joint_record(bases, shares, slas, settings))
        meter = JointMeter(server=server, repo=repo_path, models=models, shares=shares, slas=slas,
                           plan=settings.ladder_plan(), settings=settings, folder=out_dir, say=say)
        result = search_jointly(meter, repo_path, bases, grids, emit, swept_alone=swept_alone).result(meter, started)
        pending = plan_joint_write_backs(repo_path, bases, result) if settings.write_back else {}
        result.report_path = write_joint_report(out_dir, result.render_markdown(),
                                                json.dumps(result.to_dict(), indent=2, default=str) + "\n")
        for write in pending.values():  # last: a failure above leaves the repository untouched
            write.commit()
    return result
