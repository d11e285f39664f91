"""Bootstrap intervals on the LLM headline figures, and a verdict that says when its margin is noise."""

from __future__ import annotations

import numpy as np

from tests.support.paths import DATA
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.llm.judge import evaluate_llm
from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.llm.timeline import FailureReport
from tritonkit.perf.measure.confidence import bootstrap_interval

MS = 1_000_000


def _result() -> LLMResult:
    """40 requests with TTFTs spread between 50 and 150 ms, 6 tokens 20 ms apart."""
    rng = np.random.default_rng(7)
    records = []
    for i, ttft in enumerate(rng.uniform(50, 150, size=40)):
        sent = i * 300 * MS
        records.append(RequestRecord(sent, tuple(int(sent + (ttft + 20 * k) * MS) for k in range(6)), (1,) * 6))
    return LLMResult("m", "u", True, "text", "synthetic", [LLMStep("concurrency", 1, compute_metrics(records),
                                                                   FailureReport())])


def test_the_interval_holds_the_figure_and_narrows_with_more_requests() -> None:
    rng = np.random.default_rng(1)
    few, many = rng.normal(100, 20, size=20), rng.normal(100, 20, size=2000)
    narrow, wide = bootstrap_interval(many, np.mean), bootstrap_interval(few, np.mean)
    assert narrow is not None and wide is not None
    assert narrow[0] <= float(np.mean(many)) <= narrow[1]
    assert narrow[1] - narrow[0] < (wide[1] - wide[0]) / 3
    assert bootstrap_interval([1.0], np.mean) is None  # one request has no spread


def test_each_headline_figure_carries_its_interval() -> None:
    m = _result().steps[0].metrics
    assert m is not None and m.ttft_ms is not None
    low, high = m.intervals["ttft_p99"]
    assert low <= m.ttft_ms.p99 <= high and low < high
    assert {"itl_p99", "tokens_per_s", "requests_per_s"} <= set(m.intervals)


def test_a_verdict_whose_limit_lies_inside_the_interval_says_its_margin_is_noise() -> None:
    result = _result()
    m = result.steps[0].metrics
    assert m is not None
    low, high = m.intervals["ttft_p99"]
    close = evaluate_llm(parse_sla(f"ttft_p99<={(low + high) / 2:.3f}ms"), result)
    assert "inside the noise" in close.summary()
    [check] = [c for c in close.steps[0].checks if c.constraint.metric == "ttft_p99"]
    assert check.within_noise and check.to_dict()["within_noise"] is True
    far = evaluate_llm(parse_sla(f"ttft_p99<={high * 3:.0f}ms"), result)
    assert far.passed and "inside the noise" not in far.summary()


def test_a_classic_step_carries_its_throughput_spread_over_the_measured_windows() -> None:
    """perf_analyzer 2.60's real files (tests/data/perf), recorded against the bundled server."""

    from tritonkit.perf.judge.verdict import evaluate, measurement_from_step
    from tritonkit.perf.measure.parse import build_steps, parse_csv, parse_profile_export

    data = DATA / "perf"
    experiments = parse_profile_export(data / "concurrency_verbose.json")
    assert all(sum(e.window_counts) == e.request_count for e in experiments)
    steps = build_steps(parse_csv(data / "concurrency_verbose.csv"), experiments)
    measured = [s for s in steps if s.throughput_interval_per_s is not None]
    assert measured
    for step in measured:
        low, high = step.throughput_interval_per_s or (0.0, 0.0)
        assert step.throughput_per_s is not None and 0 < low <= high
        # perf_analyzer's own figure is the requests of the same windows over their length.
        assert low * 0.9 <= step.throughput_per_s <= high * 1.1
    step = measured[0]
    low, high = step.throughput_interval_per_s or (0.0, 0.0)
    assert high > low  # three windows of 97, 104 and 105 requests: a real spread
    close = evaluate(parse_sla(f"throughput>={(low + high) / 2:.6f}/s"), [measurement_from_step(step)])
    assert close.steps[0].checks[0].within_noise
    far = evaluate(parse_sla(f"throughput>={low / 2:.6f}/s"), [measurement_from_step(step)])
    assert far.passed and not far.steps[0].checks[0].within_noise
