"""Small ONNX models made with ``onnx.helper`` for the builder tests (deterministic weights)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

__all__ = [
    "make_cnn",
    "make_complex_input",
    "make_dynamic_spatial_cnn",
    "make_fixed_batch3_linear",
    "make_fixed_batch_linear",
    "make_fixed_batch_reshape",
    "make_fp16_io",
    "make_mixes_batch",
    "make_opset6_linear",
    "make_resize_cnn",
    "make_sequence_input",
    "make_two_inputs",
    "save",
]

_RNG_SEED = 1234
Shape = Sequence[int | str]


def _w(rng: np.random.Generator, name: str, *shape: int, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) / np.sqrt(shape[0])).astype(dtype), name)


def _model(nodes: list[onnx.NodeProto], inputs: list[onnx.ValueInfoProto], outputs: list[onnx.ValueInfoProto],
           inits: list[onnx.TensorProto], *, opset: int = 17) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "test", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="tritonkit-tests")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


def save(model: onnx.ModelProto, path: Path, *, external_data: bool = False) -> Path:
    """Write ``model``; with ``external_data`` every tensor goes to ``<name>.data`` beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if external_data:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                        location=path.name + ".data", size_threshold=0)
    else:
        onnx.save_model(model, str(path))
    return path


def make_cnn() -> onnx.ModelProto:
    """img FP32 [N, 3, 8, 8] → Conv → Relu → MaxPool → Flatten → Gemm → logits FP32 [N, 5]."""
    rng = np.random.default_rng(_RNG_SEED)
    nodes = [
        helper.make_node("Conv", ["img", "Wc", "bc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "Wf", "bf"], ["logits"]),
    ]
    inits = [_w(rng, "Wc", 4, 3, 3, 3), _w(rng, "bc", 4), _w(rng, "Wf", 64, 5), _w(rng, "bf", 5)]
    return _model(nodes, [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["N", 3, 8, 8])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 5])], inits)


def make_two_inputs() -> onnx.ModelProto:
    """a FP32 [N, 4] and mask BOOL [N, 4] → masked FP32 [N, 4], total FP32 [N, 1], count INT64 [N, 1]."""
    zero = numpy_helper.from_array(np.zeros(1, np.float32), "zero")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [
        helper.make_node("Where", ["mask", "a", "zero"], ["masked"]),
        helper.make_node("ReduceSum", ["masked", "axes"], ["total"], keepdims=1),
        helper.make_node("Cast", ["mask"], ["mask_i"], to=TensorProto.INT64),
        helper.make_node("ReduceSum", ["mask_i", "axes"], ["count"], keepdims=1),
    ]
    return _model(
        nodes,
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("mask", TensorProto.BOOL, ["N", 4])],
        [helper.make_tensor_value_info("masked", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("total", TensorProto.FLOAT, ["N", 1]),
         helper.make_tensor_value_info("count", TensorProto.INT64, ["N", 1])],
        [zero, axes])


def make_dynamic_spatial_cnn() -> onnx.ModelProto:
    """img FP32 [N, 3, H, W] → Conv (same padding) → Relu → GlobalAveragePool → Flatten → feat FP32 [N, 4]."""
    rng = np.random.default_rng(_RNG_SEED + 1)
    nodes = [
        helper.make_node("Conv", ["img", "Wc"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("GlobalAveragePool", ["r"], ["g"]),
        helper.make_node("Flatten", ["g"], ["feat"]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["N", 3, "H", "W"])],
                  [helper.make_tensor_value_info("feat", TensorProto.FLOAT, ["N", 4])], [_w(rng, "Wc", 4, 3, 3, 3)])


def make_resize_cnn() -> onnx.ModelProto:
    """img FP32 [N, 3, 8, 8] → Conv → Resize ×2 → Conv → GlobalAveragePool → Flatten → out FP32 [N, 4].

    Resize's ``scales`` input must stay FP32, which an FP16 conversion has to respect.
    """
    rng = np.random.default_rng(_RNG_SEED + 2)
    scales = numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "scales")
    nodes = [
        helper.make_node("Conv", ["img", "W1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["c1", "", "scales"], ["up"], mode="nearest"),
        helper.make_node("Conv", ["up", "W2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c2"], ["g"]),
        helper.make_node("Flatten", ["g"], ["out"]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["N", 3, 8, 8])],
                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["N", 4])],
                  [_w(rng, "W1", 6, 3, 3, 3), _w(rng, "W2", 4, 6, 3, 3), scales])


