"""The configurations a sweep tries: a grid over instances × max batch × batching window ×
preferred batch sizes, applied to a model's own config.

A :class:`Variant` is only the four knobs; :func:`apply_variant` turns it into a whole
``ModelConfig`` by copying the model's config and changing those fields alone, so everything
else the author wrote (inputs, outputs, parameters, queue policy, warm-up) is kept.

Example::

    base = read_config("model_repository/resnet/config.pbtxt")
    grid = variant_grid(base, instances=[1, 2], max_batch_sizes=[1, 4, 8], windows_us=[0, 5000])
    config = apply_variant(base, grid[0])
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

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
    is empty when none are set. ``is_default`` marks the model's own config, which is loaded
    exactly as written rather than rebuilt from these knobs.
    """

    instances: int
    max_batch_size: int
    window_us: int | None
    preferred_batch_sizes: tuple[int, ...] = ()
    is_default: bool = False

    @property
    def id(self) -> str:
        """A stable, path-safe name: ``i2-b4-w5ms``, ``i1-b8-w0`` (``-p2.4`` with preferred sizes, ``-nodb``
        without a dynamic batcher); ``default`` for the model's own config."""
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
        text = ", ".join(parts)
        return f"default config ({text})" if self.is_default else text

    def same_knobs(self, other: Variant) -> bool:
        """True when both would configure the model the same way (``is_default`` ignored)."""
        return self.knobs_id == other.knobs_id

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "instances": self.instances,
            "max_batch_size": self.max_batch_size,
            "window_us": self.window_us,
            "preferred_batch_sizes": list(self.preferred_batch_sizes),
            "is_default": self.is_default,
        }

    @classmethod
    def from_dict(cls, data: dict[str, object]) -> Variant:
        window = data.get("window_us")
        preferred = data.get("preferred_batch_sizes") or []
        assert isinstance(preferred, list)
        return cls(
            instances=int(str(data["instances"])),
            max_batch_size=int(str(data["max_batch_size"])),
            window_us=None if window is None else int(str(window)),
            preferred_batch_sizes=tuple(int(b) for b in preferred),
            is_default=bool(data.get("is_default", False)),
        )


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
    return config


def variant_grid(
    base: mc.ModelConfig,
    *,
    instances: Sequence[int] | None = None,
    max_batch_sizes: Sequence[int] | None = None,
    windows_us: Sequence[int | None] | None = None,
    preferred: Sequence[Sequence[int]] | None = None,
    batcher_on_batch_sweep: bool = True,
) -> list[Variant]:
    """Every variant of ``base`` over the given axes (an axis left ``None`` keeps the model's value).

    When max batch is swept, no window is given and the model has no scheduler of its own, the
    variants turn the dynamic batcher on with a 0 ms window (``batcher_on_batch_sweep``): without
    a batcher the server runs one request per execution, so max batch could not change anything
    (``windows_us=[None]`` sweeps without it on purpose).

    The model's own config comes first (``is_default``); a grid point with the same knobs is
    not repeated. Combinations Triton would refuse or that cannot differ are left out: preferred
    sizes above the max batch, and more than one window for max batch 1 (a batch of one is
    full at once, so the batcher never waits). ``preferred`` entries may use ``-1`` for "the
    variant's own max batch size".
    """
    where = f"model '{base.name}'"
    default = variant_of(base)
    scheduler = base.WhichOneof("scheduling_choice")
    if scheduler not in (None, "dynamic_batching") and (windows_us is not None or preferred is not None):
        raise ConfigError(f"{where} uses {scheduler}: the batching window and preferred sizes belong to the "
                          "dynamic batcher", hint="sweep only --instances and --max-batch-size for this model")
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
    elif batcher_on_batch_sweep and max_batch_sizes is not None and scheduler is None and \
            any(b > 1 for b in batch_axis):
        window_axis = [0]
    else:
        window_axis = [default.window_us]
    pref_axis = [tuple(p) for p in preferred] if preferred is not None else [default.preferred_batch_sizes]
    smallest_window = min((w for w in window_axis if w is not None), default=None)

    grid: list[Variant] = [default]
    seen = {default.knobs_id}
    for count, batch, window, pref in itertools.product(inst_axis, batch_axis, window_axis, pref_axis):
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
        variant = Variant(count, batch, window, sizes)
        if variant.knobs_id not in seen:
            seen.add(variant.knobs_id)
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


def _positive(values: Sequence[int], what: str) -> list[int]:
    if not values:
        raise ConfigError(f"no {what} values given", hint="e.g. 1,2")
    for value in values:
        COUNT.check(value, what)  # at least 1, and within the config's int32
    return list(dict.fromkeys(int(v) for v in values))


# ---------------------------------------------------------------- parsing command-line text


def _ints(text: str, what: str, example: str) -> list[int]:
    try:
        values = [int(p) for p in text.split(",") if p.strip()]
    except ValueError as exc:
        raise ConfigError(f"cannot read {what} {text!r}", hint=f"a comma-separated list such as {example}") from exc
    if not values:
        raise ConfigError(f"no {what} in {text!r}", hint=f"a comma-separated list such as {example}")
    return values


def parse_instances(text: str) -> list[int]:
    """``"1,2,4"`` → ``[1, 2, 4]``."""
    return _positive(_ints(text, "instance counts", "1,2,4"), "instance count")


def parse_max_batch_sizes(text: str) -> list[int]:
    """``"1,2,4,8"`` → ``[1, 2, 4, 8]``."""
    return _positive(_ints(text, "max batch sizes", "1,2,4,8"), "max batch size")


def parse_windows(text: str) -> list[int | None]:
    """``"0,5ms,10ms"`` → ``[0, 5000, 10000]`` (µs); ``off`` means no dynamic batcher.

    A bare ``0`` needs no unit (zero is zero in any unit); every other value does.
    """
    windows: list[int | None] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part.lower() in ("off", "none"):
            windows.append(None)
        elif part == "0":
            windows.append(0)
        else:
            windows.append(to_microseconds(part, field="--batch-window"))
    if not windows:
        raise ConfigError(f"no batching windows in {text!r}", hint="e.g. 0,5ms,10ms (or off)")
    return windows


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
