"""Costs a deployment pays beyond the roofline, and the efficiencies the roofline runs at.

* **Tensor-parallel all-reduce.** Each transformer layer ends its attention and its MLP with an
  all-reduce of the activations (Megatron-style TP): 2 per layer. A ring all-reduce of ``n``
  bytes over ``tp`` GPUs moves ``2 (tp − 1) / tp × n`` bytes through each GPU's link, plus a fixed
  latency (launch and synchronisation): ``t = latency + 2 (tp − 1) / tp × n / link bandwidth``.
  The link (NVLink or PCIe, bandwidth per direction and latency) is the GPU's
  :class:`~tritonkit.planner.catalogue.Link`.
* **MoE expert parallelism.** With ``ep`` GPUs each holding ``1/ep`` of the routed experts, the
  MLP's all-reduce becomes an all-to-all that sends each token's hidden state to its
  ``experts_per_token`` experts and back: ``2 × (latency + tokens × k × hidden × 2 B × (ep − 1)/ep / bw)``.
  Experts are read whole on the GPU that holds them, so the busiest GPU reads more than the
  average: an imbalance of ``1 + 1/√(tokens × k / ep)`` (the spread of a binomial draw) is applied
  to the expert reads.
* **Queueing for prefill.** A prompt waits for the prefills ahead of it: an M/D/1 queue (Poisson
  arrivals, one prefill at a time, fixed service time) waits ``ρ s / (2 (1 − ρ))`` on average at
  utilisation ``ρ = λ s`` (:func:`md1_wait_s`).

The default efficiencies (:data:`DEFAULT_BANDWIDTH_EFFICIENCY`, :data:`DEFAULT_COMPUTE_EFFICIENCY`)
are calibrated, not guessed: they are the values at which the plan's throughput matches NVIDIA's
published TensorRT-LLM measurements (:data:`CALIBRATION_SOURCE`; the cases and their figures are in
``benchmarks/planner_published.py`` and ``tests/planner/test_published.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonkit.planner.catalogue import Figure, GpuSpec, Link
from tritonkit.planner.model import TransformerShape

__all__ = [
    "ACTIVATION_BYTES",
    "ASSUMED_LINK",
    "CALIBRATION_SOURCE",
    "DEFAULT_BANDWIDTH_EFFICIENCY",
    "DEFAULT_COMPUTE_EFFICIENCY",
    "DEFAULT_MAX_NUM_TOKENS",
    "INTER_NODE_GB_S",
    "WEIGHTS_STREAM_EFFICIENCY",
    "Comm",
    "md1_wait_s",
]

#: Where the default efficiencies come from (printed beside them in every plan).
CALIBRATION_SOURCE = (
    "calibrated against NVIDIA's published TensorRT-LLM throughput (docs/source/performance/perf-overview.md "
    "of NVIDIA/TensorRT-LLM at 00f37686, the v1.0 tables: trtllm-bench, FP8, H100 SXM and H200 SXM); "
    "see benchmarks/planner_published.py"
)
#: Achievable share of datasheet memory bandwidth in decode, and of dense tensor throughput (model
#: FLOPs utilisation of batched decode and prefill): the pair at which the planner's GPUs for the
#: published cases (:data:`tritonkit.planner.published.PUBLISHED_CASES`) come closest to the
#: published GPUs, on a grid of bandwidth 0.4–0.8 × compute 0.35–0.6 (at 8 × each published load:
#: mean |log ratio| 0.09, every case within 0.88–1.25×; 0.8/0.6 gives 0.32). They stand for what the
#: whole engine achieves — kernels, scheduling, sampling — not for one kernel's peak.
DEFAULT_BANDWIDTH_EFFICIENCY = 0.5
DEFAULT_COMPUTE_EFFICIENCY = 0.45
#: The share of the datasheet bandwidth a decode step's weight reads reach: long contiguous reads, so
#: more than the paged KV cache's (:data:`DEFAULT_BANDWIDTH_EFFICIENCY`, which stays calibrated on
#: throughput-bound runs). 0.8 is the memory-bandwidth scaling factor of NVIDIA's AIConfigurator 0.12.0
#: (``mem_bw_empirical_scaling_factor`` in every ``systems/*.yaml``); at 0.5 a small-batch decode came out
#: 1.6× slower than its estimate (Llama-3.1-70B BF16 over 4 L40S at batch 1: 82 ms against 46 ms a token).
#: A MoE model's routed experts are read by many small grouped GEMMs and keep the calibrated share: at 0.8
#: DeepSeek-V3's steps came out 2.1× faster than NVIDIA's estimates, at 0.5 1.27×.
WEIGHTS_STREAM_EFFICIENCY = 0.8
#: Bytes of one activation element moved by an all-reduce (FP16/BF16 activations).
ACTIVATION_BYTES = 2
#: TensorRT-LLM's default ``max_num_tokens`` (tokens one engine step takes): the chunk a prompt is cut
#: into with chunked prefill.
DEFAULT_MAX_NUM_TOKENS = 8192
#: Between nodes (pipeline stages, a prefill worker handing its KV cache to a decode worker): one
#: 400 Gb/s InfiniBand NDR port per GPU = 50 GB/s per direction (assumption: the usual HGX fabric).
INTER_NODE_GB_S = 50.0

#: Between nodes, for an all-to-all that spans them: the same port (NVIDIA ConnectX-7: 400 Gb/s per port).
INTER_NODE_LINK = Link("InfiniBand NDR 400 Gb/s between nodes", Figure(INTER_NODE_GB_S, "GB/s", (
    "NVIDIA ConnectX-7 datasheet: 400 Gb/s per port = 50 GB/s per direction, one port per GPU (HGX)")),
    Figure(10.0, "µs", "assumption: an inter-node message's latency (RDMA over one switch hop), not a datasheet figure"),
    1024)

#: For a card described by figures alone (no catalogue link): PCIe Gen4 x16, said so in the plan.
ASSUMED_LINK = Link("PCIe Gen4 x16 (assumed)", Figure(32.0, "GB/s", "assumption: no link given for this card"),
                    Figure(25.0, "µs", "assumption: no link given for this card"), 8)


def md1_wait_s(arrival_rate: float, service_s: float) -> float:
    """Mean wait in an M/D/1 queue: ``ρ s / (2 (1 − ρ))``, ``inf`` at or above saturation."""
    rho = arrival_rate * service_s
    if rho >= 1.0:
        return math.inf
    return rho * service_s / (2.0 * (1.0 - rho))


@dataclass(frozen=True)
class Comm:
    """The communication of one replica: TP all-reduce per layer, or EP all-to-all for MoE layers."""

    tensor_parallel: int
    expert_parallel: int
    link: Link
    hidden_size: int
    num_layers: int
    experts_per_token: int
    data_parallel: int = 1

    @classmethod
    def of(cls, model: TransformerShape, gpu: GpuSpec, tensor_parallel: int, expert_parallel: int = 1, *,
           data_parallel: int = 1) -> Comm:
        """The replica's communication; the hidden size is heads × head_dim where the config gives none.
        With attention data parallel (``data_parallel`` = the replica's GPUs) the attention needs no
        all-reduce and each GPU sends only its own tokens to the experts; past one node's GPUs the
        all-to-all crosses the inter-node link."""
        hidden = model.hidden_size or model.num_attention_heads * model.head_dim
        link = gpu.link or ASSUMED_LINK
        if tensor_parallel > link.max_gpus:
            link = INTER_NODE_LINK
        return cls(tensor_parallel // data_parallel, expert_parallel, link, hidden, model.num_layers,
                   model.experts_per_token or 1, data_parallel)

    def _allreduce_s(self, payload_bytes: float) -> float:
        tp = self.tensor_parallel
        if tp <= 1:
            return 0.0
        moved = 2.0 * (tp - 1) / tp * payload_bytes
        bandwidth_gb_s, latency_us = self.link.allreduce(tp)
        return latency_us * 1e-6 + moved / (bandwidth_gb_s * 1e9)

    def _alltoall_s(self, tokens: float) -> float:
        ep = self.expert_parallel
        sent = tokens / self.data_parallel * self.experts_per_token * self.hidden_size * ACTIVATION_BYTES * (ep - 1) / ep
        return 2.0 * (self.link.latency_us * 1e-6 + sent / (self.link.bandwidth_gb_s * 1e9))

    def step_s(self, tokens: float) -> float:
        """Seconds of communication in one engine step over ``tokens`` tokens (all layers)."""
        payload = tokens * self.hidden_size * ACTIVATION_BYTES
        attention = self._allreduce_s(payload)
        mlp = self._alltoall_s(tokens) if self.expert_parallel > 1 else self._allreduce_s(payload)
        return self.num_layers * (attention + mlp)

    def expert_imbalance(self, tokens: float) -> float:
        """How much more than the average the busiest EP rank reads of its experts (1 without EP)."""
        if self.expert_parallel <= 1:
            return 1.0
        per_rank = max(tokens * self.experts_per_token / self.expert_parallel, 1.0)  # every rank's tokens
        return 1.0 + 1.0 / math.sqrt(per_rank)

    def describe(self) -> str:
        """One line for the plan: the link and what it costs."""
        if self.tensor_parallel <= 1 and self.expert_parallel <= 1:
            return "one GPU per replica: no all-reduce"
        what = (f"attention data parallel {self.data_parallel} (no all-reduce), " if self.data_parallel > 1 else "")
        what += (f"EP {self.expert_parallel}: all-to-all for the MoE layers, " if self.expert_parallel > 1 else "")
        bandwidth_gb_s, latency_us = self.link.allreduce(self.tensor_parallel)
        if (bandwidth_gb_s, latency_us) != (self.link.bandwidth_gb_s, self.link.latency_us):
            return (f"{what}2 all-reduces per layer over {self.link.name}, as measured at {self.tensor_parallel} GPUs: "
                    f"{bandwidth_gb_s:g} GB/s bus bandwidth, {latency_us:g} µs ({self.link.measured_source})")
        return (f"{what}2 all-reduces per layer over {self.link.name} ({self.link.bandwidth_gb_s:g} GB/s per direction, "
                f"{self.link.latency_us:g} µs each: {self.link.bandwidth.source}; latency {self.link.latency.source})")
