"""``tritonkit build trtllm``: HF checkpoint → engine parameters → in-flight-batching repository → engine."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tritonkit._values import COUNT, FRACTION, INSTANCES, MAX_GPUS, PARALLEL, TOKENS, excerpt
from tritonkit.cli._common import UserPath, Words, echo_result, number

F = TypeVar("F", bound=Callable[..., Any])


def _gpu_ids(_ctx: click.Context, _param: click.Parameter, value: str | None) -> list[int] | None:
    if value is None:
        return None
    try:
        ids = [int(part) for part in value.split(",") if part.strip()]
    except ValueError:
        raise click.BadParameter(f"{excerpt(value)}: expected comma-separated GPU ids like 0,1") from None
    if not ids or any(not 0 <= i < MAX_GPUS for i in ids):
        raise click.BadParameter(f"{excerpt(value)}: expected comma-separated GPU ids from 0 to {MAX_GPUS - 1}, like 0,1")
    return ids


#: What ``build trtllm --from-plan`` takes from a plan: :class:`~tritonkit.planner.PlanServing` field → option.
_PLAN_OPTIONS = {name: name for name in (
    "gpu", "precision", "kv_dtype", "tp", "pp", "input_tokens", "output_tokens", "input_tokens_p95",
    "output_tokens_p95", "max_batch_size", "max_num_tokens", "max_input_len", "max_seq_len", "kv_cache_fraction",
    "chunked_context")}


def from_plan_option(command: F) -> F:
    """``--from-plan plan.json``, shared by ``build trtllm`` and ``build vllm``."""
    return click.option(
        "--from-plan", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
        help="A plan JSON ('tritonkit plan ... --out plan.json'): its deployment (GPU, tp × pp, batch, lengths, KV "
             "dtype) fills the options not given; an option given here wins, and each is printed.")(command)


def apply_plan(path: Path | None, names: dict[str, str], values: dict[str, Any]) -> dict[str, Any]:
    """``values`` (this command's options) with the plan's filled in where not given on the command line;
    prints, for each option the plan touched, whether the plan's value or the given one won."""
    if path is None:
        return values
    from click.core import ParameterSource

    from tritonkit.planner.serving_plan import merge_plan, read_plan

    ctx = click.get_current_context()
    explicit = {name for name in values if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE}
    merged, said = merge_plan(read_plan(path), values, explicit, names)
    for line in said:
        click.echo(f"{path}: {line}", err=True)
    return merged


def llm_target_options(command: F) -> F:
    """The options an LLM serving plan is derived from (the GPU, tp × pp, the workload): ``build trtllm``
    and ``build vllm`` share them."""
    for option in reversed((
        click.option("--gpu", type=Words(example="H100-80GB"), default="H100-80GB", show_default=True, help="GPU from the planner's catalogue."),
        click.option("--tp", type=number(PARALLEL), default=1, show_default=True, help="Tensor parallelism."),
        click.option("--pp", type=number(PARALLEL), default=1, show_default=True, help="Pipeline parallelism."),
        click.option("--input-tokens", type=number(TOKENS), default=None, help="Workload: mean prompt tokens (default 1024)."),
        click.option("--output-tokens", type=number(TOKENS), default=None, help="Workload: mean output tokens (default 256)."),
        click.option("--input-tokens-p95", type=number(TOKENS), default=None, help="Workload: p95 prompt tokens."),
        click.option("--output-tokens-p95", type=number(TOKENS), default=None, help="Workload: p95 output tokens."),
    )):
        command = option(command)
    return command


@click.command("trtllm")
@click.option("--hf-model", type=UserPath(exists=True, path_type=Path), default=None,
              help="Hugging Face model folder (config.json, tokenizer, weights). Optional with --engine reference.")
@click.option("--repo", type=UserPath(file_okay=False, path_type=Path), default=Path("model_repository"),
              show_default=True, help="Repository folder to write (created if missing).")
@click.option("--engine", "engine_kind", type=click.Choice(["llmapi", "tensorrtllm", "python", "reference"]),
              default=None,
              help="llmapi: the LLM-API backend (one python model, model.yaml; no engine build); tensorrtllm: the "
                   "C++ engine backend; python: TensorRT-LLM's python engine model; reference: the CPU stand-in "
                   "(serves here). Default: as the line serves today (llmapi from 0.19).")
@click.option("--interface", type=click.Choice(["engine", "llmapi"]), default="engine", show_default=True,
              help="--engine reference: the interface the stand-in serves (the engine repository's or LLM-API's).")
@click.option("--instances", type=number(INSTANCES), default=1, show_default=True,
              help="--engine llmapi: instances of the model, each on tp×pp GPUs (gpu_device_ids; serve with --no-mpi).")
@click.option("--cuda-graphs/--no-cuda-graphs", default=True, show_default=True,
              help="--engine llmapi: CUDA graphs for decode batches up to max_batch_size.")
@click.option("--llm-arg", "llm_args", type=Words(example="max_num_tokens=8192"), multiple=True,
              help="--engine llmapi: one more LLM() argument for model.yaml, KEY=YAML (repeat); refused unless the "
                   "line's LLM() takes it.")
@llm_target_options
@click.option("--precision", type=Words(example="fp8"), default=None, help="fp16, bf16, fp8, int8, int8-wo or int4 (default: torch_dtype).")
@click.option("--kv-dtype", type=click.Choice(["fp16", "bf16", "fp8", "int8"]), default=None,
              help="KV-cache element type (default: the model's activation dtype).")
@click.option("--max-batch-size", type=number(COUNT), default=None, help="Override: engine max batch size.")
@click.option("--max-input-len", type=number(COUNT), default=None, help="Override: engine max prompt tokens.")
@click.option("--max-seq-len", type=number(COUNT), default=None, help="Override: prompt + output tokens.")
@click.option("--max-num-tokens", type=number(COUNT), default=None, help="Override: tokens per engine step.")
@click.option("--kv-cache-fraction", type=number(FRACTION), default=None, help="Override: share of free GPU memory for KV (0.9).")
@click.option("--kv-reuse/--no-kv-reuse", default=None, help="KV-cache reuse for shared prefixes (needs paged FMHA).")
@click.option("--chunked-context/--no-chunked-context", default=None, help="Split long prompts over engine steps.")
@click.option("--paged-context-fmha/--no-paged-context-fmha", default=None,
              help="Override: paged context FMHA (default: on for Ampere and newer).")
@click.option("--triton-max-batch-size", type=number(COUNT), default=None,
              help="Triton's max_batch_size (default: the engine's; never above it).")
@click.option("--gpu-ids", callback=_gpu_ids, default=None, help="GPUs of the engine, e.g. 0,1 (default 0..tp×pp−1).")
@click.option("--streaming/--no-streaming", default=True, show_default=True,
              help="Decoupled tensorrt_llm, BLS and ensemble: one response per token.")
@click.option("--batch-window", type=Words(example="0us"), default="0us", show_default=True,
              help="Queue delay in front of tensorrt_llm (the in-flight batcher schedules per step itself).")
@click.option("--tokenizer-instances", type=number(COUNT), default=None,
              help="Instances of preprocessing and of postprocessing (each detokenizes one streamed token at a time; "
                   "default: from this machine's cores and memory, at most 8 and the max batch size, the reason "
                   "printed; 1 with --engine reference). Tune: perf sweep REPO postprocessing --target ensemble.")
@click.option("--trtllm-version", type=Words(example="0.19"), default=None,
              help="TensorRT-LLM line the configs are written for: 0.17, 0.18, 0.19, 1.0, 1.1, 1.2 or main (later "
                   "versions are main; default: the installed tensorrt_llm, else the newest).")
@click.option("--bls-instances", type=number(COUNT), default=1, show_default=True,
              help="Instances of tensorrt_llm_bls.")
@click.option("--engine-dir", type=Words(example="/engines/llama"), default=None, help="Engine folder as the server sees it (default <repo>/tensorrt_llm/1/engine).")
@click.option("--tokenizer-dir", type=Words(example="/models/llama"), default=None, help="Tokenizer folder as the server sees it (default: --hf-model).")
@click.option("--build-hf-model", type=Words(example="/models/llama"), default=None, help="HF folder as the build machine sees it (default: --hf-model).")
@click.option("--python-model-file", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
              help="--engine python: TensorRT-LLM's inflight_batcher_llm tensorrt_llm/1/model.py; --engine llmapi: "
                   "its llmapi/tensorrt_llm/1/model.py (helpers.py beside it is copied too; default: a loader of "
                   "/app/all_models/llmapi/tensorrt_llm/1 in the container).")
@click.option("--no-build", is_flag=True, help="Write the repository and the build script only.")
@click.option("--runtime-version", type=Words(example="0.19.0"), default=None,
              help="TensorRT-LLM version of the serving container, to check an existing engine against.")
@click.option("--force", is_flag=True, help="Replace models of these names in the repository.")
@from_plan_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build_trtllm_command(
    hf_model: Path | None, repo: Path, engine_kind: str | None, interface: str, instances: int, cuda_graphs: bool,
    llm_args: tuple[str, ...], gpu: str, tp: int, pp: int, input_tokens: float | None,
    output_tokens: float | None, input_tokens_p95: float | None, output_tokens_p95: float | None,
    precision: str | None, kv_dtype: str | None, max_batch_size: int | None, max_input_len: int | None,
    max_seq_len: int | None, max_num_tokens: int | None, kv_cache_fraction: float | None, kv_reuse: bool | None,
    chunked_context: bool | None, paged_context_fmha: bool | None, triton_max_batch_size: int | None,
    gpu_ids: list[int] | None, streaming: bool, batch_window: str, tokenizer_instances: int | None,
    trtllm_version: str | None, bls_instances: int, engine_dir: str | None,
    tokenizer_dir: str | None, build_hf_model: str | None, python_model_file: Path | None, no_build: bool,
    runtime_version: str | None, force: bool, from_plan: Path | None, as_json: bool,
) -> None:
    """Derive TensorRT-LLM serving parameters and write the repository: the LLM-API model (model.yaml),
    or the in-flight-batching repository and its engine build.

    The engine parameters come from the model's config.json, the GPU and the workload, with the
    reasoning printed; every value can be overridden. The engine builds only where tensorrt_llm and
    a GPU are present; elsewhere the build script and its plan are written into the repository with
    the command to run them. --engine reference writes the same repository with a CPU stand-in for
    the engine that serves on this machine (for testing the serving path, not text quality).

    \b
    Examples:
      tritonkit build trtllm --hf-model Llama-3-8B/ --repo llama_repo --gpu H100-80GB --tp 2
      tritonkit build trtllm --hf-model Llama-3-8B/ --engine llmapi --trtllm-version 1.2 --instances 2
      tritonkit build trtllm --engine reference --interface llmapi --repo ref_llmapi
      tritonkit build trtllm --engine reference --repo ref_repo --trtllm-version 0.19
      tritonkit build trtllm --hf-model Llama-3-70B/ --engine llmapi --from-plan plan.json
    """
    from tritonkit.builders.trtllm import (
        EngineOverrides,
        EngineTarget,
        LlmApiSettings,
        build_trtllm,
        parse_llm_args,
    )
    from tritonkit.planner import Workload

    v = apply_plan(from_plan, _PLAN_OPTIONS, {
        "gpu": gpu, "precision": precision, "kv_dtype": kv_dtype, "tp": tp, "pp": pp, "input_tokens": input_tokens,
        "output_tokens": output_tokens, "input_tokens_p95": input_tokens_p95, "output_tokens_p95": output_tokens_p95,
        "max_batch_size": max_batch_size, "max_num_tokens": max_num_tokens, "max_input_len": max_input_len,
        "max_seq_len": max_seq_len, "kv_cache_fraction": kv_cache_fraction, "chunked_context": chunked_context})
    gpu, precision, kv_dtype, tp, pp = v["gpu"], v["precision"], v["kv_dtype"], v["tp"], v["pp"]
    input_tokens, output_tokens = v["input_tokens"], v["output_tokens"]
    input_tokens_p95, output_tokens_p95 = v["input_tokens_p95"], v["output_tokens_p95"]
    max_batch_size, max_num_tokens, max_input_len = v["max_batch_size"], v["max_num_tokens"], v["max_input_len"]
    max_seq_len, kv_cache_fraction, chunked_context = v["max_seq_len"], v["kv_cache_fraction"], v["chunked_context"]
    workload = Workload(input_tokens=input_tokens, output_tokens=output_tokens, input_tokens_p95=input_tokens_p95,
                        output_tokens_p95=output_tokens_p95)
    overrides = EngineOverrides(max_batch_size=max_batch_size, max_input_len=max_input_len, max_seq_len=max_seq_len,
                                max_num_tokens=max_num_tokens, kv_cache_free_gpu_mem_fraction=kv_cache_fraction,
                                enable_kv_cache_reuse=kv_reuse, enable_chunked_context=chunked_context,
                                use_paged_context_fmha=paged_context_fmha)
    result = build_trtllm(
        hf_model, repo=repo, engine=engine_kind,  # type: ignore[arg-type]  # click.Choice checked it
        target=EngineTarget(gpu=gpu, tp=tp, pp=pp, workload=workload, precision=precision, kv_dtype=kv_dtype,
                            overrides=overrides),
        engine_dir=engine_dir, tokenizer_dir=tokenizer_dir, hf_model_on_build_machine=build_hf_model,
        gpu_ids=gpu_ids, streaming=streaming, triton_max_batch_size=triton_max_batch_size,
        batch_window=batch_window, tokenizer_instances=tokenizer_instances, bls_instances=bls_instances,
        trtllm_version=trtllm_version,
        python_model_file=python_model_file, run_build=not no_build,
        runtime=runtime_version, force=force,
        llmapi=LlmApiSettings(instances=instances, cuda_graphs=cuda_graphs, llm_args=parse_llm_args(llm_args),
                              reference_interface=interface),  # type: ignore[arg-type]  # click.Choice checked it
    )
    echo_result(result, as_json)
    sys.stdout.flush()
