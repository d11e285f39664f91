"""How to climb a load ladder: the levels, the windows, when to stop (:class:`LadderPlan`).

Pure values and helpers; :mod:`tritonkit.perf.measure.ladder` runs a plan.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonkit._values import (
    CONCURRENCY_LEVEL,
    MAX_LADDER_LEVELS,
    POSITIVE,
    RATE_LEVEL,
    SECONDS,
    SECONDS_OR_ZERO,
    STEPS,
    WINDOW_MS,
    Bounds,
    bounded,
    check_fields,
    excerpt,
)
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.folders import run_folder

__all__ = ["LadderPlan", "Plateau", "default_results_dir", "doubling_levels", "levels_from_text", "parse_levels"]

#: How much longer each retry of an unstable step measures (a factor of at least 1).
_RETRY_FACTOR = Bounds(integer=False, low=1, high=100, example="2")
#: One number of a ladder's text, before its kind is known.
_LEVEL = Bounds(integer=False, low=0, low_open=True, noun="load level", example="8")
#: Retries of an unstable step (none is allowed).
_RETRIES = Bounds(integer=True, low=0, high=1000, example="1")


def doubling_levels(start: float, maximum: float) -> list[float]:
    """``start, 2·start, 4·start, …`` up to ``maximum`` (``maximum`` itself is always included)."""
    if start <= 0 or maximum < start:
        raise ConfigError(f"cannot build a ladder from {start} to {maximum}", hint="use 0 < start <= maximum")
    levels = []
    value = start
    while value < maximum:
        levels.append(value)
        value *= 2
    levels.append(maximum)
    return levels


@dataclass
class Plateau:
    """The plateau rule of a ladder, read from its plan (:meth:`LadderPlan.plateau`): the best
    throughput so far, and how many steps in a row have not beaten it by ``gain``; the ladder stops
    at ``patience`` such steps. Every ladder (``perf run``'s, the sweeps', the joint sweep's) asks it."""

    gain: float | None
    patience: int = 1
    best: float = 0.0
    flat: int = 0

    def stops(self, throughput: float) -> bool:
        """Count one more step's ``throughput`` in; whether the ladder stops there."""
        risen = self.gain is None or self.best <= 0 or throughput >= self.best * (1.0 + self.gain)
        self.flat = 0 if risen else self.flat + 1
        self.best = max(self.best, throughput)
        return self.flat >= self.patience


@dataclass(frozen=True)
class LadderPlan:
    """How to climb.

    ``levels`` are concurrencies (``mode="concurrency"``) or requests per second
    (``mode="request_rate"``), visited in the given order. Each step measures with
    ``step_window_ms`` windows (perf_analyzer needs 3 agreeing windows, at most ``max_trials``);
    an unstable step is retried ``unstable_retries`` times with the window multiplied by
    ``retry_window_factor``, the last retry over fixed windows whose agreement tritonkit judges
    (the step is then stable or **noisy**, a measurement either way); with ``unstable_retries=0``
    an unstable step stays unmeasured, and ends the ladder unless ``continue_after_unstable``.
    ``warmup_s`` of load at ``warmup_level`` (default: the first level)
    runs first and is not recorded. Throughput "stops rising" when a step gains less than
    ``plateau_gain`` (5 %) over the best earlier step, ``plateau_patience`` times in a row
    (``plateau_gain=None`` never stops for that).
    """

    levels: tuple[float, ...]
    mode: str = "concurrency"
    step_window_ms: int = bounded(2000, WINDOW_MS)
    max_trials: int = bounded(6, STEPS)
    stability_percentage: float | None = bounded(None, POSITIVE)
    warmup_s: float = bounded(0.0, SECONDS_OR_ZERO)
    warmup_level: float | None = bounded(None, POSITIVE)
    stop_after_sla_breaks: int = bounded(2, STEPS)
    plateau_gain: float | None = bounded(0.05, POSITIVE, optional=True)
    plateau_patience: int = bounded(1, STEPS)
    unstable_retries: int = bounded(1, _RETRIES)
    retry_window_factor: float = bounded(2.0, _RETRY_FACTOR)
    continue_after_unstable: bool = False
    request_distribution: str = "constant"
    total_timeout_s: float = bounded(1800.0, SECONDS)

    def __post_init__(self) -> None:
        check_fields(self)
        self.validate()

    @classmethod
    def from_duration(
        cls,
        duration_s: float,
        *,
        concurrency: str | Sequence[float] | None = None,
        request_rate: str | Sequence[float] | None = None,
        distribution: str = "constant",
        max_trials: int = 6,
        warmup_s: float = 0.0,
        stop_after_sla_breaks: int = 2,
        total_timeout_s: float = 1800.0,
    ) -> LadderPlan:
        """The plan ``tritonkit perf run`` makes: levels as text, measuring ``duration_s`` per step.

        ``concurrency`` or ``request_rate`` (not both) holds the levels, as numbers or in the text
        forms :func:`levels_from_text` reads; neither means concurrency ``1:8``. perf_analyzer needs
        three agreeing windows per step, so each window is a third of ``duration_s`` (at least
        100 ms) and a stable step measures at least ``duration_s``.
        """
        if concurrency and request_rate:
            raise ConfigError(
                "--concurrency and --request-rate both given", hint="a ladder steps one kind of load: choose one"
            )
        SECONDS.check(duration_s, "duration_s")
        mode = "request_rate" if request_rate else "concurrency"
        return cls(
            levels=tuple(_levels(request_rate or concurrency or "1:8", mode)),
            mode=mode,
            step_window_ms=max(100, int(duration_s * 1000 / 3)),
            max_trials=max_trials,
            warmup_s=warmup_s,
            stop_after_sla_breaks=stop_after_sla_breaks,
            request_distribution=distribution,
            total_timeout_s=total_timeout_s,
        )

    def plateau(self) -> Plateau:
        """A fresh tracker of this plan's plateau rule (``plateau_gain``, ``plateau_patience``)."""
        return Plateau(self.plateau_gain, self.plateau_patience)

    def validate(self) -> None:
        """Raise ``ConfigError`` for a plan no ladder can climb (run at construction too)."""
        if self.mode not in ("concurrency", "request_rate"):
            raise ConfigError(f"ladder mode must be 'concurrency' or 'request_rate', not {self.mode!r}")
        if not self.levels:
            raise ConfigError("the ladder has no levels", hint="e.g. levels=(1, 2, 4, 8)")
        check_levels(self.levels, self.mode, "LadderPlan.levels")

    def step_budget_s(self, window_ms: float) -> float:
        """A generous upper bound on one step's wall time (for its timeout)."""
        return 30.0 + 2.0 * self.max_trials * window_ms / 1000.0


def _levels(levels: str | Sequence[float], mode: str) -> list[float]:
    if isinstance(levels, str):
        return parse_levels(levels, mode, mode)
    values = [float(v) for v in levels]
    check_levels(values, mode, mode)
    return values


def default_results_dir(model: str, root: str | os.PathLike[str] = "results") -> Path:
    """``<root>/<UTC timestamp>-<model>`` (see :func:`~tritonkit.perf.measure.folders.run_folder`)."""
    return run_folder(model, root)


_LEVELS_HINT = "use a list '1,2,4,8', a doubling range '1:16', or 'start:end:step' like '50:400:50'"


def levels_from_text(text: str, *, where: str = "load levels") -> list[float]:
    """``"1,2,4,8"`` → levels; ``"1:16"`` → doubling from 1 to 16; ``"50:400:50"`` → a linear range.

    Every number must be finite and above zero, and a ladder has at most
    :data:`~tritonkit._values.MAX_LADDER_LEVELS` steps (checked before a range is built, so
    ``1:1e9:1`` is refused at once rather than listed); ``where`` names the option or field.
    """
    stripped = text.strip()
    try:
        parts = [float(p) for p in stripped.split(":")] if ":" in stripped else \
            [float(p) for p in stripped.split(",") if p.strip()]
    except ValueError:
        raise ConfigError(f"{where} {excerpt(text)}: not load levels", hint=_LEVELS_HINT) from None
    if not parts or (":" in stripped and len(parts) not in (2, 3)):
        raise ConfigError(f"{where} {excerpt(text)}: not load levels", hint=_LEVELS_HINT)
    for part in parts:
        problem = _LEVEL.problem(part)
        if problem is not None:
            raise ConfigError(f"{where} {excerpt(text)}: {excerpt(part)} is {problem}", hint=_LEVELS_HINT)
    if ":" in stripped and len(parts) == 2:
        levels = doubling_levels(parts[0], parts[1])
    elif ":" in stripped:
        start, end, step = parts
        if end < start:
            raise ConfigError(f"{where} {excerpt(text)}: the range ends below its start", hint=_LEVELS_HINT)
        count = int((end - start) / step + 1e-9) + 1
        if count > MAX_LADDER_LEVELS:
            raise ConfigError(f"{where} {excerpt(text)}: {count} steps, more than a ladder's {MAX_LADDER_LEVELS}",
                              hint="take a larger step, or a doubling range 'start:end'")
        levels = [start + i * step for i in range(count)]
    else:
        levels = parts
    if len(levels) > MAX_LADDER_LEVELS:
        raise ConfigError(f"{where} {excerpt(text)}: {len(levels)} steps, more than a ladder's {MAX_LADDER_LEVELS}",
                          hint="fewer levels: a doubling range '1:64' climbs in 7 steps")
    return levels


def check_levels(levels: Sequence[float], mode: str, where: str, *, text: str | None = None) -> None:
    """Hold every level to its bounds: concurrencies whole, from 1 to
    :data:`~tritonkit._values.MAX_CONCURRENCY`; request rates above 0, at most
    :data:`~tritonkit._values.MAX_REQUEST_RATE_PER_S`; at most ``MAX_LADDER_LEVELS`` of them.
    ``text``: the levels as the user wrote them, shown in the message."""
    bounds = CONCURRENCY_LEVEL if mode == "concurrency" else RATE_LEVEL
    shown = f"{where} {excerpt(text)}" if text is not None else where
    if len(levels) > MAX_LADDER_LEVELS:
        raise ConfigError(f"{shown}: {len(levels)} levels, more than a ladder's {MAX_LADDER_LEVELS}",
                          hint="fewer levels: a doubling range '1:64' climbs in 7 steps")
    for level in levels:
        value = int(level) if mode == "concurrency" and isinstance(level, float) and level.is_integer() else level
        problem = bounds.problem(value)
        if problem is not None:
            example = "1:64" if mode == "concurrency" else "50:400"
            raise ConfigError(f"{shown}: level {excerpt(value)} is {problem}",
                              hint=f"each {mode.replace('_', ' ')} level is {bounds.describe()}, e.g. {where} {example}")


def parse_levels(text: str, mode: str, where: str) -> list[float]:
    """The levels ``text`` spells (:func:`levels_from_text`), each within its bounds (:func:`check_levels`)."""
    levels = levels_from_text(text, where=where)
    check_levels(levels, mode, where, text=text)
    return levels
