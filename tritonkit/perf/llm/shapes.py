"""Traffic shapes as send schedules for perf_analyzer's ``--request-intervals``.

perf_analyzer's own load options are a fixed concurrency or a fixed rate. A ramp, a spike, a
soak or the replay of a recorded log is a *schedule*: the gap before each request. A shape
here is a typed value; ``schedule()`` turns it into those gaps (µs, one per request, what the
intervals file holds: perf_analyzer waits the i-th gap before sending the i-th request) and the
phases the report marks on its time line. Pure: the same shape gives the same schedule.

* ``Ramp``: the rate rises from ``start_per_s`` to ``end_per_s`` in ``steps`` equal steps of
  ``step_s`` seconds each;
* ``Spike``: ``base_per_s`` for ``before_s``, ``burst_per_s`` for ``burst_s``, ``base_per_s``
  again for ``after_s`` (the recovery is measured after the burst);
* ``Soak``: ``rate_per_s`` for ``duration_s`` (latency drift over time is reported);
* ``Replay``: the send times of a recorded log (JSONL, one request a line:
  ``{"timestamp_ms": 0, "input_tokens": 120, "output_tokens": 40}``), optionally sped up; Mooncake's
  trace format too (``timestamp`` ms, ``input_length``, ``output_length``, ``hash_ids``: the ids of the
  prompt's blocks of ``block_tokens``, 512 unless told; requests naming the same id share its text).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_jsonl
from tritonkit._values import (
    MAX_REQUESTS,
    POSITIVE,
    RATE_LEVEL,
    SECONDS,
    SECONDS_OR_ZERO,
    STEPS,
    TOKENS,
    Bounds,
    bounded,
    check_fields,
    excerpt,
)
from tritonkit.errors import ConfigError

__all__ = ["MAX_SCHEDULED_REQUESTS", "Phase", "Ramp", "Replay", "ReplayEntry", "Schedule", "Shape", "Soak",
           "Spike", "load_replay_log", "parse_shape", "write_intervals"]

#: Upper bound on requests one shape may schedule: load stays bounded in count and time.
MAX_SCHEDULED_REQUESTS = MAX_REQUESTS
#: A recorded request's length in tokens: a whole token at least.
_TOKEN_COUNT = replace(TOKENS, low=1, low_open=False)
#: A recorded request's time: from 0 to ten thousand years of milliseconds (an epoch's included).
_STAMP_MS = Bounds(integer=False, low=0, high=3.2e14)


@dataclass(frozen=True)
class Phase:
    """A named stretch of a schedule: requests ``[first, first + count)``, ``start_s``..``end_s``."""

    name: str
    start_s: float
    end_s: float
    first: int
    count: int
    rate_per_s: float | None = None


@dataclass(frozen=True)
class Schedule:
    """Gaps before each request (µs) and the phases; per-request lengths for a replay."""

    intervals_us: tuple[int, ...]
    phases: tuple[Phase, ...]
    input_tokens: tuple[int, ...] | None = None
    output_tokens: tuple[int, ...] | None = None
    hash_ids: tuple[tuple[int, ...], ...] | None = None
    block_tokens: int = 512

    @property
    def request_count(self) -> int:
        return len(self.intervals_us)

    @property
    def duration_s(self) -> float:
        return sum(self.intervals_us) / 1e6

    def phase(self, name: str) -> Phase | None:
        return next((p for p in self.phases if p.name == name), None)


def _constant_phases(phases: Iterable[tuple[str, float, float]]) -> Schedule:
    """The schedule of ``(name, rate_per_s, duration_s)`` phases, one after the other, each at a
    constant rate (the building block of every shape but a replay)."""
    intervals: list[int] = []
    built: list[Phase] = []
    clock_s = 0.0
    for name, rate_per_s, duration_s in phases:
        count = int(round(rate_per_s * duration_s))
        gap_us = int(round(1e6 / rate_per_s))
        start, first = clock_s, len(intervals)
        intervals.extend([gap_us] * count)
        if len(intervals) > MAX_SCHEDULED_REQUESTS:
            raise ConfigError(
                f"traffic shape schedules more than {MAX_SCHEDULED_REQUESTS} requests",
                hint="shorten the phases or lower the rates",
            )
        clock_s += count * gap_us / 1e6
        built.append(Phase(name, start, clock_s, first, count, rate_per_s))
    if not intervals:
        raise ConfigError("traffic shape schedules no request", hint="raise a rate or a duration")
    return Schedule(tuple(intervals), tuple(built))


@dataclass(frozen=True)
class Ramp:
    """Rate rising in ``steps`` equal steps from ``start_per_s`` to ``end_per_s``, ``step_s`` each."""

    start_per_s: float = bounded(1.0, RATE_LEVEL)
    end_per_s: float = bounded(8.0, RATE_LEVEL)
    steps: int = bounded(4, STEPS)
    step_s: float = bounded(10.0, SECONDS)
    kind: str = field(default="ramp", init=False)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.end_per_s < self.start_per_s:
            raise ConfigError(f"a ramp rises: its end rate {self.end_per_s:g}/s is below its start {self.start_per_s:g}/s",
                              hint="write the lower rate first (ramp:1-8/s); a falling load is a spike's after phase")

    def schedule(self) -> Schedule:
        fractions = [0.0 if self.steps == 1 else i / (self.steps - 1) for i in range(self.steps)]
        rise = self.end_per_s - self.start_per_s
        return _constant_phases(
            (f"step{i + 1}", self.start_per_s + frac * rise, self.step_s) for i, frac in enumerate(fractions)
        )


@dataclass(frozen=True)
class Spike:
    """``base_per_s`` for ``before_s``, ``burst_per_s`` for ``burst_s``, then base for ``after_s``."""

    base_per_s: float = bounded(2.0, RATE_LEVEL)
    burst_per_s: float = bounded(20.0, RATE_LEVEL)
    before_s: float = bounded(5.0, SECONDS_OR_ZERO)
    burst_s: float = bounded(3.0, SECONDS)
    after_s: float = bounded(10.0, SECONDS)
    kind: str = field(default="spike", init=False)

    def __post_init__(self) -> None:
        check_fields(self)

    def schedule(self) -> Schedule:
        before = [("base", self.base_per_s, self.before_s)] if self.before_s > 0 else []
        return _constant_phases([*before, ("burst", self.burst_per_s, self.burst_s),
                                 ("after", self.base_per_s, self.after_s)])


@dataclass(frozen=True)
class Soak:
    """A constant ``rate_per_s`` for ``duration_s``."""

    rate_per_s: float = bounded(4.0, RATE_LEVEL)
    duration_s: float = bounded(600.0, SECONDS)
    kind: str = field(default="soak", init=False)

    def __post_init__(self) -> None:
        check_fields(self)

    def schedule(self) -> Schedule:
        return _constant_phases([("soak", self.rate_per_s, self.duration_s)])


@dataclass(frozen=True)
class ReplayEntry:
    """One recorded request: when it was sent (ms from the log's start) and its lengths."""

    timestamp_ms: float
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Replay:
    """Send times (and lengths) of a recorded log, played ``speed`` times as fast."""

    entries: tuple[ReplayEntry, ...]
    speed: float = bounded(1.0, POSITIVE)
    source: str = ""
    block_tokens: int = bounded(512, _TOKEN_COUNT)
    kind: str = field(default="replay", init=False)

    def __post_init__(self) -> None:
        check_fields(self)

    def schedule(self) -> Schedule:
        if not self.entries:
            raise ConfigError(f"replay log {self.source or ''} has no requests".replace("  ", " "))
        if len(self.entries) > MAX_SCHEDULED_REQUESTS:
            raise ConfigError(f"replay log has more than {MAX_SCHEDULED_REQUESTS} requests", hint="replay a slice")
        entries = sorted(self.entries, key=lambda e: e.timestamp_ms)
        t0 = entries[0].timestamp_ms
        intervals: list[int] = []
        previous = t0
        for entry in entries:
            # The first request goes out at once (a 1 µs gap: perf_analyzer wants positive gaps).
            gap_ms = (entry.timestamp_ms - previous) / self.speed
            intervals.append(max(1, int(round(gap_ms * 1000.0))))
            previous = entry.timestamp_ms
        end_s = sum(intervals) / 1e6
        return Schedule(tuple(intervals), (Phase("replay", 0.0, end_s, 0, len(intervals)),),
                        input_tokens=tuple(e.input_tokens for e in entries),
                        output_tokens=tuple(e.output_tokens for e in entries),
                        hash_ids=tuple(e.hash_ids for e in entries) if any(e.hash_ids for e in entries) else None,
                        block_tokens=self.block_tokens)


Shape = Ramp | Spike | Soak | Replay


def _int_field(line: dict[str, Any], names: Sequence[str], where: str) -> int:
    for name in names:
        if name in line:
            return int(_TOKEN_COUNT.check(line[name], f"{where}: {name}"))
    raise ConfigError(f"{where}: missing {names[0]}", hint=f"each line needs {', '.join(names[:1])}")


def load_replay_log(path: str | os.PathLike[str], *, speed: float = 1.0, block_tokens: int = 512) -> Replay:
    """Read a JSONL request log: ``timestamp_ms`` (or ``timestamp`` in ms), input and output lengths,
    optionally ``hash_ids`` (whole numbers, one per block of ``block_tokens`` of the prompt)."""
    source = Path(path)
    entries = []
    example = '{"timestamp_ms": 0, "input_tokens": 100, "output_tokens": 20}'
    for where, line in read_jsonl(path, what="replay log", example=example):
        if not isinstance(line, dict):
            raise ConfigError(f"{where} is not a JSON object", hint=f"e.g. {example}")
        stamp: Any = line.get("timestamp_ms", line.get("timestamp"))
        if _STAMP_MS.problem(stamp) is not None:
            raise ConfigError(f"{where}: timestamp_ms must be a number of milliseconds >= 0, got {excerpt(stamp)}",
                              hint=f"e.g. {example}")
        ids = line.get("hash_ids", [])
        if not isinstance(ids, list) or not all(type(i) is int and 0 <= i < 2**63 for i in ids):
            raise ConfigError(f"{where}: hash_ids must be a list of whole numbers >= 0, got {excerpt(ids)}",
                              hint=f"e.g. {example}")
        entries.append(ReplayEntry(float(stamp), _int_field(line, ("input_tokens", "input_length", "isl"), where),
                                   _int_field(line, ("output_tokens", "output_length", "osl"), where), tuple(ids)))
    return Replay(tuple(entries), speed=speed, source=str(source), block_tokens=block_tokens)


def _float(text: str, where: str) -> float:
    try:
        return float(text.strip().removesuffix("/s").removesuffix("s"))
    except ValueError as exc:
        raise ConfigError(f"traffic shape: {where} {excerpt(text)} is not a number") from exc


def parse_shape(text: str) -> Shape:
    """``ramp:START-END/s,STEPS,STEP_S``, ``spike:BASE/s,BURST/s,BEFORE_S,BURST_S,AFTER_S``,
    ``soak:RATE/s,DURATION_S`` or ``replay:FILE.jsonl[,SPEED[,BLOCK_TOKENS]]``."""
    kind, _, rest = text.partition(":")
    kind = kind.strip().lower()
    parts = [p for p in rest.split(",")] if rest else []
    examples = "ramp:1-8/s,4,10 | spike:2/s,20/s,5,3,10 | soak:4/s,600 | replay:log.jsonl,2"
    try:
        if kind == "ramp" and 1 <= len(parts) <= 3:
            lo, _, hi = parts[0].removesuffix("/s").partition("-")
            return Ramp(_float(lo, "start rate"), _float(hi or lo, "end rate"),
                        int(STEPS.parse(parts[1], "ramp steps")) if len(parts) > 1 else 4,
                        _float(parts[2], "step duration") if len(parts) > 2 else 10.0)
        if kind == "spike" and 2 <= len(parts) <= 5:
            nums = [_float(p, "value") for p in parts]
            return Spike(nums[0], nums[1], *nums[2:])
        if kind == "soak" and len(parts) == 2:
            return Soak(_float(parts[0], "rate"), _float(parts[1], "duration"))
        if kind == "replay" and 1 <= len(parts) <= 3:
            return load_replay_log(parts[0], speed=_float(parts[1], "speed") if len(parts) > 1 else 1.0,
                                   block_tokens=int(_TOKEN_COUNT.parse(parts[2], "block tokens")) if len(parts) > 2 else 512)
    except ConfigError as exc:
        hint = f"{exc.hint}; " if exc.hint else ""
        raise ConfigError(f"traffic shape {excerpt(text)}: {exc.message}", hint=f"{hint}shapes look like: {examples}") \
            from exc
    raise ConfigError(f"cannot read traffic shape {excerpt(text)}", hint=f"use one of: {examples}")


def write_intervals(path: str | os.PathLike[str], schedule: Schedule) -> Path:
    """Write the schedule's gaps as perf_analyzer's ``--request-intervals`` file (µs, one a line)."""
    return atomic_write(Path(path), "".join(f"{gap}\n" for gap in schedule.intervals_us))
