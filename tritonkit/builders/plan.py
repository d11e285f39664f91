"""One pure decision for every builder: batching, batch window, instance groups and their defaults.

:func:`plan_build` turns what the model's shapes allow (:class:`~tritonkit.builders.onnx_model.BatchAxis`)
and what was asked (:class:`BuildOptions`) into a :class:`BuildPlan`. It reads no files and
probes no hardware (the GPU count is an argument), so the ONNX Runtime, python-runtime and
TensorRT builds decide the same way and the decision is tested without a server.

Each default has one name here; the command line shows these values and passes ``None`` for
"not given".
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from tritonkit._values import COUNT, INSTANCES, PROTO_INT32, bounded, check_fields
from tritonkit.builders.batch_axis import BatchAxis
from tritonkit.errors import BuildError, ConfigError
from tritonkit.repository import DEFAULT_WINDOW, WINDOW_RANGE_US, format_duration_us, to_microseconds

__all__ = [
    "CONSISTENCY_SAMPLES",
    "DEFAULT_INSTANCES",
    "DEFAULT_INSTANCE_KIND",
    "DEFAULT_MAX_BATCH_SIZE",
    "DEFAULT_MAX_QUEUE_SIZE",
    "DEFAULT_WINDOW",
    "WINDOW_RANGE_US",
    "BuildOptions",
    "BuildPlan",
    "batching_options",
    "check_options",
    "plan_build",
]

#: max_batch_size chosen when the model batches and none was asked for: enough for the dynamic
#: batcher to merge a burst of requests, small enough that one batch does not hold a request long.
DEFAULT_MAX_BATCH_SIZE = 8
#: Instances per group: one, until a load test shows the device has room for another.
DEFAULT_INSTANCES = 1
#: Bound on the batcher's queue: 0 is Triton's "unbounded".
DEFAULT_MAX_QUEUE_SIZE = 0
#: Samples run as one batch when a build proves the graph batches (fewer when max_batch_size is smaller).
CONSISTENCY_SAMPLES = 4
#: ``auto``: a GPU instance when the machine has a GPU, else CPU.
DEFAULT_INSTANCE_KIND = "auto"

InstanceKind = Literal["cpu", "gpu"]


@dataclass(frozen=True, kw_only=True)
class BuildOptions:
    """What was asked for; ``None`` means "not given: use the default or decide from the model".

    ``batch_axis``: ``True`` batches along the first axis even when its name suggests a sequence
    length, ``False`` never batches (dims keep the first axis), ``None`` decides from the model.
    ``force`` accepts a batch window outside :data:`WINDOW_RANGE_US` without a warning.
    """

    max_batch_size: int | None = bounded(None, PROTO_INT32)
    batch_window: str | None = None
    batch_window_us: int | None = None
    preferred_batch_sizes: tuple[int, ...] = ()
    instances: int = bounded(DEFAULT_INSTANCES, INSTANCES)
    kind: str = DEFAULT_INSTANCE_KIND
    max_queue_size: int = bounded(DEFAULT_MAX_QUEUE_SIZE, PROTO_INT32)
    batch_axis: bool | None = None
    force: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
        for size in self.preferred_batch_sizes:
            COUNT.check(size, "BuildOptions.preferred_batch_sizes")


@dataclass(frozen=True)
class BuildPlan:
    """The decision: what goes into ``config.pbtxt`` for batching and instances, and why.

    ``make_dynamic``: the first axis is fixed in the file and is to be made dynamic (the build
    then proves by running the graph that it batches). ``batch_note`` says why batching is on or
    off, ``axis_note`` why the first axis is or is not the batch axis.
    """

    max_batch_size: int
    requested_max_batch_size: int | None
    make_dynamic: bool
    fixed_batch_size: int | None
    window_us: int
    preferred_batch_sizes: tuple[int, ...]
    instances: int
    instance_kind: InstanceKind
    max_queue_size: int
    batch_note: str = ""
    axis_note: str = ""
    warnings: tuple[str, ...] = field(default_factory=tuple)

    @property
    def batched(self) -> bool:
        """True when Triton forms batches (``max_batch_size > 0``)."""
        return self.max_batch_size > 0

    def without_batching(self, reason: str) -> BuildPlan:
        """The same plan with batching off (the graph was found not to batch), ``reason`` recorded."""
        return BuildPlan(
            max_batch_size=0, requested_max_batch_size=self.requested_max_batch_size, make_dynamic=False,
            fixed_batch_size=self.fixed_batch_size, window_us=self.window_us, preferred_batch_sizes=(),
            instances=self.instances, instance_kind=self.instance_kind, max_queue_size=self.max_queue_size,
            batch_note=f"not batchable: {reason}", axis_note=self.axis_note,
            warnings=(*self.warnings, f"batching turned off: {reason}"))


def _window_us(options: BuildOptions) -> tuple[int, list[str]]:
    if options.batch_window is not None and options.batch_window_us is not None:
        raise ConfigError("give batch_window (with units) or batch_window_us, not both")
    if options.batch_window_us is not None:
        us = options.batch_window_us
        if isinstance(us, bool) or not isinstance(us, int) or us < 0:
            raise ConfigError(f"batch window {us!r} µs must be a non-negative integer")
    else:
        us = to_microseconds(options.batch_window or DEFAULT_WINDOW, field="--batch-window")
    low, high = WINDOW_RANGE_US
    warnings = []
    if not (low <= us <= high) and not options.force:
        warnings.append(f"batch window {format_duration_us(us)} is outside {format_duration_us(low)}–"
                        f"{format_duration_us(high)} (rule of thumb: shorter windows merge few requests, longer "
                        "ones add their whole length to latency at low traffic; pass --force to accept it silently)")
    return us, warnings


def _kind(kind: str, gpu_count: int) -> InstanceKind:
    if kind == "auto":
        return "gpu" if gpu_count > 0 else "cpu"
    if kind in ("cpu", "gpu"):
        return kind  # type: ignore[return-value]
    raise ConfigError(f"--kind {kind!r}: unknown instance kind", hint="use cpu, gpu or auto")


def _check_counts(options: BuildOptions) -> None:
    mbs = options.max_batch_size  # each count is within its bounds already (BuildOptions checks them)
    if mbs == 0 and options.batch_axis:
        raise ConfigError("--batch-axis asks to batch and --max-batch-size 0 turns batching off",
                          hint="drop one of them")
    sizes = options.preferred_batch_sizes
    if any(s < 1 for s in sizes) or (mbs and any(s > mbs for s in sizes)):
        raise ConfigError(f"preferred batch sizes {list(sizes)} must lie within 1..max_batch_size",
                          hint="leave them out: the batcher then forms the largest batch it can within the window")


def batching_options(batching: BuildOptions | None, fields: Mapping[str, Any], *, force: bool,
                     builder: str) -> BuildOptions:
    """The batching a builder was asked for: ``batching``, or :class:`BuildOptions`' fields given as
    keywords (``kind="cpu"``), not both. A build's ``force`` (replace a version) also accepts any window."""
    if fields:
        unknown = sorted(set(fields) - {f.name for f in dataclasses.fields(BuildOptions)})
        if unknown:
            raise TypeError(f"{builder}() got unexpected keyword argument(s): {', '.join(unknown)}")
        if batching is not None:
            raise ConfigError(f"{builder}: batching=BuildOptions(…) and its fields as keywords "
                              f"({', '.join(sorted(fields))}) were both given",
                              hint="give them all inside the BuildOptions")
        batching = BuildOptions(**fields)
    batching = batching or BuildOptions()
    return dataclasses.replace(batching, force=True) if force else batching


