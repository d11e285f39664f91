"""The steps of the LLM plan, each on its own: what it hands the next step, and what it refuses.

The whole plan is tested in ``test_plan.py``; here each step's output is checked against the
quantities it is made of, so a step that drifted from its formula is caught where it happens.
"""

from __future__ import annotations

import pytest

from tests.planner.test_plan import _model
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner import GIB, PlanAssumptions, Workload, find_gpu, find_precision
from tritonkit.planner.capacity import weights_bytes
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.llm import (
    _Capacity,
    _fleet,
    _kv_cache,
    _Lengths,
    _Memory,
    _memory_budget,
    _replica_capacity,
    _roofline,
    _tensor_parallel,
    _throughput_at,
    _walls,
    _weights,
)
from tritonkit.planner.llm_roofline import Replica
from tritonkit.planner.precision import kv_dtype_bytes
from tritonkit.planner.result import PlanDraft

LENGTHS = _Lengths(mean_in=1024, mean_out=256)


def test_tensor_parallel_is_the_smallest_that_holds_the_model_unless_given() -> None:
    llama70 = _model("llama-3-70b")
    a100, bf16 = find_gpu("A100-80GB"), find_precision("bf16")
    tp, note = _tensor_parallel(llama70, a100, bf16, PlanAssumptions(), Workload(), None)
    weights = weights_bytes(llama70.total_params, bf16.bytes_per_weight)
    assert weights > a100.memory_bytes  # 70B in bf16 does not fit one 80 GB card...
    assert tp > 1 and note and weights / tp < a100.memory_bytes  # ...so TP spreads it
    assert _tensor_parallel(llama70, a100, bf16, PlanAssumptions(tensor_parallel=8), Workload(), None) == (8, "")
    with pytest.raises(ConfigError, match="attention heads do not split evenly over tensor parallel 3"):
        _tensor_parallel(llama70, a100, bf16, PlanAssumptions(tensor_parallel=3), Workload(), None)


def test_weights_are_params_times_bytes_per_weight_or_as_given() -> None:
    model, fp8 = _model("llama-3-8b"), find_precision("fp8")
    draft = PlanDraft()
    assert _weights(draft, model, fp8, 2, None) == weights_bytes(model.total_params, fp8.bytes_per_weight)
    assert weights_bytes(model.total_params, fp8.bytes_per_weight) == pytest.approx(model.total_params, rel=0.01)
    assert [line.key for line in draft.lines] == ["weights_bytes", "weights_gib", "weights_gib_per_gpu"]
    assert _weights(PlanDraft(), model, fp8, 1, 5_000_000_000) == 5_000_000_000


def test_kv_heads_fewer_than_tp_are_replicated_and_the_plan_warns() -> None:
    model, bf16 = _model("llama-3-8b"), find_precision("bf16")  # 8 KV heads
    elem = kv_dtype_bytes("bf16")
    draft = PlanDraft()
    kv = _kv_cache(draft, model, PlanAssumptions(), bf16, 16, LENGTHS)
    assert kv.bytes_per_token_stored == 2 * model.num_layers * 16 * model.head_dim * elem
    assert kv.bytes_per_sequence == kv.bytes_per_token_stored * (LENGTHS.mean_in + LENGTHS.mean_out)
    assert any("KV heads are replicated" in w for w in draft.warnings)
    plain = _kv_cache(PlanDraft(), model, PlanAssumptions(), bf16, 1, LENGTHS)
    assert plain.bytes_per_token_stored == model.kv_bytes_per_token(elem)
    with pytest.raises(ConfigError, match="KV heads do not split evenly"):
        _kv_cache(PlanDraft(), _model("llama-3-8b"), PlanAssumptions(), bf16, 3, LENGTHS)


