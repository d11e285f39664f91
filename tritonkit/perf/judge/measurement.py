"""What the SLA reads of one measured step: :class:`StepMeasurement`, in canonical units, and how a
run's :class:`~tritonkit.perf.measure.result.StepResult` gives one (:func:`measurement_from_step`:
which figures count as measured, what a step with failed requests still tells, the step's note).

The verdict (:mod:`tritonkit.perf.judge.verdict`) judges these values against the SLA.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from tritonkit.perf.judge.sla import SLA
from tritonkit.perf.measure.failures import queue_rejections
from tritonkit.perf.measure.result import StepResult
from tritonkit.perf.metric_registry import LATENCY_STATS

__all__ = ["StepMeasurement", "measurement_from_step"]

@dataclass(frozen=True)
class StepMeasurement:
    """What the SLA needs from one step of a ladder, in canonical units.

    ``load`` is the offered load (concurrency, or request rate in requests/s); ``values`` maps
    canonical metric names to measurements (a metric that was not measured is absent or
    ``None``); ``measured`` is false for a step that has no trustworthy numbers; ``intervals``
    maps metric names to their 95 % intervals (a bound inside one is inside the noise);
    ``noisy``: the step's windows disagreed (its values are their medians).

    What the criteria beyond the SLA read (``None``: not known, not judged): ``offered_per_s`` the
    request rate an open loop offered (``None`` for a closed loop), ``carried_per_s`` the requests
    per second the server answered (known even where the step is not otherwise measured) with its
    95 % interval ``carried_interval_per_s``, ``gpu_memory_mb`` the peak GPU memory in MiB.
    ``rejected_count``: of the failed requests (``values["errors"]``), those the queue policy
    refused (their share is ``values["rejected"]``).
    """

    load: float
    values: Mapping[str, float | None]
    measured: bool = True
    note: str = ""
    intervals: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    offered_per_s: float | None = None
    carried_per_s: float | None = None
    carried_interval_per_s: tuple[float, float] | None = None
    gpu_memory_mb: float | None = None
    rejected_count: float = 0.0
    noisy: bool = False

    def values_for(self, sla: SLA) -> Mapping[str, float | None]:
        """What the SLA's bounds read: :attr:`values`, except that where ``sla`` bounds the rejected
        share, the errors and error rate it bounds are the failures other than rejections."""
        values = self.values
        if not self.rejected_count or sla.constraint("rejected") is None:
            return values
        errors, rate, share = values.get("errors"), values.get("error_rate"), values.get("rejected")
        return {**values, "errors": None if errors is None else max(0.0, errors - self.rejected_count),
                "error_rate": None if rate is None or share is None else max(0.0, rate - share)}

def measurement_from_step(step: StepResult, *, batch_size: int = 1) -> StepMeasurement:
    """What the SLA reads from one :class:`~tritonkit.perf.measure.result.StepResult`, in canonical units.

    * A clean step (stable or noisy, no failed request, numbers present) gives every metric,
      with each figure's 95 % interval where the step has one (a noisy step's are wide).
    * A step where requests failed gives only ``errors``, ``error_rate`` and ``rejected``:
      perf_analyzer stops at the first failure, so its latencies are not a measurement, but the
      failures are a fact that fails ``errors==0``. Failures the queue policy caused (its
      messages, :data:`~tritonkit.perf.measure.failures.QUEUE_REJECTIONS`) are counted as
      rejected too: all of them when every failure perf_analyzer saw was one.
    * An unstable step without figures, or one without numbers, is not measured: it passes no
      bound and fails none (only a criterion beyond the SLA, judged on the facts below, can fail it).

    Errors are the larger of the step's count and the server's failure counter over the step,
    so a failure either side saw is never missed. For the criteria beyond the SLA: an open-loop
    step's offered rate, the requests per second it carried (its throughput over ``batch_size``:
    throughput counts inferences, the rate counts requests) whenever perf_analyzer gave one and
    did not fail, and its peak GPU memory from the server's metrics.
    """
    if step.server_lost:
        return StepMeasurement(step.load_value, {}, False, "the server stopped answering during this step")
    errors, rejected, total = _failures(step)
    latency = step.latency
    clean = ((step.stable or step.noisy) and errors == 0 and step.throughput_per_s is not None
             and latency is not None and step.failure is None)
    values: dict[str, float | None] = {
        "errors": errors,
        "error_rate": errors / total if total > 0 else (0.0 if clean else None),
        "rejected": rejected / total if total > 0 else (0.0 if clean else None),
    }
    if clean and latency is not None:
        queue_us = step.server.queue_us
        if queue_us is None and step.metrics is not None:
            queue_us = step.metrics.queue_time_us_per_request
        values.update(
            throughput=step.throughput_per_s,
            **{stat: getattr(latency, f"{stat}_ms") for stat in LATENCY_STATS},
            queue=None if queue_us is None else queue_us / 1000.0,
        )
    per_request = 1.0 / max(1, batch_size)
    carried = None
    carried_band = None
    if step.throughput_per_s is not None and step.failure is None:
        carried = step.throughput_per_s * per_request
        raw_band = step.interval("throughput")
        if raw_band is not None:
            carried_band = (raw_band[0] * per_request, raw_band[1] * per_request)
    memory_bytes = step.metrics.gpu_memory_used_bytes_max if step.metrics is not None else None
    intervals = {name: band for name in ("throughput", *LATENCY_STATS)
                 if clean and (band := step.interval(name)) is not None}
    return StepMeasurement(
        step.load_value, values, clean or errors > 0, _note(step, errors, rejected, clean), intervals,
        offered_per_s=step.load_value if step.load_mode == "request_rate" else None,
        carried_per_s=carried, carried_interval_per_s=carried_band,
        gpu_memory_mb=None if memory_bytes is None else memory_bytes / 2**20, rejected_count=float(rejected),
        noisy=step.noisy,
    )


def _failures(step: StepResult) -> tuple[float, int, float]:
    """The step's failed requests, those of them the queue policy rejected, and all its requests."""
    errors = float(step.error_count)
    if step.metrics is not None and step.metrics.failure_count is not None:
        errors = max(errors, step.metrics.failure_count)
    rejected, failed_lines = queue_rejections(step.error_note or "")
    if rejected and rejected == failed_lines:
        rejected = int(errors)  # every failure perf_analyzer saw was a rejection: so were the server's
    total = float(step.request_count)
    if total <= 0 and step.metrics is not None and step.metrics.success_count is not None:
        failures = step.metrics.failure_count or 0.0
        # A request refused because the queue was full is in neither of the server's counters
        # (tritonserver 2.51, seen here): the rejections it did not count are added.
        total = step.metrics.success_count + failures + max(0.0, rejected - failures)
    return errors, rejected, total


def _note(step: StepResult, errors: float, rejected: int, clean: bool) -> str:
    """Why the step's figures are not a clean measurement (its failures first); empty when they are."""
    if errors > 0 and rejected == errors:
        return f"{errors:g} requests rejected by the queue policy (perf_analyzer stops at the first)"
    if errors > 0:
        return f"{errors:g} failed requests" + (f": {step.error_note}" if step.error_note else "")
    if step.noisy:
        return step.unstable_note or "noisy: its windows disagreed"
    if not step.stable:
        return f"unstable: {step.unstable_note}" if step.unstable_note else "unstable measurement"
    if step.failure is not None:
        return f"perf_analyzer failed ({step.failure}): {step.failure_note or 'no message'}"
    return "" if clean else "no throughput or latency measured"
