"""LLM capacity from first principles, optionally calibrated by a measurement.

One replica is ``tensor_parallel`` GPUs serving one copy of the model with in-flight batching.
The model of one replica, all of it printed beside the numbers:

* memory: weights + reserve + KV cache; max sequences = free / KV bytes per sequence;
* time: the replica's roofline (:mod:`tritonkit.planner.llm_roofline`): a decode step, a prefill,
  and from them request latency, QPS and per-user decode speed at B running sequences.

The walls: memory (max sequences), compute (the batch where decode turns compute-bound: more
concurrency only queues), and the SLA (per-user tokens/s, TTFT, P99). The lowest binds.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from tritonkit._records import record_dict
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.capacity import (
    GIB,
    KIB,
    MIB,
    PlanAssumptions,
    Workload,
    decode_tokens_per_s_bound,
    kv_bytes_per_sequence,
    littles_law_in_flight,
    max_sequences_by_memory,
    plan_fleet,
)
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.costs import (
    CALIBRATION_SOURCE,
    DEFAULT_BANDWIDTH_EFFICIENCY,
    DEFAULT_COMPUTE_EFFICIENCY,
)
from tritonkit.planner.llm_roofline import Replica, build_replica, compute_rate, largest_batch
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.placement import (
    choose_tensor_parallel,
    does_not_fit,
    kv_dtype_for,
    reserve_per_gpu,
    weights_for,
)
from tritonkit.planner.precision import Precision, kv_dtype_bytes
from tritonkit.planner.result import CapacityPlan, PlanDraft, ServingSuggestion
from tritonkit.planner.search import DeploymentSearch, SearchSpace
from tritonkit.planner.search_plan import add_search_lines, run_search, searched_assumptions
from tritonkit.planner.serving_plan import engine_parameters

if TYPE_CHECKING:  # a measurement comes from perf; the formulas need not import it
    from tritonkit.planner.measured import Measurement

__all__ = ["DEFAULT_INPUT_TOKENS", "DEFAULT_OUTPUT_TOKENS", "plan_llm"]

DEFAULT_INPUT_TOKENS = 1024
DEFAULT_OUTPUT_TOKENS = 256
_B_SCAN_LIMIT = 1_000_000


def plan_llm(
    model: TransformerShape,
    gpu: GpuSpec,
    precision: Precision,
    workload: Workload,
    assumptions: PlanAssumptions | None = None,
    *,
    measurement: Measurement | None = None,
    weights_bytes_override: int | None = None,
    precision_note: str | None = None,
    search: SearchSpace | None = None,
) -> CapacityPlan:
    """Plan serving ``model`` on ``gpu`` for ``workload``; see the module docstring for the model.

    ``measurement`` (a perf result of one replica) replaces the theoretical replica throughput and
    latency; ``weights_bytes_override`` replaces params × bytes/param (e.g. a GGUF file's size);
    ``precision_note`` marks the precision as an assumption and says why (e.g. "from torch_dtype").
    ``search`` (without a measurement) searches the deployment first
    (:mod:`tritonkit.planner.search`) and plans the best in detail: its TP, KV dtype, chunked
    prefill and expert parallelism, its batch and its fleet (``--tp`` and one ``--kv-dtype`` pin).
    Raises ``PlanError`` when the model cannot be served at all (weights do not fit, the SLA is
    out of reach even for one stream).

    The plan is written in named steps, each adding its lines to the draft and handing the next
    what it found: tensor parallel → the inputs (model, hardware, workload) → weights → KV cache
    per sequence → memory budget and the sequences it holds → the replica's roofline → the walls
    (memory, compute, SLA) and the concurrency where the first binds → throughput there → the
    measured capacity, if any → GPUs needed → the serving suggestion.
    """
    a = assumptions or PlanAssumptions()
    w = workload
    draft = PlanDraft()
    found = None
    if search is not None and measurement is None:
        found = run_search(model, gpu, precision, w, a, search, weights_bytes_override, *_Lengths.of(w).pair)
        assert found.best is not None
        a = searched_assumptions(a, found.best)
    tp, tp_note = _tensor_parallel(model, gpu, precision, a, w, weights_bytes_override)
    if found is not None and found.best is not None and (assumptions is None or assumptions.tensor_parallel is None):
        tp_note = f"chosen by the search: {found.best.label()}; --tp to pin"
    _describe_model(draft, model, precision, precision_note)
    rate_tflops = _describe_hardware(draft, gpu, precision, tp, tp_note)
    lengths = _describe_workload(draft, w)
    weights = _weights(draft, model, precision, tp, weights_bytes_override, tp if a.attention_dp else 1)
    kv_note = None
    if found is not None and (assumptions is None or assumptions.kv_dtype is None):
        allowed = sorted({c.kv_dtype for c in found.candidates})
        kv_note = f"chosen by the search (allowed: {', '.join(allowed)}; --kv-dtype to offer more)"
    kv = _kv_cache(draft, model, a, precision, tp, lengths, kv_note)
    memory = _memory_budget(draft, model, gpu, precision, a, w, lengths, tp, weights, kv)
    replica = _roofline(draft, model, gpu, precision, a, tp, rate_tflops, lengths, kv, weights_bytes_override)
    if found is None:
        walls = _walls(draft, replica, w, gpu, tp, memory.max_sequences)
        theory = _throughput_at(draft, replica, walls.concurrent, lengths)
        capacity = _replica_capacity(draft, theory, w, measurement)
        concurrent = walls.concurrent
        fleet = _fleet(draft, w, a, capacity, tp, concurrent)
    else:
        concurrent, fleet = add_search_lines(draft, found, w, a)
    suggestion = _llm_suggestion(w, concurrent, lengths, memory, tp, fleet, a, kv.dtype, found)
    if gpu.kind == "consumer":
        draft.warnings.append(f"{gpu.name} is a consumer card: no ECC memory")
    title = f"Capacity plan: {model.name} ({precision.name}) on {gpu.name}" + (f" × TP {tp}" if tp > 1 else "")
    plan = draft.finish("llm", title, suggestion,
                        {"model": model.to_dict(), "gpu": gpu.to_dict(), "precision": precision.name,
                         "kv_dtype": kv.dtype, "tensor_parallel": tp, "workload": record_dict(w)})
    return replace(plan, search=found, engines=engine_parameters(plan))


# ---- the steps, in the order plan_llm takes them ------------------------------------------------


@dataclass(frozen=True)
class _Lengths:
    """Mean tokens per request (the workload's, or the defaults)."""

    mean_in: float
    mean_out: float

    @property
    def pair(self) -> tuple[float, float]:
        return self.mean_in, self.mean_out

    @classmethod
    def of(cls, w: Workload) -> _Lengths:
        return cls(w.input_tokens if w.input_tokens is not None else DEFAULT_INPUT_TOKENS,
                   w.output_tokens if w.output_tokens is not None else DEFAULT_OUTPUT_TOKENS)


@dataclass(frozen=True)
class _KvCache:
    """The KV cache's element type, its bytes per token as stored (KV heads replicated up to TP),
    and one mean sequence's tokens kept and bytes."""

    dtype: str
    bytes_per_token_stored: int
    tokens_per_sequence: float
    bytes_per_sequence: int


@dataclass(frozen=True)
class _Memory:
    """Per-GPU memory, reserve and weights, and the sequences the rest holds per replica."""

    mem_gpu: int
    reserve_gpu: int
    weights_gpu: float
    max_sequences: int


@dataclass(frozen=True)
class _Walls:
    """The concurrency per replica where the first wall binds, which wall, and why."""

    concurrent: int
    binding: str
    why: str


@dataclass(frozen=True)
class _Capacity:
    """What the fleet is sized on: QPS per replica and mean latency, theory or measured (``basis``)."""

    qps: float
    latency_ms: float
    basis: str


def _tensor_parallel(model: TransformerShape, gpu: GpuSpec, precision: Precision, a: PlanAssumptions,
                     w: Workload, weights_override: int | None) -> tuple[int, str]:
    """TP as given, or the smallest that holds the model (and why); it must split the attention heads."""
    tp_note = ""
    if a.tensor_parallel is None:
        lengths = _Lengths.of(w)
        tp, tp_note = choose_tensor_parallel(model, gpu, precision, a, weights_override,
                                              lengths.mean_in + lengths.mean_out)
    else:
        tp = a.tensor_parallel
    if model.num_attention_heads % tp:
        raise ConfigError(
            f"{model.num_attention_heads} attention heads do not split evenly over tensor parallel {tp}",
            hint="pick --tp that divides the number of attention heads (1, 2, 4, 8…)",
        )
    return tp, tp_note


def _describe_model(draft: PlanDraft, model: TransformerShape, precision: Precision,
                    precision_note: str | None) -> None:
    """The model's lines: parameters, precision, KV layout, sliding window."""
    add = draft.add
    add("model", "model", "model", model.name, "", "input", model.source or "")
    params_given = model.params_basis.startswith("given")
    add("model", "total_params", "parameters (total)", model.total_params, "", "input" if params_given else "theory",
        model.params_basis)
    if model.is_moe:
        add("model", "active_params", "parameters active per token", model.active_params, "", "theory",
            f"{model.experts_per_token} of {model.num_experts} experts" if model.num_experts else "given")
    add("model", "precision", "weight precision", precision.name, "", "assumption" if precision_note else "input",
        (f"{precision_note}; " if precision_note else "") + f"{precision.description}; {precision.source}")
    add("model", "kv_shape", "KV layout (layers × KV heads × head_dim)" if model.latent is None else
        "KV layout (layers × latent attention: kv_lora_rank + qk_rope_head_dim)",
        f"{model.num_layers} × {model.num_kv_heads} × {model.head_dim}" if model.latent is None else
        f"{model.num_layers} × ({model.latent.kv_lora_rank} + {model.latent.qk_rope_head_dim})", "", "input",
        f"{model.num_attention_heads} attention heads" + (f"; {'; '.join(model.assumptions)}" if model.assumptions else ""))
    if model.sliding_window:
        add("model", "sliding_window_tokens", "sliding window", model.sliding_window, "tokens", "input",
            "KV per sequence capped at the window")


def _describe_hardware(draft: PlanDraft, gpu: GpuSpec, precision: Precision, tp: int, tp_note: str) -> float:
    """The GPU's lines and TP; returns its dense tensor rate for the precision (TFLOPS or TOPS)."""
    add = draft.add
    add("hardware", "gpu", "GPU", gpu.name, "", "input", f"{gpu.kind}{'' if gpu.ecc else ', no ECC'}")
    add("hardware", "gpu_memory_gib", "memory per GPU", gpu.memory_gib, "GiB", "datasheet", gpu.memory.source)
    add("hardware", "gpu_bandwidth_gb_s", "memory bandwidth per GPU", gpu.bandwidth_gb_s, "GB/s", "datasheet",
        gpu.bandwidth.source)
    rate_tflops, rate_note = compute_rate(gpu, precision)
    rate_unit = "TOPS" if precision.compute == "int8" else "TFLOPS"
    add("hardware", f"gpu_dense_{rate_unit.lower()}", f"dense {precision.compute.upper()} throughput per GPU",
        rate_tflops, rate_unit, "datasheet", rate_note)
    tp_effects = "bandwidth and compute scale ×TP; each step pays its all-reduces (see communication)"
    tp_why = (f"{tp_note}; {tp_effects}" if tp > 1 else tp_note) if tp_note else tp_effects
    add("hardware", "tensor_parallel", "tensor parallel (GPUs per replica)", tp, "", "theory" if tp_note else "input",
        tp_why)
    return rate_tflops


def _describe_workload(draft: PlanDraft, w: Workload) -> _Lengths:
    """The workload's lines; returns the mean token counts (defaults where not given)."""
    add = draft.add
    lengths = _Lengths.of(w)
    for what, given, mean in (("input", w.input_tokens, lengths.mean_in), ("output", w.output_tokens, lengths.mean_out)):
        add("workload", f"{what}_tokens_mean", f"{what} tokens (mean)", mean, "tokens",
            "input" if given is not None else "assumption", "" if given is not None else f"default; pass --{what}-tokens")
    if w.target_qps is not None:
        add("workload", "target_qps", "target QPS", w.target_qps, "req/s", "input")
    add("workload", "mode", "mode", w.mode, "", "input")
    for key, label, value, unit in (
        ("sla_p99_ms", "SLA: P99 latency", w.p99_ms, "ms"),
        ("sla_ttft_ms", "SLA: time to first token", w.ttft_ms, "ms"),
        ("sla_tokens_per_s_per_user", "SLA: decode speed per user", w.tokens_per_s_per_user, "tok/s"),
    ):
        if value is not None:
            add("workload", key, label, value, unit, "input")
    return lengths


def _weights(draft: PlanDraft, model: TransformerShape, precision: Precision, tp: int,
             weights_override: int | None, dp: int = 1) -> int:
    """Bytes of the weights (params × bytes per weight, or as given) a replica holds, and their lines."""
    add = draft.add
    weights = weights_for(model, precision, weights_override, dp)
    weights_note = ("given (--weights-gb)" if weights_override is not None
                    else f"{model.total_params:,} params × {precision.bytes_per_weight:g} B ({precision.name})")
    if dp > 1:
        weights_note += (f"; attention data parallel {dp}: the {model.total_params - model.expert_params:,} "
                         "non-expert params on every GPU")
    add("memory", "weights_bytes", "weights", weights, "B", "input" if weights_override else "theory", weights_note)
    add("memory", "weights_gib", "weights", weights / GIB, "GiB", "theory", f"= {weights / 1e9:.2f} GB (decimal)")
    if tp > 1:
        add("memory", "weights_gib_per_gpu", "weights per GPU", weights / tp / GIB, "GiB", "theory",
            f"the experts split over EP {tp}, the rest on every GPU" if dp > 1 else
            f"split over TP {tp} (embedding replication ignored)")
    return weights


def _kv_cache(draft: PlanDraft, model: TransformerShape, a: PlanAssumptions, precision: Precision, tp: int,
              lengths: _Lengths, dtype_note: str | None = None) -> _KvCache:
    """The KV cache per token and per mean sequence; KV heads fewer than TP are replicated (a warning)."""
    add = draft.add
    kv_dtype, kv_dtype_note = kv_dtype_for(a, precision)
    kv_dtype_note = dtype_note or kv_dtype_note
    kv_elem = kv_dtype_bytes(kv_dtype)
    if model.num_kv_heads < tp and model.latent is None and not a.attention_dp:
        draft.warnings.append(f"{model.num_kv_heads} KV heads < TP {tp}: KV heads are replicated, KV memory grows ×"
                              f"{tp // model.num_kv_heads}")
    elif model.num_kv_heads % tp:
        raise ConfigError(f"{model.num_kv_heads} KV heads do not split evenly over tensor parallel {tp}",
                          hint="pick --tp that divides the number of KV heads")
    kv_token = model.kv_bytes_per_token(kv_elem)
    kv_token_stored = model.kv_bytes_per_token(kv_elem, 1 if a.attention_dp else tp)
    add("memory", "kv_bytes_per_token", "KV cache per token", kv_token, "B", "theory",
        f"{model.kv_formula(kv_elem)} ({kv_dtype}: {kv_dtype_note})")
    add("memory", "kv_kib_per_token", "KV cache per token", kv_token / KIB, "KiB", "theory", "")
    seq_tokens = lengths.mean_in + lengths.mean_out
    kv_seq = kv_bytes_per_sequence(kv_token_stored, seq_tokens, model.sliding_window)
    kept = model.kv_tokens(seq_tokens)
    add("memory", "kv_tokens_per_sequence", "KV tokens per sequence", kept, "tokens", "theory",
        "mean input + mean output" + (f", capped at the {model.sliding_window}-token window"
                                      if model.sliding_window and kept < seq_tokens else ""))
    add("memory", "kv_bytes_per_sequence", "KV cache per sequence", kv_seq, "B", "theory", "")
    add("memory", "kv_mib_per_sequence", "KV cache per sequence", kv_seq / MIB, "MiB", "theory",
        "at full length: a sequence's KV grows as it decodes")
    return _KvCache(kv_dtype, kv_token_stored, kept, kv_seq)


def _memory_budget(draft: PlanDraft, model: TransformerShape, gpu: GpuSpec, precision: Precision,
                   a: PlanAssumptions, w: Workload, lengths: _Lengths, tp: int, weights: int,
                   kv: _KvCache) -> _Memory:
    """Memory left for the KV cache after weights and reserve, and the sequences it holds (the memory
    wall); ``PlanError`` when the weights or one sequence do not fit."""
    add = draft.add
    mem_gpu = gpu.memory_bytes
    reserve_gpu, reserve_note = reserve_per_gpu(a, gpu)
    add("memory", "reserve_gib_per_gpu", "reserve per GPU", reserve_gpu / GIB, "GiB",
        "input" if a.reserve_gib is not None else "assumption", reserve_note)
    weights_gpu = weights / tp
    if weights_gpu + reserve_gpu >= mem_gpu:
        raise does_not_fit(model, gpu, precision, weights, reserve_gpu, tp)
    free_kv = tp * mem_gpu - weights - tp * reserve_gpu
    add("memory", "kv_free_gib", "free for KV cache per replica", free_kv / GIB, "GiB", "theory",
        f"{tp} × {gpu.memory_gib:g} GiB − weights − reserve")
    b_mem = max_sequences_by_memory(tp * mem_gpu, weights, tp * reserve_gpu, kv.bytes_per_sequence)
    if b_mem < 1:
        raise PlanError(
            f"one {kv.tokens_per_sequence:.0f}-token sequence needs {kv.bytes_per_sequence / MIB:.0f} MiB of KV cache "
            f"but only {free_kv / MIB:.0f} MiB is free on {gpu.name} × {tp}",
            hint="use shorter sequences, --kv-dtype fp8, a smaller precision, or more --tp",
        )
    add("memory", "max_sequences_by_memory", "max concurrent sequences by memory", b_mem, "sequences", "theory",
        "free KV / KV per sequence (mean lengths)")
    if w.input_tokens_p95 is not None or w.output_tokens_p95 is not None:
        p95_tokens = (w.input_tokens_p95 or lengths.mean_in) + (w.output_tokens_p95 or lengths.mean_out)
        b_mem_p95 = max_sequences_by_memory(
            tp * mem_gpu, weights, tp * reserve_gpu,
            kv_bytes_per_sequence(kv.bytes_per_token_stored, p95_tokens, model.sliding_window)
        )
        add("memory", "max_sequences_by_memory_p95", "max concurrent sequences at p95 lengths", b_mem_p95, "sequences",
            "theory", f"{p95_tokens:g} tokens per sequence")
    return _Memory(mem_gpu, reserve_gpu, weights_gpu, b_mem)


def _roofline(draft: PlanDraft, model: TransformerShape, gpu: GpuSpec, precision: Precision, a: PlanAssumptions,
              tp: int, rate_tflops: float, lengths: _Lengths, kv: _KvCache, weights_override: int | None) -> Replica:
    """One replica's roofline at achievable bandwidth and compute, and its single-stream figures."""
    add = draft.add
    bandwidth_total = tp * gpu.bandwidth_gb_s
    replica = build_replica(model, gpu, precision, a, tensor_parallel=tp, kv_per_token=kv.bytes_per_token_stored,
                            input_tokens=lengths.mean_in, output_tokens=lengths.mean_out,
                            weights_override=weights_override)
    comm = replica.comm
    assert comm is not None
    add("throughput", "bandwidth_efficiency", "achievable share of bandwidth", a.bandwidth_efficiency, "",
        "assumption", _efficiency_note(a.bandwidth_efficiency, DEFAULT_BANDWIDTH_EFFICIENCY, "--bandwidth-efficiency"))
    add("throughput", "compute_efficiency", "achievable share of tensor throughput", a.compute_efficiency, "",
        "assumption", _efficiency_note(a.compute_efficiency, DEFAULT_COMPUTE_EFFICIENCY, "--compute-efficiency"))
    if tp > 1 or comm.expert_parallel > 1:
        add("throughput", "allreduce_ms_per_decode_step", "communication per decode step (batch 1)",
            replica.comm_s(1) * 1000, "ms", "theory", comm.describe())
    add("throughput", "chunked_prefill", "chunked prefill", a.chunked_prefill, "", "assumption" if not
        a.chunked_prefill else "input", "prompts ride in decode steps" if a.chunked_prefill
        else "prompts stall the running decodes while they prefill")
    read_1 = replica.weights_read_bytes(1)
    ideal = decode_tokens_per_s_bound(bandwidth_total, read_1)
    add("throughput", "decode_tokens_per_s_per_stream_ideal", "decode ceiling per stream (ideal)", ideal, "tok/s",
        "theory", f"{bandwidth_total:g} GB/s / {read_1 / 1e9:.2f} GB of weights read per token")
    add("throughput", "decode_tokens_per_s_per_stream", "decode per stream, batch 1 (achievable)",
        1.0 / replica.step_s(1), "tok/s", "theory", "× bandwidth efficiency, KV reads included")
    add("throughput", "prefill_ms", "prefill of a mean prompt (compute bound)", replica.prefill_s() * 1000, "ms",
        "theory", f"2 × active params × {lengths.mean_in:g} tokens + attention, at achievable dense throughput")
    return replica


def _efficiency_note(value: float, default: float, flag: str) -> str:
    if value == default:
        return f"default {CALIBRATION_SOURCE}; {flag}"
    return f"given ({flag}; the calibrated default is {default:g})"


def _walls(draft: PlanDraft, replica: Replica, w: Workload, gpu: GpuSpec, tp: int, max_sequences: int) -> _Walls:
    """The walls — memory, compute (decode turns compute-bound), each SLA term — and the lowest, which
    sets the concurrency per replica; ``PlanError`` when an SLA is out of reach even for one stream."""
    add, warnings = draft.add, draft.warnings
    scan_hi = min(max_sequences, _B_SCAN_LIMIT)
    b_compute_raw = largest_batch(lambda b: replica.step_compute_s(b) < replica.step_bandwidth_s(b), scan_hi)
    b_compute = b_compute_raw + 1 if b_compute_raw < scan_hi or b_compute_raw == 0 else None
    walls: list[tuple[str, int, str]] = [("memory", max_sequences, "KV cache fills the free memory")]
    if b_compute is not None:
        walls.append(("compute", b_compute, "decode turns compute-bound: more concurrency only queues"))
    add("walls", "max_sequences_by_compute", "decode turns compute-bound at", b_compute, "sequences", "theory",
        "" if b_compute is not None else "not reached before the memory wall")

    # (wall name, largest B meeting it, what it means, the figure at B = 1 with its unit)
    sla_walls: list[tuple[str, int, str, str]] = []
    if w.tokens_per_s_per_user is not None:
        r = w.tokens_per_s_per_user
        sla_walls.append(("sla_tokens_per_s", largest_batch(lambda b: replica.tokens_per_s_per_user(b) >= r, scan_hi),
                          f"each stream ≥ {r:g} tok/s", f"{replica.tokens_per_s_per_user(1):.1f} tok/s"))
    if w.ttft_ms is not None:
        t = w.ttft_ms / 1000
        sla_walls.append(("sla_ttft", largest_batch(lambda b: replica.ttft_s(b) <= t, scan_hi),
                          f"TTFT ≤ {w.ttft_ms:g} ms (prefill + one step, no queueing)",
                          f"a TTFT of {replica.ttft_s(1) * 1000:.0f} ms"))
    if w.p99_ms is not None:
        p = w.p99_ms / 1000
        sla_walls.append(("sla_p99", largest_batch(lambda b: replica.latency_s(b) <= p, scan_hi),
                          f"request latency ≤ {w.p99_ms:g} ms (ideal; η covers queueing)",
                          f"a latency of {replica.latency_s(1) * 1000:.0f} ms"))
    for name, limit, why, at_one in sla_walls:
        if limit < 1:
            raise PlanError(
                f"the SLA cannot be met even by a single stream on {gpu.name} × {tp}: {why}, but one stream gets "
                f"{at_one}",
                hint="relax the SLA, use a faster GPU or more --tp, a smaller precision, or shorter prompts",
            )
        walls.append((name, limit, why))
        add("walls", f"max_sequences_by_{name}", f"max sequences by {why}", limit, "sequences", "theory", "")
    if w.tokens_per_s_per_user is not None:
        # The edge rule of thumb, for a server that does not batch decode (one llama.cpp slot):
        # the single-stream rate is shared, so streams ≈ achievable tok/s / r.
        add("walls", "streams_without_batching", f"streams at ≥ {w.tokens_per_s_per_user:g} tok/s without batching",
            int(replica.tokens_per_s_per_user(1) // w.tokens_per_s_per_user), "streams", "theory",
            "achievable single-stream tok/s / r (edge rule of thumb: one stream's speed is shared); in-flight batching does better, see above")
    binding, b_star, binding_why = min(walls, key=lambda item: item[1])
    add("walls", "concurrent_sequences", "concurrent sequences per replica", b_star, "sequences", "theory",
        f"the lowest wall: {binding}")
    add("walls", "binding_wall", "wall that binds first", binding, "", "theory", binding_why)

    if w.mode == "interactive" and not sla_walls and binding == "memory":
        warnings.append(
            f"interactive workload without an SLA: concurrency is set by memory alone ({b_star} sequences), and "
            f"each user then sees {replica.tokens_per_s_per_user(b_star):.1f} tok/s and "
            f"{replica.latency_s(b_star):.1f} s per request; pass --tokens-per-s, --ttft-ms or --p99-ms"
        )
    return _Walls(b_star, binding, binding_why)


def _throughput_at(draft: PlanDraft, replica: Replica, concurrent: int, lengths: _Lengths) -> _Capacity:
    """The roofline's figures at the binding concurrency: step, tokens/s, TTFT, latency, QPS."""
    add = draft.add
    b_star = concurrent
    step = replica.step_s(b_star)
    add("throughput", "decode_step_ms", f"decode step at {b_star} sequences", step * 1000, "ms", "theory",
        "bandwidth-bound" if replica.step_bandwidth_s(b_star) >= replica.step_compute_s(b_star) else "compute-bound")
    add("throughput", "decode_tokens_per_s_aggregate", "decode tokens/s per replica (aggregate)",
        b_star / step, "tok/s", "theory", f"{b_star} sequences / step time")
    add("throughput", "tokens_per_s_per_user", "decode speed each user sees", replica.tokens_per_s_per_user(b_star),
        "tok/s", "theory", "prefills of others stall decode (no chunked prefill)")
    add("throughput", "ttft_ms", "time to first token (no queueing)", replica.ttft_s(b_star) * 1000, "ms", "theory",
        "prefill + one decode step")
    theory_latency_ms = replica.latency_s(b_star) * 1000
    add("throughput", "request_latency_ms", "request latency at that concurrency", theory_latency_ms, "ms", "theory",
        f"{b_star} × prefill + {lengths.mean_out:g} × step")
    theory_qps = replica.qps(b_star)
    add("throughput", "qps_serial", "serial QPS₁ (batch 1)", replica.qps(1), "req/s", "theory",
        "1 / (prefill + output × step at batch 1)")
    add("throughput", "qps_per_replica_theory", "QPS per replica (theory)", theory_qps, "req/s", "theory",
        f"{b_star} / request latency")
    return _Capacity(theory_qps, theory_latency_ms, "theory")


def _replica_capacity(draft: PlanDraft, theory: _Capacity, w: Workload, measurement: Measurement | None) -> _Capacity:
    """What one replica carries: the measurement's reading when there is one, else the theory."""
    if measurement is None:
        return theory
    add = draft.add
    reading = measurement.read_capacity(w.p99_ms)
    step_m = reading.step
    qps_replica = reading.requests_per_s
    assert step_m.p50_ms is not None  # a passing step is a measured one
    add("measured", "measured_source", "measurement", measurement.source, "", "measured",
        f"{reading.why}; measured on {measurement.hardware.describe()}")
    add("measured", "measured_kind", "read from", measurement.kind, "", "measured", "")
    bound = " (lower bound: no knee found)" if reading.is_lower_bound else ""
    if reading.is_lower_bound:
        draft.warnings.append(f"the measured ladder found no limit, so its throughput is a lower bound and the fleet "
                              f"an upper bound; {reading.extend}")
    add("measured", "qps_per_replica_measured", f"QPS per replica (measured){bound}", qps_replica, "req/s",
        "measured", "replaces the theoretical figure below in the fleet sizing"
        + (f"; infer/s ÷ batch {measurement.batch_size}" if measurement.batch_size > 1 else ""))
    add("measured", "latency_p50_ms_measured", "P50 latency at that step", step_m.p50_ms, "ms", "measured", "")
    if step_m.p99_ms is not None:
        add("measured", "latency_p99_ms_measured", "P99 latency at that step", step_m.p99_ms, "ms", "measured", "")
    add("measured", "theory_over_measured", "theory / measured QPS", theory.qps / qps_replica if qps_replica else None,
        "×", "measured", "how optimistic the roofline is for this deployment")
    return _Capacity(qps_replica, step_m.p50_ms, "measured")


def _fleet(draft: PlanDraft, w: Workload, a: PlanAssumptions, capacity: _Capacity, tp: int,
           concurrent: int) -> dict[str, int]:
    """The GPUs a target QPS needs (``{}`` without one): replicas and GPUs recommended."""
    if w.target_qps is None:
        return {}
    fleet_lines, fleet_warnings, fleet = plan_fleet(w, a, capacity.qps, capacity.latency_ms, capacity.basis, tp)
    draft.lines.extend(fleet_lines)
    draft.warnings.extend(fleet_warnings)
    in_flight_per_replica = littles_law_in_flight(w.target_qps, capacity.latency_ms) / fleet.replicas_recommended
    if in_flight_per_replica > concurrent:
        draft.warnings.append(f"{in_flight_per_replica:.1f} requests in flight per replica exceed its {concurrent} "
                              "concurrent sequences: requests will queue")
    return {"replicas": fleet.replicas_recommended, "gpus": fleet.gpus_recommended}


def _round_up(value: float, multiple: int) -> int:
    return int(math.ceil(value / multiple) * multiple)


def _llm_suggestion(w: Workload, b_star: int, lengths: _Lengths, memory: _Memory, tp: int,
                    fleet: dict[str, int], a: PlanAssumptions | None = None, kv_dtype: str | None = None,
                    found: DeploymentSearch | None = None) -> ServingSuggestion:
    """TensorRT-LLM's serving parameters for the plan: batch, token and length limits, KV share, fleet."""
    input_len = w.input_tokens_p95 or lengths.mean_in
    output_len = w.output_tokens_p95 or lengths.mean_out
    max_input = int(math.ceil(input_len))
    max_seq = int(math.ceil(input_len + output_len))
    after_weights = memory.mem_gpu - memory.weights_gpu
    fraction = (after_weights - memory.reserve_gpu) / after_weights
    fraction = max(0.05, min(0.95, math.floor(fraction * 100) / 100))
    length_basis = "p95" if w.input_tokens_p95 else "mean (pass --input-tokens-p95)"
    best = found.best if found is not None else None
    pp = best.pipeline_parallel if best is not None else 1
    return ServingSuggestion(
        max_batch_size=b_star,
        max_num_tokens=_round_up(max_input + b_star, 256),
        max_input_len=max_input,
        max_seq_len=max_seq,
        kv_cache_free_gpu_mem_fraction=fraction,
        tensor_parallel=tp // pp,
        instance_count=1,
        max_queue_delay_us=None,
        replicas=fleet.get("replicas"),
        gpus=fleet.get("gpus"),
        pipeline_parallel=pp,
        expert_parallel=(a.expert_parallel or 1) if a is not None else 1,
        attention_dp=bool(a is not None and a.attention_dp),
        kv_cache_dtype=kv_dtype,
        enable_chunked_prefill=a.chunked_prefill if a is not None else None,
        disaggregated=({"prefill_workers": best.prefill_workers, "prefill_tensor_parallel": best.prefill_tensor_parallel,
                        "decode_workers": best.workers} if best is not None and best.mode == "disaggregated" else None),
        notes={
            "max_batch_size": "the searched deployment's batch" if best is not None
            else "concurrent sequences where the first wall binds",
            "max_num_tokens": f"one {length_basis} prompt + one token per running sequence, rounded up to 256",
            "max_input_len": f"{length_basis} input tokens",
            "max_seq_len": "input + output at the same percentile",
            "kv_cache_free_gpu_mem_fraction": "share of memory left after weights that keeps the reserve free",
            "instance_count": "one engine per replica; in-flight batching, not instances, gives concurrency",
            "replicas": "recommended fleet (headroom included)",
        },
    )
