"""How to climb a load ladder: the levels, the windows, when to stop (:class:`LadderPlan`).

Pure values and helpers; :mod:`tritonkit.perf.measure.ladder` runs a plan.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonkit.errors import ConfigError
from tritonkit.perf.measure.folders import run_folder

__all__ = ["LadderPlan", "default_results_dir", "doubling_levels", "levels_from_text"]


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
    step_window_ms: int = 2000
    max_trials: int = 6
    stability_percentage: float | None = None
    warmup_s: float = 0.0
    warmup_level: float | None = None
    stop_after_sla_breaks: int = 2
    plateau_gain: float | None = 0.05
    plateau_patience: int = 1
    unstable_retries: int = 1
    retry_window_factor: float = 2.0
    continue_after_unstable: bool = False
    request_distribution: str = "constant"
    total_timeout_s: float = 1800.0

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
        if duration_s <= 0:
            raise ConfigError(f"--duration-s must be > 0, got {duration_s:g}", hint="e.g. --duration-s 6")
        return cls(
            levels=tuple(_levels(request_rate or concurrency or "1:8")),
            mode="request_rate" if request_rate else "concurrency",
            step_window_ms=max(100, int(duration_s * 1000 / 3)),
            max_trials=max_trials,
            warmup_s=warmup_s,
            stop_after_sla_breaks=stop_after_sla_breaks,
            request_distribution=distribution,
            total_timeout_s=total_timeout_s,
        )

    def validate(self) -> None:
        if self.mode not in ("concurrency", "request_rate"):
            raise ConfigError(f"ladder mode must be 'concurrency' or 'request_rate', not {self.mode!r}")
        if not self.levels:
            raise ConfigError("the ladder has no levels", hint="e.g. levels=(1, 2, 4, 8)")
        if any(v <= 0 for v in self.levels):
            raise ConfigError(f"ladder levels must be > 0, got {list(self.levels)}")
        if self.mode == "concurrency" and any(float(v) != int(v) for v in self.levels):
            raise ConfigError(f"concurrency levels must be whole numbers, got {list(self.levels)}")
        if self.step_window_ms < 50:
            raise ConfigError(f"step_window_ms {self.step_window_ms} is too short", hint="use at least 100 ms")
        if self.stop_after_sla_breaks < 1 or self.plateau_patience < 1 or self.unstable_retries < 0:
            raise ConfigError("stop_after_sla_breaks and plateau_patience must be >= 1, unstable_retries >= 0")
        if self.retry_window_factor < 1.0:
            raise ConfigError("retry_window_factor must be >= 1")
        if self.total_timeout_s <= 0:
            raise ConfigError("total_timeout_s must be > 0")

    def step_budget_s(self, window_ms: float) -> float:
        """A generous upper bound on one step's wall time (for its timeout)."""
        return 30.0 + 2.0 * self.max_trials * window_ms / 1000.0


def _levels(levels: str | Sequence[float]) -> list[float]:
    return levels_from_text(levels) if isinstance(levels, str) else [float(v) for v in levels]


def default_results_dir(model: str, root: str | os.PathLike[str] = "results") -> Path:
    """``<root>/<UTC timestamp>-<model>`` (see :func:`~tritonkit.perf.measure.folders.run_folder`)."""
    return run_folder(model, root)


def levels_from_text(text: str) -> list[float]:
    """``"1,2,4,8"`` → levels; ``"1:16"`` → doubling from 1 to 16; ``"50:400:50"`` → a linear range."""
    text = text.strip()
    try:
        if ":" in text:
            parts = [float(p) for p in text.split(":")]
            if len(parts) == 2:
                return doubling_levels(parts[0], parts[1])
            if len(parts) == 3 and parts[2] > 0:
                start, end, step = parts
                count = int((end - start) / step + 1e-9) + 1
                return [start + i * step for i in range(count)]
            raise ValueError(text)
        levels = [float(p) for p in text.split(",") if p.strip()]
        if not levels:
            raise ValueError(text)
        return levels
    except ValueError as exc:
        raise ConfigError(
            f"cannot read load levels {text!r}",
            hint="use a list '1,2,4,8', a doubling range '1:16', or 'start:end:step' like '50:400:50'",
        ) from exc

