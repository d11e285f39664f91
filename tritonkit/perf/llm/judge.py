"""Judge an LLM result against an SLA with the toolkit's one verdict engine.

Each step becomes a ``StepMeasurement`` whose values are the LLM metrics under their SLA names
(``ttft_p99``, ``itl_p50``, ``latency_p99``, ``tokens_per_s``, ``requests_per_s``, ``goodput``,
``user_tokens_per_s``) plus the classic ones (``p50``…``p99`` and ``mean`` of request latency,
``throughput`` = requests/s, ``errors``, ``error_rate``), so knee, binding constraint and headroom
work exactly as for any ladder. Every failure class counts as an error: a client that timed out
did not get its answer either.

The per-request objectives goodput needs come from the SLA's own upper bounds on TTFT, ITL and
request latency (``ttft_p99<=500ms`` → each request's TTFT ≤ 500 ms) unless given explicitly.

The criteria beyond the SLA (:class:`~tritonkit.perf.judge.JudgeSettings`) are the judge's as for
every run, and judge what an LLM step measures: no GPU memory figure (an LLM step scrapes no GPU
metrics), and no offered rate. A concurrency step is a closed loop; a traffic shape (ramp, spike,
soak, replay) is meant to outrun the server at times, and the requests it answered per second
count the generation of the last ones after the schedule ended, so they are no carried rate to
hold against the schedule's mean: how a shaped step falls behind and recovers is its recovery time.
"""

from __future__ import annotations

from tritonkit.perf.judge.criteria import JudgeSettings
from tritonkit.perf.judge.sla import SLA
from tritonkit.perf.judge.verdict import StepMeasurement, Verdict, evaluate
from tritonkit.perf.llm.metrics import GoodputSLO
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.metric_registry import LATENCY_STATS

__all__ = ["evaluate_llm", "goodput_slo_from_sla", "llm_measurement"]

_PER_REQUEST = {"ttft": "ttft_ms", "itl": "itl_ms", "latency": "latency_ms"}
#: The SLA's request-latency metrics (``latency_p99`` is spelled ``p99`` once parsed).
_LATENCY = frozenset(LATENCY_STATS)


def goodput_slo_from_sla(sla: SLA | None) -> GoodputSLO | None:
    """Per-request objectives from the SLA's upper bounds on TTFT / ITL / latency; ``None`` without any."""
    if sla is None:
        return None
    limits: dict[str, float] = {}
    for constraint in sla.constraints:
        if constraint.op not in ("<=", "<"):
            continue
        prefix = constraint.metric.split("_", 1)[0]
        if constraint.metric in _LATENCY:
            field = "latency_ms"
        elif prefix in _PER_REQUEST and "_" in constraint.metric:
            field = _PER_REQUEST[prefix]
        else:
            continue
        limits[field] = min(limits.get(field, constraint.value), constraint.value)
    return GoodputSLO(**limits) if limits else None


def llm_measurement(step: LLMStep) -> StepMeasurement:
    """What the SLA reads from one LLM step."""
    errors = float(step.failures.total)
    m = step.metrics
    total = float(m.request_count) if m is not None and m.request_count else 0.0
    values: dict[str, float | None] = {
        "errors": errors,
        "error_rate": errors / total if total else None,
    }
    measured = m is not None and m.answered_count > 0
    if m is not None and measured:
        values.update(m.sla_values())
        if m.latency_ms is not None:
            for stat in LATENCY_STATS:
                values[stat] = m.latency_ms.get(stat)
        values["throughput"] = m.request_throughput_per_s
    note = "" if measured else f"nothing answered ({step.failures.hit or 'no requests'})"
    intervals = m.sla_intervals() if m is not None and measured else {}
    return StepMeasurement(load=_offered_load(step), values=values, measured=measured or errors > 0, note=note,
                           intervals=intervals)


def _offered_load(step: LLMStep) -> float:
    """Concurrency, or for a traffic shape its mean offered rate (scheduled requests / schedule length)."""
    if step.load_mode == "concurrency" or not step.phases:
        return step.load_value
    end_s = max(float(p.get("end_s", 0.0)) for p in step.phases)
    count = sum(int(p.get("count", 0)) for p in step.phases)
    return count / end_s if end_s > 0 else step.load_value


def evaluate_llm(sla: SLA, result: LLMResult, judging: JudgeSettings | None = None) -> Verdict:
    """Judge every step of ``result`` against ``sla`` plus ``errors==0`` unless errors are bounded,
    and ``judging`` (see the module docstring), with the one judge every run has."""
    shaped = bool(result.steps) and result.steps[0].load_mode != "concurrency"
    load_kind = "request_rate" if shaped else "concurrency"
    return evaluate(sla.with_zero_errors(), [llm_measurement(s) for s in result.steps], load_kind=load_kind,
                    judging=judging)
