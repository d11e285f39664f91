"""Published GPU measurements the planner is held to: model × GPU × workload, with their source.

Each :class:`PublishedCase` is one row of NVIDIA's TensorRT-LLM performance overview (read at
NVIDIA/TensorRT-LLM ``docs/source/performance/perf-overview.md``, commit 00f37686, the v1.0
tables): ``trtllm-bench throughput`` at maximum load with FP8 weights, fixed input/output lengths,
the reported figure being total output tokens/s on the row's GPUs. The "SLA" of those rows is
maximum throughput (no latency bound), so the planner is asked for a batch workload of
``copies`` times the published rate; the GPUs it needs are compared with ``copies`` times the
published GPUs (:func:`check_case`). The model shapes are the public ``config.json`` values of the
checkpoints the rows name.

:data:`LATENCY_CASES` hold the prefill (the context phase, which emits the first token) to the
older "Low Latency" table of the same document (TensorRT-LLM v0.5, batch 1, output length 1:
first-token latency) — the latency side of the model, where the throughput rows say nothing.

``benchmarks/planner_published.py`` prints the comparison; ``tests/planner/test_published.py``
holds every throughput case and the long-prompt latency cases within 2×, and the default
efficiencies to them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonkit.planner.capacity import PlanAssumptions, Workload
from tritonkit.planner.catalogue import find_gpu
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.precision import find_precision
from tritonkit.planner.search import SearchSpace, search_deployments

__all__ = ["LATENCY_CASES", "PUBLISHED_CASES", "PERF_OVERVIEW", "PERF_V05", "CaseCheck", "PublishedCase",
           "PublishedLatency", "check_case", "check_latency"]

PERF_OVERVIEW = ("NVIDIA/TensorRT-LLM docs/source/performance/perf-overview.md at commit 00f37686 (v1.0 tables; "
                 "https://nvidia.github.io/TensorRT-LLM/performance/perf-overview.html)")


def _dense(name: str, layers: int, heads: int, kv_heads: int, hidden: int, params: int, source: str
           ) -> TransformerShape:
    return TransformerShape(name=name, num_layers=layers, num_attention_heads=heads, num_kv_heads=kv_heads,
                            head_dim=hidden // heads, total_params=params, active_params=params,
                            params_basis="given (published parameter count)", hidden_size=hidden, source=source)


PERF_V05 = ("NVIDIA/TensorRT-LLM docs/source/performance.md at commit 138f96d4 ('Low Latency' tables, data from "
            "TensorRT-LLM v0.5: batch 1, first-token latency)")

LLAMA_2_7B = _dense("Llama-2-7B", 32, 32, 32, 4096, 6_738_415_616, "meta-llama/Llama-2-7b-hf config.json")
LLAMA_2_70B = _dense("Llama-2-70B", 80, 64, 8, 8192, 68_976_648_192, "meta-llama/Llama-2-70b-hf config.json")
LLAMA_31_8B = _dense("Llama-3.1-8B", 32, 32, 8, 4096, 8_030_261_248, "meta-llama/Llama-3.1-8B-Instruct config.json")
LLAMA_33_70B = _dense("Llama-3.3-70B", 80, 64, 8, 8192, 70_553_706_496,
                      "meta-llama/Llama-3.3-70B-Instruct config.json")
LLAMA_31_405B = _dense("Llama-3.1-405B", 126, 128, 8, 16384, 405_853_388_800,
                       "meta-llama/Llama-3.1-405B-Instruct config.json")
#: 128 routed experts, 8 per token; 235 B total, 22 B active (the model card's figures).
QWEN3_235B = TransformerShape(
    name="Qwen3-235B-A22B", num_layers=94, num_attention_heads=64, num_kv_heads=4, head_dim=128,
    total_params=235_000_000_000, active_params=22_000_000_000, params_basis="given (model card: 235B, 22B active)",
    hidden_size=4096, num_experts=128, experts_per_token=8,
    expert_params=int((235_000_000_000 - 22_000_000_000) / (1 - 8 / 128)), source="Qwen/Qwen3-235B-A22B config.json")


@dataclass(frozen=True)
class PublishedCase:
    """One published measurement: ``tokens_per_s`` output tokens/s of ``model`` on ``gpus`` × ``gpu``."""

    model: TransformerShape
    gpu: str
    precision: str
    tensor_parallel: int
    input_tokens: int
    output_tokens: int
    tokens_per_s: float
    source: str = PERF_OVERVIEW

    @property
    def gpus(self) -> int:
        return self.tensor_parallel

    def describe(self) -> str:
        return (f"{self.model.name} {self.precision.upper()} on {self.gpu} TP{self.tensor_parallel}, "
                f"ISL/OSL {self.input_tokens}/{self.output_tokens}: {self.tokens_per_s:,.0f} output tok/s")


PUBLISHED_CASES: tuple[PublishedCase, ...] = (
    PublishedCase(LLAMA_31_8B, "H100-SXM", "fp8", 1, 1000, 1000, 15_220),
    PublishedCase(LLAMA_31_8B, "H200", "fp8", 1, 128, 2048, 26_221),
    PublishedCase(LLAMA_33_70B, "H200", "fp8", 1, 1000, 1000, 2_909),
    PublishedCase(LLAMA_33_70B, "H100-SXM", "fp8", 2, 1000, 1000, 4_205),
    PublishedCase(LLAMA_33_70B, "H100-SXM", "fp8", 2, 2048, 128, 762),
    PublishedCase(LLAMA_31_405B, "H200", "fp8", 8, 1000, 1000, 3_330),
    PublishedCase(QWEN3_235B, "H200", "fp8", 8, 1000, 1000, 23_789),
)


@dataclass(frozen=True)
class CaseCheck:
    """The planner's answer for one case: GPUs for ``copies`` × the published rate, against ``copies`` × its GPUs."""

    case: PublishedCase
    copies: int
    published_gpus: int
    planned_gpus: int
    planned_deployment: str

    @property
    def ratio(self) -> float:
        """Planned / published GPUs (1 = exact; above 1 the planner is pessimistic)."""
        return self.planned_gpus / self.published_gpus

    def to_dict(self) -> dict[str, Any]:
        return {"case": self.case.describe(), "source": self.case.source, "copies": self.copies,
                "published_gpus": self.published_gpus, "planned_gpus": self.planned_gpus,
                "planned_deployment": self.planned_deployment, "ratio": round(self.ratio, 3)}


