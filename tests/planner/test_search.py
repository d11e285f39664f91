"""The deployment search: what it enumerates, how it scores, the costs it pays, what it refuses.

The planner runs no GPU: these check the arithmetic against the quantities it is made of and the
search's choices against each other; ``test_published.py`` holds it to published measurements.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from tests.planner.test_plan import _model
from tritonkit.errors import PlanError
from tritonkit.planner import PlanAssumptions, Workload, find_gpu, find_precision, plan_llm
from tritonkit.planner.costs import Comm, md1_wait_s
from tritonkit.planner.llm_roofline import build_replica
from tritonkit.planner.search import SearchSpace, pareto_front, search_deployments

H200, BF16 = find_gpu("H200"), find_precision("bf16")
SLA_30_MS = Workload(target_qps=16, input_tokens=1024, output_tokens=256, tokens_per_s_per_user=33.3)


def test_70b_on_h200_at_30_ms_per_token_needs_a_handful_of_gpus_not_hundreds() -> None:
    # Before the search: TP 2 at one sequence per replica, 406 GPUs. NVIDIA's model answers 8.
    llama70 = _model("llama-3-70b")
    plan = plan_llm(llama70, H200, BF16, SLA_30_MS, search=SearchSpace())
    assert 4 <= plan.value("gpus_needed") <= 16
    assert plan.search is not None and plan.search.best is not None
    best = plan.search.best
    assert best.tokens_per_s_per_user >= 33.3 and best.batch > 1
    assert plan.value("concurrent_sequences") == best.batch == plan.suggestion.max_batch_size
    assert plan.suggestion.tensor_parallel == best.tensor_parallel == plan.inputs["tensor_parallel"]


def test_the_best_needs_no_more_gpus_than_any_candidate_that_meets_the_sla() -> None:
    found = search_deployments(_model("llama-3-70b"), H200, BF16, SLA_30_MS)
    assert found.best is not None and found.best.gpus is not None
    meeting = [c for c in found.candidates if c.meets_sla]
    assert meeting and all(c.gpus is not None and c.gpus >= found.best.gpus for c in meeting)
    assert found.runner_up is not None and found.runner_up.config_key() != found.best.config_key()
    # both kinds of serving were tried
    assert {c.mode for c in found.candidates} == {"aggregated", "disaggregated"}
    assert {c.chunked_prefill for c in found.candidates if c.mode == "aggregated"} == {False, True}


def test_tp_pins_the_search_and_a_list_of_kv_dtypes_is_searched() -> None:
    a = PlanAssumptions(tensor_parallel=4)
    plan = plan_llm(_model("llama-3-70b"), H200, BF16, SLA_30_MS, a,
                    search=SearchSpace(kv_dtypes=("bf16", "fp8")))
    assert plan.search is not None
    assert {c.tensor_parallel for c in plan.search.candidates if c.mode == "aggregated"} == {4}
    assert {c.kv_dtype for c in plan.search.candidates} == {"bf16", "fp8"}
    assert plan.value("tensor_parallel") == 4
    assert "chosen by the search (allowed: bf16, fp8" in plan.line("kv_bytes_per_token").note


def test_the_pareto_curve_holds_no_point_another_beats_on_both_axes() -> None:
    found = search_deployments(_model("llama-3-70b"), H200, BF16, SLA_30_MS)
    front = found.pareto
    assert len(front) >= 3
    for point in front:
        assert not any(c.tokens_per_s_per_user > point.tokens_per_s_per_user
                       and c.tokens_per_s_per_gpu > point.tokens_per_s_per_gpu for c in found.candidates)
    speeds = [c.tokens_per_s_per_user for c in front]
    assert speeds == sorted(speeds, reverse=True)
    assert pareto_front([]) == []


def test_disaggregated_candidates_count_prefill_and_decode_gpus_and_queue_the_prompts() -> None:
    found = search_deployments(_model("llama-3-70b"), H200, BF16, SLA_30_MS)
    disagg = [c for c in found.candidates if c.mode == "disaggregated"]
    assert disagg
    for c in disagg:
        assert c.workers and c.prefill_workers and c.prefill_tensor_parallel
        assert c.gpus == c.workers * c.tensor_parallel + c.prefill_workers * c.prefill_tensor_parallel
        # the prefill workers are sized below saturation, so the queue (and the TTFT) stays finite
        assert math.isfinite(c.ttft_ms) and c.ttft_ms > 0


def test_a_ttft_out_of_reach_is_refused_naming_the_closest_miss() -> None:
    workload = replace(SLA_30_MS, ttft_ms=1.0)
    with pytest.raises(PlanError) as err:
        plan_llm(_model("llama-3-70b"), H200, BF16, workload, search=SearchSpace())
    assert "meets the SLA" in str(err.value) and "TTFT" in str(err.value)


def test_a_tp_that_cannot_hold_the_weights_is_refused_with_a_tp_hint() -> None:
    with pytest.raises(PlanError) as err:
        plan_llm(_model("llama-3-70b"), find_gpu("L4"), BF16, SLA_30_MS, PlanAssumptions(tensor_parallel=1),
                 search=SearchSpace())
    assert "do not fit" in str(err.value) and "--tp" in (err.value.hint or "")


def test_weights_beyond_one_node_are_pipelined_across_nodes() -> None:
    big = replace(_model("llama-3-70b"), total_params=900_000_000_000, active_params=900_000_000_000)
    found = search_deployments(big, find_gpu("H100-SXM"), BF16, Workload(target_qps=1, output_tokens=128))
    assert found.candidates and all(c.pipeline_parallel > 1 for c in found.candidates)
    assert any("pipeline parallelism" in note for note in found.notes)


def test_tensor_parallel_pays_all_reduces_so_tp8_is_less_than_8_times_tp1() -> None:
    llama8 = _model("llama-3-8b")
    a = PlanAssumptions()

    def step(tp: int) -> float:
        kv = llama8.kv_bytes_per_token(2, tp)
        return build_replica(llama8, H200, BF16, a, tensor_parallel=tp, kv_per_token=kv, input_tokens=1024,
                             output_tokens=256, weights_override=None).decode_step_s(1)

    assert step(8) > step(1) / 8 * 1.2
    comm = Comm.of(llama8, H200, 8)
    # 2 all-reduces per layer, each at least the link's latency
    assert comm.step_s(1) >= 2 * llama8.num_layers * 8e-6
    assert Comm.of(llama8, H200, 1).step_s(1) == 0.0
    # over PCIe (L40S) the same all-reduces cost more than over NVLink (H200)
    assert Comm.of(llama8, find_gpu("L40S"), 8).step_s(64) > comm.step_s(64)


def test_the_prefill_queue_wait_is_md1_and_unbounded_at_saturation() -> None:
    assert md1_wait_s(0.0, 0.1) == 0.0
    assert md1_wait_s(5.0, 0.1) == pytest.approx(0.5 * 0.1 / (2 * 0.5))
    assert md1_wait_s(10.0, 0.1) == math.inf


def test_a_moe_model_tries_expert_parallelism_and_reads_its_busiest_rank() -> None:
    mixtral = _model("mixtral-8x7b")
    found = search_deployments(mixtral, find_gpu("H100-SXM"), BF16,
                               Workload(target_qps=20, input_tokens=512, output_tokens=256, tokens_per_s_per_user=20))
    eps = {c.expert_parallel for c in found.candidates if c.tensor_parallel > 1}
    assert eps == {1} | {c.tensor_parallel for c in found.candidates if c.tensor_parallel > 1}
    comm = Comm.of(mixtral, find_gpu("H100-SXM"), 4, 4)
    assert comm.expert_imbalance(4) > comm.expert_imbalance(4096) > 1.0


def test_without_a_target_the_search_ranks_by_tokens_per_gpu() -> None:
    found = search_deployments(_model("llama-3-8b"), H200, BF16, Workload(tokens_per_s_per_user=20))
    assert found.best is not None and found.best.gpus is None
    assert found.best.tokens_per_s_per_gpu == max(c.tokens_per_s_per_gpu for c in found.candidates if c.meets_sla)


def test_an_edge_board_is_searched_without_disaggregation_and_the_report_renders_as_markdown() -> None:
    from tritonkit.planner.hf_config import model_from_values
    from tritonkit.planner.model import ModelOverrides
    from tritonkit.planner.pareto import render_search_markdown

    model = model_from_values(ModelOverrides(num_layers=32, num_kv_heads=32, head_dim=128, total_params=7 * 10**9))
    found = search_deployments(model, find_gpu("JETSON-ORIN-64GB"), find_precision("q4_k_m"),
                               Workload(input_tokens=512, output_tokens=256, tokens_per_s_per_user=10),
                               weights_override=4 * 10**9)
    assert found.best is not None and {c.mode for c in found.candidates} == {"aggregated"}
    assert {c.tensor_parallel for c in found.candidates} == {1}
    table = render_search_markdown(found)
    assert table.splitlines()[0].startswith("| | deployment | tok/s/user")
    assert f"| best | {found.best.label()} |" in table
    assert table.count("| pareto |") == len(found.pareto)


def test_the_pareto_plot_is_written_as_svg_and_an_unknown_format_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tritonkit.errors import ConfigError
    from tritonkit.planner.pareto import plot_pareto

    found = search_deployments(_model("llama-3-8b"), H200, BF16, Workload(tokens_per_s_per_user=20))
    svg = plot_pareto(found, tmp_path / "curve.svg", title="llama-3-8b on H200")
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and "Pareto curve" in text
    with pytest.raises(ConfigError, match="cannot write a .txt plot"):
        plot_pareto(found, tmp_path / "curve.txt")
    assert not (tmp_path / "curve.txt").exists()


def test_a_given_efficiency_derates_the_searched_fleet() -> None:
    llama70 = _model("llama-3-70b")
    plain = plan_llm(llama70, H200, BF16, SLA_30_MS, search=SearchSpace())
    derated = plan_llm(llama70, H200, BF16, SLA_30_MS, PlanAssumptions(efficiency=0.5), search=SearchSpace())
    assert plain.value("efficiency") == 1.0 and derated.value("efficiency") == 0.5
    assert derated.line("efficiency").basis == "input"
    assert derated.value("gpus_needed") > plain.value("gpus_needed")
    assert derated.value("gpus_recommended") >= derated.value("gpus_needed")
