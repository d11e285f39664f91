"""One sweep end to end: read the model's config → grid → one server → search → write back → report.

:func:`run_sweep` is what ``tritonkit perf sweep`` and the demo call. Everything cheap is
checked before the server starts (the config, the SLA, the grid, perf_analyzer's presence, a
sweep folder holding results of other settings). The server is stopped however the sweep
ends; a Ctrl-C re-raises ``KeyboardInterrupt`` after that, with every finished variant saved.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import path_error
from tritonkit.errors import ConfigError, ServerError, TritonKitError
from tritonkit.perf import PerfSpec
from tritonkit.perf.measure.input_data import region_for_server
from tritonkit.perf.measure.metrics import scrape_metrics, server_gpus
from tritonkit.perf.measure.runtime import ServedRuntime, runtime_of
from tritonkit.perf.sweep.driver import LoadGenerator, VariantMeter
from tritonkit.perf.sweep.live import LiveModel, ModelHost
from tritonkit.perf.sweep.outcome import STATUS_FAILED, STATUS_LOAD_FAILED, STATUS_MEASURED, VariantOutcome
from tritonkit.perf.sweep.report import write_sweep_report
from tritonkit.perf.sweep.result import SweepEvent, SweepResult
from tritonkit.perf.sweep.search import SearchSettings, search
from tritonkit.perf.sweep.settings import SweepGrid, SweepSettings
from tritonkit.perf.sweep.store import SweepStore, sweep_locks
from tritonkit.perf.sweep.variants import Variant, apply_variant, grid_warnings, pinned_config
from tritonkit.perf.sweep.writeback import PendingWriteBack, plan_write_back
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import CONFIG_FILENAME, Hardware, model_folder, read_config, render_config
from tritonkit.server import TritonServer, locate_server
from tritonkit.triton_releases import client_shm_args

__all__ = ["SweepEvent", "SweepGrid", "SweepResult",
           "SweepSettings", "run_sweep"]


def config_key(base: mc.ModelConfig) -> str:
    """A digest of ``base`` without the swept knobs: writing a winner back keeps the key, so a
    re-run after it reuses the results; any other edit to the config invalidates them."""
    neutral = apply_variant(base, Variant(1, base.max_batch_size, 0))
    neutral.max_batch_size = 0
    if neutral.HasField("dynamic_batching"):
        neutral.dynamic_batching.max_queue_delay_microseconds = 0
        del neutral.dynamic_batching.preferred_batch_size[:]
    return hashlib.sha256(render_config(neutral).encode()).hexdigest()[:16]


@contextlib.contextmanager
def _os_errors(action: str, where: Path) -> Iterator[None]:
    """An ``OSError`` (disk full, read-only, permissions) as a ``ConfigError`` naming the file, or
    ``where`` when the error names none (a failed ``write`` has no file name)."""
    try:
        yield
    except OSError as exc:
        raise path_error(exc, action, exc.filename or where) from exc


def run_sweep(
    repo: str | os.PathLike[str],
    model: str,
    settings: SweepSettings,
    *,
    server: TritonServer | None = None,
    on_event: Callable[[SweepEvent], None] | None = None,
) -> SweepResult:
    """Sweep ``model`` of ``repo`` as ``settings`` say and return the result.

    ``server``: an already running server with explicit model control to use instead of starting
    one (it is not stopped). The sweep folder and the model folder are locked while it runs
    (:class:`~tritonkit._lock.LockedError` names the holder of either). Order on the way out:
    every variant's result is saved as it is measured, then the report and ``sweep.json``, and
    only then is the winner written into the repository; a failure before that leaves the
    repository untouched, and an ``OSError`` (disk full, read-only) is a ``ConfigError`` naming
    the path. A variant that could not be measured means exit 2 and no write-back.
    """
    started = time.monotonic()
    emit = on_event or (lambda _event: None)
    settings.validate()
    repo_path = Path(repo)
    config_path = model_folder(repo_path, model) / CONFIG_FILENAME
    if not config_path.is_file():
        raise ConfigError(f"no {CONFIG_FILENAME} for model '{model}' in {repo_path}",
                          hint=f"pass the repository folder and a model folder inside it ({config_path} is missing)")
    base = read_config(config_path)
    parsed = settings.parsed_sla()
    settings.grid.validate([model])
    variants = settings.grid.variants(base, model)
    plan = settings.ladder_plan()
    target_config = _target_config(repo_path, model, settings.target)
    composing = _composing_configs(repo_path, model, settings, target_config)
    locate_perf_analyzer()  # MissingComponentError now, before any server starts
    if server is not None and server.model_control != "explicit":
        raise ConfigError("the sweep needs a server with explicit model control",
                          hint="start it with model_control='explicit' (tritonkit serve --explicit)")
    out_dir = settings.out_dir(model)
    warnings = grid_warnings(variants)
    with sweep_locks(out_dir, [model_folder(repo_path, model)], f"perf sweep {model}", read_only=not settings.write_back,
                     say=lambda text: emit(SweepEvent("note", text))), _os_errors("write the sweep's results", out_dir):
        settings = settings.with_input_data(repo_path, model, out_dir)
        for text in warnings:
            emit(SweepEvent("warning", text))
        store = SweepStore(out_dir)
        store.begin({"model": model, "target": settings.target, "config": config_key(base), "sla": str(parsed),
                     **settings.record(plan),
                     **({"composing_pins": [str(p) for pins in settings.grid.composing_pins([model]).values()
                                            for p in pins]} if composing else {})})
        stopping: list[threading.Thread] = []
        try:
            sweep = search_on_server(repo_path, model, base, variants, settings, store, server, emit, started,
                                     target_config, stopping=stopping, composing=composing)
            sweep.warnings = warnings + sweep.warnings
            pending: PendingWriteBack | None = None
            winner = sweep.search.winner
            if settings.write_back and winner is not None and sweep.commits:
                pending = plan_write_back(repo_path, model, apply_variant(base, winner.variant))
                sweep.write_back = pending.planned
            sweep.wall_s = time.monotonic() - started
            sweep.report_path, sweep.plot_path = write_sweep_report(sweep)
            store.write_summary(sweep.to_dict())
        finally:
            for thread in stopping:
                thread.join()
        if stopping:
            # The report shows the time up to itself; the result and sweep.json the whole of it.
            sweep.wall_s = time.monotonic() - started
            store.write_summary(sweep.to_dict())
    if pending is not None:
        # Last, and only once everything above is on disk: the repository changes or stays as it was.
        with _os_errors("write the winner into the repository", config_path):
            written = pending.commit()
        if written.backup_path is not None:
            emit(SweepEvent("written", f"winner written to {written.config_path}; previous config kept as "
                            f"{written.backup_path} (restore: {written.restore_command})",
                            variant=sweep.search.winner.variant.id if sweep.search.winner else None,
                            data=written.to_dict()))
    return sweep


def search_on_server(repo_path: Path, model: str, base: mc.ModelConfig, variants: list[Variant], settings: SweepSettings,
             store: SweepStore, server: ModelHost | None, emit: Callable[[SweepEvent], None],
             started: float, target_config: mc.ModelConfig | None, *,
             stopping: list[threading.Thread] | None = None,
             composing: dict[str, mc.ModelConfig] | None = None,
             live_model: Callable[[ModelHost, str], LiveModel] = LiveModel,
             load_generator: LoadGenerator | None = None) -> SweepResult:
    """Serve (unless ``server`` is given), search and stop the server it started, however the
    search ends; nothing is written back here. The joint sweep calls it for each model alone.
    ``stopping``: once the search has finished, the server this call started is stopped in a
    thread appended there, for the caller to join (any other way out stops it at once).
    ``composing``: composing models of the target loaded with these configs (pinned knobs)
    before the target. ``live_model``: what loads the swept model on the server (a remote sweep's
    checks that the server still serves what it loaded); ``load_generator``: what sends each
    ladder's load (default perf_analyzer here)."""
    plan = settings.ladder_plan()
    finished_before = set(store.finished())
    search_settings = _search_settings(settings)
    own_server = server is None
    live_server: ModelHost
    load_args: list[str] = []
    if server is None:
        started_server, load_args = _own_server(repo_path, model, base, settings, store.root)
        live_server = started_server
    else:
        live_server = server
    progress = _Progress(emit, total=len(variants))
    searched = False
    server_start_s = 0.0
    try:
        if isinstance(live_server, TritonServer) and own_server:
            live_server.start()
            server_start_s = time.monotonic() - started
        version = live_server.version()
        runtime = (runtime_of(base, version, backend_dir=live_server.install.backend_dir, local_python=True)
                   if isinstance(live_server, TritonServer) else runtime_of(base, version))
        emit(SweepEvent("server", f"tritonserver {version} on {live_server.grpc_url} (explicit model control"
                        + (f", {AUTO_COMPLETE_OFF}" if load_args else "")
                        + f"); {len(variants)} variants, sweep folder {store.root}; {model} served by "
                        + runtime.describe()))
        stand_in_warning = stand_in_note(model, runtime) if runtime.stand_in else None
        if stand_in_warning is not None:
            emit(SweepEvent("warning", stand_in_warning))
        meter = _meter(live_server, model, base, settings, store, runtime, target_config, composing, emit,
                       live_model=live_model)
        meter.load_generator = load_generator
        meter.load_target()
        gpus = _server_gpus(live_server.metrics_url)
        if gpus is not None:
            search_settings = replace(search_settings, gpus=gpus)
        measure = _Measure(meter, settings, progress, finished_before)
        result = search(variants, measure, meter.confirm, search_settings, notify=progress.decision)
        searched = True
    finally:
        if isinstance(live_server, TritonServer) and own_server and searched and stopping is not None:
            # The server takes seconds to let its models go (python stubs exit slowly): the
            # report is written meanwhile, and the caller joins the thread before it returns.
            thread = threading.Thread(target=_stop_unloaded, args=(live_server, [model, settings.target or model]),
                                      name="tritonserver-stop")
            thread.start()
            stopping.append(thread)
        elif isinstance(live_server, TritonServer) and own_server:
            live_server.stop()
    return SweepResult(
        model=model, repo=repo_path, out_dir=store.root, sla_text=str(settings.parsed_sla()),
        load_text=f"{plan.mode.replace('_', ' ')} " + ", ".join(f"{v:g}" for v in plan.levels),
        p99_limit_ms=search_settings.p99_limit_ms, exhaustive=settings.exhaustive, grid=variants, search=result,
        write_back=None, wall_s=time.monotonic() - started, resumed=measure.resumed, server_version=version,
        server_start_s=server_start_s, target=settings.target, runtime=runtime, headroom_required=settings.headroom,
        warnings=[stand_in_warning] if stand_in_warning else [],
    )


