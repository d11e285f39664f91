"""``tritonkit plan``: capacity planning from business targets and measurements.

The options become one :class:`~tritonkit.planner.PlanRequest` for
:func:`~tritonkit.planner.plan_capacity` (``--check``: :func:`~tritonkit.planner.check_saved_predictions`).
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

import click

from tritonkit._values import COUNT, POSITIVE, Bounds, field_default
from tritonkit.cli._common import UserPath, Words, echo_json, echo_result, levels_type, number
from tritonkit.errors import ConfigError
from tritonkit.planner import (
    GPUS,
    PRECISIONS,
    GpuFigures,
    ModelOverrides,
    PlanAssumptions,
    PlanRequest,
    Workload,
    check_saved_predictions,
    parse_param_count,
    plan_capacity,
)
from tritonkit.planner.pareto import plot_pareto
from tritonkit.planner.precision import KV_DTYPES
from tritonkit.planner.search import DeploymentSearch, SearchSpace

_PRECISION_NAMES = [p.name for p in PRECISIONS]

#: The option defaults are the library's (:class:`PlanAssumptions`), so the help shows what the plan uses.
_assumed = partial(field_default, PlanAssumptions)


def _params(ctx: click.Context, param: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    return parse_param_count(value, flag=f"--{param.name.replace('_', '-')}" if param.name else "--params")


def _kv_dtypes(_ctx: click.Context, _param: click.Parameter, value: str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    names = tuple(dict.fromkeys(part.strip().lower() for part in value.split(",") if part.strip()))
    unknown = [n for n in names if n not in KV_DTYPES]
    if not names or unknown:
        raise click.BadParameter(f"{value!r}: expected KV dtypes from {', '.join(KV_DTYPES)}, comma-separated "
                                 "like fp16,fp8")
    return names


def _gpu_table() -> str:
    header = f"{'name':<18} {'memory':>8} {'bandwidth':>11} {'FP16':>9} {'FP8':>9} {'INT8':>9}  kind, aliases"
    rows = [header, f"{'':<18} {'GiB':>8} {'GB/s':>11} {'TFLOPS':>9} {'TFLOPS':>9} {'TOPS':>9}", "-" * len(header)]
    for g in GPUS:
        fp8 = f"{g.fp8_tflops:g}" if g.fp8_tflops is not None else "—"
        extra = ", ".join((g.kind + ("" if g.ecc else " (no ECC)"), *g.aliases))
        rows.append(
            f"{g.name:<18} {g.memory_gib:>8g} {g.bandwidth_gb_s:>11g} {g.fp16_tflops:>9g} {fp8:>9} "
            f"{g.int8_tops:>9g}  {extra}"
        )
    rows.append("")
    rows.append("Tensor figures are dense (no 2:4 sparsity); memory is the datasheet's GB label (= GiB);")
    rows.append("bandwidth is decimal GB/s. Each figure's source: tritonkit plan --list-gpus --json.")
    return "\n".join(rows)


#: A dynamic batching window to predict, in microseconds: none to a minute.
_WINDOW_US = Bounds(integer=True, low=0, high=60_000_000, noun="number of microseconds", example="5000")


@click.command("plan")
@click.option("--list-gpus", is_flag=True, help="List the GPU catalogue (with --json: every figure's source) and exit.")
# model
@click.option("--hf-config", type=UserPath(exists=True, path_type=Path), default=None,
              help="Hugging Face config.json (or the model folder holding it) of an LLM.")
@click.option("--model-name", type=Words(example="llama-3-8b"), default=None, help="Name to print for the model.")
@click.option("--params", type=Words(example="7B"), callback=_params, default=None, help="Total parameters, e.g. 7B or 6.74e9 (default: counted).")
@click.option("--active-params", type=Words(example="12.9B"), callback=_params, default=None, help="Parameters active per token (MoE), e.g. 12.9B.")
@click.option("--num-layers", type=number(COUNT), default=None, help="Transformer layers.")
@click.option("--num-heads", type=number(COUNT), default=None, help="Attention heads.")
@click.option("--num-kv-heads", type=number(COUNT), default=None, help="KV heads (GQA/MQA).")
@click.option("--head-dim", type=number(COUNT), default=None, help="Dimension per head.")
@click.option("--hidden-size", type=number(COUNT), default=None, help="Hidden size.")
@click.option("--sliding-window", type=number(COUNT), default=None, help="Attention window in tokens.")
@click.option("--precision", type=click.Choice(_PRECISION_NAMES, case_sensitive=False), default=None,
              help="Weight precision (default: the config's torch_dtype).")
@click.option("--kv-dtype", callback=_kv_dtypes, default=None,
              help="KV-cache element type, or several for the search to choose from, e.g. fp16,fp8 (default: the "
                   "model's dtype, bf16 for a bf16 model, else fp16).")
@click.option("--weights-gb", type=number(POSITIVE), default=None,
              help="Weights size in decimal GB (e.g. a GGUF file's size), instead of params × bytes.")
# hardware
@click.option("--gpu", "gpu_name", type=Words(example="A100-80GB"), default=None, help="GPU from the catalogue, e.g. A100-80GB, H100-SXM, L4.")
@click.option("--gpu-memory-gib", type=number(POSITIVE), default=None, help="Custom or overridden GPU memory (GiB).")
@click.option("--gpu-bandwidth-gb-s", type=number(POSITIVE), default=None, help="Custom or overridden bandwidth (GB/s).")
@click.option("--gpu-fp16-tflops", type=number(POSITIVE), default=None, help="Custom or overridden dense FP16 TFLOPS.")
@click.option("--gpu-fp8-tflops", type=number(POSITIVE), default=None, help="Custom or overridden dense FP8 TFLOPS.")
@click.option("--gpu-int8-tops", type=number(POSITIVE), default=None, help="Custom or overridden dense INT8 TOPS.")
@click.option("--tp", type=number(PlanAssumptions, "tensor_parallel"), default=None,
              help="Tensor parallel degree (GPUs per replica): pins the search's choice (with --no-search, default: "
                   "the smallest that holds the model).")
@click.option("--search/--no-search", default=True, show_default=True,
              help="LLM without --from-result: search TP, batch, aggregated or disaggregated serving and the KV "
                   "dtypes allowed for the fewest GPUs under the SLA (--no-search: the smallest TP, walls alone).")
@click.option("--performance-model", type=click.Choice(["auto", "own", "aiconfigurator"]),
              default=field_default(PlanRequest, "performance_model"), show_default=True,
              help="Who answers the search: own (the planner's), aiconfigurator (NVIDIA's AIConfigurator/AISimulate, "
                   "installed in its own venv: TRITONKIT_AICONFIGURATOR or PATH), or auto (NVIDIA's where installed "
                   "and covering the GPU and precision, else own). The plan says which answered.")
@click.option("--plot", type=UserPath(dir_okay=False, path_type=Path), default=None,
              help="Write the search's Pareto curve (tokens/s per GPU against tokens/s per user) to this .png/.svg/.pdf.")
# workload
@click.option("--qps", type=number(Workload, "target_qps"), default=None, help="Target requests per second.")
@click.option("--input-tokens", type=number(Workload, "input_tokens"), default=None, help="Mean input tokens per request (default 1024).")
@click.option("--output-tokens", type=number(Workload, "output_tokens"), default=None, help="Mean output tokens per request (default 256).")
@click.option("--input-tokens-p95", type=number(Workload, "input_tokens_p95"), default=None, help="p95 input tokens.")
@click.option("--output-tokens-p95", type=number(Workload, "output_tokens_p95"), default=None, help="p95 output tokens.")
@click.option("--mode", type=click.Choice(["interactive", "batch"]), default=field_default(Workload, "mode"), show_default=True)
@click.option("--p99-ms", type=number(Workload, "p99_ms"), default=None, help="SLA: end-to-end P99 latency (ms); makes η strict.")
@click.option("--ttft-ms", type=number(Workload, "ttft_ms"), default=None, help="SLA: time to first token (ms).")
@click.option("--tokens-per-s", type=number(Workload, "tokens_per_s_per_user"), default=None, help="SLA: decode tokens/s each user must see.")
# assumptions
@click.option("--efficiency", type=number(PlanAssumptions, "efficiency"), default=None, help="η (default by SLA: 0.6 interactive, 0.8 batch, 0.45 strict P99).")
@click.option("--headroom", type=number(PlanAssumptions, "headroom"), default=_assumed("headroom"), show_default=True, help="Spare capacity kept at the target.")
@click.option("--scale-out-at", type=number(PlanAssumptions, "scale_out_utilisation"), default=_assumed("scale_out_utilisation"), show_default=True, help="Utilisation at which to scale out.")
@click.option("--bandwidth-efficiency", type=number(PlanAssumptions, "bandwidth_efficiency"), default=_assumed("bandwidth_efficiency"), show_default=True,
              help="Achievable share of datasheet bandwidth.")
@click.option("--compute-efficiency", type=number(PlanAssumptions, "compute_efficiency"), default=_assumed("compute_efficiency"), show_default=True,
              help="Achievable share of dense tensor throughput.")
@click.option("--reserve-gib", type=number(PlanAssumptions, "reserve_gib"), default=None, help="Memory kept back per GPU (default 10 %, 25 % on Jetson).")
# measurement
@click.option("--from-result", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A perf result.json, or an LLM run's llm_result.json (Triton's stream or an OpenAI endpoint): "
              "measured throughput replaces theory (or sizes a non-LLM model).")
@click.option("--model-config", type=UserPath(exists=True, path_type=Path), default=None,
              help="The measured model's config.pbtxt (or its folder): serving parameters stay within it "
              "(default: the config the run recorded from the server).")
@click.option("--instances-per-gpu", type=number(COUNT), default=None,
              help="Model instances in the measured deployment, when --model-config is not given (default 1).")
# prediction
@click.option("--predict-concurrency", type=levels_type("concurrency"), default=None, help="Predict these concurrencies, e.g. '8,16,32' or '8:32'.")
@click.option("--predict-rate", type=levels_type("request_rate"), default=None, help="Predict these request rates (req/s), e.g. '100,200'.")
@click.option("--predict-instances", type=number(COUNT), multiple=True,
              help="Also predict with this many instances (repeatable).")
@click.option("--predict-window-us", type=number(_WINDOW_US), multiple=True,
              help="Also predict with this dynamic batching window in µs (repeatable).")
@click.option("--arrivals", type=click.Choice(["constant", "poisson"]), default=field_default(PlanRequest, "arrivals"), show_default=True,
              help="Arrivals for --predict-rate (perf_analyzer's --request-distribution).")
@click.option("--check", "check_result", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
              help="A later perf result.json to score saved predictions against (with --predictions).")
@click.option("--predictions", type=UserPath(exists=True, dir_okay=False, path_type=Path), default=None,
              help="The plan JSON a predicting 'tritonkit plan ... --out' wrote.")
# output
@click.option("--json", "as_json", is_flag=True, help="Print the plan as JSON.")
@click.option("--markdown", is_flag=True, help="Print the plan as Markdown (a table per section, the search's table).")
@click.option("--out", type=UserPath(dir_okay=False, path_type=Path), default=None,
              help="Also write the plan as JSON to this file.")
def plan(list_gpus: bool, hf_config: Path | None, gpu_name: str | None, from_result: Path | None, as_json: bool,
         out: Path | None, search: bool, plot: Path | None, performance_model: str, markdown: bool,
         **o: Any) -> None:
    """Size a deployment: weights, KV cache, walls, GPUs for a target QPS, serving parameters.

    Every number is printed with its unit, its basis (input, datasheet, assumption, theory,
    measured) and how it was obtained. Binary units are GiB/MiB/KiB; GB and GB/s are decimal.

    \b
    Example:
      tritonkit plan --hf-config llama-3-8b/config.json --gpu A100-80GB \\
          --input-tokens 1024 --output-tokens 256 --qps 20 --tokens-per-s 20
      tritonkit plan --hf-config llama-3-70b/config.json --gpu H200 --qps 16 \\
          --tokens-per-s 33 --ttft-ms 1000 --kv-dtype bf16,fp8 --plot pareto.png --out plan.json
      tritonkit plan --from-result runs/resnet/result.json --qps 200 --p99-ms 50
      tritonkit plan --params 7B --num-layers 32 --num-kv-heads 32 --head-dim 128 \\
          --precision q4_k_m --gpu JETSON-ORIN-64GB --input-tokens 512 --output-tokens 256
      tritonkit plan --from-result runs/calib/result.json --model-config repo/resnet \\
          --predict-concurrency 16,32 --predict-instances 2 --out plan.json
      tritonkit plan --check runs/later/result.json --predictions plan.json
      tritonkit plan --list-gpus
    """
    if as_json and markdown:
        raise ConfigError("--json and --markdown both choose the output", hint="pass one of them")
    if list_gpus:
        if as_json:
            echo_json([g.to_dict() for g in GPUS])
        else:
            click.echo(_gpu_table())
        return
    if o["check_result"] is not None:
        if o["predictions"] is None:
            raise ConfigError("--check needs the saved predictions to score",
                              hint="pass --predictions plan.json (written by a predicting 'tritonkit plan ... --out')")
        check = check_saved_predictions(o["check_result"], o["predictions"], model_config=o["model_config"])
        echo_result(check, as_json, check.render_text, nl=False)
        return
    model = ModelOverrides(
        name=o["model_name"], num_layers=o["num_layers"], num_attention_heads=o["num_heads"],
        num_kv_heads=o["num_kv_heads"], head_dim=o["head_dim"], hidden_size=o["hidden_size"], total_params=o["params"],
        active_params=o["active_params"], sliding_window=o["sliding_window"],
    )
    figures = GpuFigures(memory_gib=o["gpu_memory_gib"], bandwidth_gb_s=o["gpu_bandwidth_gb_s"],
                         fp16_tflops=o["gpu_fp16_tflops"], fp8_tflops=o["gpu_fp8_tflops"], int8_tops=o["gpu_int8_tops"])
    workload = Workload(
        target_qps=o["qps"], input_tokens=o["input_tokens"], output_tokens=o["output_tokens"],
        input_tokens_p95=o["input_tokens_p95"], output_tokens_p95=o["output_tokens_p95"], mode=o["mode"],
        p99_ms=o["p99_ms"], ttft_ms=o["ttft_ms"], tokens_per_s_per_user=o["tokens_per_s"],
    )
    kv_dtypes: tuple[str, ...] = o["kv_dtype"]
    if len(kv_dtypes) > 1 and not search:
        raise ConfigError(f"--kv-dtype {','.join(kv_dtypes)} offers a choice, but --no-search makes none",
                          hint="give one --kv-dtype, or leave out --no-search")
    assumptions = PlanAssumptions(
        efficiency=o["efficiency"], headroom=o["headroom"], scale_out_utilisation=o["scale_out_at"],
        bandwidth_efficiency=o["bandwidth_efficiency"], compute_efficiency=o["compute_efficiency"],
        reserve_gib=o["reserve_gib"], tensor_parallel=o["tp"],
        kv_dtype=kv_dtypes[0] if len(kv_dtypes) == 1 else None,
    )
    result = plan_capacity(PlanRequest(
        hf_config=hf_config, model=model, precision=o["precision"], weights_gb=o["weights_gb"], gpu=gpu_name,
        gpu_figures=figures, workload=workload, assumptions=assumptions, from_result=from_result,
        model_config=o["model_config"], instances_per_gpu=o["instances_per_gpu"],
        predict_concurrency=o["predict_concurrency"], predict_rate=o["predict_rate"],
        predict_instances=o["predict_instances"], predict_window_us=o["predict_window_us"], arrivals=o["arrivals"],
        search=SearchSpace(kv_dtypes=kv_dtypes if len(kv_dtypes) > 1 else ()) if search else None,
        performance_model=performance_model,
    ))
    if plot is not None:
        if not isinstance(result.search, DeploymentSearch):
            raise ConfigError("--plot draws the deployment search, and this plan made none",
                              hint="plan an LLM without --from-result and without --no-search, or leave out --plot")
        plot_pareto(result.search, plot, title=result.title)
    if out is not None:
        result.save(out)
    if as_json:
        echo_json(result.to_dict())
    else:
        click.echo(result.render_markdown() if markdown else result.render_text(), nl=False)
        if out is not None:
            click.echo(f"\nplan written to {out}")
        if plot is not None:
            click.echo(f"Pareto plot written to {plot}")


COMMANDS: list[click.Command] = [plan]
