"""The planner against published GPU measurements (NVIDIA's TensorRT-LLM performance overview).

No GPU runs here: the published figures are the measurement (their source is in
:mod:`tritonkit.planner.published`). Each case asks the planner for the GPUs that serve 8 times
the published load; the answer must be within 2× of 8 times the published GPUs.
"""

from __future__ import annotations

import math

import pytest

from tritonkit.planner import PlanAssumptions
from tritonkit.planner.costs import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
from tritonkit.planner.published import LATENCY_CASES, PUBLISHED_CASES, check_case, check_latency


@pytest.mark.parametrize("case", PUBLISHED_CASES, ids=lambda c: c.describe().split(":")[0])
def test_the_plan_needs_within_2x_of_the_published_gpus(case) -> None:  # type: ignore[no-untyped-def]
    check = check_case(case)
    assert 0.5 <= check.ratio <= 2.0, check.to_dict()


def test_at_least_three_models_and_two_gpus_are_held_to_published_figures() -> None:
    assert len({c.model.name for c in PUBLISHED_CASES}) >= 3
    assert len({c.gpu for c in PUBLISHED_CASES}) >= 2
    assert all(c.source and c.tokens_per_s > 0 for c in PUBLISHED_CASES)


def test_the_default_efficiencies_fit_the_published_cases_at_least_as_well_as_their_neighbours() -> None:
    def spread(bandwidth: float, compute: float) -> float:
        a = PlanAssumptions(bandwidth_efficiency=bandwidth, compute_efficiency=compute)
        return sum(abs(math.log(check_case(c, a).ratio)) for c in PUBLISHED_CASES) / len(PUBLISHED_CASES)

    bw, cp = DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
    assert (PlanAssumptions().bandwidth_efficiency, PlanAssumptions().compute_efficiency) == (bw, cp)
    calibrated = spread(bw, cp)
    for neighbour in ((bw - 0.1, cp), (bw + 0.15, cp), (bw, cp - 0.1), (bw, cp + 0.1), (0.8, 0.6)):
        assert calibrated <= spread(*neighbour), neighbour
    assert calibrated < 0.15


@pytest.mark.parametrize("case", [c for c in LATENCY_CASES if c.input_tokens >= 2048],
                         ids=lambda c: c.describe().split(":")[0])
def test_the_prefill_of_a_long_prompt_is_within_2x_of_the_published_first_token_latency(case) -> None:  # type: ignore[no-untyped-def]
    assert 0.5 <= check_latency(case) <= 2.0, case.describe()


def test_short_prompts_come_out_faster_than_published_as_the_roofline_lacks_fixed_step_costs() -> None:
    """Recorded, not hidden: at 128 tokens the prefill is a weight read plus per-kernel costs the roofline
    does not model, and the plan is optimistic there (0.35–0.8× of TensorRT-LLM v0.5's figures, the
    weights streamed at 0.8 of the datasheet)."""
    short = [check_latency(c) for c in LATENCY_CASES if c.input_tokens == 128]
    assert short and all(0.3 <= ratio < 1.0 for ratio in short)
