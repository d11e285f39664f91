"""What an LLM plan writes for the engines, and what ``build trtllm`` / ``build vllm --from-plan`` read.

:func:`engine_parameters` turns a plan's :class:`~tritonkit.planner.result.ServingSuggestion` into
each engine's own names: TensorRT-LLM's LLM-API arguments (``model.yaml``), its engine build
options, vLLM's engine arguments, and Triton's instance groups. :func:`read_plan` reads a saved
plan (``tritonkit plan ... --out plan.json``) back into :class:`PlanServing`, the values a builder
takes from it; a flag given on the command line wins over the plan (the builder says which won).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tritonkit._fs import read_json
from tritonkit.errors import ConfigError

if TYPE_CHECKING:
    from tritonkit.planner.result import CapacityPlan

__all__ = ["PlanServing", "engine_parameters", "merge_plan", "read_plan"]


def engine_parameters(plan: CapacityPlan) -> dict[str, Any]:
    """Serving parameters for each engine, in that engine's names (see the module docstring)."""
    s = plan.suggestion
    kv_fp8 = s.kv_cache_dtype in ("fp8", "int8")
    llmapi: dict[str, Any] = {
        "tensor_parallel_size": s.tensor_parallel,
        "pipeline_parallel_size": s.pipeline_parallel,
        "max_batch_size": s.max_batch_size,
        "max_num_tokens": s.max_num_tokens,
        "max_seq_len": s.max_seq_len,
        "enable_chunked_prefill": bool(s.enable_chunked_prefill),
        "kv_cache_config": {"free_gpu_memory_fraction": s.kv_cache_free_gpu_mem_fraction,
                            **({"dtype": "fp8"} if kv_fp8 else {})},
    }
    if s.expert_parallel > 1:
        llmapi["moe_expert_parallel_size"] = s.expert_parallel
    if s.attention_dp:
        llmapi["enable_attention_dp"] = True
    build = {"tp_size": s.tensor_parallel, "pp_size": s.pipeline_parallel, "max_batch_size": s.max_batch_size,
             "max_num_tokens": s.max_num_tokens, "max_input_len": s.max_input_len, "max_seq_len": s.max_seq_len,
             "kv_cache_free_gpu_mem_fraction": s.kv_cache_free_gpu_mem_fraction,
             "enable_chunked_context": bool(s.enable_chunked_prefill)}
    vllm: dict[str, Any] = {  # vLLM's attention data parallel: data_parallel_size ranks of TP 1
        "tensor_parallel_size": 1 if s.attention_dp else s.tensor_parallel,
        **({"data_parallel_size": s.tensor_parallel} if s.attention_dp else {}),
        "pipeline_parallel_size": s.pipeline_parallel,
        "max_num_seqs": s.max_batch_size,
        "max_model_len": s.max_seq_len,
        "gpu_memory_utilization": _vllm_utilisation(plan),
        "enable_chunked_prefill": bool(s.enable_chunked_prefill),
        "max_num_batched_tokens": s.max_num_tokens,
        **({"kv_cache_dtype": "fp8"} if kv_fp8 else {}),
        **({"enable_expert_parallel": True} if s.expert_parallel > 1 else {}),
    }
    triton = {"instance_group": [{"kind": "KIND_MODEL", "count": s.instance_count}],
              "gpus_per_instance": s.tensor_parallel * s.pipeline_parallel, "replicas": s.replicas}
    out: dict[str, Any] = {"trtllm_llmapi": llmapi, "trtllm_build": build, "vllm": vllm, "triton": triton}
    if s.disaggregated:
        out["disaggregated"] = dict(s.disaggregated)
    return out


def _vllm_utilisation(plan: CapacityPlan) -> float | None:
    """vLLM's ``gpu_memory_utilization`` is a share of the whole GPU: 1 − the plan's reserve share."""
    try:
        reserve = float(plan.value("reserve_gib_per_gpu"))
        memory = float(plan.value("gpu_memory_gib"))
    except (KeyError, TypeError, ValueError):
        return None
    return round(max(0.05, min(0.95, 1 - reserve / memory)), 2)


