"""PyTorch module → ONNX with a dynamic batch axis, and the module as a verification reference.

torch is optional: everything here imports it on use and raises
:class:`~tritonkit.errors.MissingComponentError` with the install command when it is absent.
"""

from __future__ import annotations

import importlib.util
import tempfile
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit._optional import require_module
from tritonkit.builders.onnx_builder import OnnxBuildResult, build_onnx
from tritonkit.builders.verify import Reference
from tritonkit.errors import BuildError, ConfigError

__all__ = ["build_torch", "export_torch", "torch_reference"]

_TORCH_HINT = "pip install torch"


def _torch() -> Any:
    return require_module("torch", "PyTorch is not installed; it is needed to export a torch module", _TORCH_HINT)


def _as_tuple(example_inputs: Any) -> tuple[Any, ...]:
    return tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)


def export_torch(
    module: Any,
    example_inputs: Any,
    path: Path | str,
    *,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_batch: bool = True,
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    opset: int = 17,
    exporter: Literal["auto", "torchscript", "dynamo"] = "auto",
) -> Path:
    """Export ``module`` to ``path`` with ``torch.onnx.export`` and return the path.

    With ``dynamic_batch`` the first axis of every input and output is named ``batch`` and
    left dynamic, which is what lets Triton batch requests; ``dynamic_axes`` adds more (e.g.
    ``{"x": {2: "height"}}``). ``exporter="auto"`` uses the torch.export-based exporter when
    ``onnxscript`` is installed and the TorchScript one otherwise.
    """
    torch = _torch()
    args = _as_tuple(example_inputs)
    if len(input_names) != len(args):
        raise ConfigError(f"{len(input_names)} input name(s) for {len(args)} example input(s)",
                          hint="give one input name per positional example input")
    axes: dict[str, dict[int, str]] = {}
    if dynamic_batch:
        for tensor_name in (*input_names, *output_names):
            axes.setdefault(tensor_name, {})[0] = "batch"
    for tensor_name, extra in (dynamic_axes or {}).items():
        axes.setdefault(tensor_name, {}).update(extra)
    if exporter == "auto":
        exporter = "dynamo" if importlib.util.find_spec("onnxscript") is not None else "torchscript"
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    was_training = bool(getattr(module, "training", False))
    module.eval()
    try:
        with torch.no_grad(), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the TorchScript exporter's deprecation notice is not the user's problem
            if exporter == "dynamo":
                shapes = _dynamic_shapes(torch, input_names, axes)
                torch.onnx.export(module, args, str(path), input_names=list(input_names),
                                  output_names=list(output_names), dynamic_shapes=shapes, opset_version=opset,
                                  dynamo=True)
            else:
                torch.onnx.export(module, args, str(path), input_names=list(input_names),
                                  output_names=list(output_names), dynamic_axes=axes, opset_version=opset,
                                  dynamo=False)
    except Exception as exc:  # noqa: BLE001 - torch raises many types; the message is what matters
        raise BuildError(f"torch.onnx.export failed ({exporter} exporter): {str(exc).strip().splitlines()[0]}",
                         hint="make the module traceable (no data-dependent Python control flow), "
                              "or export it yourself and build the .onnx file") from exc
    finally:
        if was_training:
            module.train()
    return path


def _dynamic_shapes(torch: Any, input_names: Sequence[str], axes: Mapping[str, Mapping[int, str]]) -> dict[str, Any]:
    dims: dict[str, Any] = {}
    shapes: dict[str, Any] = {}
    for name in input_names:
        shapes[name] = {axis: dims.setdefault(label, torch.export.Dim(label)) for axis, label in axes.get(name, {}).items()}
    return shapes


def torch_reference(module: Any, *, input_names: Sequence[str], output_names: Sequence[str]) -> Reference:
    """``module`` as a verification reference: numpy inputs by name in, numpy outputs by name out."""
    torch = _torch()

    def run(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        module.eval()
        with torch.no_grad():
            result = module(*(torch.from_numpy(np.ascontiguousarray(feeds[n])) for n in input_names))
        outs = result if isinstance(result, (tuple, list)) else (result,)
        if len(outs) != len(output_names):
            raise BuildError(f"the module returned {len(outs)} output(s) for {len(output_names)} output name(s)")
        return {n: o.detach().cpu().numpy() for n, o in zip(output_names, outs, strict=True)}

    return run


def build_torch(
    module: Any,
    example_inputs: Any,
    *,
    name: str,
    input_names: Sequence[str],
    output_names: Sequence[str],
    dynamic_axes: Mapping[str, Mapping[int, str]] | None = None,
    opset: int = 17,
    **build_options: Any,
) -> OnnxBuildResult:
    """Export ``module`` (dynamic batch axis) and build it like :func:`build_onnx`, verified against the module itself.

    ``build_options`` are :func:`build_onnx`'s keyword arguments (``repo``, ``max_batch_size``, ``fp16``, …).
    """
    with tempfile.TemporaryDirectory(prefix="tritonkit-torch-") as tmp:
        onnx_path = export_torch(module, example_inputs, Path(tmp) / f"{name}.onnx", input_names=input_names,
                                 output_names=output_names, dynamic_axes=dynamic_axes, opset=opset)
        reference = torch_reference(module, input_names=input_names, output_names=output_names)
        return build_onnx(onnx_path, name=name, reference=reference, reference_title="torch module", **build_options)
