"""Calibrating prefill and decode step costs and the KV wall from streamed requests of known cost.

The requests are synthetic (no LLM engine runs on these machines): each is generated from a
known prefill and decode cost with a little noise, so the fit has a right answer to find.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from tritonkit.errors import PlanError
from tritonkit.planner import (
    StreamedRequest,
    fit_llm_costs,
    max_concurrency_within,
    predict_llm,
    streamed_requests,
)

# Truth: prefill 20 ms + 0.1 ms/token; decode step 15 ms + 0.5 ms per running sequence.
P0, P1, D0, D1 = 20.0, 0.1, 15.0, 0.5


def _requests(levels: list[int], *, wall: int | None = None, noise: float = 0.02, seed: int = 3) -> list[StreamedRequest]:
    rng = random.Random(seed)
    out: list[StreamedRequest] = []
    for c in levels:
        for _ in range(40):
            n = rng.choice([256, 512, 1024, 2048])
            m = rng.choice([128, 256])
            prefill = P0 + P1 * n
            step = D0 + D1 * c
            ttft = prefill + step
            itl = step + (c - 1) * (P0 + P1 * n) / 192  # 192 = the mean of the output lengths
            if wall is not None and c >= wall:
                ttft += 2000.0  # queued for KV space
            out.append(StreamedRequest(n, m, ttft * rng.uniform(1 - noise, 1 + noise),
                                       itl * rng.uniform(1 - noise, 1 + noise), c))
    return out


def test_the_fit_recovers_known_prefill_and_decode_costs() -> None:
    costs = fit_llm_costs(_requests([1, 4, 16, 32]))
    assert costs.prefill_fixed_ms == pytest.approx(P0, rel=0.15)
    assert costs.prefill_per_token_ms == pytest.approx(P1, rel=0.05)
    assert costs.decode_fixed_ms == pytest.approx(D0, rel=0.1)
    assert costs.decode_per_seq_ms == pytest.approx(D1, rel=0.1)
    assert costs.wall_at is None and "no wall" in costs.describe()


def test_predictions_at_another_concurrency_match_the_truth() -> None:
    costs = fit_llm_costs(_requests([1, 4, 16]))
    p = predict_llm(costs, 48, input_tokens=1024, output_tokens=192)
    true_step = D0 + D1 * 48
    assert p.ttft_ms == pytest.approx(P0 + P1 * 1024 + true_step, rel=0.05)
    assert p.itl_ms == pytest.approx(true_step + 47 * (P0 + P1 * 1024) / 192, rel=0.05)
    assert p.tokens_per_s_per_user == pytest.approx(1000 / p.itl_ms)


def test_a_ttft_jump_is_found_as_the_wall_and_left_out_of_the_fit() -> None:
    costs = fit_llm_costs(_requests([1, 4, 8, 16, 32, 64], wall=32))
    assert (costs.wall_above, costs.wall_at) == (16, 32)
    assert 32 not in costs.fitted_concurrencies and 64 not in costs.fitted_concurrencies
    assert costs.decode_per_seq_ms == pytest.approx(D1, rel=0.1)
    assert predict_llm(costs, 40, 512, 192).beyond_wall


def test_concurrent_sequences_at_the_sla_follow_the_targets_and_stop_below_the_wall() -> None:
    costs = fit_llm_costs(_requests([1, 4, 16, 32]))
    # ITL ≤ 60 ms at 512-token prompts: step(N) + (N − 1) · 71.2 / 192 ≤ 60 → N ≤ 52 by hand.
    n = max_concurrency_within(costs, 512, 192, itl_ms=60.0)
    assert n == pytest.approx(52, abs=2)
    walled = fit_llm_costs(_requests([1, 4, 8, 16, 32], wall=32))
    assert max_concurrency_within(walled, 512, 192, itl_ms=60.0) == 31
    assert max_concurrency_within(costs, 512, 192, ttft_ms=10.0) == 0


def test_one_concurrency_is_not_enough_to_calibrate() -> None:
    with pytest.raises(PlanError, match="two or more concurrencies"):
        fit_llm_costs(_requests([8]))


def test_request_records_of_a_streaming_run_become_calibration_input() -> None:
    @dataclass(frozen=True)
    class Record:  # the shape of one request record a streaming perf run keeps
        input_tokens: int | None
        output_tokens: int
        ttft_ms: float | None
        itl_ms: float | None

    records = [Record(512, 128, 90.0, 20.0), Record(None, 128, 90.0, 20.0), Record(512, 1, 90.0, None),
               Record(256, 64, None, None)]
    assert streamed_requests(records, 4) == [StreamedRequest(512, 128, 90.0, 20.0, 4)]
