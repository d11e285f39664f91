"""Each node's clock against the driver's: how far off it is, and how sure that is.

The driver asks a node for its wall clock (a tiny Ray task) several times, noting its own clock
before and after; the exchange with the shortest round trip is kept, and the node's offset is its
answer minus the middle of that round trip, give or take half of it (:func:`estimate_offset`, the
usual NTP-style estimate; pure). Times a node recorded are moved onto the driver's clock by removing
its offset. On machines kept in step by NTP the offset is near zero and the uncertainty (the Ray
round trip, a few milliseconds) bounds what is left; that uncertainty is recorded with each client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["ClockOffset", "estimate_offset", "measure_offsets"]

#: Exchanges per node; the shortest round trip is kept.
ROUNDS = 5


@dataclass(frozen=True)
class ClockOffset:
    """A node's clock minus the driver's (``offset_ns``), give or take ``uncertainty_ns``."""

    node_id: str
    offset_ns: int
    uncertainty_ns: int

    def to_dict(self) -> dict[str, float]:
        return {"clock_offset_ms": round(self.offset_ns / 1e6, 3),
                "clock_uncertainty_ms": round(self.uncertainty_ns / 1e6, 3)}


def estimate_offset(exchanges: Sequence[tuple[int, int, int]]) -> tuple[int, int]:
    """(offset, uncertainty) in ns from ``(driver before, node, driver after)`` exchanges: the one
    with the shortest round trip, the node's time minus the middle of it, and half the round trip."""
    if not exchanges:
        raise ValueError("no exchange to estimate a clock offset from")
    before, node, after = min(exchanges, key=lambda e: e[2] - e[0])
    if after < before:
        raise ValueError("the driver's clock went backwards during an exchange")
    return node - (before + after) // 2, (after - before + 1) // 2


def measure_offsets(ray: Any, node_ids: Sequence[str], *, rounds: int = ROUNDS) -> list[ClockOffset]:
    """Each node's :class:`ClockOffset`, measured as the module docstring says (one node at a time,
    so no exchange waits behind another)."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from tritonkit.perf.cluster.remote import now_ns

    ask = ray.remote(now_ns)
    found = []
    for node_id in node_ids:
        pinned = ask.options(num_cpus=0, max_retries=0,
                             scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
        ray.get(pinned.remote())  # the first call may start a worker there: not an exchange
        exchanges = []
        for _ in range(rounds):
            before = time.time_ns()
            node = int(ray.get(pinned.remote()))
            exchanges.append((before, node, time.time_ns()))
        offset, uncertainty = estimate_offset(exchanges)
        found.append(ClockOffset(node_id, offset, uncertainty))
    return found