@dataclass(frozen=True)
class PlanServing:
    """What a builder takes from a saved plan (``None``: the plan does not say)."""

    source: str
    gpu: str | None = None
    precision: str | None = None
    kv_dtype: str | None = None
    tp: int | None = None
    pp: int | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    input_tokens_p95: float | None = None
    output_tokens_p95: float | None = None
    max_batch_size: int | None = None
    max_num_tokens: int | None = None
    max_input_len: int | None = None
    max_seq_len: int | None = None
    kv_cache_fraction: float | None = None
    chunked_context: bool | None = None
    gpu_memory_utilization: float | None = None
    #: A disaggregated plan's workers (``prefill_workers``, ``prefill_tensor_parallel``, ``decode_workers``).
    disaggregated: dict[str, Any] | None = None

    def given(self) -> dict[str, Any]:
        """The values the plan gives, by builder option name."""
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name not in ("source", "disaggregated") and getattr(self, f.name) is not None}


def read_plan(path: str | Path) -> PlanServing:
    """The serving values of a plan JSON that ``tritonkit plan --out`` wrote for an LLM.

    ``ConfigError`` when the file is not JSON, not a plan, or a plan of a measured non-LLM model.
    """
    file = Path(path)
    # The one reader of a user's JSON: a FIFO or device refused before it is opened, numbers finite.
    data = read_json(file, what="plan", hint="pass the file 'tritonkit plan ... --out plan.json' wrote", finite=True)
    if not isinstance(data, dict) or data.get("kind") != "llm" or not isinstance(data.get("serving"), dict):
        raise ConfigError(f"{file}: not an LLM plan (no kind 'llm' with serving parameters)",
                          hint="write one with 'tritonkit plan --hf-config ... --gpu ... --out plan.json'")
    serving, inputs = data["serving"], data.get("inputs") or {}
    workload = inputs.get("workload") or {}
    gpu = (inputs.get("gpu") or {}).get("name")
    build = (data.get("engines") or {}).get("trtllm_build") or {}
    vllm = (data.get("engines") or {}).get("vllm") or {}
    return PlanServing(
        source=str(file),
        gpu=gpu if isinstance(gpu, str) and not gpu.endswith("(edited)") and gpu != "custom" else None,
        precision=inputs.get("precision"), kv_dtype=inputs.get("kv_dtype"),
        tp=serving.get("tensor_parallel"), pp=serving.get("pipeline_parallel"),
        input_tokens=workload.get("input_tokens"), output_tokens=workload.get("output_tokens"),
        input_tokens_p95=workload.get("input_tokens_p95"), output_tokens_p95=workload.get("output_tokens_p95"),
        max_batch_size=serving.get("max_batch_size"), max_num_tokens=serving.get("max_num_tokens"),
        max_input_len=serving.get("max_input_len"), max_seq_len=serving.get("max_seq_len"),
        kv_cache_fraction=serving.get("kv_cache_free_gpu_mem_fraction"),
        chunked_context=build.get("enable_chunked_context"),
        gpu_memory_utilization=vllm.get("gpu_memory_utilization"),
        disaggregated=serving.get("disaggregated") if isinstance(serving.get("disaggregated"), dict) else None,
    )


def merge_plan(plan: PlanServing, values: dict[str, Any], explicit: set[str], names: dict[str, str]
               ) -> tuple[dict[str, Any], list[str]]:
    """A builder's option values with the plan's filled in: ``names`` maps a :class:`PlanServing` field to
    the builder's option (parameter name); an option in ``explicit`` (given on the command line) wins
    over the plan. Returns the merged values and one line per option the plan touched, saying which won."""
    merged = dict(values)
    said: list[str] = []
    for field_name, value in plan.given().items():
        option = names.get(field_name)
        if option is None:
            continue
        flag = "--" + option.replace("_", "-")
        if option in explicit:
            if merged.get(option) != value:
                said.append(f"{flag} {_show(merged.get(option))} (given) wins over the plan's {_show(value)}")
            continue
        merged[option] = value
        said.append(f"{flag} {_show(value)} from the plan")
    if plan.disaggregated:
        d = plan.disaggregated
        said.append(f"the plan is disaggregated ({d.get('prefill_workers')} prefill workers of TP "
                    f"{d.get('prefill_tensor_parallel')}, {d.get('decode_workers')} decode workers): this builds the "
                    f"decode workers' model; build the prefill workers' with --tp {d.get('prefill_tensor_parallel')}")
    return merged, said


def _show(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
