"""The configurations a sweep tries: a grid over instances × max batch × batching window ×
preferred batch sizes × queue policy, applied to a model's own config.

A :class:`Variant` is only the knobs; :func:`apply_variant` turns it into a whole
``ModelConfig`` by copying the model's config and changing those fields alone, so everything
else the author wrote (inputs, outputs, parameters, warm-up, and the queue policy unless it is
swept) is kept.

Each axis is read from command-line text by one parser: a comma-separated list whose items may
be ranges, ``START:STOP`` (step 1) or ``START:STOP:STEP`` with an added step (``5ms``, ``2``) or a
multiplying one (``x2``): ``--instances 1:8``, ``--max-batch-size 1:64:x2``,
``--batch-window 0:20ms:5ms``.

Example::

    base = read_config("model_repository/resnet/config.pbtxt")
    grid = variant_grid(base, instances=[1, 2], max_batch_sizes=[1, 4, 8], windows_us=[0, 5000])
    config = apply_variant(base, grid[0])
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._values import COUNT
from tritonkit.errors import ConfigError
from tritonkit.repository import format_duration_us, serving_of, to_microseconds

__all__ = [
    "DEFAULT_ID",
    "Variant",
    "apply_variant",
    "grid_warnings",
    "parse_instances",
    "parse_max_batch_sizes",
    "parse_preferred",
    "parse_queue_sizes",
    "parse_queue_timeouts",
    "parse_windows",
    "variant_grid",
    "variant_of",
]

#: The id the model's own (unchanged) configuration is stored and reported under.
DEFAULT_ID = "default"

#: ``preferred_batch_sizes`` placeholder meaning "the variant's own max batch size".
PREFERRED_MAX = -1


@dataclass(frozen=True)
class Variant:
    """One point of the grid.

    ``instances`` is the count in every instance group; ``window_us`` is the dynamic batcher's
    ``max_queue_delay_microseconds`` (``None``: no dynamic batcher); ``preferred_batch_sizes``
    is empty when none are set. ``max_queue_size`` and ``queue_timeout_us`` are the dynamic
    batcher's default queue policy (0: unbounded, no timeout; a timeout rejects the request):
    ``None`` keeps what the model's config says (they are only set when the queue is swept).
    ``is_default`` marks the model's own config, which is loaded exactly as written rather than
    rebuilt from these knobs.
    """

    instances: int
    max_batch_size: int
    window_us: int | None
    preferred_batch_sizes: tuple[int, ...] = ()
    is_default: bool = False
    max_queue_size: int | None = None
    queue_timeout_us: int | None = None

    @property
    def id(self) -> str:
        """A stable, path-safe name: ``i2-b4-w5ms``, ``i1-b8-w0`` (``-p2.4`` with preferred sizes, ``-nodb``
        without a dynamic batcher, ``-q16``/``-t10ms`` with a swept queue size/timeout); ``default``
        for the model's own config."""
        if self.is_default:
            return DEFAULT_ID
        return self.knobs_id

    @property
    def knobs_id(self) -> str:
        """The id of the knobs alone (the default config has one too)."""
        window = "nodb" if self.window_us is None else f"w{_window_text(self.window_us).replace(' ', '')}"
        text = f"i{self.instances}-b{self.max_batch_size}-{window}"
        if self.preferred_batch_sizes:
            text += "-p" + ".".join(str(b) for b in self.preferred_batch_sizes)
        if self.max_queue_size is not None:
            text += f"-q{self.max_queue_size}"
        if self.queue_timeout_us is not None:
            text += f"-t{_window_text(self.queue_timeout_us).replace(' ', '')}"
        return text

    def describe(self) -> str:
        """Human words: ``2 instances, max batch 4, window 5 ms``."""
        parts = [f"{self.instances} instance{'s' if self.instances != 1 else ''}", f"max batch {self.max_batch_size}"]
        if self.window_us is None:
            parts.append("no dynamic batcher")
        else:
            parts.append(f"window {_window_text(self.window_us)}")
        if self.preferred_batch_sizes:
            parts.append("preferred " + "/".join(str(b) for b in self.preferred_batch_sizes))
        if self.max_queue_size is not None:
            parts.append(f"queue ≤ {self.max_queue_size}" if self.max_queue_size else "queue unbounded")
        if self.queue_timeout_us is not None:
            parts.append(f"queue timeout {format_duration_us(self.queue_timeout_us)}" if self.queue_timeout_us
                         else "no queue timeout")
        text = ", ".join(parts)
        return f"default config ({text})" if self.is_default else text

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "instances": self.instances,
            "max_batch_size": self.max_batch_size,
            "window_us": self.window_us,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "is_default": self.is_default,
            **({"max_queue_size": self.max_queue_size} if self.max_queue_size is not None else {}),
            **({"queue_timeout_us": self.queue_timeout_us} if self.queue_timeout_us is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Variant:
        window = data.get("window_us")
        preferred = data.get("preferred_batch_sizes") or []
        assert isinstance(preferred, list)
        queue, timeout = data.get("max_queue_size"), data.get("queue_timeout_us")
        return cls(
            instances=int(str(data["instances"])),
            max_batch_size=int(str(data["max_batch_size"])),
            window_us=None if window is None else int(str(window)),
            preferred_batch_sizes=tuple(int(b) for b in preferred),
            is_default=bool(data.get("is_default", False)),
            max_queue_size=None if queue is None else int(str(queue)),
            queue_timeout_us=None if timeout is None else int(str(timeout)),
        )

    def resolved(self, base: mc.ModelConfig) -> Variant:
        """These knobs with a queue policy left to the model (``None``) read from ``base``: two
        variants that configure the model alike resolve to the same knobs."""
        policy = base.dynamic_batching.default_queue_policy
        timeout = policy.default_timeout_microseconds if policy.timeout_action == mc.ModelQueuePolicy.REJECT else 0
        return Variant(self.instances, self.max_batch_size, self.window_us, self.preferred_batch_sizes, False,
                       policy.max_queue_size if self.max_queue_size is None else self.max_queue_size,
                       timeout if self.queue_timeout_us is None else self.queue_timeout_us)


def _window_text(window_us: int) -> str:
    """``0`` (zero needs no unit), else the duration with its unit (``5ms``, ``500us``)."""
    return "0" if window_us == 0 else format_duration_us(window_us)


def variant_of(config: mc.ModelConfig) -> Variant:
    """The knobs of ``config`` as it stands, marked as the default."""
    serving = serving_of(config)
    return Variant(
        # The knob apply_variant turns (every group's count), not the total: see Serving.instances for that.
        instances=serving.group_count,
        max_batch_size=serving.max_batch_size,
        window_us=serving.window_us,
        preferred_batch_sizes=serving.preferred_batch_sizes,
        is_default=True,
    )


def apply_variant(base: mc.ModelConfig, variant: Variant) -> mc.ModelConfig:
    """``base`` with ``variant``'s knobs; every other field is kept. The default comes back unchanged."""
    config = mc.ModelConfig()
    config.CopyFrom(base)
    if variant.is_default:
        return config
    config.max_batch_size = variant.max_batch_size
    if config.instance_group:
        for group in config.instance_group:
            group.count = variant.instances
    else:
        # No group written: Triton's default is one instance (per GPU); KIND_AUTO keeps that placement.
        config.instance_group.add(count=variant.instances)
    if variant.window_us is None:
        if config.WhichOneof("scheduling_choice") == "dynamic_batching":
            config.ClearField("dynamic_batching")
    else:
        config.dynamic_batching.max_queue_delay_microseconds = variant.window_us
        del config.dynamic_batching.preferred_batch_size[:]
        config.dynamic_batching.preferred_batch_size.extend(variant.preferred_batch_sizes)
        policy = config.dynamic_batching.default_queue_policy
        if variant.max_queue_size is not None:
            policy.max_queue_size = variant.max_queue_size
        if variant.queue_timeout_us is not None:
            # A timeout that delays instead of rejecting would not be a queue limit: REJECT, as the knob says.
            policy.default_timeout_microseconds = variant.queue_timeout_us
            policy.timeout_action = mc.ModelQueuePolicy.REJECT if variant.queue_timeout_us else policy.timeout_action
    return config


def variant_grid(
    base: mc.ModelConfig,
    *,
    instances: Sequence[int] | None = None,
    max_batch_sizes: Sequence[int] | None = None,
    windows_us: Sequence[int | None] | None = None,
    preferred: Sequence[Sequence[int]] | None = None,
    batcher_on_batch_sweep: bool = True,
    queue_sizes: Sequence[int] | None = None,
    queue_timeouts_us: Sequence[int] | None = None,
) -> list[Variant]:
    """Every variant of ``base`` over the given axes (an axis left ``None`` keeps the model's value).

    When max batch is swept, no window is given and the model has no scheduler of its own, the
    variants turn the dynamic batcher on with a 0 ms window (``batcher_on_batch_sweep``): without
    a batcher the server runs one request per execution, so max batch could not change anything
    (``windows_us=[None]`` sweeps without it on purpose). ``queue_sizes`` (0: unbounded) and
    ``queue_timeouts_us`` (0: none; else the request is rejected once it waited that long) set the
    dynamic batcher's default queue policy; a variant without a batcher has none.

    The model's own config comes first (``is_default``); a grid point that configures the model
    the same way is not repeated. Combinations Triton would refuse or that cannot differ are
    left out: preferred sizes above the max batch, and more than one window for max batch 1 (a
    batch of one is full at once, so the batcher never waits). ``preferred`` entries may use
    ``-1`` for "the variant's own max batch size".
    """
    where = f"model '{base.name}'"
    default = variant_of(base)
    scheduler = base.WhichOneof("scheduling_choice")
    queue_swept = queue_sizes is not None or queue_timeouts_us is not None
    if scheduler not in (None, "dynamic_batching") and (windows_us is not None or preferred is not None or queue_swept):
        raise ConfigError(f"{where} uses {scheduler}: the batching window, preferred sizes and queue policy belong "
                          "to the dynamic batcher", hint="sweep only --instances and --max-batch-size for this model")
    if base.max_batch_size == 0 and any(b != 0 for b in (max_batch_sizes or ())):
        raise ConfigError(f"{where} does not batch (max_batch_size 0): its inputs have no batch dimension",
                          hint="drop --max-batch-size, or rebuild the model with a dynamic batch axis")
    inst_axis = _positive(instances, "instances") if instances is not None else [default.instances]
    batch_axis = _positive(max_batch_sizes, "max batch size") if max_batch_sizes is not None \
        else [default.max_batch_size]
    if windows_us is not None:
        if any(w is not None and w < 0 for w in windows_us):
            raise ConfigError(f"batching windows must be >= 0, got {list(windows_us)}")
        window_axis: list[int | None] = list(dict.fromkeys(windows_us))
    elif (batcher_on_batch_sweep and scheduler is None
          and ((max_batch_sizes is not None and any(b > 1 for b in batch_axis)) or queue_swept)):
        window_axis = [0]
    else:
        window_axis = [default.window_us]
    pref_axis = [tuple(p) for p in preferred] if preferred is not None else [default.preferred_batch_sizes]
    size_axis = _non_negative(queue_sizes, "max queue size") if queue_sizes is not None else [None]
    timeout_axis = _non_negative(queue_timeouts_us, "queue timeout") if queue_timeouts_us is not None else [None]
    smallest_window = min((w for w in window_axis if w is not None), default=None)

    grid: list[Variant] = [default]
    seen = {default.resolved(base).knobs_id}
    for count, batch, window, pref, size, timeout in itertools.product(inst_axis, batch_axis, window_axis, pref_axis,
                                                                        size_axis, timeout_axis):
        sizes: tuple[int, ...] = ()
        if batch == 0:
            window = None  # a model that does not batch has no batcher
        elif window is not None:
            sizes = tuple(sorted({batch if b == PREFERRED_MAX else b for b in pref}))
            if any(b > batch for b in sizes):
                continue  # Triton refuses preferred sizes above the max batch
            if batch == 1:
                # A batch of one is full at once: the batcher never waits, so windows cannot differ.
                window, sizes = smallest_window, ()
        if window is None:
            size = timeout = None  # the queue policy is the dynamic batcher's
        variant = Variant(count, batch, window, sizes, max_queue_size=size, queue_timeout_us=timeout)
        key = variant.resolved(base).knobs_id
        if key not in seen:
            seen.add(key)
            grid.append(variant)
    return grid


def grid_warnings(grid: Sequence[Variant]) -> list[str]:
    """What makes (part of) ``grid`` unable to change throughput, said before anything is measured:
    variants that differ only in max batch while none runs a dynamic batcher can only tie."""
    notes: list[str] = []
    swept = [v for v in grid if not v.is_default]
    if not swept:
        notes.append("the grid holds only the model's own config: there is nothing to compare it with "
                     "(give --instances, --max-batch-size or --batch-window)")
    groups: dict[tuple[int, tuple[int, ...]], set[int]] = {}
    for v in grid:
        if v.window_us is None:
            groups.setdefault((v.instances, v.preferred_batch_sizes), set()).add(v.max_batch_size)
    for (count, _), sizes in sorted(groups.items()):
        if len(sizes) > 1:
            notes.append(f"{count} instance(s) with max batch {', '.join(str(b) for b in sorted(sizes))} and no "
                         "dynamic batcher: the server runs one request per execution, so these can only tie "
                         "(add --batch-window 0, or more)")
    return notes


def _non_negative(values: Sequence[int], what: str) -> list[int]:
    if not values:
        raise ConfigError(f"no {what} values given", hint="e.g. 0,16,64 (0: no limit)")
    bad = [v for v in values if v < 0]
    if bad:
        raise ConfigError(f"{what} must be >= 0, got {bad}", hint="0 means no limit")
    return list(dict.fromkeys(int(v) for v in values))


def _positive(values: Sequence[int], what: str) -> list[int]:
    if not values:
        raise ConfigError(f"no {what} values given", hint="e.g. 1,2")
    for value in values:
        COUNT.check(value, what)  # at least 1, and within the config's int32
    return list(dict.fromkeys(int(v) for v in values))


# ---------------------------------------------------------------- parsing command-line text


#: The most values one axis may expand to (``--max-batch-size 1:100000`` is a typo, not a grid).
MAX_AXIS_VALUES = 1024


def _range(part: str, option: str, read: Callable[[str], int], example: str, *,
           default_step: int | None) -> list[int]:
    """``START:STOP[:STEP]`` → the values from START by STEP (added, or ``xF`` multiplied) up to STOP
    (included when the steps reach it)."""
    pieces = [p.strip() for p in part.split(":")]
    if len(pieces) not in (2, 3) or not all(pieces):
        raise ConfigError(f"{option}: cannot read the range {part!r}", hint=f"START:STOP[:STEP], e.g. {example}")
    start, stop = read(pieces[0]), read(pieces[1])
    if stop < start:
        raise ConfigError(f"{option}: the range {part!r} ends before it starts", hint=f"e.g. {example}")
    step_text = pieces[2] if len(pieces) == 3 else None
    factor: float | None = None
    step = default_step
    if step_text is not None and step_text[:1].lower() in ("x", "*"):
        try:
            factor = float(step_text[1:])
        except ValueError:
            factor = math.nan
        if not (math.isfinite(factor) and factor > 1):
            raise ConfigError(f"{option}: the factor in {part!r} must be a number above 1", hint=f"e.g. {example}")
        if start <= 0:
            raise ConfigError(f"{option}: a multiplying range cannot start at {pieces[0]}",
                              hint="start at 1 or more, or give an added step")
    elif step_text is not None:
        step = read(step_text)
    if factor is None and (step is None or step <= 0):
        raise ConfigError(f"{option}: the range {part!r} needs a step above zero", hint=f"e.g. {example}")
    values: list[int] = []
    value: float = start
    while value <= stop:
        if len(values) >= MAX_AXIS_VALUES:
            raise ConfigError(f"{option}: the range {part!r} has more than {MAX_AXIS_VALUES} values",
                              hint="give a larger step, or a multiplying one such as x2")
        if not values or int(value) != values[-1]:
            values.append(int(value))
        value = value * factor if factor is not None else value + (step or 1)
    return values


def _axis(text: str, option: str, read: Callable[[str], int], example: str, *,
          default_step: int | None = 1) -> list[int]:
    """A comma-separated list whose items may be ranges (see :func:`_range`)."""
    values: list[int] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        values += _range(part, option, read, example, default_step=default_step) if ":" in part else [read(part)]
    if not values:
        raise ConfigError(f"{option}: no values in {text!r}", hint=f"e.g. {example}")
    return values


def _int_reader(option: str, example: str) -> Callable[[str], int]:
    def read(text: str) -> int:
        try:
            return int(text.strip())
        except ValueError:
            raise ConfigError(f"{option}: {text.strip()!r} is not a whole number",
                              hint=f"a list or range of whole numbers, e.g. {example}") from None
    return read


def _duration_reader(option: str) -> Callable[[str], int]:
    def read(text: str) -> int:
        text = text.strip()
        # Zero is zero in any unit; every other duration names its unit.
        return 0 if text == "0" else to_microseconds(text, field=option)
    return read


def parse_instances(text: str) -> list[int]:
    """``"1,2,4"`` → ``[1, 2, 4]``; ``"1:4"`` → ``[1, 2, 3, 4]``; ``"1:8:x2"`` → ``[1, 2, 4, 8]``."""
    example = "1,2,4 or 1:8"
    return _positive(_axis(text, "--instances", _int_reader("--instances", example), example), "instance count")


def parse_max_batch_sizes(text: str) -> list[int]:
    """``"1,2,4,8"`` → ``[1, 2, 4, 8]``; ``"1:64:x2"`` → ``[1, 2, 4, …, 64]``; ``"8:32:8"`` → ``[8, 16, 24, 32]``."""
    example = "1,4,8 or 1:64:x2"
    return _positive(_axis(text, "--max-batch-size", _int_reader("--max-batch-size", example), example),
                     "max batch size")


def parse_windows(text: str) -> list[int | None]:
    """``"0,5ms,10ms"`` → ``[0, 5000, 10000]`` (µs); ``"0:20ms:5ms"`` → ``[0, 5000, …, 20000]``;
    ``off`` means no dynamic batcher.

    A bare ``0`` needs no unit (zero is zero in any unit); every other value does, and so does
    a range's step.
    """
    windows: list[int | None] = []
    read = _duration_reader("--batch-window")
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.lower() in ("off", "none"):
            windows.append(None)
        else:
            windows += _axis(part, "--batch-window", read, "0:20ms:5ms", default_step=None)
    if not windows:
        raise ConfigError(f"no batching windows in {text!r}", hint="e.g. 0,5ms,10ms (or off)")
    return windows


def parse_queue_sizes(text: str) -> list[int]:
    """``--max-queue-size``: ``"0,16,64"`` or ``"8:64:x2"``; 0 is an unbounded queue."""
    example = "0,16,64 or 8:64:x2"
    return _non_negative(_axis(text, "--max-queue-size", _int_reader("--max-queue-size", example), example),
                         "max queue size")


def parse_queue_timeouts(text: str) -> list[int]:
    """``--queue-timeout``: ``"off,10ms,50ms"`` or ``"10ms:50ms:20ms"`` (µs); ``off`` or 0 is no timeout."""
    values: list[int] = []
    read = _duration_reader("--queue-timeout")
    for part in (p.strip() for p in text.split(",")):
        if part.lower() in ("off", "none"):
            values.append(0)
        elif part:
            values += _axis(part, "--queue-timeout", read, "off,10ms,50ms", default_step=None)
    return _non_negative(values, "queue timeout")


def parse_preferred(text: str) -> list[tuple[int, ...]]:
    """``"none,4,2+8,max"`` → ``[(), (4,), (2, 8), (-1,)]``: options split by commas, sizes
    within one option by ``+``; ``max`` is the variant's own max batch size."""
    options: list[tuple[int, ...]] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.lower() == "none":
            options.append(())
            continue
        try:
            sizes = tuple(PREFERRED_MAX if s.strip().lower() == "max" else int(s) for s in part.split("+"))
        except ValueError as exc:
            raise ConfigError(f"cannot read preferred batch sizes {part!r}",
                              hint="e.g. none,4,2+8,max (sizes of one option joined by +)") from exc
        for size in sizes:
            if size != PREFERRED_MAX:
                COUNT.check(size, "preferred batch size")
        options.append(sizes)
    if not options:
        raise ConfigError(f"no preferred batch options in {text!r}", hint="e.g. none,max")
    return options


# ------------------------------------------------------------------------------------ pins

#: The knobs ``--pin`` can fix, by their canonical name, with the spellings it also takes.
PIN_KNOBS: dict[str, tuple[str, ...]] = {
    "instances": ("instance", "count", "instance_count"),
    "max_batch_size": ("max_batch", "batch"),
    "batch_window": ("window", "max_queue_delay"),
    "preferred_batch": ("preferred", "preferred_batch_size", "preferred_batch_sizes"),
    "max_queue_size": ("queue_size",),
    "queue_timeout": ("timeout", "queue_timeout_us"),
}
_PIN_NAMES = {alias: knob for knob, aliases in PIN_KNOBS.items() for alias in (knob, *aliases)}

PinValue = int | None | tuple[int, ...]

#: Each knob's reader: its option's text (``--instances 1:4``, a pin's value) → the values it names.
KNOB_PARSERS: dict[str, Callable[[str], Sequence[PinValue]]] = {
    "instances": parse_instances, "max_batch_size": parse_max_batch_sizes, "batch_window": parse_windows,
    "preferred_batch": parse_preferred, "max_queue_size": parse_queue_sizes, "queue_timeout": parse_queue_timeouts}


@dataclass(frozen=True)
class Pin:
    """One knob held at one value: for every swept model (``model`` ``None``), or for one model —
    a swept one, or with a load target a composing model that is loaded with it (``--pin
    preprocessing.instances=2``). ``value``: an int (instances, max batch, queue size), µs
    (window — ``None``: no dynamic batcher —, queue timeout) or sizes (preferred batch)."""

    model: str | None
    knob: str
    value: PinValue

    def __str__(self) -> str:
        value = self.value
        if self.knob in ("batch_window", "queue_timeout"):
            text = "off" if value is None else _window_text(int(value))  # type: ignore[arg-type]
        elif isinstance(value, tuple):
            text = "+".join("max" if b == PREFERRED_MAX else str(b) for b in value) or "none"
        else:
            text = str(value)
        return f"{self.model + '.' if self.model else ''}{self.knob}={text.replace(' ', '')}"


def parse_pin(text: str) -> Pin:
    """``--pin [MODEL.]KNOB=VALUE`` → :class:`Pin`; VALUE as the knob's own option reads it
    (``instances=2``, ``preprocessing.max_batch_size=8``, ``batch_window=5ms``, ``preferred_batch=4+8``)."""
    left, sep, value_text = text.partition("=")
    model, dot, name = left.strip().rpartition(".")
    knob = _PIN_NAMES.get(name.strip().lower().replace("-", "_"))
    if sep and name.strip() and knob is None:
        raise ConfigError(f"--pin {text!r}: {name.strip()!r} is not a knob tritonkit sweeps",
                          hint=f"pin one of {', '.join(PIN_KNOBS)}, e.g. --pin preprocessing.instances=2")
    if not sep or not value_text.strip() or knob is None or (dot and not model.strip()):
        raise ConfigError(f"--pin: cannot read {text!r}",
                          hint=f"[MODEL.]KNOB=VALUE with KNOB one of {', '.join(PIN_KNOBS)}, "
                               "e.g. --pin preprocessing.instances=2")
    values = KNOB_PARSERS[knob](value_text)
    if len(values) != 1:
        raise ConfigError(f"--pin {text}: a pin holds one value, not {len(values)}",
                          hint=f"to try several, give the knob's own option (e.g. --{knob.replace('_', '-')})")
    return Pin(model.strip() or None, knob, values[0])


def pinned_config(base: mc.ModelConfig, pins: Sequence[Pin]) -> mc.ModelConfig:
    """``base`` with ``pins`` applied and every other field kept: a composing model that is not
    swept is loaded so. Its own config is returned unchanged when no pin names it."""
    if not pins:
        return base
    variant = variant_of(base)
    changes: dict[str, object] = {}
    for pin in pins:
        value = pin.value
        if pin.knob == "instances":
            changes["instances"] = value
        elif pin.knob == "max_batch_size":
            changes["max_batch_size"] = value
        elif pin.knob == "batch_window":
            changes["window_us"] = value
        elif pin.knob == "preferred_batch":
            sizes = value if isinstance(value, tuple) else ()
            batch = int(changes.get("max_batch_size", variant.max_batch_size))  # type: ignore[call-overload]
            changes["preferred_batch_sizes"] = tuple(sorted({batch if b == PREFERRED_MAX else b for b in sizes}))
        elif pin.knob == "max_queue_size":
            changes["max_queue_size"] = value
        else:
            changes["queue_timeout_us"] = value
    pinned = replace(variant, is_default=False, **changes)  # type: ignore[arg-type]
    return apply_variant(base, pinned)
