"""What a step must meet beyond its SLA's bounds: one frozen value every verdict function takes.

* **The offered rate, carried.** An open-loop step (a request rate) passes only if the server
  carried at least ``(1 - rate_tolerance)`` × the rate it was offered. A server that falls behind
  carries what it can while requests wait (in its queue, or in perf_analyzer's, which then sends
  fewer), so the latency measured says little about the load that was asked for.
* **GPU memory.** A step whose peak GPU memory (from the server's metrics) is above
  ``max_gpu_memory_mb`` fails.
* **Headroom.** With ``headroom`` (a fraction, ``0.2`` = 20 %), each SLA bound that has a scale
  must keep that margin to its limit, as a fraction of it (:meth:`JudgeSettings.keeps_headroom`):
  ``p99<=50ms`` is then held at 40 ms, ``throughput>=200/s`` at 240/s; a zero limit
  (``errors==0``) has no scale and is judged as written. The check of that bound fails (or is
  inside the noise) as it would against the moved limit, so a step that meets the SLA with less
  to spare does not meet it here.

Both are facts about a step even where perf_analyzer could not call it stable (the rate a server
carries does not depend on its latency settling), so they fail such a step too; a figure that was
not measured (no throughput, no GPU metrics) is not judged. A required rate inside the carried
rate's 95 % interval is inside the noise (:meth:`JudgeSettings.rate_inside_noise`): the step is
then neither failed nor passed on it. Closed-loop steps (concurrency) are
offered no rate, so the rate rule does not apply to them.

``perf run`` (``--rate-tolerance``), ``perf sweep`` (``--rate-tolerance``, ``--max-gpu-memory-mb``, ``--headroom``),
the joint sweep and LLM runs build a :class:`JudgeSettings` and pass it to the verdict functions
of :mod:`tritonkit.perf.judge.verdict`; nobody changes a verdict afterwards.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tritonkit.errors import ConfigError

if TYPE_CHECKING:
    from tritonkit.perf.judge.sla import Constraint

__all__ = ["DEFAULT_RATE_TOLERANCE", "JudgeSettings"]

#: The share of the offered rate a step may fall short by and still pass (5 %).
DEFAULT_RATE_TOLERANCE = 0.05


@dataclass(frozen=True)
class JudgeSettings:
    """The criteria of a step verdict beyond the SLA's own bounds (see the module docstring).

    ``rate_tolerance``: a fraction in ``[0, 1)``; the command lines take it in percent.
    ``max_gpu_memory_mb``: ``None`` caps nothing. ``headroom``: the margin every scaled SLA bound
    must keep, a fraction in ``[0, 1)`` (0: none). Refused when built (``ConfigError``) if out of range.
    """

    rate_tolerance: float = DEFAULT_RATE_TOLERANCE
    max_gpu_memory_mb: float | None = None
    headroom: float = 0.0

    def __post_init__(self) -> None:
        fraction = "a fraction in [0, 1)"
        for name, must, hint in (
                ("rate_tolerance", fraction, "e.g. 0.05 for 5 % (the command line takes percent: --rate-tolerance 5)"),
                ("max_gpu_memory_mb", "> 0", "give the cap in MiB, e.g. --max-gpu-memory-mb 20000, or leave it out"),
                ("headroom", fraction, "e.g. 0.2 to keep 20 % to spare under every limit (the command line takes "
                                       "percent: --headroom 20%)")):
            value = getattr(self, name)
            if (value is not None or name != "max_gpu_memory_mb") and (
                    isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                    or not (value > 0 if must == "> 0" else 0.0 <= value < 1.0)):
                raise ConfigError(f"{name} must be {must}, got {value!r}", hint=hint)

    def limit(self, constraint: Constraint) -> float:
        """The value ``constraint`` holds a measurement to: its limit moved inward by ``headroom``
        (``p99<=50ms`` with 20 %: 40 ms; ``throughput>=200/s``: 240/s). A zero limit is kept."""
        if not self.headroom or constraint.value == 0:
            return constraint.value
        inward = -self.headroom if constraint.spec.bound == "upper" else self.headroom
        return constraint.value * (1.0 + inward)

    def keeps_headroom(self, constraint: Constraint, measured: float) -> bool:
        """Whether ``measured`` keeps the required ``headroom`` to ``constraint``'s limit (always,
        without one, or for a zero limit: :meth:`~tritonkit.perf.judge.sla.Constraint.headroom` is
        ``None`` there). Only the margin is asked here; whether the bound holds is the constraint's."""
        if not self.headroom:
            return True
        margin = constraint.headroom(measured)
        # A hair of float slack: 31 ms under 50 ms keeps exactly the 38 % asked for.
        return margin is None or margin >= self.headroom - 1e-9

    def rate_miss(self, offered_per_s: float | None, carried_per_s: float | None,
                  interval_per_s: tuple[float, float] | None = None) -> str | None:
        """Why an open-loop step offered ``offered_per_s`` requests/s missed by carrying
        ``carried_per_s``; ``None`` when it carried enough, or when either figure is unknown
        (a closed loop is offered no rate). ``interval_per_s`` (the carried rate's 95 % interval)
        only adds a note when the required rate lies inside it."""
        if offered_per_s is None or carried_per_s is None or offered_per_s <= 0:
            return None
        share = 1.0 - self.rate_tolerance
        required = share * offered_per_s
        if carried_per_s >= required:
            return None
        reason = (f"carried {carried_per_s:,.1f} of {offered_per_s:g} req/s offered "
                  f"(below {100 * share:g} %)")
        if interval_per_s is not None and interval_per_s[0] <= required <= interval_per_s[1]:
            low, high = interval_per_s
            reason += f"; inside the noise (95% interval {low:,.1f} – {high:,.1f} req/s)"
        return reason

    def rate_inside_noise(self, offered_per_s: float | None,
                          interval_per_s: tuple[float, float] | None) -> bool:
        """Whether the rate an open loop must carry lies inside the carried rate's 95 % interval:
        a shortfall (or a pass) there is inside the noise, not a verdict either way."""
        if offered_per_s is None or interval_per_s is None or offered_per_s <= 0:
            return False
        required = (1.0 - self.rate_tolerance) * offered_per_s
        return interval_per_s[0] <= required <= interval_per_s[1]

    def memory_miss(self, gpu_memory_mb: float | None) -> str | None:
        """Why a step whose peak GPU memory was ``gpu_memory_mb`` MiB missed; ``None`` when it is
        within the cap, or there is no cap or no figure."""
        cap = self.max_gpu_memory_mb
        if cap is None or gpu_memory_mb is None or gpu_memory_mb <= cap:
            return None
        return f"GPU memory {gpu_memory_mb:,.0f} MiB above {cap:g} MiB"

    def fingerprint(self, *, open_loop: bool = True) -> dict[str, Any]:
        """The criteria that change a verdict, for a resume record: each only when set away from its
        default, so a record written before it was kept still matches a run at the default (the rate
        tolerance only for an open loop: a closed one is offered no rate)."""
        found = {k: v for k, v in self.to_dict().items() if v != getattr(JudgeSettings, k)}
        return {k: v for k, v in found.items() if open_loop or k != "rate_tolerance"}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (kept with a verdict; read back by :meth:`from_dict`)."""
        return {"rate_tolerance": self.rate_tolerance, "max_gpu_memory_mb": self.max_gpu_memory_mb,
                "headroom": self.headroom}

    @classmethod
    def from_dict(cls, data: Any) -> JudgeSettings:
        """Inverse of :meth:`to_dict`; the defaults for what a verdict written before them lacks."""
        if not isinstance(data, dict):
            return cls()
        tolerance = data.get("rate_tolerance", DEFAULT_RATE_TOLERANCE)
        cap = data.get("max_gpu_memory_mb")
        return cls(DEFAULT_RATE_TOLERANCE if tolerance is None else float(tolerance),
                   None if cap is None else float(cap), float(data.get("headroom") or 0.0))