def check_case(case: PublishedCase, assumptions: PlanAssumptions | None = None, *, copies: int = 8) -> CaseCheck:
    """Plan ``copies`` × the case's published load (batch workload, no latency bound) at the case's TP (no
    attention data parallel: the rows measure tensor parallelism),
    with the FP8 KV cache the published checkpoints use; compare the GPUs."""
    a = assumptions or PlanAssumptions()
    qps = case.tokens_per_s * copies / case.output_tokens
    workload = Workload(target_qps=qps, input_tokens=case.input_tokens, output_tokens=case.output_tokens,
                        mode="batch")
    space = SearchSpace(tensor_parallel=(case.tensor_parallel,), kv_dtypes=("fp8",), disaggregated=False,
                        attention_dp=False,  # the published rows are tensor-parallel runs
                        batches=(*SearchSpace().batches, 1536, 2048, 3072, 4096))
    found = search_deployments(case.model, find_gpu(case.gpu), find_precision(case.precision), workload, a,
                               space, mean_in=case.input_tokens, mean_out=case.output_tokens)
    assert found.best is not None and found.best.gpus is not None
    return CaseCheck(case, copies, case.gpus * copies, found.best.gpus, found.best.label())


@dataclass(frozen=True)
class PublishedLatency:
    """A published first-token latency at batch 1: ``model`` on ``tensor_parallel`` × ``gpu``, ``input_tokens`` in."""

    model: TransformerShape
    gpu: str
    precision: str
    tensor_parallel: int
    input_tokens: int
    first_token_ms: float
    source: str = PERF_V05

    def describe(self) -> str:
        return (f"{self.model.name} {self.precision.upper()} on {self.gpu} TP{self.tensor_parallel}, "
                f"{self.input_tokens} tokens in: first token {self.first_token_ms:g} ms")


LATENCY_CASES: tuple[PublishedLatency, ...] = (
    PublishedLatency(LLAMA_2_7B, "H100-SXM", "fp8", 1, 128, 7),
    PublishedLatency(LLAMA_2_7B, "H100-SXM", "fp8", 1, 2048, 36),
    PublishedLatency(LLAMA_2_70B, "H100-SXM", "fp8", 4, 128, 26),
    PublishedLatency(LLAMA_2_70B, "H100-SXM", "fp8", 4, 2048, 109),
    PublishedLatency(LLAMA_2_7B, "A100-80GB", "fp16", 1, 128, 16),
    PublishedLatency(LLAMA_2_7B, "A100-80GB", "fp16", 1, 2048, 133),
    PublishedLatency(LLAMA_2_70B, "A100-80GB", "fp16", 4, 128, 47),
    PublishedLatency(LLAMA_2_70B, "A100-80GB", "fp16", 4, 2048, 377),
)


def check_latency(case: PublishedLatency, assumptions: PlanAssumptions | None = None) -> float:
    """The plan's prefill of the case's prompt (TP all-reduces included) over the published first-token latency."""
    from tritonkit.planner.llm_roofline import build_replica
    from tritonkit.planner.precision import kv_dtype_bytes

    precision = find_precision(case.precision)
    kv = case.model.kv_bytes_per_token(kv_dtype_bytes("fp8" if case.precision == "fp8" else "fp16"),
                                       case.tensor_parallel)
    replica = build_replica(case.model, find_gpu(case.gpu), precision, assumptions or PlanAssumptions(),
                            tensor_parallel=case.tensor_parallel, kv_per_token=kv, input_tokens=case.input_tokens,
                            output_tokens=1, weights_override=None)
    return replica.prefill_s() * 1000 / case.first_token_ms
