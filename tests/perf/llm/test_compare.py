"""Comparing an LLM run with its baseline: TTFT / ITL rises and token-throughput drops gate a build."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.llm.compare import (
    compare_llm_results,
    latest_llm_baseline,
    llm_compare_limits,
    save_llm_baseline,
)
from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.llm.timeline import FailureReport

MS = 1_000_000


def _result(first_ms: float, interval_ms: float, *, started: str = "2026-11-30T10:00:00.000000Z") -> LLMResult:
    span_ms = first_ms + 5 * interval_ms  # closed loop: each request sent when the previous ended
    records = [
        RequestRecord(int(i * span_ms * MS), tuple(int((i * span_ms + first_ms + k * interval_ms) * MS) for k in range(6)),
                      (1,) * 6)
        for i in range(8)
    ]
    step = LLMStep("concurrency", 1, compute_metrics(records), FailureReport())
    return LLMResult("m", "u", True, "text", "synthetic", [step], started_utc=started)


def test_the_same_run_is_no_regression() -> None:
    comparison = compare_llm_results(_result(100, 20), _result(100, 20))
    assert comparison.passed and comparison.exit_code == 0
    assert {r.metric for r in comparison.rows} == {"ttft_p99", "itl_p99", "tokens_per_s"}


def test_a_slower_first_token_beyond_the_limit_is_a_regression() -> None:
    limits = llm_compare_limits(max_rise=0.10, max_drop=0.5)
    comparison = compare_llm_results(_result(100, 20), _result(130, 20), limits=limits)
    assert [r.metric for r in comparison.regressions] == ["ttft_p99"]
    assert comparison.exit_code == 1 and "ttft_p99 +30.0%" in comparison.summary()


def test_slower_tokens_regress_itl_and_token_throughput() -> None:
    comparison = compare_llm_results(_result(100, 20), _result(100, 30))
    assert {r.metric for r in comparison.regressions} == {"itl_p99", "tokens_per_s"}


def test_the_limits_are_keyed_by_registry_names_and_the_registry_says_which_way_is_worse() -> None:
    assert llm_compare_limits(max_rise=0.2, max_drop=0.3) == {"ttft_p99": 0.2, "itl_p99": 0.2, "tokens_per_s": 0.3,
                                                              "goodput": 0.3}
    # Any LLM metric of the registry can be compared: the median TTFT here, which rose 30 %.
    comparison = compare_llm_results(_result(100, 20), _result(130, 20), limits={"ttft_p50": 0.25})
    assert [(r.metric, r.worse_when, r.regressed) for r in comparison.rows] == [("ttft_p50", "rise", True)]
    with pytest.raises(ConfigError, match="no LLM metric 'p99_ttft'") as info:
        compare_llm_results(_result(100, 20), _result(100, 20), limits={"p99_ttft": 0.1})
    assert info.value.hint is not None and "ttft_p99" in info.value.hint


def test_a_step_the_new_run_did_not_measure_is_a_regression() -> None:
    new = _result(100, 20)
    new.steps[0].metrics = None
    assert not compare_llm_results(_result(100, 20), new).passed


def test_baselines_are_kept_per_model_and_the_latest_is_found(tmp_path: Path) -> None:
    first = save_llm_baseline(_result(100, 20, started="2026-11-30T10:00:00.1Z"), tmp_path)
    second = save_llm_baseline(_result(100, 20, started="2026-11-30T11:00:00.1Z"), tmp_path)
    assert first != second and first.parent == second.parent == tmp_path / "m" / "llm"
    assert latest_llm_baseline("m", tmp_path) == second
    assert LLMResult.load(second).steps[0].metrics == _result(100, 20).steps[0].metrics


def test_a_nan_metric_is_a_regression_never_a_pass() -> None:
    from dataclasses import replace

    base = _result(100, 20)
    metrics = base.steps[0].metrics
    assert metrics is not None
    base.steps[0].metrics = replace(metrics, output_token_throughput_per_s=float("nan"))
    assert not compare_llm_results(base, _result(100, 40)).passed
    assert not compare_llm_results(_result(100, 20), base).passed


def test_a_stored_llm_result_with_an_infinite_ttft_is_refused_naming_the_field(tmp_path: Path) -> None:
    import json

    import pytest

    from tritonkit.errors import ConfigError

    path = _result(100, 20).save(tmp_path / "llm_result.json")
    data = json.loads(path.read_text())
    data["steps"][0]["metrics"]["ttft_ms"]["p99"] = float("inf")
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=r"steps\[0\]\.metrics\.ttft_ms\.p99"):
        LLMResult.load(path)