def _search_settings(settings: SweepSettings) -> SearchSettings:
    """The search's knobs: the sweep's ladder, SLA and tolerances, on this machine's hardware (the
    GPUs the server's own metrics show replace that count once it runs)."""
    plan = settings.ladder_plan()
    p99 = settings.parsed_sla().constraint("p99")
    hardware = Hardware.detect()
    return SearchSettings(
        exhaustive=settings.exhaustive, tie_tolerance=settings.tie_tolerance,
        noise_allowance=settings.noise_allowance,
        max_concurrency=max(plan.levels) if plan.mode == "concurrency" else None,
        levels=tuple(plan.levels), load_mode=plan.mode,
        p99_limit_ms=p99.value if p99 is not None else None,
        cpu_cores=hardware.cpu_cores, gpus=len(hardware.gpus), rate_tolerance=settings.rate_tolerance,
    )


def _own_server(repo_path: Path, model: str, base: mc.ModelConfig, settings: SweepSettings,
                out_dir: Path) -> tuple[TritonServer, list[str]]:
    """The server the sweep starts for itself (explicit model control, its log in the sweep folder),
    and the arguments it adds: auto-complete off where no variant needs it, client shared memory."""
    load_args = quick_load_args(repo_path, {model: base}) if settings.target is None else []
    if settings.spec is not None and settings.spec.output_shared_memory_size_bytes is not None:
        # Its own loopback server: let perf_analyzer's output region in where the release needs the flag.
        load_args = [*load_args, *client_shm_args(locate_server().version)]
    return TritonServer(repo_path, model_control="explicit", log_path=out_dir / "tritonserver.log",
                        extra_args=load_args, server_bin=settings.server_bin,
                        backend_dir=settings.backend_dir), load_args


