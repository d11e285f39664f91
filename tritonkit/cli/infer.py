"""``tritonkit infer``: one inference call from the command line."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import click
import numpy as np

from tritonkit._fs import read_user_file
from tritonkit._values import SECONDS, excerpt
from tritonkit.cli._common import HOST_PORT, Words, check_model_name, dial_options, echo_json, number
from tritonkit.client import Client, ModelMetadata
from tritonkit.errors import ConfigError

Array = np.ndarray[Any, Any]


def parse_input(text: str, meta: ModelMetadata) -> tuple[str, Array]:
    """``NAME=FILE.npy`` or ``NAME=JSON`` → (name, array); JSON takes the model's dtype for that input."""
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise ConfigError(
            f"--input {excerpt(text)} is not NAME=FILE.npy or NAME=JSON",
            hint="e.g. --input INPUT0=a.npy or --input 'INPUT0=[[1, 2, 3, 4]]'",
        )
    if value.endswith(".npy"):
        data_bytes = read_user_file(value, what=f"--input {name} file", hint="pass the path of a .npy file")
        try:
            return name, np.load(io.BytesIO(data_bytes), allow_pickle=False)
        except (ValueError, EOFError, OSError) as exc:
            raise ConfigError(
                f"--input {name}: {excerpt(value, 160)} is not a numeric .npy file ({excerpt(str(exc), 120)})",
                hint="save it with numpy.save(path, array); object arrays are not read (no pickle)",
            ) from exc
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"--input {name}: {excerpt(value)} is neither a .npy path nor JSON ({exc.msg} at column {exc.colno})",
            hint="quote JSON for the shell, e.g. --input 'INPUT0=[[1, 2, 3, 4]]'",
        ) from exc
    except RecursionError:
        raise ConfigError(f"--input {name}: the JSON value nests too deeply", hint="give a flat list or a .npy file") \
            from None
    tensor = meta.input(name)
    # An unknown name is sent as is: the client's check then lists every input the model expects.
    return name, np.asarray(data) if tensor is None else tensor.coerce(data, model=meta.name)


def _jsonable(array: Array) -> Any:
    if array.dtype == object or array.dtype.kind == "S":
        return np.vectorize(
            lambda v: v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v), otypes=[object]
        )(array).tolist()
    return array.tolist()


def _describe(outputs: dict[str, Array]) -> dict[str, Any]:
    return {
        name: {"dtype": str(array.dtype), "shape": list(array.shape), "data": _jsonable(array)}
        for name, array in outputs.items()
    }


def _echo_result(model: str, url: str, latency_ms: float, key: str, value: Any) -> None:
    echo_json({"model": model, "url": url, "latency_ms": round(latency_ms, 3), key: value})


def _print_outputs(outputs: dict[str, Array]) -> None:
    for name, array in outputs.items():
        click.echo(f"{name}  {array.dtype}  shape {list(array.shape)}")
        click.echo(np.array2string(array, threshold=64, max_line_width=100))


@click.command("infer")
@click.argument("model", type=Words(check_model_name, example="resnet"))
@click.option(
    "--url", type=HOST_PORT, default="127.0.0.1:8001", show_default=True, help="host:port of Triton's gRPC endpoint."
)
@click.option(
    "--input",
    "inputs",
    type=Words(example="INPUT0=a.npy"),
    multiple=True,
    metavar="NAME=FILE.npy|JSON",
    help="One input (repeat): a .npy file, or a JSON value converted to the model's dtype. "
    "Shapes are sent as given, batch dimension included.",
)
@click.option("--output", "outputs", type=Words(example="OUTPUT0"), multiple=True, metavar="NAME", help="Only return this output (repeat).")
@click.option("--model-version", default="", help="Model version (default: the server's choice).")
@click.option("--timeout-s", type=number(SECONDS), default=30.0, show_default=True, help="Deadline for the whole call.")
@click.option("--request-id", default="", help="Request id passed to the server.")
@click.option("--json", "as_json", is_flag=True, help="Print the outputs as JSON.")
@dial_options
def infer(
    model: str,
    url: str,
    inputs: tuple[str, ...],
    outputs: tuple[str, ...],
    model_version: str,
    timeout_s: float,
    request_id: str,
    as_json: bool,
) -> None:
    """Call MODEL once over gRPC and print its outputs.

    The request is checked against the model's metadata and config first; a
    mismatch is reported with the inputs the model expects. A decoupled model's
    responses are printed as they arrive (with --json: a list). A server behind TLS
    (mutual too) or a restricted protocol: --tls-ca, --tls-cert, --tls-key, --header.

    \b
    Example:
      tritonkit infer add_sub --url 127.0.0.1:8001 \\
        --input 'INPUT0=[[1, 2, 3, 4]]' --input INPUT1=b.npy --json
    """
    with Client(url, timeouts=timeout_s) as client:
        meta = client.model_metadata(model, version=model_version)
        arrays = dict(parse_input(text, meta) for text in inputs)
        selected = list(outputs) or None
        started = time.perf_counter()
        if meta.decoupled:
            responses: list[dict[str, Any]] = []
            with client.stream(
                model,
                arrays,
                outputs=selected,
                version=model_version,
                request_id=request_id,
                timeout_s=timeout_s,
            ) as stream:
                for response in stream:
                    if not as_json:
                        click.echo(f"# response {len(responses)}")
                        _print_outputs(response)
                    responses.append(_describe(response))
            latency_ms = (time.perf_counter() - started) * 1000.0
            if as_json:
                _echo_result(model, client.url, latency_ms, "responses", responses)
            else:
                click.echo(f"# {len(responses)} responses in {latency_ms:.1f} ms")
            return
        result = client.infer(model, arrays, outputs=selected, version=model_version, request_id=request_id)
        latency_ms = (time.perf_counter() - started) * 1000.0
    if as_json:
        _echo_result(model, client.url, latency_ms, "outputs", _describe(result))
    else:
        _print_outputs(result)
        click.echo(f"# {latency_ms:.1f} ms")


COMMANDS: list[click.Command] = [infer]
