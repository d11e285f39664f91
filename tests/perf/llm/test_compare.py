"""Comparing an LLM run with its baseline: TTFT / ITL rises and token-throughput drops gate a build,
each judged on the interval of its change (the runs' bootstrap intervals, widened by the spread
between single runs), as the classic gate is."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.judge.compare import DEFAULT_RUN_NOISE
from tritonkit.perf.llm.compare import (
    DEFAULT_TAIL_RUN_NOISE,
    ENGINE_RUN_NOISE,
    ENGINE_TAIL_RUN_NOISE,
    compare_llm_files,
    compare_llm_results,
    default_noise,
    latest_llm_baseline,
    llm_compare_limits,
    run_kind,
    save_llm_baseline,
)
from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.llm.timeline import FailureReport

MS = 1_000_000


def _result(first_ms: float, interval_ms: float, *, started: str = "2026-11-30T10:00:00.000000Z",
            count: int = 400) -> LLMResult:
    """``count`` identical closed-loop requests (400: enough for a p99 with a known upper bound)."""
    span_ms = first_ms + 5 * interval_ms  # closed loop: each request sent when the previous ended
    records = [
        RequestRecord(int(i * span_ms * MS), tuple(int((i * span_ms + first_ms + k * interval_ms) * MS) for k in range(6)),
                      (1,) * 6)
        for i in range(count)
    ]
    step = LLMStep("concurrency", 1, compute_metrics(records), FailureReport())
    return LLMResult("m", "u", True, "text", "synthetic", [step], started_utc=started)


def _noisy(first_ms: float, interval_ms: float, *, seed: int, count: int = 400, spread: float = 0.10) -> LLMResult:
    """``count`` closed-loop requests of 6 tokens whose TTFT and token gaps vary (log-normal, ``spread``)."""
    rng = np.random.default_rng(seed)
    records, now_ms = [], 0.0
    for _ in range(count):
        first = first_ms * float(rng.lognormal(0.0, spread))
        gaps = np.cumsum(interval_ms * rng.lognormal(0.0, spread, size=5))
        times = [now_ms + first, *(now_ms + first + gaps)]
        records.append(RequestRecord(int(now_ms * MS), tuple(int(t * MS) for t in times), (1,) * 6))
        now_ms = times[-1]
    step = LLMStep("concurrency", 1, compute_metrics(records), FailureReport())
    return LLMResult("m", "u", True, "text", "synthetic", [step], started_utc="2026-11-30T10:00:00.000000Z")


def test_the_same_run_is_no_regression_on_its_requests_and_inside_the_noise_between_single_runs() -> None:
    comparison = compare_llm_results(_result(100, 20), _result(100, 20), run_noise=0.0, tail_run_noise=0.0)
    assert comparison.passed and comparison.exit_code == 0 and comparison.outcome == "no regression"
    assert {r.metric for r in comparison.rows} == {"ttft_p99", "itl_p99", "tokens_per_s"}
    assert all(r.change_interval == pytest.approx((0.0, 0.0)) for r in comparison.rows)
    # Two single runs of one build differ by ~5 % each (the default --run-noise): a 5 % limit on
    # tokens/s then lies inside the interval of "no change" — not a pass, not a regression.
    default = compare_llm_results(_result(100, 20), _result(100, 20))
    assert default.outcome == "inside the noise" and default.exit_code == 3 and not default.passed
    assert not default.regressions and "INSIDE THE NOISE" in default.summary()
    tokens = next(r for r in default.rows if r.metric == "tokens_per_s")
    assert tokens.change_interval is not None and tokens.change_interval[0] < -0.05 < 0 < tokens.change_interval[1]


def test_noisy_runs_of_one_build_are_never_a_regression_and_a_real_slowdown_always_is() -> None:
    # 400 requests each, TTFT and token gaps spread 10 %: the p99s' bootstrap intervals are wide.
    bases = [_noisy(100, 20, seed=seed) for seed in range(6)]
    for seed, (base, new) in enumerate(zip(bases, bases[1:], strict=False), start=100):
        same = compare_llm_results(base, new)
        assert not same.regressions, same.summary()
        slower = compare_llm_results(base, _noisy(140, 30, seed=seed))
        assert {r.metric for r in slower.regressions} >= {"ttft_p99", "itl_p99", "tokens_per_s"}, slower.summary()
        for row in slower.regressions:
            assert row.change_interval is not None and (row.change_interval[0] > 0 or row.change_interval[1] < 0)


def test_a_change_near_the_limit_is_inside_the_noise_and_never_kept_as_a_baseline(tmp_path: Path) -> None:
    base, new = _noisy(100, 20, seed=1), _noisy(108, 20, seed=2)
    comparison = compare_llm_results(base, new, limits={"ttft_p99": 0.10})
    (row,) = comparison.rows
    assert row.outcome == "inside the noise" and row.unsure is not None and "95% interval" in row.unsure
    assert row.change_interval is not None and row.change_interval[0] < 0.10 < row.change_interval[1]
    base_file, new_file = base.save(tmp_path / "base.json"), new.save(tmp_path / "new.json")
    found, _, _, saved = compare_llm_files(base_file, new_file, max_rise=0.10, max_drop=0.05,
                                           baseline_root=tmp_path / "baselines")
    assert found.exit_code == 3 and saved is None and not (tmp_path / "baselines").exists()


def test_a_result_without_intervals_is_judged_on_its_figures_alone() -> None:
    base, new = _noisy(100, 20, seed=1), _noisy(108, 20, seed=2)
    for result in (base, new):
        metrics = result.steps[0].metrics
        assert metrics is not None
        result.steps[0].metrics = replace(metrics, intervals={})  # as a result written before intervals
    comparison = compare_llm_results(base, new, limits={"ttft_p99": 0.10, "tokens_per_s": 0.05})
    assert all(r.change_interval is None for r in comparison.rows)
    ttft = next(r for r in comparison.rows if r.metric == "ttft_p99")
    assert ttft.change is not None and ttft.regressed == (ttft.change > 0.10)
    assert comparison.outcome in ("regression", "no regression")  # figures alone are never unsure


def test_a_goodput_of_nothing_in_the_baseline_leaves_nothing_to_lose() -> None:
    base, new = _result(100, 20), _result(100, 20)
    for result in (base, new):
        metrics = result.steps[0].metrics
        assert metrics is not None
        result.steps[0].metrics = replace(metrics, goodput_per_s=0.0)
    (row,) = compare_llm_results(base, new, limits={"goodput": 0.05}).rows
    assert row.metric == "goodput" and not row.regressed and row.change is None


def test_a_run_noise_outside_zero_to_one_is_refused_naming_the_option() -> None:
    with pytest.raises(ConfigError, match="--run-noise"):
        compare_llm_results(_result(100, 20), _result(100, 20), run_noise=1.5)


def test_a_slower_first_token_beyond_the_limit_and_the_noise_is_a_regression() -> None:
    limits = llm_compare_limits(max_rise=0.10, max_drop=0.5)
    comparison = compare_llm_results(_result(100, 20), _result(150, 20), limits=limits)
    assert [r.metric for r in comparison.regressions] == ["ttft_p99"]
    assert comparison.exit_code == 1 and "ttft_p99 +50.0%" in comparison.summary()
    # +30 %: past the limit as measured, but two single runs' tails spread 10 % each (the default
    # --tail-run-noise), so a rise that size could be none at all.
    closer = compare_llm_results(_result(100, 20), _result(130, 20), limits=limits)
    [row] = [r for r in closer.rows if r.metric == "ttft_p99"]
    assert row.outcome == "inside the noise" and row.change_interval is not None and row.change_interval[0] < 0
    assert compare_llm_results(_result(100, 20), _result(130, 20), limits=limits, tail_run_noise=0.05).regressions


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


def test_a_tail_percentile_of_too_few_requests_is_inside_the_noise_and_says_how_many_it_needs() -> None:
    # 64 requests: the p99 is their largest, and the next run's largest can be anywhere above it.
    base, slower = _noisy(100, 20, seed=1, count=64), _noisy(140, 30, seed=2, count=64)
    comparison = compare_llm_results(base, slower)
    rows = {r.metric: r for r in comparison.rows}
    for metric in ("ttft_p99", "itl_p99"):
        assert rows[metric].outcome == "inside the noise" and rows[metric].change_interval is None
        assert rows[metric].unsure is not None and "381 requests per level" in rows[metric].unsure
    assert rows["tokens_per_s"].regressed  # a rate of 64 requests is known well enough: caught
    # p90 needs 35: over 64 requests its upper bound is known; a run keeps no interval for it, so
    # its two figures decide, and the slowdown is a regression.
    p90 = compare_llm_results(base, slower, limits={"ttft_p90": 0.10})
    assert p90.rows[0].regressed and p90.rows[0].change_interval is None


# ---- runs on an OpenAI endpoint: an engine's noise ----------------------------------------------

_OPENAI = "OpenAI v1/chat/completions over HTTP (streamed)"


def _engine(first_ms: float, interval_ms: float, *, seed: int) -> LLMResult:
    """A run on an OpenAI endpoint (its recorded layout says so), 400 requests spread 10 %."""
    return replace(_noisy(first_ms, interval_ms, seed=seed), layout=_OPENAI)


def test_the_kind_of_run_is_read_from_the_result_and_picks_the_default_noise() -> None:
    triton, engine = _result(100, 20), _engine(100, 20, seed=1)
    assert (run_kind(triton), run_kind(engine)) == ("triton", "openai")
    assert default_noise(triton, triton) == (DEFAULT_RUN_NOISE, DEFAULT_TAIL_RUN_NOISE)
    assert default_noise(triton, engine) == (ENGINE_RUN_NOISE, ENGINE_TAIL_RUN_NOISE)
    assert ENGINE_RUN_NOISE > DEFAULT_RUN_NOISE and ENGINE_TAIL_RUN_NOISE > DEFAULT_TAIL_RUN_NOISE
    found = compare_llm_results(engine, engine)
    assert (found.run_noise, found.tail_run_noise, found.kind) == (ENGINE_RUN_NOISE, ENGINE_TAIL_RUN_NOISE, "openai")
    assert not found.noise_named and found.single_runs and found.to_dict()["kind"] == "openai"
    # A named spread is used as named, for an engine's runs too.
    named = compare_llm_results(engine, engine, run_noise=0.02, tail_run_noise=0.04)
    assert (named.run_noise, named.tail_run_noise, named.noise_named) == (0.02, 0.04, True)


def test_a_slowdown_inside_an_engines_noise_between_single_runs_is_inside_the_noise_saying_to_repeat() -> None:
    """20 % slower on every token (TTFT and ITL × 1.2, tokens/s ÷ 1.2): past each limit as measured,
    but within what single runs on an engine spread by between runs of one build."""
    base, slower = _engine(100, 20, seed=1), _engine(120, 24, seed=2)
    found = compare_llm_results(base, slower)
    assert found.outcome == "inside the noise" and found.exit_code == 3 and not found.regressions
    tokens = next(r for r in found.rows if r.metric == "tokens_per_s")
    assert tokens.change is not None and tokens.change < -0.05  # past its limit, as measured
    summary = found.summary()
    assert re.search(r"tokens_per_s -1\d\.\d% past its limit", summary), summary
    assert "--repeat 3" in summary and "--run-noise" in summary and "--tail-run-noise" in summary
    # The same runs with the spread named small enough: the gate calls it.
    assert compare_llm_results(base, slower, run_noise=0.02, tail_run_noise=0.04).outcome == "regression"
    # Triton-protocol runs of the same figures keep their own (smaller) default and its advice.
    triton = compare_llm_results(replace(base, layout="text"), replace(slower, layout="text"))
    assert triton.run_noise == DEFAULT_RUN_NOISE and "--repeat 3" not in triton.summary()


def test_a_three_times_slower_engine_build_is_a_regression_even_with_the_engines_noise() -> None:
    """tokens/s a third of the base's: far past its noise. The tails' spread is so wide on an engine
    that even a tripled p99 lies inside it; the rate decides."""
    found = compare_llm_results(_engine(100, 20, seed=1), _engine(300, 60, seed=2))
    assert found.exit_code == 1 and "tokens_per_s" in {r.metric for r in found.regressions}


def test_repeated_engine_runs_are_judged_on_their_own_spread_without_the_advice_to_repeat() -> None:
    from tritonkit.perf.llm.repeats import combine_llm_runs

    base = combine_llm_runs([_engine(100, 20, seed=s) for s in (1, 2, 3)])
    slower = combine_llm_runs([_engine(120, 24, seed=s) for s in (4, 5, 6)])
    found = compare_llm_results(base, slower)
    assert not found.single_runs and "--repeat 3" not in found.summary()
    assert "tokens_per_s" in {r.metric for r in found.regressions}


def test_perf_compare_on_stored_engine_runs_uses_the_engine_noise_unless_one_is_named(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from tritonkit.cli import main

    base = _engine(100, 20, seed=1).save(tmp_path / "base" / "llm_result.json")
    new = _engine(120, 24, seed=2).save(tmp_path / "new" / "llm_result.json")
    unnamed = CliRunner().invoke(main, ["perf", "compare", str(base.parent), str(new.parent)], catch_exceptions=False)
    assert unnamed.exit_code == 3, unnamed.output
    assert "INSIDE THE NOISE" in unnamed.output and "perf run --llm --repeat 3" in unnamed.output
    named = CliRunner().invoke(main, ["perf", "compare", str(base.parent), str(new.parent), "--run-noise", "2%",
                                      "--tail-run-noise", "4%", "--json"], catch_exceptions=False)
    assert named.exit_code == 1, named.output
    assert '"noise_named": true' in named.output and '"kind": "openai"' in named.output


def test_the_engines_own_figures_are_put_beside_a_comparison_not_gated() -> None:
    base, new = _result(100, 20), _result(100, 20)
    base.steps[0].engine = {"ttft_ms": {"mean": 40.0, "count": 400}, "itl_ms": {"mean": 5.0, "count": 2000},
                            "prefix_cache_hit_rate": 0.0}
    new.steps[0].engine = {"ttft_ms": {"mean": 60.0, "count": 400}, "prefix_cache_hit_rate": 0.5}
    comparison = compare_llm_results(base, new, run_noise=0.0, tail_run_noise=0.0)
    assert comparison.engine == (("concurrency 1", "ttft_ms", 40.0, 60.0), ("concurrency 1", "prefix_cache_hit_rate", 0.0, 0.5))
    assert comparison.passed and comparison.to_dict()["engine"][0] == ["concurrency 1", "ttft_ms", 40.0, 60.0]
    assert compare_llm_results(_result(100, 20), new).engine == ()