def _meter(server: ModelHost, model: str, base: mc.ModelConfig, settings: SweepSettings, store: SweepStore,
           runtime: ServedRuntime, target_config: mc.ModelConfig | None, composing: dict[str, mc.ModelConfig] | None,
           emit: Callable[[SweepEvent], None], *, live_model: Callable[[ModelHost, str], LiveModel] = LiveModel) -> VariantMeter:
    """What measures ``model``'s variants on ``server``: perf_analyzer sent to the load target, with
    an output region of derived data only where the server takes client shared memory."""
    target = settings.target or model
    template = settings.spec or PerfSpec(model=target, url=server.grpc_url)
    template, shm_said = region_for_server(replace(template, url=server.grpc_url))
    if shm_said:
        emit(SweepEvent("note", shm_said))
    return VariantMeter(
        live=live_model(server, model), base=base, spec=replace(template, model=target, url=server.grpc_url),
        plan=settings.ladder_plan(), sla=settings.parsed_sla(), store=store,
        say=lambda text: emit(SweepEvent("note", text)), judging=settings.judging(),
        target=LiveModel(server, target) if settings.target else None, target_config=target_config,
        noise_allowance=settings.noise_allowance, runtime=runtime, composing=dict(composing or {}),
    )


@dataclass
class _Measure:
    """The search's ``measure``: one variant on the meter, with the bars the best so far sets, its
    progress told; ``resumed``: the variants a finished earlier run measured."""

    meter: VariantMeter
    settings: SweepSettings
    progress: _Progress
    finished_before: set[str]
    best_per_s: float = 0.0
    best_tuned_per_s: float = 0.0  # the best of the variants other than the default
    resumed: list[str] = field(default_factory=list)

    def __call__(self, variant: Variant, loads: tuple[float, ...]) -> VariantOutcome:
        reused = variant.knobs_id in self.finished_before
        if not reused:
            self.progress.start(variant, loads)
        # Every variant is measured from its top load down (see driver.py), unless the sweep
        # is exhaustive. A contender (within twice the tie tolerance of the best variant so far,
        # or above it) is re-measured while it is loaded; the search's closing round re-measures,
        # loading them again, only the contenders not re-measured so. The default alone sets no
        # such bar: a tuned variant nearly always clears it, and the first one measured after
        # it (the first guess) is often overtaken, its re-measurement then wasted.
        quick = not self.settings.exhaustive
        tie = self.settings.tie_tolerance
        outcome = self.meter.measure(
            variant, loads, descend=quick, floor_per_s=self.best_per_s * (1.0 - tie),
            confirm_above_per_s=(self.best_tuned_per_s * (1.0 - 2 * tie)
                                 if quick and self.best_tuned_per_s > 0 else None))
        score = outcome.score()
        if score is not None:
            self.best_per_s = max(self.best_per_s, score.throughput_per_s)
            if not variant.is_default:
                self.best_tuned_per_s = max(self.best_tuned_per_s, score.throughput_per_s)
        if reused:
            self.resumed.append(variant.id)
        self.progress.finished(outcome, reused)
        return outcome


