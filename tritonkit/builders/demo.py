"""The built-in demo model: a small MLP made with ``onnx.helper``, deterministic weights.

Used by ``scripts/demo`` and the tests, so that a first run needs no download and no framework.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = ["DEMO_INPUT", "DEMO_MODEL_NAME", "DEMO_OUTPUT", "build_demo_entry", "make_demo_model"]

#: The demo model's folder in a repository (the committed ``model_repository/`` holds one).
DEMO_MODEL_NAME = "demo_mlp"

#: Input name, dtype and per-sample shape of the demo model.
DEMO_INPUT = ("x", "TYPE_FP32", (16,))
#: Output name, dtype and per-sample shape of the demo model.
DEMO_OUTPUT = ("y", "TYPE_FP32", (4,))


def make_demo_model(path: Path | str, *, hidden: int = 32, seed: int = 0, opset: int = 17) -> Path:
    """Write the demo MLP to ``path`` and return it.

    ``y = softmax(relu(x @ W1 + b1) @ W2 + b2)`` with ``x: FP32 [batch, 16]``, ``y: FP32 [batch, 4]``;
    the batch axis is dynamic. The same ``seed`` always gives the same bytes.
    """
    rng = np.random.default_rng(seed)
    n_in, n_out = DEMO_INPUT[2][0], DEMO_OUTPUT[2][0]
    weights = {
        "W1": (rng.standard_normal((n_in, hidden)) / np.sqrt(n_in)).astype(np.float32),
        "b1": (0.1 * rng.standard_normal(hidden)).astype(np.float32),
        "W2": (rng.standard_normal((hidden, n_out)) / np.sqrt(hidden)).astype(np.float32),
        "b2": (0.1 * rng.standard_normal(n_out)).astype(np.float32),
    }
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h"], name="fc1"),
        helper.make_node("Relu", ["h"], ["a"], name="relu"),
        helper.make_node("Gemm", ["a", "W2", "b2"], ["logits"], name="fc2"),
        helper.make_node("Softmax", ["logits"], ["y"], axis=-1, name="softmax"),
    ]
    graph = helper.make_graph(
        nodes,
        "tritonkit_demo_mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", n_in])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n_out])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="tritonkit", producer_version="demo")
    model.ir_version = 8  # readable by every onnxruntime tritonkit supports
    onnx.checker.check_model(model, full_check=True)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return path


def build_demo_entry(repo: Path | str) -> Path:
    """Write the demo model into ``repo/demo_mlp`` as ``tritonkit build onnx`` does today; return its folder.

    The python runtime on CPU, so the bundled server (python backend only) serves it on any machine.
    Replaces version 1 if present. The committed ``model_repository/`` is this function's output;
    a test keeps it so (regenerate: ``python -m tritonkit.builders.demo model_repository``).
    """
    import tempfile

    from tritonkit.builders.onnx_builder import build_onnx

    with tempfile.TemporaryDirectory(prefix="tritonkit-demo-") as tmp:
        source = make_demo_model(Path(tmp) / f"{DEMO_MODEL_NAME}.onnx")
        result = build_onnx(source, name=DEMO_MODEL_NAME, repo=repo, runtime="python", kind="cpu", force=True)
    return result.model_dir


if __name__ == "__main__":
    import sys

    print(build_demo_entry(sys.argv[1] if len(sys.argv) > 1 else "model_repository"))
