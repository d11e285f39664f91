"""TK951–TK954 — Triton's vLLM backend (``backend: "vllm"``): config.pbtxt and ``1/model.json``.

What the backend does (triton-inference-server/vllm_backend r26.01, c70d6547, ``src/model.py``):
``auto_complete_config`` makes the model decoupled with ``max_batch_size`` 0 and adds its inputs;
``initialize`` asserts the decoupled transaction policy, reads ``<version>/model.json`` into
``AsyncEngineArgs(**…)`` and refuses a ``KIND_GPU`` instance when ``tensor_parallel_size`` ×
``pipeline_parallel_size`` > 1 ("KIND_GPU is currently for single-GPU models, please specify
KIND_MODEL").
"""

from __future__ import annotations

from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import is_regular_file, read_json
from tritonkit.errors import ConfigError
from tritonkit.repository.lint.core import ERROR, WARNING, LintContext, ModelInfo, rule

FAMILY = "vllm"
MODEL_JSON = "model.json"


def engine_args(m: ModelInfo) -> tuple[str, dict[str, Any] | None, str | None] | None:
    """``(file, parsed, why not)`` of the newest version's ``model.json``; ``None`` when no version has one."""
    for version in reversed(m.versions):
        path = m.folder / str(version) / MODEL_JSON
        if is_regular_file(path):
            where = f"{m.name}/{version}/{MODEL_JSON}"
            try:
                doc = read_json(path, what="vLLM model.json", hint="write model.json as a JSON object")
            except ConfigError as exc:
                return where, None, exc.message
            return (where, doc, None) if isinstance(doc, dict) else (where, None, "not a JSON object")
    return None


def _int(doc: dict[str, Any], key: str) -> int:
    value = doc.get(key, 1)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1


@rule("TK951", ERROR, "vLLM model: model.json missing or unreadable, or names no model", family=FAMILY)
def model_json(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.backend != "vllm":
        return
    found = engine_args(m)
    if found is None:
        ctx.report(m, f"no {MODEL_JSON} in a version folder: the vLLM backend reads its engine arguments there",
                   file=f"{m.name}/", hint="tritonkit build vllm --hf-model DIR writes it")
        return
    where, doc, why = found
    if doc is None:
        ctx.report(m, f"{where} cannot be read as a JSON object ({why}): the model fails to load", file=where,
                   hint="write the AsyncEngineArgs as one JSON object")
    elif not isinstance(doc.get("model"), str) or not doc["model"]:
        ctx.report(m, f"{where} names no model", file=where, hint='add "model": "/path/or/hf-id"')


@rule("TK952", ERROR, "vLLM model: KIND_GPU instances for a multi-GPU engine", family=FAMILY)
def kind_gpu_multi(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = engine_args(m) if cfg.backend == "vllm" else None
    if found is None or found[1] is None:
        return
    world = _int(found[1], "tensor_parallel_size") * _int(found[1], "pipeline_parallel_size")
    if world > 1 and any(g.kind == mc.ModelInstanceGroup.KIND_GPU for g in cfg.instance_group):
        ctx.report(m, f"tensor × pipeline parallel size {world} with a KIND_GPU instance group: the backend "
                   "refuses it (\"KIND_GPU is currently for single-GPU models\")", field="instance_group",
                   hint="use instance_group [{kind: KIND_MODEL, count: 1}]")


@rule("TK953", ERROR, "vLLM model: not decoupled, or batched by Triton", family=FAMILY)
def decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    if cfg.backend != "vllm":
        return
    if cfg.HasField("model_transaction_policy") and not cfg.model_transaction_policy.decoupled:
        ctx.report(m, "decoupled is false: the backend asserts the decoupled transaction policy at load",
                   field="model_transaction_policy", hint="remove model_transaction_policy (auto-complete sets it)")
    if cfg.max_batch_size > 0:
        ctx.report(m, f"max_batch_size {cfg.max_batch_size}: the backend batches in vLLM and sets 0 itself",
                   field="max_batch_size", hint="remove max_batch_size", severity=WARNING)


@rule("TK954", WARNING, "vLLM model: engine argument out of range", family=FAMILY)
def engine_ranges(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = engine_args(m) if cfg.backend == "vllm" else None
    if found is None:
        return
    where, doc, _ = found
    if doc is None:
        return
    share = doc.get("gpu_memory_utilization")
    if share is not None and (isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1):
        ctx.report(m, f"{where}: gpu_memory_utilization {share!r} must be a share in (0, 1]", file=where,
                   hint="e.g. 0.9 (vLLM's default)")
    for key in ("max_num_seqs", "max_model_len", "tensor_parallel_size", "pipeline_parallel_size"):
        value = doc.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            ctx.report(m, f"{where}: {key} {value!r} must be a positive integer", file=where,
                       hint=f"fix {key} or remove it (vLLM's default)")
