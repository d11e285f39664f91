"""Attention data parallelism beside expert parallelism for a MoE model: each GPU attends to its own
sequences (the KV cache not replicated, the non-expert weights on every GPU), the experts split over
the GPUs, across nodes where the weights need it."""

from __future__ import annotations

import pytest

from tests.support.paths import DATA
from tritonkit.planner import PlanAssumptions, Workload, plan_llm
from tritonkit.planner.capacity import GB
from tritonkit.planner.catalogue import find_gpu
from tritonkit.planner.costs import INTER_NODE_LINK, Comm
from tritonkit.planner.hf_config import load_hf_config, model_from_hf_config
from tritonkit.planner.placement import weights_for
from tritonkit.planner.precision import find_precision
from tritonkit.planner.search import SearchSpace, search_deployments

DEEPSEEK = model_from_hf_config(load_hf_config(DATA / "planner" / "deepseek-v3.json"))
FP8 = find_precision("fp8")
WORKLOAD = Workload(target_qps=10, input_tokens=1024, output_tokens=256, ttft_ms=1000, tokens_per_s_per_user=33)


def test_attention_dp_keeps_one_copy_of_the_latent_kv_and_a_copy_of_the_non_expert_weights_per_gpu() -> None:
    shared = DEEPSEEK.total_params - DEEPSEEK.expert_params
    assert weights_for(DEEPSEEK, FP8, None, 8) == pytest.approx(DEEPSEEK.total_params + 7 * shared, abs=1)
    a = PlanAssumptions(tensor_parallel=8, expert_parallel=8, attention_dp=True, kv_dtype="fp8")
    dp = plan_llm(DEEPSEEK, find_gpu("H200"), FP8, WORKLOAD, a)
    tp = plan_llm(DEEPSEEK, find_gpu("H200"), FP8, WORKLOAD, PlanAssumptions(tensor_parallel=8, kv_dtype="fp8"))
    assert dp.value("kv_bytes_per_sequence") == 35_136 * 1280  # not replicated over the 8 GPUs
    assert tp.value("kv_bytes_per_sequence") == 8 * 35_136 * 1280  # the latent whole on every TP rank
    assert dp.value("max_sequences_by_memory") > 4 * tp.value("max_sequences_by_memory")
    assert dp.value("weights_bytes") > tp.value("weights_bytes") + 7 * shared * 0.99  # the copies counted
    engines = dp.engines
    assert engines["trtllm_llmapi"]["enable_attention_dp"] is True
    assert engines["trtllm_llmapi"]["moe_expert_parallel_size"] == 8
    assert engines["vllm"]["data_parallel_size"] == 8 and engines["vllm"]["tensor_parallel_size"] == 1


def test_the_search_scores_attention_dp_with_ep_for_a_moe_model_and_labels_it_so() -> None:
    found = search_deployments(DEEPSEEK, find_gpu("H200"), FP8, WORKLOAD, space=SearchSpace(kv_dtypes=("fp8",)))
    dp = [c for c in found.candidates if c.attention_dp]
    assert dp and all(c.label().startswith(("agg DP8·EP8", "disagg P:TP")) for c in dp)
    assert all(c.expert_parallel == c.tensor_parallel == 8 for c in dp)
    dense = model_from_hf_config(load_hf_config(DATA / "planner" / "llama-3-8b.json"))
    assert not any(c.attention_dp for c in search_deployments(dense, find_gpu("H200"), FP8, WORKLOAD).candidates)


def test_where_one_node_cannot_hold_the_experts_the_attention_dp_spans_nodes_over_the_inter_node_link() -> None:
    bf16 = find_precision("bf16")  # 1.34 TB of weights, and a copy of the non-expert ones per GPU: over 16 H100s
    found = search_deployments(DEEPSEEK, find_gpu("H100-SXM"), bf16, WORKLOAD, space=SearchSpace(kv_dtypes=("fp8",)))
    wide = [c for c in found.candidates if c.attention_dp]
    assert wide and {c.tensor_parallel for c in wide} == {32}
    comm = Comm.of(DEEPSEEK, find_gpu("H100-SXM"), 32, 32, data_parallel=32)
    assert comm.link is INTER_NODE_LINK and comm.tensor_parallel == 1
    assert INTER_NODE_LINK.bandwidth_gb_s * GB == 50 * GB and "ConnectX-7" in INTER_NODE_LINK.bandwidth.source
    # no all-reduce for the attention; each GPU sends only its own tokens to the experts
    assert comm.step_s(64) < Comm.of(DEEPSEEK, find_gpu("H100-SXM"), 32, 32).step_s(64)


def test_the_catalogue_plans_with_measured_all_reduces_and_the_l40s_usable_memory() -> None:
    l40s = find_gpu("L40S")
    assert l40s.memory_gib == pytest.approx(44.99, abs=0.01) and "AIConfigurator" in l40s.memory.source
    assert l40s.link is not None and l40s.link.allreduce(8) == (1.5, 42.0) and l40s.link.allreduce(2)[0] == 19.9
    assert l40s.link.allreduce(3) == (l40s.link.bandwidth_gb_s, l40s.link.latency_us)  # none measured: datasheet
    # so TP 8 over PCIe pays for it: eight L40S all-reduce far slower than two
    slow, fast = Comm.of(DEEPSEEK, l40s, 8), Comm.of(DEEPSEEK, l40s, 2)
    assert slow.step_s(32) > 10 * fast.step_s(32)
    assert "measured" in slow.describe() and "nccl_perf" in slow.describe()


def test_the_benchmark_cases_are_data_every_one_planned_by_the_planner() -> None:
    import json
    import sys

    from tests.support.paths import ROOT

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import planner_vs_aiconfigurator as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    cases = json.loads(bench.CASES.read_text())["cases"]
    assert len(cases) == 6
    for case in cases:
        gpus, pick = bench.planner_pick(case)
        assert gpus >= pick.gpus_per_worker and pick.meets_sla
    # a pick with the attention data parallel is scored with NVIDIA's flags for it, the batch per rank
    found = search_deployments(DEEPSEEK, find_gpu("H200"), FP8, WORKLOAD, space=SearchSpace(kv_dtypes=("fp8",)))
    dp = next(c for c in found.candidates if c.attention_dp and c.mode == "aggregated" and c.batch == 64)
    argv = bench.estimate_argv(bench.Path("aic"), cases[1], bench.Path("m"), dp, moe=True)
    at = {flag: argv[i + 1] for i, flag in enumerate(argv) if flag.startswith("--")}
    assert (at["--tp-size"], at["--attention-dp-size"], at["--moe-ep-size"], at["--batch-size"]) == ("1", "8", "8", "8")
