"""Other clients' requests to the swept model, from the server's own counters.

A server the sweep did not start may serve other clients while a step is measured; their requests
then share the model's instances, and the step's figures include their effect. The server counts
every successful request of a model (``nv_inference_request_success``, scraped during each step,
and the statistics API's ``inference_stats.success.count``); perf_analyzer's own are the requests
of its export windows. What the server counted beyond those, less the requests in flight at the
step's two edges (up to twice the concurrency — seen on the bundled 2.51: 2 to 8 at concurrency 2
and 4 with no other client), and 2 % for the windows' rounding, is other clients' traffic.

Their failed requests: the failure counter (``nv_inference_request_failure``) less perf_analyzer's
errors in a step, all of it across a reload. A request to a model not served at all counts nowhere.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator, Sequence
from typing import Any

from tritonkit.perf.measure.metrics import scrape_metrics
from tritonkit.perf.measure.result import StepResult
from tritonkit.server.admin import ServerAdmin
from tritonkit.triton_metrics import REQUEST_FAILURE

__all__ = ["failed_during", "idle_requests", "others_requests", "success_count"]

#: Seconds an idle model is watched before a variant is measured (``--exclusive``).
IDLE_WATCH_S = 1.0


def others_requests(step: StepResult) -> int | None:
    """Requests the server counted for ``step``'s model beyond perf_analyzer's own (0: none seen);
    ``None`` when the step has no server counts or no export windows to compare."""
    metrics = step.metrics
    if metrics is None or metrics.success_count is None or not step.windows:
        return None
    sent = sum(window.request_count for window in step.windows)
    in_flight = step.load_value if step.load_mode == "concurrency" else max(2.0, 0.1 * step.load_value)
    extra = metrics.success_count - sent
    return int(round(extra)) if extra > 2 * in_flight + 0.02 * sent else 0


def success_count(admin: ServerAdmin, model: str) -> int:
    """The server's count of ``model``'s successful requests since it was loaded (every version)."""
    total = 0
    for version in admin.statistics(model):
        stats: dict[str, Any] = version.get("inference_stats", {})
        total += int(stats.get("success", {}).get("count", 0))
    return total


def idle_requests(admin: ServerAdmin, model: str, watch_s: float = IDLE_WATCH_S) -> int:
    """Requests others sent ``model`` while nothing of the sweep's ran, over ``watch_s`` seconds."""
    before = success_count(admin, model)
    time.sleep(watch_s)
    return success_count(admin, model) - before


@contextlib.contextmanager
def failed_during(metrics_url: str, models: Sequence[str], where: str, into: list[dict[str, Any]]) -> Iterator[None]:
    """Count the server's failed requests of ``models`` (every reason) while the block runs (a
    reload: none are the sweep's) into ``into`` as ``{"where", "failed"}`` (``None``: no counts)."""
    def total() -> float | None:
        try:
            snapshot = scrape_metrics(metrics_url)
        except (OSError, ValueError):  # no metrics page: not counted
            return None
        return sum(snapshot.total(REQUEST_FAILURE.name, model=model) or 0.0 for model in models)

    before = total()
    try:
        yield
    finally:
        after = total() if before is not None else None
        # A counter that went down: the model was loaded afresh (not by the sweep); unknown.
        into.append({"where": where, "failed": None if before is None or after is None or after < before
                     else round(after - before)})
