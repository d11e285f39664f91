"""Scheduling settings of a model configuration: the dynamic batcher, the sequence batcher and ensemble steps.

The default dynamic-batching window is a rule of thumb: 5 ms, the low end of a 5–20 ms
range, because a shorter window merges few requests and a longer one adds its whole length
to latency when traffic is light. No ``preferred_batch_size`` unless asked: Triton's own
guidance is to let the batcher form the largest batch it can.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository.units import DTypeLike, Duration, dtype_to_triton, to_microseconds

__all__ = [
    "DEFAULT_WINDOW",
    "WINDOW_RANGE_US",
    "ControlInput",
    "DynamicBatching",
    "EnsembleStep",
    "QueuePolicy",
    "SequenceBatching",
    "SequenceState",
]

#: Default dynamic-batching window (rule of thumb): the low end of 5–20 ms, since a longer window
#: adds its whole length to latency when traffic is light.
DEFAULT_WINDOW = "5ms"
#: Rule-of-thumb dynamic-batching window range, in µs: shorter merges little, longer hurts latency at low traffic.
WINDOW_RANGE_US = (5_000, 20_000)


def _resolve_us(value: Duration | None, value_us: int | None, *, field: str) -> int | None:
    """One of ``value`` (with units) or ``value_us`` (an explicit int), never both."""
    if value is not None and value_us is not None:
        raise ConfigError(f"{field}: give either {field}= (with units) or {field}_us=, not both")
    if value_us is not None:
        if isinstance(value_us, bool) or not isinstance(value_us, int) or value_us < 0:
            raise ConfigError(f"{field}_us: expected a non-negative int of microseconds, got {value_us!r}")
        return value_us
    if value is None:
        return None
    return to_microseconds(value, field=field)



@dataclass(frozen=True, kw_only=True)
class QueuePolicy:
    """What the scheduler does with queued requests (``ModelQueuePolicy``).

    ``timeout_action`` applies once a request waited longer than ``default_timeout``:
    REJECT fails it, DELAY keeps it behind the others. ``max_queue_size`` 0 means unbounded;
    an unbounded queue hides overload as ever-growing latency instead of fast
    rejections, so set it.
    """

    max_queue_size: int = 0
    timeout_action: Literal["REJECT", "DELAY"] = "REJECT"
    default_timeout: Duration | None = None
    default_timeout_us: int | None = None
    allow_timeout_override: bool = False

    def to_proto(self) -> mc.ModelQueuePolicy:
        """The ``ModelQueuePolicy`` message."""
        timeout_us = _resolve_us(self.default_timeout, self.default_timeout_us, field="default_timeout")
        if self.timeout_action not in ("REJECT", "DELAY"):
            raise ConfigError(f"queue policy: timeout_action {self.timeout_action!r} must be REJECT or DELAY")
        if self.max_queue_size < 0:
            raise ConfigError("queue policy: max_queue_size must be >= 0")
        return mc.ModelQueuePolicy(
            timeout_action=mc.ModelQueuePolicy.TimeoutAction.Value(self.timeout_action),
            default_timeout_microseconds=timeout_us or 0,
            allow_timeout_override=self.allow_timeout_override,
            max_queue_size=self.max_queue_size,
        )


@dataclass(frozen=True, kw_only=True)
class DynamicBatching:
    """Dynamic batcher settings; the window is given with units (``"5ms"``) or as ``window_us=``.

    >>> DynamicBatching(window="10ms").to_proto().max_queue_delay_microseconds
    10000
    """

    window: Duration | None = None
    window_us: int | None = None
    preferred_batch_sizes: Sequence[int] = ()
    preserve_ordering: bool = False
    priority_levels: int = 0
    default_priority_level: int = 0
    default_queue_policy: QueuePolicy | None = None
    priority_queue_policy: Mapping[int, QueuePolicy] = field(default_factory=dict)

    def window_microseconds(self) -> int:
        """The window in µs (``DEFAULT_WINDOW`` when neither form was given)."""
        us = _resolve_us(self.window, self.window_us, field="window")
        return to_microseconds(DEFAULT_WINDOW) if us is None else us

    def to_proto(self) -> mc.ModelDynamicBatching:
        """The ``ModelDynamicBatching`` message; priority settings Triton would refuse raise ``ConfigError``."""
        levels = self.priority_levels
        if levels > 0 and not 1 <= self.default_priority_level <= levels:
            raise ConfigError(f"dynamic_batching: default_priority_level {self.default_priority_level} is outside "
                              f"1..{levels}", hint="priority 1 is highest; pick the level unmarked requests get")
        bad_keys = [k for k in self.priority_queue_policy if not 1 <= k <= levels]
        if bad_keys:
            raise ConfigError(f"dynamic_batching: priority_queue_policy levels {sorted(bad_keys)} are outside "
                              f"1..{levels}", hint="set priority_levels, and key policies by level 1..priority_levels")
        if self.preserve_ordering and levels > 1:
            raise ConfigError("dynamic_batching: preserve_ordering allows only one priority level",
                              hint="drop preserve_ordering or the priority levels")
        msg = mc.ModelDynamicBatching(
            max_queue_delay_microseconds=self.window_microseconds(),
            preserve_ordering=self.preserve_ordering,
            priority_levels=self.priority_levels,
            default_priority_level=self.default_priority_level,
        )
        msg.preferred_batch_size.extend(int(b) for b in self.preferred_batch_sizes)
        if self.default_queue_policy is not None:
            msg.default_queue_policy.CopyFrom(self.default_queue_policy.to_proto())
        for level, policy in sorted(self.priority_queue_policy.items()):
            msg.priority_queue_policy[int(level)].CopyFrom(policy.to_proto())
        return msg


@dataclass(frozen=True, kw_only=True)
class ControlInput:
    """A sequence-batcher control tensor (START, READY, END, CORRID)."""

    name: str
    kind: Literal["CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY", "CONTROL_SEQUENCE_END",
                  "CONTROL_SEQUENCE_CORRID"]
    dtype: DTypeLike | None = None
    int32_false_true: Sequence[int] = ()
    fp32_false_true: Sequence[float] = ()
    bool_false_true: Sequence[bool] = ()

    def to_proto(self) -> mc.ModelSequenceBatching.ControlInput:
        """The ``ControlInput`` message."""
        control = mc.ModelSequenceBatching.Control(kind=mc.ModelSequenceBatching.Control.Kind.Value(self.kind))
        control.int32_false_true.extend(self.int32_false_true)
        control.fp32_false_true.extend(self.fp32_false_true)
        control.bool_false_true.extend(self.bool_false_true)
        if self.dtype is not None:
            control.data_type = dtype_to_triton(self.dtype, field=f"control {self.name!r}")
        msg = mc.ModelSequenceBatching.ControlInput(name=self.name)
        msg.control.append(control)
        return msg


@dataclass(frozen=True, kw_only=True)
class SequenceState:
    """An implicit state tensor carried between requests of one sequence."""

    input_name: str
    output_name: str
    dtype: DTypeLike
    dims: Sequence[int]
    zero_initial_state: bool = False

    def to_proto(self) -> mc.ModelSequenceBatching.State:
        """The ``State`` message."""
        msg = mc.ModelSequenceBatching.State(
            input_name=self.input_name, output_name=self.output_name,
            data_type=dtype_to_triton(self.dtype, field=f"state {self.input_name!r}"))
        msg.dims.extend(int(d) for d in self.dims)
        if self.zero_initial_state:
            init = msg.initial_state.add(name=f"{self.input_name}_init", data_type=msg.data_type, zero_data=True)
            init.dims.extend(int(d) for d in self.dims)
        return msg


@dataclass(frozen=True, kw_only=True)
class SequenceBatching:
    """Sequence batcher (stateful models); ``strategy`` is ``"direct"`` or ``"oldest"``."""

    max_sequence_idle: Duration | None = None
    max_sequence_idle_us: int | None = None
    control_inputs: Sequence[ControlInput] = ()
    states: Sequence[SequenceState] = ()
    strategy: Literal["direct", "oldest"] = "direct"
    window: Duration | None = None
    window_us: int | None = None
    max_candidate_sequences: int = 0
    preferred_batch_sizes: Sequence[int] = ()
    preserve_ordering: bool = False
    iterative_sequence: bool = False

    def to_proto(self) -> mc.ModelSequenceBatching:
        """The ``ModelSequenceBatching`` message."""
        idle = _resolve_us(self.max_sequence_idle, self.max_sequence_idle_us, field="max_sequence_idle")
        window = _resolve_us(self.window, self.window_us, field="window") or 0
        msg = mc.ModelSequenceBatching(max_sequence_idle_microseconds=idle or 0,
                                       iterative_sequence=self.iterative_sequence)
        msg.control_input.extend(c.to_proto() for c in self.control_inputs)
        msg.state.extend(s.to_proto() for s in self.states)
        if self.strategy == "oldest":
            msg.oldest.SetInParent()
            msg.oldest.max_candidate_sequences = self.max_candidate_sequences
            msg.oldest.max_queue_delay_microseconds = window
            msg.oldest.preserve_ordering = self.preserve_ordering
            msg.oldest.preferred_batch_size.extend(self.preferred_batch_sizes)
        elif self.strategy == "direct":
            if self.preferred_batch_sizes or self.max_candidate_sequences or self.preserve_ordering:
                raise ConfigError("sequence_batching: preferred sizes, candidates and ordering need strategy='oldest'")
            msg.direct.SetInParent()
            msg.direct.max_queue_delay_microseconds = window
        else:
            raise ConfigError(f"sequence_batching.strategy: {self.strategy!r} must be 'direct' or 'oldest'")
        return msg


@dataclass(frozen=True, kw_only=True)
class EnsembleStep:
    """One step of an ensemble: ``input_map`` maps the step model's input → ensemble tensor,
    ``output_map`` maps the step model's output → ensemble tensor."""

    model_name: str
    model_version: int = -1
    input_map: Mapping[str, str] = field(default_factory=dict)
    output_map: Mapping[str, str] = field(default_factory=dict)

    def to_proto(self) -> mc.ModelEnsembling.Step:
        """The ``Step`` message."""
        msg = mc.ModelEnsembling.Step(model_name=self.model_name, model_version=self.model_version)
        for k, v in self.input_map.items():
            msg.input_map[k] = v
        for k, v in self.output_map.items():
            msg.output_map[k] = v
        return msg
