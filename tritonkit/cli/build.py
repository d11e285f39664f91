"""``tritonkit build …``: model file → repository entry.

Each subcommand parses options and calls one builder; the decisions (batching, instances, their
defaults) are the library's (:func:`tritonkit.builders.plan_build`), so the help text shows the
library's named defaults. More builders register on the ``build`` group with ``build.add_command``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tritonkit._values import BUILD_VERSION, COUNT
from tritonkit.builders.plan import (
    DEFAULT_INSTANCE_KIND,
    DEFAULT_INSTANCES,
    DEFAULT_MAX_BATCH_SIZE,
    DEFAULT_MAX_QUEUE_SIZE,
    DEFAULT_WINDOW,
    WINDOW_RANGE_US,
    BuildOptions,
)
from tritonkit.cli._common import (
    UserPath,
    Words,
    check_model_name,
    echo_result,
    local_server_options,
    number,
    sigterm_as_interrupt,
)
from tritonkit.cli.build_trtllm import build_trtllm_command
from tritonkit.cli.build_vllm import build_vllm_command
from tritonkit.errors import VerificationError

_INPUT = UserPath(dir_okay=False, path_type=Path)


def _progress(verbose: bool, as_json: bool) -> Callable[[str], None] | None:
    """Step lines on stderr at a terminal (or with -v); silent when piped, so output stays parseable."""
    if as_json and not verbose:
        return None
    if verbose or sys.stderr.isatty():
        return lambda line: click.echo(line, err=True)
    return None


_WINDOW_TEXT = f"{WINDOW_RANGE_US[0] // 1000}ms–{WINDOW_RANGE_US[1] // 1000}ms"


def _model_into_repository(command: Callable[..., None]) -> Callable[..., None]:
    """The MODEL file argument and where it goes (``--name``, ``--repo``), alike for every file builder."""
    decorators = (
        click.argument("model", type=_INPUT),
        click.option("--name", type=Words(check_model_name, example="resnet"), required=True,
                     help="Model name: its folder in the repository."),
        click.option("--repo", type=UserPath(file_okay=False, path_type=Path), default=Path("model_repository"),
                     show_default=True, help="Repository folder (created if missing)."),
    )
    # Applied last-first, as stacked decorators are, so --help lists them in this order.
    for decorate in reversed(decorators):
        command = decorate(command)
    return command


def _version_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--version", "model_version", type=number(BUILD_VERSION), default=1, show_default=True,
        help="Version folder to write; a new version is added beside the model's others.",
    )(command)


def _batch_axis_option(command: Callable[..., None]) -> Callable[..., None]:
    return click.option(
        "--batch-axis/--no-batch-axis", "batch_axis", default=None,
        help="Batch along the inputs' first axis, or never. Default: decided from the model "
             "(a rank-1 input [L] or an axis named like a length is not a batch axis); the output says which.",
    )(command)


def _print_warnings(warnings: list[str]) -> None:
    for warning in warnings:
        click.secho(f"warning: {warning}", fg="yellow", err=True)


@click.group("build")
def build() -> None:
    """Build a model file into a Triton model repository.

    \b
    Example:
      tritonkit build onnx model.onnx --name resnet --repo model_repository
    """


@build.command("onnx")
@_model_into_repository
@click.option("--max-batch-size", type=number(BuildOptions, "max_batch_size"), default=None,
              help=f"Largest batch Triton may form; 0 turns batching off. Default: {DEFAULT_MAX_BATCH_SIZE} when the "
                   "model can batch (or the model's other versions' value), else 0.")
@_batch_axis_option
@click.option("--batch-output", "batch_outputs", type=Words(example="label"), multiple=True, metavar="OUTPUT",
              help="Declare OUTPUT's first axis the batch axis where the exporter declared it fixed "
                   "(onnxmltools' LightGBM label [1]); the batch-consistency check still proves it. Repeat.")
@click.option("--batch-window", type=Words(example="5ms"), default=DEFAULT_WINDOW, show_default=True,
              help=f"Dynamic-batching window with its unit ({_WINDOW_TEXT}; outside warns unless --force).")
@click.option("--instances", type=number(BuildOptions, "instances"), default=DEFAULT_INSTANCES, show_default=True,
              help="Model instances.")
@click.option("--max-queue-size", type=number(BuildOptions, "max_queue_size"), default=DEFAULT_MAX_QUEUE_SIZE, show_default=True,
              help="Bound on queued requests (0: unbounded); past it Triton refuses instead of queueing.")
@click.option("--kind", type=click.Choice(["cpu", "gpu", "auto"]), default=DEFAULT_INSTANCE_KIND, show_default=True,
              help="Instance kind; auto = gpu when this machine has one.")
@click.option("--runtime", type=click.Choice(["onnxruntime", "python", "auto"]), default="auto", show_default=True,
              help="onnxruntime backend, or a python-backend model.py running ONNX Runtime; "
                   "auto picks from the target server's backends.")
@click.option("--fp16", is_flag=True, help="Convert weights and compute to FP16; inputs and outputs stay FP32.")
@click.option("--verify/--no-verify", default=True, show_default=True,
              help="Check numbers against the reference and batch consistency with ONNX Runtime.")
@click.option("--samples", type=_INPUT, default=None,
              help="An .npz with one array per input (first axis = samples when batching) to verify with.")
@_version_option
@click.option("--force", is_flag=True, help="Replace this version if it exists (others stay); accept any batch window.")
@click.option("--no-warmup", is_flag=True, help="Do not add a model_warmup entry.")
@click.option("--ort-tensorrt", is_flag=True, help="GPU, onnxruntime runtime: add ORT's TensorRT accelerator.")
@click.option("--cuda-graphs", is_flag=True, help="GPU, onnxruntime runtime: enable CUDA graphs in ORT's CUDA provider.")
@local_server_options("Target tritonserver for --runtime auto",
                      "The target server's backends, for --runtime auto and its ONNX Runtime's limits")
@click.option("--server-version", default=None,
              help="Triton release the model is for (X.Y, X.Y.Z or an NGC tag YY.MM): with the onnxruntime runtime, "
                   "its ONNX Runtime's IR and opset limits are checked (default: the onnxruntime backend in "
                   "--backend-dir, when there is one).")
@click.option("--convert-onnx", is_flag=True,
              help="Convert a model newer than the target's ONNX Runtime loads down to it with ONNX's version "
                   "converter (verified against the original) instead of refusing it.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Print each step on stderr even when not at a terminal.")
def build_onnx_command(
    model: Path, name: str, repo: Path, batch_outputs: tuple[str, ...], runtime: str, fp16: bool, verify: bool,
    samples: Path | None, model_version: int, force: bool, no_warmup: bool, ort_tensorrt: bool, cuda_graphs: bool,
    server_bin: Path | None, backend_dir: Path | None, server_version: str | None, convert_onnx: bool, as_json: bool,
    verbose: bool, **batching: Any,
) -> None:
    """Check, verify and write an ONNX MODEL as repository entry NAME.

    Runs the full ONNX checker and shape inference, finds the batch axis (making a fixed
    one dynamic when the graph allows), optionally converts to FP16, verifies the numbers
    with ONNX Runtime (a table of max abs / rel error per output) and that k samples as one
    batch equal k runs of one, then writes config.pbtxt and the model in one move.

    \b
    Examples:
      tritonkit build onnx mlp.onnx --name mlp
      tritonkit build onnx mlp_v2.onnx --name mlp --version 2
      tritonkit build onnx cnn.onnx --name cnn --max-batch-size 32 --batch-window 10ms --instances 2
      tritonkit build onnx big.onnx --name big --fp16 --runtime onnxruntime --kind gpu --ort-tensorrt
      tritonkit build onnx lightgbm.onnx --name gbm --batch-output label
      tritonkit build onnx new.onnx --name m --runtime onnxruntime --server-version 2.51 --convert-onnx
    """
    from tritonkit.builders import build_onnx

    # The batching options are named as BuildOptions' fields (max_batch_size, batch_window, kind, …).
    try:
        with sigterm_as_interrupt():
            result = build_onnx(
                model, name=name, repo=repo, batching=BuildOptions(**batching), runtime=runtime, fp16=fp16,
                verify=verify, samples=samples, version=model_version, force=force, warmup=not no_warmup,
                ort_tensorrt=ort_tensorrt, cuda_graphs=cuda_graphs, server_bin=server_bin, backend_dir=backend_dir,
                server_version=server_version, convert_onnx=convert_onnx, batch_outputs=batch_outputs,
                log=_progress(verbose, as_json))
    except VerificationError as exc:
        for comparison in exc.comparisons:
            click.echo(comparison.table(), err=True)
        raise
    _print_warnings(result.warnings)
    echo_result(result, as_json)


def _dim_ranges(values: tuple[str, ...]) -> dict[str, tuple[int, int, int]]:
    from tritonkit.builders import parse_dim_range

    return dict(parse_dim_range(v) for v in values)


@build.command("tensorrt")
@_model_into_repository
@click.option("--max-batch-size", type=number(BuildOptions, "max_batch_size"), default=None,
              help=f"Batch axis max (profile max); default {DEFAULT_MAX_BATCH_SIZE} when the model can batch, else 0.")
@_batch_axis_option
@click.option("--opt-batch-size", type=number(COUNT), default=None, help="Batch size TensorRT optimises for (default: max).")
@click.option("--dim-range", "dim_ranges", type=Words(example="img:2=64:224:512"), multiple=True, metavar="KEY=MIN:OPT:MAX",
              help="Range of a dynamic non-batch axis; KEY is INPUT:AXIS or a symbolic axis name (repeat).")
@click.option("--fp16", is_flag=True, help="Allow FP16 kernels.")
@click.option("--int8", is_flag=True, help="Allow INT8 kernels (explicitly quantized Q/DQ models only).")
@click.option("--workspace", type=Words(example="4GiB"), default="4GiB", show_default=True, help="Builder workspace limit, e.g. 512MiB, 4GiB.")
@click.option("--timing-cache", type=UserPath(dir_okay=False, path_type=Path), default=None,
              help="Timing cache file: read if present, written after the build (speeds up rebuilds).")
@click.option("--batch-window", type=Words(example="5ms"), default=DEFAULT_WINDOW, show_default=True,
              help=f"Dynamic-batching window with its unit ({_WINDOW_TEXT}).")
@click.option("--instances", type=number(BuildOptions, "instances"), default=DEFAULT_INSTANCES, show_default=True,
              help="Instances per GPU.")
@click.option("--cuda-graphs", is_flag=True, help="Enable CUDA graphs in the TensorRT backend.")
@_version_option
@click.option("--force", is_flag=True, help="Replace this version if it exists (others stay).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def build_tensorrt_command(
    model: Path, name: str, repo: Path, opt_batch_size: int | None, dim_ranges: tuple[str, ...], fp16: bool,
    int8: bool, workspace: str, timing_cache: Path | None, cuda_graphs: bool, model_version: int, force: bool,
    as_json: bool, **batching: Any,
) -> None:
    """Build a TensorRT plan from an ONNX MODEL as repository entry NAME (needs an NVIDIA GPU).

    The optimisation profile comes from --max-batch-size (min 1, opt --opt-batch-size or
    max, max) and a --dim-range for every other dynamic axis.

    \b
    Example:
      tritonkit build tensorrt cnn.onnx --name cnn_trt --max-batch-size 32 --fp16 \\
          --dim-range img:2=64:224:512 --dim-range img:3=64:224:512 --timing-cache trt.cache
    """
    from tritonkit.builders import build_tensorrt, parse_size_bytes

    # The batching options are named as BuildOptions' fields, as for build onnx.
    with sigterm_as_interrupt():
        result = build_tensorrt(
            model, name=name, repo=repo, batching=BuildOptions(**batching), opt_batch_size=opt_batch_size,
            dim_ranges=_dim_ranges(dim_ranges), fp16=fp16, int8=int8, workspace_bytes=parse_size_bytes(workspace),
            timing_cache=timing_cache, cuda_graphs=cuda_graphs, version=model_version, force=force,
            log=_progress(False, as_json))
    echo_result(result, as_json)


build.add_command(build_trtllm_command)
build.add_command(build_vllm_command)

COMMANDS: list[click.Command] = [build]
