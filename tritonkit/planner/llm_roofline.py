"""One LLM replica's roofline: the time of a decode step, a prefill and a request at B sequences.

With in-flight batching, over the ``tensor_parallel`` GPUs of one replica:

* decode step at B running sequences (roofline): bytes read = weights touched + B × KV of the
  average context, over achievable bandwidth; FLOPs = B × (2 × active params + attention), over
  achievable tensor throughput; the step takes the longer of the two;
* prefill of a prompt: 2 × active params × tokens + causal attention, over achievable throughput
  (never faster than one read of the weights);
* prefill is not overlapped with decode: each request costs its prefill plus its share of
  decode steps, so QPS(B) = B / (B × prefill + output × step(B)), latency(B) = B × prefill +
  output × step(B), per-user decode speed = output / ((B − 1) × prefill + output × step(B)).

:func:`tritonkit.planner.llm.plan_llm` finds a replica's walls with :func:`largest_batch`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tritonkit.errors import ConfigError
from tritonkit.planner.catalogue import GPUS, GpuSpec
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.precision import Precision

__all__ = ["Replica", "compute_rate", "largest_batch"]


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

    def weights_read_bytes(self, batch: int) -> float:
        if self.weights_override is not None:
            share = self.model.weights_read_params(batch) / self.model.total_params
            return self.weights_override * share
        return self.model.weights_read_params(batch) * self.bytes_per_weight

    def attention_flops_per_token(self, context: float) -> float:
        # QKᵀ and PV: 2 matmuls × 2 FLOPs × context × (heads × head_dim), per layer.
        m = self.model
        return 4.0 * m.num_layers * m.num_attention_heads * m.head_dim * context

    def step_bandwidth_s(self, batch: int) -> float:
        kv = batch * self.kv_per_token * self.model.kv_tokens(self.decode_context)
        return (self.weights_read_bytes(batch) + kv) / self.bandwidth_bytes_s

    def step_compute_s(self, batch: int) -> float:
        per_token = 2.0 * self.model.active_params + self.attention_flops_per_token(self.decode_context)
        return batch * per_token / self.flops_s

    def step_s(self, batch: int) -> float:
        return max(self.step_bandwidth_s(batch), self.step_compute_s(batch))

    def prefill_s(self) -> float:
        n = self.input_tokens
        m = self.model
        flops = 2.0 * m.active_params * n + 2.0 * m.num_layers * m.num_attention_heads * m.head_dim * n * n
        return max(flops / self.flops_s, self.weights_read_bytes(1) / self.bandwidth_bytes_s)

    def latency_s(self, batch: int) -> float:
        return batch * self.prefill_s() + self.output_tokens * self.step_s(batch)

    def qps(self, batch: int) -> float:
        return batch / self.latency_s(batch)

    def tokens_per_s_per_user(self, batch: int) -> float:
        return self.output_tokens / ((batch - 1) * self.prefill_s() + self.output_tokens * self.step_s(batch))

    def ttft_s(self, batch: int) -> float:
        return self.prefill_s() + self.step_s(batch)


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