def make_mixes_batch() -> onnx.ModelProto:
    """x FP32 [N, 4] → y = x - mean over the batch axis: every answer depends on the rest of the batch."""
    axes = numpy_helper.from_array(np.array([0], np.int64), "axes")
    nodes = [
        helper.make_node("ReduceMean", ["x", "axes"], ["m"], keepdims=1),
        helper.make_node("Sub", ["x", "m"], ["y"]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], [axes], opset=18)


def make_fixed_batch_linear() -> onnx.ModelProto:
    """x FP32 [1, 4] → MatMul → y FP32 [1, 3]: batch fixed to 1, but the graph runs at any batch size."""
    rng = np.random.default_rng(_RNG_SEED + 3)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])], [_w(rng, "W", 4, 3)])


def make_fixed_batch_reshape() -> onnx.ModelProto:
    """x FP32 [1, 12] → Reshape to the constant [1, 3, 4] → y: batch fixed to 1 and the graph cannot change it."""
    shape = numpy_helper.from_array(np.array([1, 3, 4], np.int64), "shape")
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 12])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 4])], [shape])


def make_fp16_io() -> onnx.ModelProto:
    """x FP16 [N, 8] → MatMul (FP16 weights) → Relu → y FP16 [N, 3]: an FP16 model end to end."""
    rng = np.random.default_rng(_RNG_SEED + 4)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]), helper.make_node("Relu", ["h"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["N", 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["N", 3])],
                  [_w(rng, "W", 8, 3, dtype=np.float16)])


def make_complex_input() -> onnx.ModelProto:
    """An input of type COMPLEX64, which Triton cannot carry (the model is otherwise valid)."""
    nodes = [helper.make_node("Identity", ["z"], ["w"])]
    return _model(nodes, [helper.make_tensor_value_info("z", TensorProto.COMPLEX64, ["N", 2])],
                  [helper.make_tensor_value_info("w", TensorProto.COMPLEX64, ["N", 2])], [])


def make_fixed_batch3_linear() -> onnx.ModelProto:
    """x FP32 [3, 4] → MatMul → y FP32 [3, 2]: batch fixed to 3, but the graph runs at any batch size."""
    rng = np.random.default_rng(_RNG_SEED + 5)
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"])]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])], [_w(rng, "W", 4, 2)])


def make_opset6_linear() -> onnx.ModelProto:
    """An old exporter's model: opset 6, IR 3, ``Add`` with the ``broadcast`` attribute (removed in opset 7).

    x FP32 [1, 4] → MatMul → Add(b, broadcast=1) → Relu → y FP32 [1, 3]. ONNX Runtime has no kernel for
    ``Add`` version 6; the version converter needs the fixed shapes to convert that ``Add``.
    """
    rng = np.random.default_rng(_RNG_SEED + 6)
    weights = [_w(rng, "W", 4, 3), numpy_helper.from_array(np.array([0.5, -0.25, 1.0], np.float32), "b")]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Add", ["h", "b"], ["a"], broadcast=1),
             helper.make_node("Relu", ["a"], ["y"])]
    # IR 3 lists initializers among the graph inputs.
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
              helper.make_tensor_value_info("W", TensorProto.FLOAT, [4, 3]),
              helper.make_tensor_value_info("b", TensorProto.FLOAT, [3])]
    graph = helper.make_graph(nodes, "old", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3])],
                              weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)], producer_name="old-exporter")
    model.ir_version = 3
    onnx.checker.check_model(model, full_check=True)
    return model


def make_sequence_input(dim: str = "L") -> onnx.ModelProto:
    """tokens FP32 [L] → Relu → out FP32 [L]: one variable-length vector per request (rank 1)."""
    nodes = [helper.make_node("Relu", ["tokens"], ["out"])]
    return _model(nodes, [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, [dim])],
                  [helper.make_tensor_value_info("out", TensorProto.FLOAT, [dim])], [])
