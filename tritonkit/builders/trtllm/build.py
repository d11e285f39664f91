"""``build_trtllm``: HF checkpoint → derived engine parameters → repository → engine build (GPU only).

The steps, each usable alone: :func:`~tritonkit.builders.trtllm.params.derive_engine_params`,
:func:`~tritonkit.builders.trtllm.repository.write_trtllm_repository`,
:func:`~tritonkit.builders.trtllm.engine.write_build_files` /
:func:`~tritonkit.builders.trtllm.engine.run_engine_build`, and
:func:`~tritonkit.builders.trtllm.engine.check_engine`. With ``engine="reference"`` the same
repository is written with the CPU reference engine in place of the GPU one, and nothing is built.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any, Literal

from tritonkit.builders.trtllm.engine import (
    EngineInfo,
    check_engine,
    engine_build_argv,
    engine_build_plan,
    run_engine_build,
    runtime_version,
    write_build_files,
)
from tritonkit.builders.trtllm.instances import TokenizerInstances, derive_tokenizer_instances
from tritonkit.builders.trtllm.llm_args import check_llm_args
from tritonkit.builders.trtllm.llmapi import LlmApiOptions, LlmApiPlan, plan_llmapi, write_llmapi_repository
from tritonkit.builders.trtllm.params import EngineParams, EnginePlan, EngineTarget, derive_engine_params
from tritonkit.builders.trtllm.reference import (
    ReferenceEngine,
    build_reference_llmapi_repository,
    build_reference_repository,
)
from tritonkit.builders.trtllm.repository import (
    ENGINE_QUEUE_DELAY,
    TrtllmRepoOptions,
    write_trtllm_repository,
)
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.planner import load_hf_config
from tritonkit.trtllm_versions import EngineChoice, TrtllmInterface, resolve_trtllm_line

__all__ = ["LlmApiSettings", "TrtllmBuildResult", "build_trtllm"]


@dataclass(frozen=True, kw_only=True)
class LlmApiSettings:
    """The LLM-API backend's own knobs (``--engine llmapi``): instances of the model (each on
    tp × pp GPUs of ``gpu_ids``), CUDA graphs, and further ``LLM()`` arguments for ``model.yaml``
    (each must be one the line accepts)."""

    instances: int = 1
    cuda_graphs: bool = True
    llm_args: Mapping[str, Any] = field(default_factory=dict)
    #: ``--engine reference``: serve the LLM-API interface instead of the engine's.
    reference_interface: Literal["engine", "llmapi"] = "engine"


@dataclass(frozen=True, kw_only=True)
class TrtllmBuildResult:
    """What was derived, written and (maybe) built."""

    repo: Path
    engine: EngineChoice
    plan: EnginePlan | None
    line: TrtllmInterface
    options: TrtllmRepoOptions | None = None
    build_argv: list[str] = field(default_factory=list)
    engine_built: bool = False
    engine_version: str | None = None
    not_built_reason: str | None = None
    engine_info: EngineInfo | None = None
    line_why: str = ""
    llmapi: LlmApiPlan | None = None
    tokenizer_instances: TokenizerInstances | None = None

    def summary(self) -> str:
        """Human-readable: the reasoning, what was written, and the engine's state."""
        lines = [f"line: {self.line_why}"]
        if self.llmapi is not None:
            lines += ["LLM-API model.yaml (every value can be overridden):", self.llmapi.render_text(), ""]
            lines.append(f"repository: {self.repo} (tensorrt_llm [LLM-API backend], one python model)")
            lines.append(f"interface: TensorRT-LLM {self.line.version} LLM-API, from "
                         f"{self.llmapi.options.api.source}")
            if self.engine == "reference":
                lines.append("model: CPU reference stand-in (serves here; it tests the serving path, not text quality)")
            else:
                lines.append("model.py: TensorRT-LLM's own, from the container (/app/all_models/llmapi/tensorrt_llm/1) "
                             "unless --python-model-file placed it")
                lines.append(f"serve: {self.llmapi.launch}")
            return "\n".join(lines)
        if self.plan is not None:
            lines += ["engine parameters (rule of thumb; every value can be overridden):", self.plan.render_text(), ""]
        if self.tokenizer_instances is not None:
            lines.append(f"{'preprocessing / postprocessing instances':<32} {self.tokenizer_instances.count:<14} "
                         f"{self.tokenizer_instances.why}")
        lines.append(f"repository: {self.repo} (preprocessing, tensorrt_llm [{self.engine}], postprocessing, "
                     "ensemble, tensorrt_llm_bls)")
        v = self.line
        lines.append(f"interface: TensorRT-LLM {v.version} ({v.min_tokens_input}, {v.seed_input}; also accepted: "
                     f"{', '.join(v.renamed_inputs)}), from {v.source}")
        if self.engine == "reference":
            lines.append("engine: CPU reference engine (serves here; it tests the serving path, not text quality)")
        elif self.engine_built:
            assert self.options is not None
            lines.append(f"engine: built by TensorRT-LLM {self.engine_version} in {self.options.engine_dir}")
        elif self.engine_info is not None:
            assert self.options is not None
            lines.append(f"engine: found in {self.options.engine_dir} (TensorRT-LLM {self.engine_info.version}), "
                         "checked against the configs")
        else:
            lines.append(f"engine: not built — {self.not_built_reason}")
            # Quoted for a POSIX shell: a path holding spaces or $(...) is pasted as a path, not run.
            lines.append(f"  to build it on the GPU machine: {shlex.join(self.build_argv)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit build trtllm --json``): the parameters with their reasons, the build
        command, and the engine's TensorRT-LLM version (built now, or found and checked)."""
        return {
            "repo": str(self.repo),
            "engine": self.engine,
            "params": self.plan.params.to_dict() if self.plan else None,
            "reasons": [{"key": r.key, "value": str(r.value), "why": r.why} for r in self.plan.reasons]
            if self.plan else [],
            "build_argv": self.build_argv,
            "engine_built": self.engine_built,
            "engine_version": self.engine_version or (self.engine_info.version if self.engine_info else None),
            "not_built_reason": self.not_built_reason,
            "trtllm_version": self.line.version,
            "line": self.line_why,
            "model_yaml": self.llmapi.model_yaml if self.llmapi else None,
            "tokenizer_instances": self.tokenizer_instances.count if self.tokenizer_instances else None,
        }


def build_trtllm(
    hf_model: str | Path | None,
    *,
    repo: str | Path,
    target: EngineTarget | None = None,
    engine: EngineChoice | None = None,
    engine_dir: str | None = None,
    tokenizer_dir: str | None = None,
    hf_model_on_build_machine: str | None = None,
    gpu_ids: Sequence[int] | None = None,
    streaming: bool = True,
    triton_max_batch_size: int | None = None,
    batch_window: str = ENGINE_QUEUE_DELAY,
    tokenizer_instances: int | None = None,
    bls_instances: int = 1,
    trtllm_version: str | None = None,
    python_model_file: str | Path | None = None,
    run_build: bool = True,
    runtime: str | None = None,
    force: bool = False,
    llmapi: LlmApiSettings | None = None,
    model_path: str | None = None,
    log: Callable[[str], None] | None = None,
) -> TrtllmBuildResult:
    """Derive, write and build; see the module docstring.

    ``target`` is what the engine is derived for (GPU, tp/pp, workload, precisions, overrides;
    default: one H100-80GB at the model's own precision).
    ``engine_dir`` / ``tokenizer_dir`` / ``hf_model_on_build_machine`` are paths as the server and
    the build machine see them (default: this machine's absolute paths: ``<repo>/tensorrt_llm/1/engine``
    and the HF folder). ``gpu_ids`` default to ``0 … tp×pp−1``. ``runtime`` is the serving
    TensorRT-LLM version to check an existing engine against (default: the one installed here, if any).
    ``tokenizer_instances`` (pre- and postprocessing each; default: derived from this machine,
    :func:`~tritonkit.builders.trtllm.instances.derive_tokenizer_instances`, and 1 for the reference
    engine, which shares this machine's CPUs) and
    ``bls_instances`` are python-model instance counts: each handles one request (or one streamed
    token) at a time. ``trtllm_version`` picks the TensorRT-LLM line whose interface the configs
    follow and ``engine`` the backend (``None``: as the line serves today, the LLM-API backend where
    it has one): :func:`~tritonkit.trtllm_versions.resolve_trtllm_line` decides both.
    ``engine="llmapi"`` writes the LLM-API repository (``llmapi`` holds its own knobs; ``model_path``
    is the checkpoint as the server sees it, default the HF folder).
    """
    say = log or (lambda _line: None)
    root = Path(repo).resolve()
    settings = llmapi or LlmApiSettings()
    wants = "llmapi" if engine == "reference" and settings.reference_interface == "llmapi" else engine
    interface, chosen, line_why = resolve_trtllm_line(trtllm_version, installed=runtime_version(), engine=wants)
    say(f"line: {line_why}")
    target = replace(target or EngineTarget(), gpu=(target or EngineTarget()).gpu_spec)  # an unknown GPU: refused now
    _check_extra_llm_args(settings, interface, "llmapi" if wants == "llmapi" else chosen)
    plan, hf_dir = _derive_plan(hf_model, target, say)
    result = partial(TrtllmBuildResult, repo=root, plan=plan, line=interface, line_why=line_why)
    if engine == "reference" and settings.reference_interface == "llmapi":
        ref_api = build_reference_llmapi_repository(root, engine=_reference_engine(plan), streaming=streaming, overwrite=force,
                                                    trtllm_version=interface.version, extra_llm_args=settings.llm_args)
        return result(engine="reference", llmapi=ref_api.plan)
    if chosen == "llmapi":
        if hf_dir is None and model_path is None:
            raise ConfigError("the LLM-API backend needs the model: its folder to plan from (and to load)",
                              hint="pass --hf-model DIR (the folder with config.json and the weights)")
        api_plan = plan_llmapi(_llmapi_options(interface, target, settings, model=model_path or str(hf_dir),
                                               streaming=streaming, gpu_ids=gpu_ids), plan)
        write_llmapi_repository(root, api_plan, python_model_file=python_model_file, overwrite=force)
        return result(engine="llmapi", llmapi=api_plan)
    if engine == "reference":
        ref = build_reference_repository(root, engine=_reference_engine(plan), streaming=streaming,
                                         max_batch_size=triton_max_batch_size, batch_window=batch_window,
                                         tokenizer_instances=tokenizer_instances or 1,
                                         trtllm_version=interface.version, overwrite=force)
        why = "given" if tokenizer_instances else "the reference engine shares this machine's CPUs with the client"
        return result(engine="reference", options=ref.options,
                      tokenizer_instances=TokenizerInstances(tokenizer_instances or 1, why))
    engine = chosen
    if plan is None or hf_dir is None:
        raise ConfigError(f"engine {engine!r} needs the Hugging Face model folder to derive and build the engine",
                          hint="pass --hf-model DIR (the folder with config.json and the weights)")
    params = plan.params
    ids, batch, tok_dir = _serving_inputs(params, target, hf_dir, gpu_ids, triton_max_batch_size, tokenizer_dir)
    engine_path = engine_dir or str(root / "tensorrt_llm" / "1" / "engine")
    tokenizers = derive_tokenizer_instances(batch, given=tokenizer_instances)
    say(f"preprocessing / postprocessing instances: {tokenizers.count} ({tokenizers.why})")
    options = TrtllmRepoOptions(
        engine=engine, engine_dir=engine_path, tokenizer_dir=tok_dir, max_batch_size=batch, streaming=streaming,
        gpu_ids=tuple(ids), kv_cache_free_gpu_mem_fraction=params.kv_cache_free_gpu_mem_fraction,
        enable_kv_cache_reuse=params.enable_kv_cache_reuse, enable_chunked_context=params.enable_chunked_context,
        max_beam_width=params.max_beam_width, batch_window=batch_window,
        preprocessing_instances=tokenizers.count, postprocessing_instances=tokenizers.count,
        bls_instances=bls_instances, trtllm_version=interface.version,
    )
    write_trtllm_repository(root, options, python_model_file=python_model_file, overwrite=force)
    build_plan = engine_build_plan(params, hf_model=hf_model_on_build_machine or str(hf_dir), engine_dir=engine_path)
    write_build_files(root, build_plan)
    built, version, reason = _run_build(root, engine_path, run_build=run_build)
    info = None
    if (Path(engine_path) / "config.json").is_file():
        info = check_engine(engine_path, runtime=runtime or runtime_version(), triton_max_batch_size=batch,
                            gpu_ids=ids, enable_kv_cache_reuse=params.enable_kv_cache_reuse)
    return result(engine=engine, options=options, build_argv=engine_build_argv(root), engine_built=built,
                  engine_version=version, not_built_reason=reason, engine_info=info, tokenizer_instances=tokenizers)


def _check_extra_llm_args(settings: LlmApiSettings, interface: TrtllmInterface, writes: str) -> None:
    """``--llm-arg`` keys and values checked against the line's ``LLM()`` whatever the engine (an
    unknown key is never dropped silently), then refused where no ``model.yaml`` is written."""
    if not settings.llm_args:
        return
    if interface.llmapi is None:
        raise ConfigError(f"--llm-arg: TensorRT-LLM {interface.version} has no LLM-API backend to take it "
                          "(it comes with 0.19)", hint="pass --trtllm-version 0.19 or newer, or drop --llm-arg")
    check_llm_args(settings.llm_args, interface.llmapi.llm_args, line=interface.version,
                   source=interface.llmapi.llm_args_source)
    if writes != "llmapi":
        raise ConfigError(f"--llm-arg sets LLM() arguments in the LLM-API backend's model.yaml, which the {writes} "
                          "engine's repository does not have",
                          hint="add --engine llmapi (or --engine reference --interface llmapi), or drop --llm-arg")


def _derive_plan(hf_model: str | Path | None, target: EngineTarget,
                 say: Callable[[str], None]) -> tuple[EnginePlan | None, Path | None]:
    """The engine parameters derived from the HF model's config (its folder or its config.json), and its folder."""
    if hf_model is None:
        return None, None
    hf_dir = Path(hf_model).resolve()
    config_path = hf_dir / "config.json" if hf_dir.is_dir() else hf_dir
    hf_config = load_hf_config(config_path)
    plan = derive_engine_params(hf_config, target, source=str(config_path))
    say(plan.render_text())
    return plan, hf_dir.parent if hf_dir.is_file() else hf_dir


def _llmapi_options(interface: TrtllmInterface, target: EngineTarget, settings: LlmApiSettings, *, model: str,
                    streaming: bool, gpu_ids: Sequence[int] | None) -> LlmApiOptions:
    """What the LLM-API plan is derived from: the target's parallelism and the overrides it knows."""
    ov = target.overrides
    return LlmApiOptions(
        line=interface, model=model, tp=target.tp, pp=target.pp,
        max_batch_size=None, max_num_tokens=None, max_seq_len=None,
        kv_cache_free_gpu_memory_fraction=None,
        enable_block_reuse=bool(ov and ov.enable_kv_cache_reuse),
        enable_chunked_prefill=bool(ov and ov.enable_chunked_context),
        cuda_graphs=settings.cuda_graphs, streaming=streaming, instances=settings.instances,
        gpu_ids=gpu_ids, extra_llm_args=settings.llm_args)


def _serving_inputs(params: EngineParams, target: EngineTarget, hf_dir: Path, gpu_ids: Sequence[int] | None,
                    triton_max_batch_size: int | None, tokenizer_dir: str | None) -> tuple[list[int], int, str]:
    """The GPU ids (one per tp × pp rank), Triton's max_batch_size (at most the engine's) and the
    tokenizer's folder (one with tokenizer.json)."""
    ids = list(gpu_ids) if gpu_ids is not None else list(range(params.world_size))
    if len(ids) != params.world_size:
        raise ConfigError(f"{len(ids)} GPU id(s) given ({','.join(map(str, ids))}) but tp {target.tp} × pp {target.pp} = "
                          f"{params.world_size}", hint=f"give exactly {params.world_size} ids with --gpu-ids")
    batch = triton_max_batch_size if triton_max_batch_size is not None else params.max_batch_size
    if batch > params.max_batch_size:
        raise ConfigError(f"Triton max_batch_size {batch} exceeds the engine's {params.max_batch_size}",
                          hint="lower --triton-max-batch-size or raise --max-batch-size")
    if tokenizer_dir is None and not (hf_dir / "tokenizer.json").is_file():
        raise ConfigError(f"{hf_dir}: no tokenizer.json; the preprocessing and postprocessing models read it",
                          hint="save the fast tokenizer there (transformers: AutoTokenizer.from_pretrained(d)"
                               ".save_pretrained(d)), or pass --tokenizer-dir")
    return ids, batch, tokenizer_dir or str(hf_dir)


def _run_build(root: Path, engine_path: str, *, run_build: bool) -> tuple[bool, str | None, str | None]:
    """Build the engine unless one is already there (it is checked instead): built, its version, why not."""
    if (Path(engine_path) / "config.json").is_file():
        return False, None, None
    if not run_build:
        return False, None, "skipped (--no-build)"
    try:
        return True, run_engine_build(root), None
    except MissingComponentError as exc:
        return False, None, exc.message


def _reference_engine(plan: EnginePlan | None) -> ReferenceEngine:
    if plan is None:
        return ReferenceEngine()
    return ReferenceEngine(max_batch_size=plan.params.max_batch_size, max_input_len=plan.params.max_input_len,
                           max_seq_len=plan.params.max_seq_len, max_num_tokens=plan.params.max_num_tokens)
