"""One step judged as the ladder climbs (``judge_step``) and the ladder's stop rule
(``ladder_check``): the same judge and settings as the whole verdict. Pure: hand-made steps."""

from __future__ import annotations

from tritonkit.perf.judge import JudgeSettings, judge_step, ladder_check, parse_sla
from tritonkit.perf.judge.verdict import evaluate_result
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepMetrics, StepResult


def _step(thr: float | None, p99: float = 10.0, *, mode: str = "concurrency", load: float = 1, errors: int = 0,
          stable: bool = True, gpu_bytes: float | None = None) -> StepResult:
    latency = LatencyStats(p50_ms=p99, p90_ms=p99, p95_ms=p99, p99_ms=p99) if thr is not None else None
    metrics = StepMetrics(gpu_memory_used_bytes_max=gpu_bytes) if gpu_bytes is not None else None
    return StepResult(mode, load, thr, latency, request_count=100, error_count=errors, stable=stable,
                      metrics=metrics)


def test_the_ladder_stop_rule_ignores_throughput_floors_that_low_loads_miss_by_design() -> None:
    """Only limits that load makes worse stop a ladder."""
    check = ladder_check(parse_sla("p99<=50ms,throughput>=200/s").with_zero_errors())
    assert check(_step(thr=20, p99=10))  # too little throughput: not a break, keep climbing
    assert not check(_step(thr=300, p99=80))  # latency past its limit: a break
    assert not check(_step(thr=300, p99=10, errors=1))  # failed requests: a break
    assert ladder_check(parse_sla("throughput>=200/s"))(_step(thr=20, p99=999))


def test_a_rate_not_carried_or_memory_above_the_cap_breaks_even_without_an_upper_bound() -> None:
    check = ladder_check(parse_sla("throughput>=10/s"), JudgeSettings(max_gpu_memory_mb=1024))
    assert not check(_step(thr=50, mode="request_rate", load=200))  # carried 50 of 200
    assert check(_step(thr=195, mode="request_rate", load=200))  # 97.5 %: carried
    assert not check(_step(thr=50, gpu_bytes=2 * 2**30))  # 2048 MiB above 1024
    assert check(_step(thr=50, gpu_bytes=512 * 2**20))


def test_an_unstable_step_breaks_only_through_a_fact_never_through_its_latency() -> None:
    check = ladder_check(parse_sla("p99<=50ms"))
    assert check(_step(thr=300, p99=80, stable=False))  # unstable latency says nothing: no break
    assert not check(_step(thr=50, p99=80, stable=False, mode="request_rate", load=200))  # fell behind: a break


def test_the_stop_rule_reads_the_offered_rate_in_requests_for_batched_requests() -> None:
    check = ladder_check(parse_sla("p99<=50ms"), batch_size=4)
    assert check(_step(thr=780, mode="request_rate", load=200))  # 195 requests/s of 200
    assert not ladder_check(parse_sla("p99<=50ms"))(_step(thr=780, mode="request_rate", load=1000))


def test_a_step_judged_as_it_finishes_is_what_the_verdict_says_of_it() -> None:
    sla = parse_sla("p99<=50ms").with_zero_errors()
    judging = JudgeSettings(rate_tolerance=0.1)
    steps = [_step(99, mode="request_rate", load=100), _step(170, mode="request_rate", load=200),
             _step(180, p99=90, mode="request_rate", load=400)]
    result = PerfResult(RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="x"), steps=steps)
    verdict = evaluate_result(sla, result, judging)
    live = [judge_step(sla, s, judging) for s in steps]
    assert live == list(verdict.steps)
    assert [s.status for s in verdict.steps] == ["pass", "fail", "fail"]
    assert judge_step(None, steps[0]) is None
