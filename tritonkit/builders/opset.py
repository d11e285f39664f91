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

from tritonkit.builders.onnx_model import OnnxAnalysis, load_onnx
from tritonkit.builders.verify import Reference
from tritonkit.errors import BuildError

__all__ = ["CONVERTED_OPSET", "MIN_RUNTIME_OPSET", "convert_old_opset", "needs_conversion", "reference_evaluator"]

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


def reference_evaluator(path: Path) -> Reference:
    """The model at ``path`` run by ``onnx.reference.ReferenceEvaluator`` (any opset; slow, exact)."""
    from onnx.reference import ReferenceEvaluator

    evaluator = ReferenceEvaluator(load_onnx(path, load_external_data=True))
    names = list(evaluator.output_names)

    def run(feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = evaluator.run(None, dict(feeds))
        return {name: np.asarray(value) for name, value in zip(names, results, strict=True)}

    return run