def check_options(options: BuildOptions, *, gpu_count: int = 0) -> InstanceKind:
    """Check ``options`` on their own (before the model is read); return the instance kind they resolve to."""
    _check_counts(options)
    _window_us(options)
    return _kind(options.kind, gpu_count)


def plan_build(axis: BatchAxis, options: BuildOptions, *, gpu_count: int = 0, where: str = "the model",
               default_max_batch_size: int = DEFAULT_MAX_BATCH_SIZE) -> BuildPlan:
    """Decide batching and instances for a model whose first axes are described by ``axis``.

    ``max_batch_size=None`` batches with ``default_max_batch_size`` when the model allows it and
    writes 0 with the reason otherwise; an explicit value > 0 the model cannot honour is a
    :class:`BuildError`. ``where`` names the model file in messages. Pure: no I/O.
    """
    _check_counts(options)
    window_us, warnings = _window_us(options)
    kind = _kind(options.kind, gpu_count)
    requested = options.max_batch_size
    usable = axis.kind if axis.kind != "none" or not (options.batch_axis and axis.overridable) else "dynamic"
    axis_note = axis.reason if axis.kind != "none" else ""
    if usable != axis.kind:
        axis_note = f"first axis taken as the batch axis (--batch-axis), though {axis.reason}"
    mbs, make_dynamic, batch_note = 0, False, ""
    if requested == 0:
        batch_note = "batching off as requested"
    elif options.batch_axis is False:
        batch_note = "batching off: no batch axis (--no-batch-axis)"
    elif usable == "none":
        if requested is not None:
            raise BuildError(f"{where}: cannot batch ({axis.reason}), so --max-batch-size {requested} is impossible",
                             hint=("pass --batch-axis to batch along the first axis anyway, or "
                                   if axis.overridable else "")
                                  + "build with --max-batch-size 0: clients then send whole tensors")
        batch_note = f"not batchable: {axis.reason}" + ("; --batch-axis batches along it anyway"
                                                         if axis.overridable else "")
    else:
        mbs = requested if requested is not None else default_max_batch_size
        make_dynamic = usable == "fixed"
        if make_dynamic:
            batch_note = f"batch axis was fixed to {axis.fixed_size}; made dynamic"
    return BuildPlan(
        max_batch_size=mbs, requested_max_batch_size=requested, make_dynamic=make_dynamic,
        fixed_batch_size=axis.fixed_size if usable == "fixed" else None, window_us=window_us,
        preferred_batch_sizes=options.preferred_batch_sizes if mbs > 0 else (), instances=options.instances,
        instance_kind=kind, max_queue_size=options.max_queue_size, batch_note=batch_note, axis_note=axis_note,
        warnings=tuple(warnings))
