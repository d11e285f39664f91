"""Models from older exporters: opsets ONNX Runtime no longer runs, converted and checked.

ONNX Runtime guarantees only ``ai.onnx`` opset 7 and later (older operators such as ``Add`` with its
``broadcast`` attribute have no kernel). :func:`convert_old_opset` rewrites such a model with ONNX's
version converter; the build then verifies the converted model against the original run by ONNX's
reference evaluator, which implements the old operator versions, so a wrong conversion is caught.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import onnx

from tritonkit.builders.onnx_model import OnnxAnalysis, load_onnx, save_onnx
from tritonkit.builders.verify import Reference
from tritonkit.errors import BuildError
from tritonkit.onnxruntime_versions import OnnxRuntimeLimits

__all__ = ["CONVERTED_OPSET", "MIN_RUNTIME_OPSET", "convert_for_onnxruntime", "convert_old_opset", "needs_conversion",
           "reference_evaluator"]

# Past this many bytes of weights a converted model is written with external data (protobuf's limit is 2 GiB).
_EXTERNAL_DATA_BYTES = 1_800_000_000

#: The oldest ``ai.onnx`` opset ONNX Runtime guarantees to run.
MIN_RUNTIME_OPSET = 7
#: What an older model is converted to: a mature opset that ONNX Runtime and TensorRT's parser both run,
#: rather than the minimum 7, whose operators TensorRT's parser no longer all accepts.
CONVERTED_OPSET = 13


def needs_conversion(analysis: OnnxAnalysis) -> bool:
    """True when the model's default-domain opset is older than ONNX Runtime runs."""
    return analysis.opsets.get("", MIN_RUNTIME_OPSET) < MIN_RUNTIME_OPSET


def convert_old_opset(analysis: OnnxAnalysis, dest: Path) -> str:
    """Write ``analysis``'s model converted to :data:`CONVERTED_OPSET` into ``dest``; return a note saying so."""
    old = analysis.opsets.get("", 0)
    model = load_onnx(analysis.path, load_external_data=True)
    try:
        converted = onnx.version_converter.convert_version(model, CONVERTED_OPSET)
        onnx.checker.check_model(converted, full_check=True)
    except Exception as exc:  # noqa: BLE001 - the converter raises RuntimeError/ValidationError with C++ text
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BuildError(f"{analysis.path}: opset {old} is older than ONNX Runtime runs ({MIN_RUNTIME_OPSET}+), "
                         f"and ONNX's version converter cannot convert it to opset {CONVERTED_OPSET}: {first}",
                         hint=f"re-export the model with opset {CONVERTED_OPSET} or later; the converter needs "
                              "fixed dimensions for some old operators, so a fixed-shape export may convert") from exc
    onnx.save_model(converted, str(dest))
    return (f"converted from opset {old} to opset {CONVERTED_OPSET} with ONNX's version converter "
            f"(ONNX Runtime runs opset {MIN_RUNTIME_OPSET} and later); verified against the original model "
            "run by ONNX's reference evaluator")


def convert_for_onnxruntime(analysis: OnnxAnalysis, dest: Path, limits: OnnxRuntimeLimits, version: str) -> str:
    """Write ``analysis``'s model into ``dest`` as ONNX Runtime ``version`` loads it: its ``ai.onnx`` opset
    converted down to ``limits.max_opset`` with ONNX's version converter when newer, and its IR version
    lowered to the newest that ONNX Runtime loads (no lower than its opsets need; ONNX's checker then
    proves the model valid at that IR). Returns a note saying what changed."""
    model = load_onnx(analysis.path, load_external_data=True)
    opset = analysis.opsets.get("", 0)
    changes = []
    try:
        if opset > limits.max_opset:
            model = onnx.version_converter.convert_version(model, limits.max_opset)
            changes.append(f"opset {opset} → {limits.max_opset}")
        needed = onnx.helper.find_min_ir_version_for(list(model.opset_import), ignore_unknown=True)
        if needed > limits.max_ir_version:
            raise BuildError(f"{analysis.path}: its opsets need IR version {needed}, newer than ONNX Runtime {version} "
                             f"loads ({limits.max_ir_version})",
                             hint=f"re-export with opset {limits.max_opset} or older")
        if model.ir_version > limits.max_ir_version:
            changes.append(f"IR {model.ir_version} → {max(needed, limits.max_ir_version)}")
            model.ir_version = max(needed, limits.max_ir_version)
        onnx.checker.check_model(model, full_check=True)
    except BuildError:
        raise
    except Exception as exc:  # noqa: BLE001 - the converter and checker raise several types with C++ text
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise BuildError(f"{analysis.path}: cannot be converted for ONNX Runtime {version} (IR ≤ "
                         f"{limits.max_ir_version}, opset ≤ {limits.max_opset}): {first}",
                         hint=f"re-export the model with opset {limits.max_opset} or older "
                              f"(torch.onnx.export(..., opset_version={limits.max_opset})) and onnx "
                              f"ir_version {limits.max_ir_version}") from exc
    weights = sum(t.ByteSize() for t in model.graph.initializer)
    save_onnx(model, dest, external_data_file="model.onnx.data" if weights > _EXTERNAL_DATA_BYTES else None)
    return (f"converted for ONNX Runtime {version} ({', '.join(changes)}; opsets by ONNX's version converter, the "
            "model then proven valid by ONNX's checker) because --convert-onnx was given; verified against the "
            "original model")


def reference_evaluator(path: Path) -> Reference:
    """The model at ``path`` run by ``onnx.reference.ReferenceEvaluator`` (any opset; slow, exact)."""
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(load_onnx(path, load_external_data=True))
    names = list(evaluator.output_names)

    def run(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = evaluator.run(None, dict(feeds))
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    return run
