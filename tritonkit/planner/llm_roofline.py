"""One LLM replica's roofline: the time of a decode step, a prefill and a request at B sequences.

With in-flight batching, over the ``tensor_parallel`` GPUs of one replica:

* decode step at B running sequences (roofline): bytes read = weights touched + B × KV of the
  average context, over achievable bandwidth; FLOPs = B × (2 × active params + attention), over
  achievable tensor throughput; the step takes the longer of the two;
* prefill of a prompt: 2 × active params × tokens + causal attention, over achievable throughput
  (never faster than one read of the weights);
* communication (:class:`~tritonkit.planner.costs.Comm`): the TP all-reduces (or MoE all-to-all)
  of every step are added to it, and a MoE replica with expert parallelism reads its busiest
  rank's experts;
* without chunked prefill, prefill is not overlapped with decode: each request costs its prefill
  plus its share of decode steps, so QPS(B) = B / (B × prefill + output × step(B)),
  latency(B) = B × prefill + output × step(B), per-user decode speed = output / ((B − 1) ×
  prefill + output × step(B));
* with chunked prefill (``chunked``), prompts ride in the decode steps: a step carries the B
  decode tokens and, on average, B × input / output prompt tokens, so prefill compute hides under
  the bandwidth-bound decode until the step turns compute-bound; per-user speed = 1 / that step.

:func:`tritonkit.planner.llm.plan_llm` finds a replica's walls with :func:`largest_batch`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tritonkit.errors import ConfigError
from tritonkit.planner.catalogue import GPUS, GpuSpec
from tritonkit.planner.costs import WEIGHTS_STREAM_EFFICIENCY, Comm, md1_wait_s
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.precision import Precision

if TYPE_CHECKING:
    from tritonkit.planner.capacity import PlanAssumptions

__all__ = ["Replica", "build_replica", "compute_rate", "largest_batch"]


@dataclass(frozen=True)
class Replica:
    """The roofline of one replica: everything in bytes, FLOPs and seconds."""

    model: TransformerShape
    bytes_per_weight: float
    kv_per_token: int
    bandwidth_bytes_s: float  # achievable
    flops_s: float  # achievable
    decode_context: float  # average tokens attended per decode step
    input_tokens: float
    output_tokens: float
    weights_override: int | None
    comm: Comm | None = None
    chunked: bool = False
    data_parallel: int = 1
    #: Streaming the weights (long contiguous reads) reaches more of the datasheet than the KV cache's
    #: paged reads: :data:`~tritonkit.planner.costs.WEIGHTS_STREAM_EFFICIENCY`; ``None``: ``bandwidth_bytes_s``.
    weights_bandwidth_bytes_s: float | None = None  # attention data parallel: the non-expert weights read on each of these GPUs

    def weights_read_bytes(self, batch: float) -> float:
        m = self.model
        shared = m.total_params - m.expert_params
        read = m.weights_read_params(max(int(round(batch)), 1)) if batch else shared  # 0: the dense part alone
        if self.comm is not None and m.expert_params and self.comm.expert_parallel > 1:
            read = shared + (read - shared) * self.comm.expert_imbalance(batch)
        read += (self.data_parallel - 1) * shared
        if self.weights_override is not None:
            return self.weights_override * read / m.total_params
        return read * self.bytes_per_weight

    def comm_s(self, tokens: float) -> float:
        return self.comm.step_s(tokens) if self.comm is not None else 0.0

    def attention_flops_per_token(self, context: float) -> float:
        # QKᵀ and PV: 2 FLOPs × context × heads × their width (2 × head_dim, or the latent's), per layer.
        m = self.model
        return 2.0 * m.num_layers * m.num_attention_heads * m.attention_width(prefill=False) * context

    def step_bandwidth_s(self, batch: int) -> float:
        """The step's reads: the dense weights streamed (long reads), the routed experts' and the KV cache
        at the calibrated share (many small grouped-GEMM reads, paged reads)."""
        kv = batch * self.kv_per_token * self.model.kv_tokens(self.decode_context)
        weights = self.weights_read_bytes(batch)
        m = self.model
        dense = min(weights, self.weights_read_bytes(0) if m.expert_params else weights)
        return dense / self._weights_bandwidth() + (weights - dense + kv) / self.bandwidth_bytes_s

    def _weights_bandwidth(self) -> float:
        return self.weights_bandwidth_bytes_s or self.bandwidth_bytes_s

    def step_compute_s(self, batch: int) -> float:
        per_token = 2.0 * self.model.active_params + self.attention_flops_per_token(self.decode_context)
        return batch * per_token / self.flops_s

    def decode_step_s(self, batch: int) -> float:
        """One decode step at ``batch`` sequences, prompts apart (communication included)."""
        return max(self.step_bandwidth_s(batch), self.step_compute_s(batch)) + self.comm_s(batch)

    def prefill_flops(self) -> float:
        n = self.input_tokens
        m = self.model
        return 2.0 * m.active_params * n + m.num_layers * m.num_attention_heads * m.attention_width(prefill=True) * n * n

    def chunked_step_s(self, batch: int) -> float:
        """A step carrying ``batch`` decode tokens and their share of prompt tokens (chunked prefill)."""
        prompt_share = batch / self.output_tokens
        compute = self.step_compute_s(batch) + prompt_share * self.prefill_flops() / self.flops_s
        tokens = batch + prompt_share * self.input_tokens
        return max(self.step_bandwidth_s(batch), compute) + self.comm_s(tokens)

    def step_s(self, batch: int) -> float:
        """The step each running sequence waits for: a decode step, or with chunked prefill one that
        carries prompt tokens too."""
        return self.chunked_step_s(batch) if self.chunked else self.decode_step_s(batch)

    def prefill_s(self) -> float:
        """One prompt alone: compute-bound, never faster than one read of the weights."""
        return (max(self.prefill_flops() / self.flops_s, self.weights_read_bytes(1) / self._weights_bandwidth())
                + self.comm_s(self.input_tokens))

    def latency_s(self, batch: int) -> float:
        if self.chunked:
            return self.ttft_s(batch) + self.output_tokens * self.step_s(batch)
        return batch * self.prefill_s() + self.output_tokens * self.step_s(batch)

    def qps(self, batch: int) -> float:
        return batch / self.latency_s(batch)

    def tokens_per_s_per_user(self, batch: int) -> float:
        if self.chunked:
            return 1.0 / self.step_s(batch)
        return self.output_tokens / ((batch - 1) * self.prefill_s() + self.output_tokens * self.step_s(batch))

    def ttft_s(self, batch: int) -> float:
        """Prefill and the first step, with no queue ahead (chunked: the prompt's step is longer by it)."""
        if self.chunked:
            return self.prefill_s() + self.decode_step_s(batch)
        return self.prefill_s() + self.step_s(batch)

    def ttft_at_load_s(self, batch: int, arrival_rate: float) -> float:
        """TTFT at ``arrival_rate`` requests/s on this replica: the prefill queue (M/D/1 on the prefill
        time) plus, without chunked prefill, half a decode step in progress, plus :meth:`ttft_s`."""
        wait = md1_wait_s(arrival_rate, self.prefill_s())
        in_progress = 0.0 if self.chunked else self.step_s(batch) / 2
        return wait + in_progress + self.ttft_s(batch)


def largest_batch(ok: Callable[[int], bool], upper: int) -> int:
    """Largest B in [1, upper] with ok(B), for ok true up to some point then false; 0 if none."""
    if upper < 1 or not ok(1):
        return 0
    lo, hi = 1, upper
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if ok(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def compute_rate(gpu: GpuSpec, precision: Precision) -> tuple[float, str]:
    """The GPU's dense tensor rate for the precision's compute type (TFLOPS or TOPS), and its source."""
    if precision.compute == "fp8":
        if gpu.fp8_tflops is None:
            with_fp8 = ", ".join(g.name for g in GPUS if g.fp8_tflops is not None)
            raise ConfigError(
                f"{gpu.name} has no FP8 tensor cores, so precision fp8 cannot run on it",
                hint=f"use --precision fp16/bf16/int8/int4, or an FP8 GPU ({with_fp8})",
            )
        return gpu.fp8_tflops, f"dense FP8 tensor rate ({gpu.fp8.source})"
    if precision.compute == "int8":
        return gpu.int8_tops, f"dense INT8 tensor rate ({gpu.int8.source})"
    return gpu.fp16_tflops, f"dense FP16 tensor rate ({gpu.fp16.source})"


def build_replica(model: TransformerShape, gpu: GpuSpec, precision: Precision, a: PlanAssumptions, *,
                  tensor_parallel: int, kv_per_token: int, input_tokens: float, output_tokens: float,
                  weights_override: int | None) -> Replica:
    """One replica of ``tensor_parallel`` GPUs at the assumptions' efficiencies, expert parallelism
    and chunked prefill; ``kv_per_token`` is the KV bytes per token as stored (KV heads replicated up to TP)."""
    rate, _ = compute_rate(gpu, precision)
    tp = tensor_parallel
    dp = tp if a.attention_dp else 1
    return Replica(
        model=model,
        bytes_per_weight=precision.bytes_per_weight,
        kv_per_token=kv_per_token,
        bandwidth_bytes_s=tp * gpu.bandwidth_gb_s * 1e9 * a.bandwidth_efficiency,
        # an edge board's unified memory, shared with the CPU, keeps the calibrated share
        weights_bandwidth_bytes_s=None if gpu.kind == "edge" else
        tp * gpu.bandwidth_gb_s * 1e9 * max(WEIGHTS_STREAM_EFFICIENCY, a.bandwidth_efficiency),
        flops_s=tp * rate * 1e12 * a.compute_efficiency,
        decode_context=input_tokens + output_tokens / 2,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        weights_override=weights_override,
        comm=Comm.of(model, gpu, tp, a.expert_parallel or 1, data_parallel=dp),
        chunked=a.chunked_prefill,
        data_parallel=dp,
    )
