"""``tritonkit build vllm``: HF checkpoint → vLLM engine arguments from the planner → Triton's vLLM backend model."""

from __future__ import annotations

from pathlib import Path

import click

from tritonkit._values import COUNT, FRACTION
from tritonkit.cli._common import UserPath, Words, check_model_name, echo_json, number
from tritonkit.cli.build_trtllm import apply_plan, from_plan_option, llm_target_options

#: What ``build vllm --from-plan`` takes from a plan: :class:`~tritonkit.planner.PlanServing` field → option.
_PLAN_OPTIONS = {"gpu": "gpu", "tp": "tp", "pp": "pp", "input_tokens": "input_tokens", "output_tokens": "output_tokens",
                 "input_tokens_p95": "input_tokens_p95", "output_tokens_p95": "output_tokens_p95",
                 "max_batch_size": "max_num_seqs", "max_seq_len": "max_model_len",
                 "gpu_memory_utilization": "gpu_memory_utilization"}


@click.command("vllm")
@click.option("--hf-model", type=UserPath(exists=True, path_type=Path), required=True,
              help="Hugging Face model folder (config.json; the planner reads it).")
@click.option("--repo", type=UserPath(file_okay=False, path_type=Path), default=Path("model_repository"),
              show_default=True, help="Repository folder to write (created if missing).")
@click.option("--name", type=Words(check_model_name, example="vllm_model"), default="vllm_model", show_default=True, help="Model name (folder).")
@click.option("--model-path", type=Words(example="/models/llama"), default=None, help="The checkpoint as the server sees it (default: --hf-model).")
@llm_target_options
@click.option("--gpu-memory-utilization", type=number(FRACTION), default=None, help="Override (vLLM's default 0.9).")
@click.option("--max-num-seqs", type=number(COUNT), default=None, help="Override: sequences batched at once.")
@click.option("--max-model-len", type=number(COUNT), default=None, help="Override: prompt + output tokens.")
@click.option("--force", is_flag=True, help="Replace a model of this name.")
@from_plan_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build_vllm_command(hf_model: Path, repo: Path, name: str, model_path: str | None, gpu: str, tp: int, pp: int,
                       input_tokens: float | None, output_tokens: float | None, input_tokens_p95: float | None,
                       output_tokens_p95: float | None, gpu_memory_utilization: float | None,
                       max_num_seqs: int | None, max_model_len: int | None, force: bool, from_plan: Path | None,
                       as_json: bool) -> None:
    """Write a model for Triton's vLLM backend: config.pbtxt (backend vllm, one KIND_MODEL instance)
    and 1/model.json with gpu_memory_utilization, max_num_seqs, max_model_len and the parallel sizes
    from the planner (the model's config.json, the GPU, the workload), each printed with its reason.

    \b
    Example:
      tritonkit build vllm --hf-model Llama-3-8B/ --repo repo --gpu H100-80GB --tp 2 --input-tokens 512
      tritonkit build vllm --hf-model Llama-3-70B/ --repo repo --from-plan plan.json --max-num-seqs 32
    """
    from tritonkit.builders.trtllm import EngineTarget
    from tritonkit.builders.vllm import build_vllm
    from tritonkit.planner import Workload

    v = apply_plan(from_plan, _PLAN_OPTIONS, {
        "gpu": gpu, "tp": tp, "pp": pp, "input_tokens": input_tokens, "output_tokens": output_tokens,
        "input_tokens_p95": input_tokens_p95, "output_tokens_p95": output_tokens_p95, "max_num_seqs": max_num_seqs,
        "max_model_len": max_model_len, "gpu_memory_utilization": gpu_memory_utilization})
    gpu, tp, pp, max_num_seqs, max_model_len = v["gpu"], v["tp"], v["pp"], v["max_num_seqs"], v["max_model_len"]
    input_tokens, output_tokens = v["input_tokens"], v["output_tokens"]
    input_tokens_p95, output_tokens_p95 = v["input_tokens_p95"], v["output_tokens_p95"]
    gpu_memory_utilization = v["gpu_memory_utilization"]
    workload = Workload(input_tokens=input_tokens, output_tokens=output_tokens, input_tokens_p95=input_tokens_p95,
                        output_tokens_p95=output_tokens_p95)
    result = build_vllm(hf_model, repo=repo, name=name, target=EngineTarget(gpu=gpu, tp=tp, pp=pp, workload=workload),
                        model_path=model_path, gpu_memory_utilization=gpu_memory_utilization,
                        max_num_seqs=max_num_seqs, max_model_len=max_model_len, force=force)
    if as_json:
        echo_json({"repo": str(result.repo), "model": result.name, "model_json": result.engine_args,
                   "reasons": [{"key": r.key, "value": str(r.value), "why": r.why} for r in result.reasons]})
    else:
        click.echo(result.summary())
