"""One registry of the metrics tritonkit measures, judges, reports and alerts on.

Each :class:`Metric` holds, once, what every reader needs: its canonical name (the SLA key), the
spellings the SLA parser also accepts, its kind (which fixes the canonical unit), which way is
worse, a one-line definition, the report column it appears under, and — for latency percentiles
— the quantile label of Triton's Prometheus summary that measures the same thing server-side.
The SLA parser (:mod:`tritonkit.perf.judge.sla`), the verdicts, the reports and ``perf compare``
read it; adding a metric is one entry here.

Pure data and the standard library only (and Triton's metric table, for the summary quantiles):
importing it loads no plotting, templating or client library. ``tritonkit.deploy`` reads it for
its alert rules: a latency percentile's alert watches the quantile its entry names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tritonkit.triton_metrics import summary_quantile

__all__ = ["LATENCY_STATS", "METRICS", "PERCENTILES", "PER_REQUEST_TIMES", "Bound", "Kind", "Metric", "Mode", "metric", "metrics_for"]

Kind = Literal["time", "rate", "count", "fraction"]
Bound = Literal["upper", "lower"]
Mode = Literal["classic", "llm"]

_UNITS: dict[str, str] = {"time": "ms", "rate": "/s", "count": "", "fraction": ""}


@dataclass(frozen=True)
class Metric:
    """One metric: what it is, how it is written, judged, reported and exported.

    ``bound``: ``"upper"`` when only ``<=``, ``<`` and ``==`` make sense in an SLA (latency,
    errors: a rise is worse), ``"lower"`` when only ``>=`` / ``>`` do (throughput: a drop is worse).
    ``modes``: the kinds of run that measure it. ``column``: its report column header (``None``:
    not a column of its own). ``prometheus_quantile``: the ``quantile`` label of Triton's request
    latency summary for the same percentile (``None``: no server-side counterpart).
    """

    name: str
    kind: Kind
    description: str
    bound: Bound
    aliases: tuple[str, ...] = ()
    definition: str = ""
    modes: tuple[Mode, ...] = ("classic",)
    column: str | None = None
    prometheus_quantile: str | None = None

    @property
    def unit(self) -> str:
        """The canonical unit values are stored and printed in (``ms``, ``/s``, or none)."""
        return _UNITS[self.kind]

    @property
    def worse_when(self) -> Literal["rise", "drop"]:
        """Which change of the value is a regression."""
        return "rise" if self.bound == "upper" else "drop"


_FRACTIONS = {"p50": 0.50, "p90": 0.90, "p95": 0.95, "p99": 0.99}
#: The latency percentiles tritonkit reports and judges (each ``pNN_ms`` in a latency record).
PERCENTILES: tuple[str, ...] = tuple(_FRACTIONS)
#: The statistics of a latency distribution an SLA can bound: the percentiles and the mean.
LATENCY_STATS: tuple[str, ...] = (*PERCENTILES, "mean")
_BOTH: tuple[Mode, ...] = ("classic", "llm")
_LLM: tuple[Mode, ...] = ("llm",)

#: The per-request LLM times: SLA prefix → (long name, report label, definition).
PER_REQUEST_TIMES: dict[str, tuple[str, str, str]] = {
    "ttft": ("time to first token", "TTFT", "first response carrying a token − request sent"),
    "itl": ("inter token latency", "ITL",
            "(request latency − TTFT) / (output tokens − 1), over requests with at least two tokens"),
}


def _entries() -> tuple[Metric, ...]:
    latency = tuple(
        Metric(stat, "time", f"{stat} latency", "upper", (f"{stat}_latency", f"latency_{stat}", *extra),
               definition=f"{stat} of the end-to-end request latency the client saw", modes=_BOTH,
               column=f"{stat} (ms)", prometheus_quantile=summary_quantile(_FRACTIONS[stat]))
        for stat, extra in (("p50", ("median",)), ("p90", ()), ("p95", ()), ("p99", ()))
    )
    llm_times = tuple(
        Metric(f"{short}_{stat}", "time", f"{stat} {long}", "upper", (f"{long.replace(' ', '_')}_{stat}",),
               definition=f"{stat} over requests of {label}: {definition}", modes=_LLM,
               column=f"{label} {stat} (ms)")
        for short, (long, label, definition) in PER_REQUEST_TIMES.items()
        for stat in LATENCY_STATS
    )
    return (
        *latency,
        Metric("mean", "time", "mean latency", "upper", ("avg", "average", "latency", "mean_latency"),
               definition="mean end-to-end request latency the client saw", modes=_BOTH, column="mean (ms)"),
        Metric("queue", "time", "mean server queue time", "upper", ("queue_time", "server_queue"),
               definition="mean time a request waited in the server's queue", column="queue (ms)"),
        Metric("throughput", "rate", "throughput", "lower", ("qps", "rps", "ips", "infer_per_s"),
               definition="inferences per second (answered requests per second in an LLM run)", modes=_BOTH,
               column="throughput (infer/s)"),
        Metric("errors", "count", "failed requests", "upper", ("error", "failures", "error_count"),
               definition="requests that failed in the step, as the client or the server counted them", modes=_BOTH,
               column="errors"),
        Metric("error_rate", "fraction", "error rate", "upper", ("errors_rate", "failure_rate"),
               definition="failed requests / all requests of the step", modes=_BOTH),
        Metric("rejected", "fraction", "rejected share", "upper",
               ("rejected_rate", "reject_rate", "rejection_rate", "rejected_share", "rejections"),
               definition="requests the dynamic batcher's queue policy refused (its queue full, or a wait past its "
                          "timeout) / all requests of the step; bounding it lets those rejections pass the errors "
                          "bound, which then counts the other failures", column="rejected"),
        *llm_times,
        Metric("tokens_per_s", "rate", "output token throughput", "lower", ("output_tokens_per_s", "token_throughput"),
               definition="Σ output tokens / (last response − first request sent), over the step", modes=_LLM,
               column="output tokens/s"),
        Metric("user_tokens_per_s", "rate", "per-user tokens/s (1 / ITL, median)", "lower",
               ("tokens_per_s_per_user",), definition="1 / ITL: the speed one reader sees", modes=_LLM,
               column="per-user tok/s p50"),
        Metric("goodput", "rate", "requests/s meeting every per-request objective", "lower", ("goodput_per_s",),
               definition="requests meeting every per-request objective, each judged on its own, / the same span",
               modes=_LLM, column="goodput /s"),
    )


#: Every metric, by canonical name.
METRICS: dict[str, Metric] = {m.name: m for m in _entries()}

_BY_SPELLING: dict[str, str] = {alias: m.name for m in METRICS.values() for alias in (m.name, *m.aliases)}


def metric(name: str) -> Metric | None:
    """The metric ``name`` (or one of its aliases, any case) stands for; ``None`` when none."""
    canonical = _BY_SPELLING.get(name.strip().lower())
    return None if canonical is None else METRICS[canonical]


def metrics_for(mode: Mode) -> tuple[Metric, ...]:
    """The metrics a run of ``mode`` measures, in registry order."""
    return tuple(m for m in METRICS.values() if mode in m.modes)