#: Triton's flag that loads a config as given. Each load with auto-complete on makes the python
#: backend start a stub of its own just to ask ``model.py`` for a config and wait for it to exit
#: (about 1.2 s a load here, against 0.2 s without it).
NO_AUTO_COMPLETE = "--disable-auto-complete-config"


def stand_in_note(model: str, runtime: ServedRuntime) -> str:
    """What a sweep of an ONNX model on the python stand-in says, once: its winner is the stand-in's,
    and how to measure the backend production serves."""
    return (f"{model} is an ONNX model served by the python stand-in (tritonkit's model.py running ONNX Runtime"
            f"{' ' + runtime.engine_version if runtime.engine_version else ''} in a python-backend model), not by "
            "Triton's onnxruntime backend that production servers run: this winner is the stand-in's, and the real "
            "backend carries different loads and can pick another winner. To measure it: rebuild with "
            f"`tritonkit build onnx MODEL.onnx --name {model} --runtime onnxruntime --force --backend-dir DIR` and "
            "sweep with `--backend-dir DIR` (DIR: a folder holding Triton's onnxruntime backend, e.g. an NGC "
            "container's /opt/tritonserver/backends)")


def needs_auto_complete(repo: Path, model: str, base: mc.ModelConfig) -> bool:
    """Whether loading ``model``'s variants could depend on the server completing its config.

    Only a python-backend model whose config declares its inputs and outputs and whose python
    files define no ``auto_complete_config`` hook is known not to: the python backend's
    auto-complete only runs that hook, so without it the config is the same either way. Other
    backends fill in tensors and a max batch from the model file, so they keep auto-complete."""
    if base.backend != "python" or base.platform or not base.input or not base.output:
        return True
    try:
        for path in model_folder(repo, model).rglob("*.py"):
            if "auto_complete_config" in path.read_text(encoding="utf-8", errors="replace"):
                return True
    except OSError:
        return True
    return False


