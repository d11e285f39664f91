"""The SLA language's LLM terms, and LLM steps judged by the toolkit's one verdict engine."""

from __future__ import annotations

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import format_metric, parse_sla
from tritonkit.perf.llm.judge import evaluate_llm, goodput_slo_from_sla, llm_measurement
from tritonkit.perf.llm.metrics import GoodputSLO, RequestRecord, compute_metrics
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.llm.timeline import FailureReport, classify_failures

MS = 1_000_000


def _step(concurrency: int, ttft_ms: float, interval_ms: float, *, slo: GoodputSLO | None = None) -> LLMStep:
    span = ttft_ms + 4 * interval_ms
    records = [RequestRecord(int(i * span * MS), tuple(int((i * span + ttft_ms + k * interval_ms) * MS) for k in range(5)),
                             (1,) * 5) for i in range(10)]
    return LLMStep("concurrency", concurrency, compute_metrics(records, goodput_slo=slo), FailureReport())


def _result(*steps: LLMStep) -> LLMResult:
    return LLMResult("m", "u", True, "text", "synthetic", list(steps))


def test_the_sla_language_reads_llm_terms_in_canonical_units() -> None:
    sla = parse_sla("ttft_p99<=0.5s, itl_p50<=40ms, tokens_per_s>=200, user_tokens_per_s>=20/s, goodput>=2/s")
    assert [(c.metric, c.op, c.value) for c in sla.constraints] == [
        ("ttft_p99", "<=", 500.0), ("itl_p50", "<=", 40.0), ("tokens_per_s", ">=", 200.0),
        ("user_tokens_per_s", ">=", 20.0), ("goodput", ">=", 2.0),
    ]
    assert str(parse_sla("ttft_mean<=100ms").constraints[0]) == "ttft_mean<=100ms"
    assert format_metric("tokens_per_s", 250) == "250 tokens/s"
    assert format_metric("goodput", 2) == "2 req/s"


def test_llm_time_terms_need_a_unit_like_any_latency() -> None:
    with pytest.raises(ConfigError, match="no unit"):
        parse_sla("ttft_p99<=500")


def test_per_request_goodput_objectives_come_from_the_slas_upper_bounds() -> None:
    sla = parse_sla("ttft_p99<=500ms,ttft_p50<=300ms,itl_p99<=40ms,p99<=2s,goodput>=1/s,tokens_per_s>=10")
    assert goodput_slo_from_sla(sla) == GoodputSLO(ttft_ms=300.0, itl_ms=40.0, latency_ms=2000.0)
    assert goodput_slo_from_sla(parse_sla("tokens_per_s>=10")) is None


def test_llm_steps_are_judged_with_a_knee_at_the_highest_passing_concurrency() -> None:
    result = _result(_step(1, 100, 20), _step(2, 150, 20), _step(4, 400, 20))
    verdict = evaluate_llm(parse_sla("ttft_p99<=200ms,itl_p99<=30ms"), result)
    assert verdict.status == "pass" and verdict.knee_load == 2
    assert verdict.binding is not None and verdict.binding.constraint.metric == "ttft_p99"
    assert [s.status for s in verdict.steps] == ["pass", "pass", "fail"]


def test_goodput_and_token_throughput_are_sla_terms() -> None:
    slo = GoodputSLO(ttft_ms=120)
    step = _step(1, 100, 20, slo=slo)
    values = llm_measurement(step).values
    assert values["goodput"] == step.metrics.goodput_per_s if step.metrics else False
    assert values["throughput"] == step.metrics.request_throughput_per_s if step.metrics else False
    assert evaluate_llm(parse_sla("goodput>=50/s"), _result(step)).status == "fail"
    assert evaluate_llm(parse_sla("goodput>=1/s,tokens_per_s>=10"), _result(step)).status == "pass"


def test_failed_requests_fail_the_implicit_zero_errors_bound() -> None:
    step = _step(1, 100, 20)
    step.failures = classify_failures([RequestRecord(0, (900 * MS,), (1,))], client_deadline_ms=500)
    verdict = evaluate_llm(parse_sla("ttft_p99<=1s"), _result(step))
    assert verdict.status == "fail"
    assert verdict.binding is not None and verdict.binding.constraint.metric == "errors"
