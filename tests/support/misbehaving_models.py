"""Built models whose python-backend ``model.py`` answers wrongly: a shape unlike the config, or
numbers unlike the model file. ``perf run`` (and :func:`tritonkit.perf.load_test`) must refuse both."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tritonkit.builders import OnnxBuildResult, build_onnx, make_demo_model

__all__ = ["WRONG_SHAPE_PY", "WRONG_VALUES_PY", "build_misbehaving"]

_MISBEHAVING_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    # {why}
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "x").as_numpy()
            y = {answer}
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("y", y)]))
        return responses
"""
#: Declares y: [batch, 4] in config.pbtxt but answers [batch, 3].
WRONG_SHAPE_PY = _MISBEHAVING_PY.format(why="answers [batch, 3] for the declared [batch, 4]",
                                        answer="np.zeros((x.shape[0], 3), dtype=np.float32)")
#: The declared shape and dtype, but not what the model file computes.
WRONG_VALUES_PY = _MISBEHAVING_PY.format(why="the declared shape and dtype, other numbers",
                                         answer="np.full((x.shape[0], 4), 0.5, dtype=np.float32)")


def build_misbehaving(source_dir: Path, repo: Path, name: str, model_py: str) -> OnnxBuildResult:
    """The demo MLP (x [batch, 16] → y [batch, 4]) built into ``repo`` as ``name`` with the python
    runtime, its ``model.py`` then replaced by ``model_py``; the model file stays, as the reference."""
    source = source_dir / "misbehaving.onnx"
    if not source.is_file():
        make_demo_model(source)
    built = build_onnx(source, name=name, repo=repo, runtime="python", kind="cpu")
    (built.model_dir / "1" / "model.py").write_text(textwrap.dedent(model_py).lstrip())
    return built