#: What a sweep says when its server loads configs as written.
AUTO_COMPLETE_OFF = "config auto-complete off: the config is complete as written"


def quick_load_args(repo: Path, bases: dict[str, mc.ModelConfig]) -> list[str]:
    """The server arguments for a sweep's own server that loads only ``bases``' models: without
    auto-complete when none of them needs it (see :func:`needs_auto_complete`), else none."""
    return [] if any(needs_auto_complete(repo, m, base) for m, base in bases.items()) else [NO_AUTO_COMPLETE]


def _stop_unloaded(server: TritonServer, models: list[str]) -> None:
    """Stop ``server`` once ``models`` are unloaded. A server told to stop with a model still
    unloading looks again only once a second (``--exit-timeout-secs``); unloaded first, it
    finds none at its first look and exits at once (about 0.7 s less, here)."""
    for name in dict.fromkeys(models):
        with contextlib.suppress(TritonKitError):  # best effort: stop() ends the server however it is
            server.unload_model(name, wait=True, timeout_s=30.0)
    server.stop()


def _target_config(repo: Path, model: str, target: str | None) -> mc.ModelConfig | None:
    """The load target's own config (``None`` without a target); an ensemble must use ``model``."""
    if target is None or target == model:
        return None
    path = model_folder(repo, target) / CONFIG_FILENAME
    if not path.is_file():
        raise ConfigError(f"the load target '{target}' has no {CONFIG_FILENAME} in {repo}",
                          hint="--target names an ensemble or BLS model in the same repository")
    return check_target(read_config(path), model, target, str(path))


