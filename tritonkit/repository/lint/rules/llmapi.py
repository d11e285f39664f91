"""TK911–TK916 — TensorRT-LLM's LLM-API model (``all_models/llmapi``): config.pbtxt against model.yaml.

The model is a python-backend model whose newest version folder holds a ``model.yaml`` with a
``triton_config`` block. What its ``model.py`` does with them (tensorrtllm_backend v0.19.0 and
NVIDIA/TensorRT-LLM 1.2.0rc2 ``all_models/llmapi/tensorrt_llm/1/model.py``): ``auto_complete_config``
sets ``max_batch_size`` and ``decoupled`` from ``triton_config`` (reading both keys); every other
top-level key is passed to ``tensorrt_llm.LLM(...)``, whose arguments are checked; a streaming
request to a model that is not decoupled is refused. The line (and so which ``LLM()`` arguments
it takes) is told by the tensors the config declares (:func:`tritonkit.trtllm_versions.llmapi_from_inputs`).
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._fs import expand_user, is_regular_file, path_exists, read_user_text
from tritonkit.errors import ConfigError
from tritonkit.repository.lint.core import ERROR, INFO, WARNING, LintContext, ModelInfo, rule

FAMILY = "trtllm"
MODEL_YAML = "model.yaml"


def model_yaml(m: ModelInfo) -> tuple[Path, Any] | None:
    """``(path, parsed)`` of the newest version's ``model.yaml`` (parsed ``None`` when it does not
    parse), or ``None`` when there is none."""
    for version in reversed(m.versions):
        path = m.folder / str(version) / MODEL_YAML
        if is_regular_file(path):
            try:
                return path, yaml.safe_load(read_user_text(path, what="model.yaml"))
            except (yaml.YAMLError, ConfigError, RecursionError):
                return path, None
    return None


def _llmapi(m: ModelInfo, cfg: mc.ModelConfig) -> tuple[Path, Any] | None:
    if cfg.backend != "python":
        return None
    found = model_yaml(m)
    if found is None:
        return None
    _path, doc = found
    if doc is None or (isinstance(doc, dict) and "triton_config" in doc):
        return found
    return None


def _rel(m: ModelInfo, path: Path) -> str:
    return str(path.relative_to(m.repo_root)) if path.is_relative_to(m.repo_root) else str(path)


def _world(doc: dict[str, Any]) -> int:
    total = 1
    for key in ("tensor_parallel_size", "pipeline_parallel_size"):
        value = doc.get(key, 1)
        total *= value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 1
    return total


@rule("TK911", ERROR, "LLM-API model: config.pbtxt sets max_batch_size or decoupled", family=FAMILY)
def batch_or_decoupled_in_config(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None:
        return
    for field, is_set in (("max_batch_size", cfg.max_batch_size != 0),
                          ("model_transaction_policy", cfg.HasField("model_transaction_policy"))):
        if is_set:
            ctx.report(m, f"{field} is set in config.pbtxt, but the LLM-API model.py sets it at load from "
                       f"{_rel(m, found[0])}'s triton_config, and a value written in the config cannot be "
                       "overwritten there", field=field,
                       hint=f"remove {field} from config.pbtxt; set triton_config.max_batch_size / decoupled in "
                            "model.yaml")


@rule("TK912", ERROR, "LLM-API model: model.yaml unreadable or its triton_config incomplete", family=FAMILY)
def triton_config_keys(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None:
        return
    path, doc = found
    where = _rel(m, path)
    if not isinstance(doc, dict):
        ctx.report(m, f"{where} does not parse as a YAML mapping: the model fails to load", file=where,
                   hint="fix the YAML (top-level LLM() arguments and a triton_config block)")
        return
    triton = doc.get("triton_config")
    missing = [k for k in ("max_batch_size", "decoupled") if not isinstance(triton, dict) or k not in triton]
    if missing:
        ctx.report(m, f"{where}: triton_config lacks {', '.join(missing)}, which model.py reads at load "
                   "(KeyError)", file=where, hint="add triton_config: {max_batch_size: 0, decoupled: true}")
    if not isinstance(doc.get("model"), str) or not doc.get("model"):
        ctx.report(m, f"{where} names no model: LLM() needs the checkpoint", file=where,
                   hint="add model: /path/to/hf_folder (as the server sees it) or a Hugging Face id")


@rule("TK913", WARNING, "LLM-API model: model.yaml key the line's LLM() does not take", family=FAMILY)
def unknown_llm_args(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None or not isinstance(found[1], dict):
        return
    from tritonkit.trtllm_versions import llmapi_from_inputs

    line = llmapi_from_inputs(t.name for t in cfg.input)
    if line is None or line.llmapi is None:
        return
    known = line.llmapi.llm_args
    where = _rel(m, found[0])
    for key in found[1]:
        if key == "triton_config" or key in known:
            continue
        near = difflib.get_close_matches(str(key), sorted(known), n=1)
        ctx.report(m, f"{where}: {key!r} is not among TensorRT-LLM {line.version}'s LLM() arguments (the line its "
                   f"tensors say; arguments as read at {line.llmapi.llm_args_source}): LLM() refuses unknown "
                   "arguments at load", file=where,
                   hint=f"did you mean {near[0]!r}?" if near else "remove it, or check the serving release's LlmArgs")


@rule("TK914", ERROR, "LLM-API model: GPUs do not match instances × tp × pp", family=FAMILY)
def gpus_match(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None or not isinstance(found[1], dict):
        return
    world = _world(found[1])
    count = sum(g.count or 1 for g in cfg.instance_group) or 1
    field = 'parameters["gpu_device_ids"]'
    value = cfg.parameters["gpu_device_ids"].string_value if "gpu_device_ids" in cfg.parameters else ""
    if value:
        sets = [[i.strip() for i in s.split(",") if i.strip()] for s in value.split(";")]
        if len(sets) != count:
            ctx.report(m, f"gpu_device_ids {value!r} gives {len(sets)} GPU set(s) for {count} instance(s): "
                       "docs/llmapi.md wants one set per instance", field=field,
                       hint="separate one comma-separated set per instance with ';', e.g. 0,1;2,3")
        for ids in sets:
            if len(ids) != world:
                ctx.report(m, f"gpu_device_ids set {','.join(ids)!r} has {len(ids)} GPU(s); model.yaml's "
                           f"tensor × pipeline parallel size is {world}", field=field,
                           hint=f"give {world} ids per instance, or change tensor_parallel_size / "
                                "pipeline_parallel_size")
    elif count > 1:
        ctx.report(m, f"{count} instances without gpu_device_ids: every instance loads the model on the same "
                   "GPUs", field="instance_group",
                   hint="set parameters gpu_device_ids (one set per instance, '0;1') and start with --no-mpi",
                   severity=WARNING)
    gpus = ctx.target.gpu_count
    if gpus is not None and ctx.target.kind == "gpu" and count * world > gpus and not value:
        ctx.report(m, f"{count} instance(s) × tp × pp {world} need {count * world} GPUs; the target has {gpus}",
                   field="instance_group", hint="lower the parallel sizes or the instances, or use a larger machine")


@rule("TK915", WARNING, "LLM-API model: streaming requests to a model that is not decoupled", family=FAMILY)
def streaming_needs_decoupled(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None or not isinstance(found[1], dict):
        return
    triton = found[1].get("triton_config")
    if isinstance(triton, dict) and "decoupled" in triton and not triton["decoupled"] and \
            any(t.name == "streaming" for t in cfg.input):
        ctx.report(m, f"{_rel(m, found[0])}: triton_config.decoupled is false, so every request with streaming "
                   "true is refused (\"Streaming is only supported in decoupled mode.\")", file=_rel(m, found[0]),
                   hint="set triton_config.decoupled: true to stream (tritonkit build trtllm --streaming)")


@rule("TK916", ERROR, "LLM-API model: the local model path is not there", family=FAMILY)
def model_path_exists(ctx: LintContext, m: ModelInfo, cfg: mc.ModelConfig) -> None:
    found = _llmapi(m, cfg)
    if found is None or not isinstance(found[1], dict) or not isinstance(found[1].get("model"), str):
        return
    value: str = found[1]["model"]
    if not value.startswith(("/", "./", "../", "~")):
        return  # a Hugging Face id (org/name) is fetched by the server, not a path here
    path = expand_user(value)
    path = path if path.is_absolute() else found[0].parent / path
    if path_exists(path):
        return
    where = _rel(m, found[0])
    if path_exists(path.parent):
        ctx.report(m, f"{where}: model {value!r} is not there (its folder {path.parent} is): LLM() cannot load it",
                   file=where, hint="point model at the checkpoint folder as the server sees it")
    else:
        ctx.report(m, f"{where}: model {value!r} is not on this machine; checked only where the path exists "
                   "(a container path is fine)", file=where, severity=INFO,
                   hint="lint where the checkpoint is mounted to check it")
