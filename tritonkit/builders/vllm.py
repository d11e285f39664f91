"""Triton's vLLM backend: a ``backend: "vllm"`` model whose ``1/model.json`` holds vLLM's engine arguments.

Facts (triton-inference-server/vllm_backend r26.01, commit c70d6547): ``src/model.py`` reads
``<version>/model.json`` into ``AsyncEngineArgs(**…)``; its ``auto_complete_config`` makes the
model decoupled with ``max_batch_size`` 0 and declares the inputs (``text_input``, ``stream``,
``sampling_parameters``, ``exclude_input_in_output``, ``return_*``) and outputs (``text_output``,
``finish_reason``, …) itself, so the config needs only the backend and the instance group;
``KIND_GPU`` is refused for tp × pp > 1 ("please specify KIND_MODEL"), and the sample repository
(``samples/model_repository/vllm_model``) uses one ``KIND_MODEL`` instance.

The engine arguments come from the same planner figures as TensorRT-LLM's
(:func:`~tritonkit.builders.trtllm.params.derive_engine_params`: the model's ``config.json``, the
GPU, tp × pp, the workload), each printed with its reason:

* ``max_model_len``: prompt + output at the p95 lengths (or twice the means), rounded up to 128,
  capped at the model's positions (the planner's ``max_seq_len``);
* ``max_num_seqs``: the sequences the KV cache holds at mean lengths (the planner's
  ``max_batch_size``);
* ``gpu_memory_utilization``: 0.9, vLLM's default share of the GPU it takes (weights, activations
  and KV cache together);
* ``tensor_parallel_size`` / ``pipeline_parallel_size``: as given (tp must divide the heads).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.builders.trtllm.params import EnginePlan, EngineTarget, Reason, derive_engine_params
from tritonkit.errors import ConfigError
from tritonkit.planner import load_hf_config
from tritonkit.repository import InstanceGroup, ModelRepository, ModelSpec

__all__ = ["VLLM_DEFAULT_GPU_MEMORY_UTILIZATION", "VllmBuildResult", "build_vllm", "vllm_model_spec"]

#: vLLM's default ``gpu_memory_utilization`` (its EngineArgs / CacheConfig default).
VLLM_DEFAULT_GPU_MEMORY_UTILIZATION = 0.9
_SOURCE = "triton-inference-server/vllm_backend r26.01 (c70d6547) src/model.py, samples/model_repository/vllm_model"


@dataclass(frozen=True)
class VllmBuildResult:
    """What ``build_vllm`` derived and wrote."""

    repo: Path
    name: str
    engine_args: dict[str, Any]
    reasons: tuple[Reason, ...]
    plan: EnginePlan

    def summary(self) -> str:
        lines = ["vLLM engine arguments (model.json; every value can be overridden):"]
        lines += [r.render() for r in self.reasons]
        lines.append(f"repository: {self.repo} ({self.name}: backend vllm, one KIND_MODEL instance; "
                     f"inputs and outputs completed by the backend at load, as in {_SOURCE})")
        return "\n".join(lines)


def vllm_model_spec(name: str) -> ModelSpec:
    """The config: the backend and one KIND_MODEL instance (the backend completes the rest at load)."""
    return ModelSpec(name=name, backend="vllm", dynamic_batching=None,
                     instance_groups=[InstanceGroup(kind="KIND_MODEL", count=1)])


def build_vllm(
    hf_model: str | Path,
    *,
    repo: str | Path,
    name: str = "vllm_model",
    target: EngineTarget | None = None,
    model_path: str | None = None,
    gpu_memory_utilization: float | None = None,
    max_num_seqs: int | None = None,
    max_model_len: int | None = None,
    force: bool = False,
) -> VllmBuildResult:
    """Derive vLLM's engine arguments for ``hf_model`` on ``target`` and write the model into ``repo``.

    ``model_path`` is the checkpoint as the server sees it (default: the HF folder's absolute path).
    Everything is checked before anything is written.
    """
    hf = Path(hf_model).resolve()
    config_path = hf / "config.json" if hf.is_dir() else hf
    target = target or EngineTarget()
    plan = derive_engine_params(load_hf_config(config_path), target, source=str(config_path))
    planned = {r.key: r for r in plan.reasons}
    reasons: list[Reason] = []
    share = gpu_memory_utilization if gpu_memory_utilization is not None else VLLM_DEFAULT_GPU_MEMORY_UTILIZATION
    if not 0 < share <= 1:
        raise ConfigError(f"gpu_memory_utilization {share} must be in (0, 1]", hint="pass --gpu-memory-utilization 0.9")
    for key, value in (("max_num_seqs", max_num_seqs), ("max_model_len", max_model_len)):
        if value is not None and value < 1:
            raise ConfigError(f"{key} {value} must be >= 1", hint=f"pass --{key.replace('_', '-')} 1 or more")
    model = model_path or str(hf if hf.is_dir() else hf.parent)
    args: dict[str, Any] = {"model": model}
    reasons.append(Reason("model", model, "the checkpoint as the server sees it"))
    args["gpu_memory_utilization"] = share
    reasons.append(Reason("gpu_memory_utilization", share, "given" if gpu_memory_utilization is not None else
                          "vLLM's default: the share of the GPU vLLM takes (weights, activations, KV cache)"))
    args["max_num_seqs"] = max_num_seqs if max_num_seqs is not None else plan.params.max_batch_size
    reasons.append(Reason("max_num_seqs", args["max_num_seqs"], "given" if max_num_seqs is not None else
                          f"planner: {planned['max_batch_size'].why}"))
    args["max_model_len"] = max_model_len if max_model_len is not None else plan.params.max_seq_len
    reasons.append(Reason("max_model_len", args["max_model_len"], "given" if max_model_len is not None else
                          f"planner: {planned['max_seq_len'].why}"))
    args["tensor_parallel_size"] = target.tp
    if target.pp > 1:
        args["pipeline_parallel_size"] = target.pp
    reasons.append(Reason("tensor × pipeline parallel", f"{target.tp} × {target.pp}",
                          f"{target.tp * target.pp} GPU(s), one KIND_MODEL instance (KIND_GPU is refused above one)"))
    repository = ModelRepository.init(repo)
    if (repository.root / name / "config.pbtxt").exists() and not force:
        raise ConfigError(f"{repository.root} already holds {name}", hint="pass --force to replace it, or --name")
    repository.add_model(vllm_model_spec(name), files={"model.json": json.dumps(args, indent=2) + "\n"},
                         overwrite=True)
    return VllmBuildResult(repo=repository.root, name=name, engine_args=args, reasons=tuple(reasons), plan=plan)