def check_target(config: mc.ModelConfig, model: str, target: str, where: str) -> mc.ModelConfig:
    """``config`` of the load ``target`` (read at ``where``), refused when it is an ensemble without a
    step that calls ``model``."""
    steps = {step.model_name for step in config.ensemble_scheduling.step}
    if config.platform == "ensemble" and model not in steps:
        raise ConfigError(f"ensemble '{target}' ({where}) has no step that calls '{model}' (it calls "
                          f"{', '.join(sorted(steps)) or 'nothing'})",
                          hint="sweep one of its composing models, or pass the right --target")
    return config


def _composing_configs(repo: Path, model: str, settings: SweepSettings, target_config: mc.ModelConfig | None,
                       served: Callable[[str], mc.ModelConfig] | None = None) -> dict[str, mc.ModelConfig]:
    """The configs of the composing models a ``--pin`` names (its knobs applied, the rest as
    written, or as ``served`` reads them from a server the sweep did not start), loaded before the
    target; a pin for a model this sweep does not load is refused."""
    pins = settings.grid.composing_pins([model])
    if pins and settings.target is None:
        raise ConfigError(f"--pin names {', '.join(sorted(pins))}, which this sweep does not load",
                          hint=f"pin a knob of '{model}' (or of every model: --pin KNOB=VALUE); a composing model's "
                               "knobs can be pinned with --target ENSEMBLE")
    steps = ({step.model_name for step in target_config.ensemble_scheduling.step}
             if target_config is not None and target_config.platform == "ensemble" else None)
    configs: dict[str, mc.ModelConfig] = {}
    for name, held in pins.items():
        if name == settings.target or (steps is not None and name not in steps):
            raise ConfigError(f"--pin {held[0]}: '{name}' is not a composing model of '{settings.target}'",
                              hint=f"its steps call {', '.join(sorted(steps or ())) or 'nothing'}")
        path = model_folder(repo, name) / CONFIG_FILENAME
        if served is not None:
            configs[name] = pinned_config(served(name), held)
            continue
        if not path.is_file():
            raise ConfigError(f"--pin {held[0]}: no {CONFIG_FILENAME} for model '{name}' in {repo}",
                              hint="pin a model of the repository")
        configs[name] = pinned_config(read_config(path), held)
    return configs


def _server_gpus(metrics_url: str) -> int | None:
    """How many GPUs the server's own metrics show (``None``: they cannot be read). The first
    guess counts these rather than the GPUs of the machine running the sweep."""
    try:
        return len(server_gpus(scrape_metrics(metrics_url)))
    except (OSError, ServerError):
        return None


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
        data: dict[str, Any] = {"status": outcome.status, "duration_s": round(outcome.duration_s, 2)}
        if outcome.status != STATUS_MEASURED:
            data["reason"] = outcome.reason or outcome.stop_reason
        if score is not None:
            data.update(score.to_dict())
        self.emit(SweepEvent(kind, text, variant=v.id, done=self.done, left=self._left(), eta_s=self._eta(), data=data))

    def decision(self, kind: str, data: dict[str, Any]) -> None:
        variant = str(data.get("variant", ""))
        if kind == "pruned":
            self.pruned += 1
            text = (f"{variant}: pruned, it cannot carry more than {data['bound_per_s']:,.1f} infer/s "
                    f"(best so far {data['best_per_s']:,.1f})")
        elif kind == "skipped":
            self.pruned += 1
            text = f"{variant}: {data['reason']}"
        elif kind == "propose":
            text = f"next: {variant}, {data['reason']}"
        elif kind == "guess":
            predicted = data.get("predicted")
            text = (f"first guess: {variant}, the model fitted to the default predicts "
                    f"{predicted['throughput_per_s']:,.0f} infer/s" if predicted
                    else f"first guess from the measured cost and the hardware: {variant}")
        else:
            text = f"re-measuring {variant} at its best load (a leader must hold up twice)"
        self.emit(SweepEvent(kind, text, variant=variant, done=self.done, left=self._left(), eta_s=self._eta(),
                             data=dict(data)))
