"""What a sweep is asked to do, as one frozen value: the contract between the CLI and the library.

``tritonkit perf sweep`` builds a :class:`SweepSettings` from its options (their defaults are read
from here, see :meth:`SweepSettings.default`) and :func:`~tritonkit.perf.sweep.run_sweep` takes
it as it is, so the command line and a library caller cannot drift apart. The ladder every
variant climbs is derived here too (:meth:`SweepSettings.ladder_plan`), in the open.

Example::

    settings = SweepSettings(sla="p99<=50ms", grid=SweepGrid(instances=(1, 2), max_batch_sizes=(1, 4, 8)),
                             concurrency="1:16", out=Path("results/resnet-sweep"))
    result = run_sweep("model_repository", "resnet", settings)
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._settings import field_default
from tritonkit._values import (
    COUNT,
    POSITIVE,
    PROTO_INT32,
    SECONDS_OR_ZERO,
    STEPS,
    TOLERANCE,
    WINDOW_MS,
    bounded,
    check_fields,
)
from tritonkit.errors import ConfigError
from tritonkit.perf import SLA, LadderPlan, PerfSpec, parse_sla
from tritonkit.perf.judge.criteria import DEFAULT_RATE_TOLERANCE, JudgeSettings
from tritonkit.perf.measure.folders import run_folder
from tritonkit.perf.sweep.outcome import NOISE_ALLOWANCE, TIE_TOLERANCE
from tritonkit.perf.sweep.variants import KNOB_PARSERS, Pin, Variant, parse_pin, variant_grid

__all__ = ["SweepGrid", "SweepSettings"]


@dataclass(frozen=True)
class SweepGrid:
    """The axes to sweep; an axis left ``None`` keeps the model's own value (see
    :func:`~tritonkit.perf.sweep.variant_grid`). ``batcher_on_batch_sweep``: when max batch is
    swept and no window is given, variants run the dynamic batcher with a 0 ms window (without a
    batcher the server never forms a batch, so max batch could not change throughput); pass
    ``windows_us=[None]`` (``--batch-window off``) to sweep without it. ``queue_sizes`` (0:
    unbounded) and ``queue_timeouts_us`` (0: none; else a request waiting that long is rejected)
    sweep the dynamic batcher's queue policy; pair them with an SLA term on the rejected share
    (``rejected<=1%``) to allow some rejection.

    ``pins`` hold a knob at one value (:class:`~tritonkit.perf.sweep.variants.Pin`): for every
    swept model, or for one model — a swept one (in a joint sweep, the others keep the axes), or
    with a load target a composing model that is not swept, loaded with the pin applied.
    """

    instances: Sequence[int] | None = None
    max_batch_sizes: Sequence[int] | None = None
    windows_us: Sequence[int | None] | None = None
    preferred: Sequence[Sequence[int]] | None = None
    batcher_on_batch_sweep: bool = True
    queue_sizes: Sequence[int] | None = None
    queue_timeouts_us: Sequence[int] | None = None
    pins: Sequence[Pin] = ()

    #: Pin knob → (the axis it fixes, the option that sweeps it).
    _AXES = {"instances": ("instances", "--instances"), "max_batch_size": ("max_batch_sizes", "--max-batch-size"),
             "batch_window": ("windows_us", "--batch-window"), "preferred_batch": ("preferred", "--preferred-batch"),
             "max_queue_size": ("queue_sizes", "--max-queue-size"),
             "queue_timeout": ("queue_timeouts_us", "--queue-timeout")}

    @classmethod
    def from_text(cls, pins: Sequence[str] = (), **texts: str | None) -> SweepGrid:
        """The grid the command line's options give: each knob's text by its pin name
        (``instances="1:4"``, ``batch_window="0,5ms"``; ``None`` keeps the model's own value), read
        as its option reads it, and ``--pin`` texts."""
        axes = {cls._AXES[knob][0]: KNOB_PARSERS[knob](text) for knob, text in texts.items() if text}
        return cls(**axes, pins=tuple(parse_pin(text) for text in pins))  # type: ignore[arg-type]

    def validate(self, swept: Sequence[str]) -> None:
        """Refuse pins that contradict each other or an axis every model sweeps (``ConfigError``)."""
        seen: dict[tuple[str | None, str], Pin] = {}
        for pin in self.pins:
            key = (pin.model, pin.knob)
            if key in seen and seen[key] != pin:
                raise ConfigError(f"--pin {seen[key]} and --pin {pin} hold the same knob at two values",
                                  hint="keep one of them")
            seen[key] = pin
            axis, option = self._AXES[pin.knob]
            if pin.model is None and getattr(self, axis) is not None:
                raise ConfigError(f"--pin {pin} and {option} both set {pin.knob.replace('_', ' ')} for every model",
                                  hint=f"drop one; to hold it for one model only, write --pin MODEL.{pin.knob}=…")
            if pin.model is not None and len(swept) == 1 and pin.model == swept[0] \
                    and getattr(self, axis) is not None:
                raise ConfigError(f"--pin {pin} and {option} both set {pin.knob.replace('_', ' ')} for "
                                  f"'{pin.model}'", hint="drop one of them")

    def for_model(self, model: str) -> SweepGrid:
        """The axes ``model`` is swept over: these, with the pins for every model and for it applied."""
        changes: dict[str, object] = {}
        for pin in self.pins:
            if pin.model not in (None, model):
                continue
            axis, _ = self._AXES[pin.knob]
            changes[axis] = [pin.value]
        return replace(self, pins=(), **changes)  # type: ignore[arg-type]

    def variants(self, base: mc.ModelConfig, model: str | None = None) -> list[Variant]:
        """The grid of ``base`` (the config of ``model``) over these axes, pins applied."""
        axes = self.for_model(model or base.name)
        return variant_grid(base, instances=axes.instances, max_batch_sizes=axes.max_batch_sizes,
                            windows_us=axes.windows_us, preferred=axes.preferred,
                            batcher_on_batch_sweep=axes.batcher_on_batch_sweep, queue_sizes=axes.queue_sizes,
                            queue_timeouts_us=axes.queue_timeouts_us)

    def composing_pins(self, swept: Sequence[str]) -> dict[str, list[Pin]]:
        """The pins for models that are not swept, by model: composing models loaded with them."""
        found: dict[str, list[Pin]] = {}
        for pin in self.pins:
            if pin.model is not None and pin.model not in swept:
                found.setdefault(pin.model, []).append(pin)
        return found


@dataclass(frozen=True)
class SweepSettings:
    """Everything a sweep depends on except the repository, the model and the server.

    ``concurrency``/``request_rate``: the ladder's levels as in ``perf run`` (default concurrency
    ``1:8``); each step measures three ``step_window_ms`` windows (at most ``max_trials``) after
    ``warmup_s`` of unrecorded load per variant. ``out``: the sweep folder (default
    ``<results_root>/<UTC>-<model>-sweep``); re-running into it resumes. ``tie_tolerance``: relative
    throughput difference that is a tie; ``noise_allowance``: headroom on the bounds that prune.
    ``rate_tolerance``: with a request-rate ladder a step meets the SLA only if the server carried
    at least ``(1 - rate_tolerance)`` × the offered rate. ``max_gpu_memory_mb``: a variant whose
    peak GPU memory (from the server's metrics) is above it does not meet the SLA. ``headroom``
    (a fraction in ``[0, 1)``, ``0.2`` = 20 %): a step meets the SLA only if every scaled bound
    keeps that margin to its limit, so the winner's load may be lower (0: none). All three are the
    judge's criteria (:meth:`judging`), the same ``perf run`` applies. ``spec``:
    perf_analyzer options (input data, shapes; model and URL are replaced). ``write_back=False``
    leaves the repository untouched. ``target``: the model perf_analyzer sends the load to, when
    it is not the swept model itself: an ensemble or a BLS model that calls it (the swept model's
    instances and batching are what change; the target's config is loaded as written).
    ``shares``/``model_slas`` are for several models swept together (see
    :func:`~tritonkit.perf.sweep.run_joint_sweep`): each model's share of the traffic (equal when
    absent) and an SLA for a model that differs from ``sla``; the ladder's concurrencies are then
    totals over all models. ``server_bin`` / ``backend_dir``: the tritonserver the sweep starts and the
    backends folder it loads (default: ``$TRITONKIT_SERVER_BIN`` / ``$TRITONKIT_BACKEND_DIR`` where the
    sweep runs, else the bundled server and its own), as :func:`~tritonkit.server.locate_server` takes
    them: paths on the machine the sweep runs on, so a sweep sent to another machine (a Ray node)
    names that machine's backends.
    """

    sla: SLA | str
    grid: SweepGrid = field(default_factory=SweepGrid)
    concurrency: str | Sequence[float] | None = None
    request_rate: str | Sequence[float] | None = None
    step_window_ms: int = bounded(500, WINDOW_MS)
    warmup_s: float = bounded(0.5, SECONDS_OR_ZERO)
    max_trials: int = bounded(5, STEPS)
    exhaustive: bool = False
    out: Path | None = None
    results_root: Path = Path("results")
    write_back: bool = True
    tie_tolerance: float = bounded(TIE_TOLERANCE, TOLERANCE)
    noise_allowance: float = bounded(NOISE_ALLOWANCE, TOLERANCE)
    rate_tolerance: float = bounded(DEFAULT_RATE_TOLERANCE, TOLERANCE)
    max_gpu_memory_mb: float | None = bounded(None, POSITIVE)
    headroom: float = bounded(0.0, TOLERANCE)
    spec: PerfSpec | None = None
    target: str | None = None
    shares: Mapping[str, float] | None = None
    model_slas: Mapping[str, SLA | str] | None = None
    server_bin: Path | None = None
    backend_dir: Path | None = None

    @staticmethod
    def default(name: str) -> Any:
        """The default of field ``name`` (the CLI's option defaults are read from here)."""
        return field_default(SweepSettings, name)

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise ``ConfigError`` for a value no sweep can use (at construction, before any server starts)."""
        check_fields(self)
        for name, share in (self.shares or {}).items():
            POSITIVE.check(share, f"SweepSettings.shares[{name!r}]")
        for name, values, bounds in (("instances", self.grid.instances, COUNT),
                                     ("max_batch_sizes", self.grid.max_batch_sizes, PROTO_INT32)):
            for value in values or ():
                bounds.check(value, f"SweepGrid.{name}")
        self.ladder_plan()  # the levels, held to their bounds
        self.judging()  # what a step must meet beyond the SLA, checked where it is decided

    def judging(self) -> JudgeSettings:
        """What a step must meet beyond the SLA, as the judge takes it (``ConfigError`` if out of range)."""
        return JudgeSettings(rate_tolerance=self.rate_tolerance, max_gpu_memory_mb=self.max_gpu_memory_mb,
                             headroom=self.headroom)

    def record(self, plan: LadderPlan | None = None) -> dict[str, Any]:
        """The one settings fingerprint every sweep's resume record holds (``sweep.json``
        ``settings``), beside what names the models, SLAs and configs: the ladder each variant
        climbs and every criterion that changes which steps meet the SLA
        (:meth:`~tritonkit.perf.judge.criteria.JudgeSettings.fingerprint`: rate tolerance, GPU
        memory cap, headroom). A folder recorded under other values is refused, never mixed."""
        plan = plan or self.ladder_plan()
        return {"mode": plan.mode, "levels": list(plan.levels), "step_window_ms": plan.step_window_ms,
                "warmup_s": plan.warmup_s, "max_trials": plan.max_trials,
                **self.judging().fingerprint(open_loop=plan.mode == "request_rate")}

    def parsed_sla(self, model: str | None = None) -> SLA:
        """The SLA (``model``'s own when ``model_slas`` has one) with ``errors==0`` added (a
        variant that fails requests never wins)."""
        sla = (self.model_slas or {}).get(model, self.sla) if model is not None else self.sla
        return (parse_sla(sla) if isinstance(sla, str) else sla).with_zero_errors()

    def ladder_plan(self) -> LadderPlan:
        """The ladder each variant climbs."""
        plan = LadderPlan.from_duration(3 * self.step_window_ms / 1000.0, concurrency=self.concurrency,
                                        request_rate=self.request_rate, max_trials=self.max_trials,
                                        warmup_s=self.warmup_s)
        # Once the SLA breaks, more load only breaks it harder: one break ends a variant's ladder.
        # Patience 2: with a zero window a second request only waits for the first, so throughput
        # can stall for one doubling of concurrency before batches start to fill.
        # Short windows on a shared machine wobble more than perf_analyzer's default 10 %: accept
        # 20 %, and let an unstable step pass to the next load rather than end the variant (the
        # leaders are re-measured anyway).
        return replace(plan, step_window_ms=self.step_window_ms, stop_after_sla_breaks=1, plateau_patience=2,
                       stability_percentage=20.0, continue_after_unstable=True, total_timeout_s=600.0)

    def out_dir(self, model: str) -> Path:
        """The sweep folder: ``out``, else a new ``<results_root>/<UTC>-<model>-sweep``."""
        if self.out is not None:
            return Path(self.out)
        return run_folder(model, self.results_root, kind="sweep")

    def with_input_data(self, repo: str | os.PathLike[str], model: str, folder: Path) -> SweepSettings:
        """These settings with valid input data derived from the model file in ``repo`` (the
        target's with ``target``), written into the sweep ``folder``, as ``perf run`` derives it
        (see :func:`~tritonkit.perf.measure.input_data.sweep_spec`); unchanged when ``spec`` has
        data of its own or no model file is there. One model swept alone (a joint sweep does not)."""
        from tritonkit.perf.measure.input_data import sweep_spec

        measured = self.target or model
        spec = self.spec or PerfSpec(model=measured, url="127.0.0.1:8001")
        prepared = sweep_spec(spec, Path(repo), measured, folder, max_batch_sizes=self.grid.max_batch_sizes)
        return self if prepared.spec is spec else replace(self, spec=prepared.spec)

    def with_out(self, model: str) -> SweepSettings:
        """These settings with ``out`` fixed (the CLI fixes it first, so it can print where to resume)."""
        return replace(self, out=self.out_dir(model))