def test_the_memory_budget_holds_as_many_sequences_as_fit_after_weights_and_reserve() -> None:
    model, gpu, bf16 = _model("llama-3-8b"), find_gpu("A100-80GB"), find_precision("bf16")
    a = PlanAssumptions(reserve_gib=8)
    weights = _weights(PlanDraft(), model, bf16, 1, None)
    kv = _kv_cache(PlanDraft(), model, a, bf16, 1, LENGTHS)
    memory = _memory_budget(PlanDraft(), model, gpu, bf16, a, Workload(), LENGTHS, 1, weights, kv)
    free = gpu.memory_bytes - weights - 8 * GIB
    assert memory.max_sequences == free // kv.bytes_per_sequence
    assert memory.reserve_gpu == 8 * GIB and memory.weights_gpu == weights
    with pytest.raises(PlanError):  # 70B in bf16 on one 80 GB card
        big = _model("llama-3-70b")
        _memory_budget(PlanDraft(), big, gpu, bf16, a, Workload(), LENGTHS, 1,
                       _weights(PlanDraft(), big, bf16, 1, None), _kv_cache(PlanDraft(), big, a, bf16, 1, LENGTHS))


def _replica_and_memory(gpu_name: str = "A100-80GB") -> tuple[GpuSpec, Replica, _Memory]:
    model, gpu, bf16 = _model("llama-3-8b"), find_gpu(gpu_name), find_precision("bf16")
    a = PlanAssumptions(reserve_gib=8)
    weights = _weights(PlanDraft(), model, bf16, 1, None)
    kv = _kv_cache(PlanDraft(), model, a, bf16, 1, LENGTHS)
    memory = _memory_budget(PlanDraft(), model, gpu, bf16, a, Workload(), LENGTHS, 1, weights, kv)
    replica = _roofline(PlanDraft(), model, gpu, bf16, a, 1, gpu.fp16_tflops, LENGTHS, kv, None)
    return gpu, replica, memory


def test_the_lowest_wall_binds_and_an_sla_out_of_reach_is_refused() -> None:
    gpu, replica, memory = _replica_and_memory()
    draft = PlanDraft()
    walls = _walls(draft, replica, Workload(tokens_per_s_per_user=20, mode="batch"), gpu, 1, memory.max_sequences)
    by_name = {line.key: line.value for line in draft.lines}
    candidates = [v for k, v in by_name.items() if k.startswith("max_sequences_by_") and isinstance(v, int)]
    assert walls.concurrent == min(candidates + [memory.max_sequences])
    assert replica.tokens_per_s_per_user(walls.concurrent) >= 20
    if walls.binding == "sla_tokens_per_s":
        assert replica.tokens_per_s_per_user(walls.concurrent + 1) < 20
    with pytest.raises(PlanError, match="cannot be met even by a single stream"):
        _walls(PlanDraft(), replica, Workload(ttft_ms=0.001), gpu, 1, memory.max_sequences)


def test_without_an_sla_an_interactive_plan_bound_by_memory_warns() -> None:
    gpu, replica, memory = _replica_and_memory()
    draft = PlanDraft()
    walls = _walls(draft, replica, Workload(), gpu, 1, memory.max_sequences)
    assert (walls.binding == "memory") == any("interactive workload without an SLA" in w for w in draft.warnings)


def test_throughput_at_the_binding_concurrency_is_the_roofline_there() -> None:
    _, replica, _ = _replica_and_memory()
    theory = _throughput_at(PlanDraft(), replica, 16, LENGTHS)
    assert theory.qps == pytest.approx(16 / replica.latency_s(16))
    assert theory.latency_ms == pytest.approx(replica.latency_s(16) * 1000)


def test_without_a_measurement_the_capacity_is_the_theory_and_without_a_target_no_fleet() -> None:
    draft = PlanDraft()
    capacity = _replica_capacity(draft, _Capacity(qps=3.5, latency_ms=900.0, basis="theory"), Workload(), None)
    assert (capacity.qps, capacity.latency_ms, capacity.basis) == (3.5, 900.0, "theory")
    assert draft.lines == []
    assert _fleet(draft, Workload(), PlanAssumptions(), capacity, 1, 8) == {}
    fleet = _fleet(draft, Workload(target_qps=35), PlanAssumptions(), capacity, 2, 8)
    assert fleet["gpus"] == 2 * fleet["replicas"] and fleet["replicas"] >= 35 / 3.5
