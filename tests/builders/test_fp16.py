"""FP16 conversion: FP32 in and out, FP16 inside, FP32 kept exactly where an op's schema demands it."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.support import onnx_models as models
from tritonkit.builders import convert_to_fp16
from tritonkit.errors import BuildError


def _run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import onnxruntime as ort

    return list(ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds))


def _io_types(model: onnx.ModelProto) -> list[int]:
    return [v.type.tensor_type.elem_type for v in [*model.graph.input, *model.graph.output]]


def test_cnn_weights_become_fp16_and_io_stays_fp32() -> None:
    original = models.make_cnn()
    converted, report = convert_to_fp16(original)
    onnx.checker.check_model(converted, full_check=True)
    assert _io_types(converted) == [TensorProto.FLOAT, TensorProto.FLOAT]
    assert {t.data_type for t in converted.graph.initializer} == {TensorProto.FLOAT16}
    assert report.converted_tensors == 4 and report.kept_fp32 == ()
    img = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want, got = _run(original, {"img": img})[0], _run(converted, {"img": img})[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, atol=0.01 * float(np.abs(want).max()))


def test_resize_scales_stay_fp32_because_its_schema_demands_it() -> None:
    converted, report = convert_to_fp16(models.make_resize_cnn())
    onnx.checker.check_model(converted, full_check=True)
    scales = next(t for t in converted.graph.initializer if t.name == "scales")
    assert scales.data_type == TensorProto.FLOAT
    assert report.kept_fp32 == ("Resize (input 'scales' cannot be float16)",)
    resize = next(n for n in converted.graph.node if n.op_type == "Resize")
    producers = {o: n for n in converted.graph.node for o in n.output}
    assert producers[resize.input[0]].op_type == "Cast"  # X cast back to FP32 for the FP32 Resize


def test_constants_casts_and_constant_of_shape_are_retyped() -> None:
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "W")
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["m"]),
        helper.make_node("Constant", [], ["half"], value_float=0.5),
        helper.make_node("Mul", ["m", "half"], ["h"]),
        helper.make_node("Shape", ["h"], ["s"]),
        helper.make_node("ConstantOfShape", ["s"], ["zeros"]),
        helper.make_node("Add", ["h", "zeros"], ["a"]),
        helper.make_node("Cast", ["a"], ["y"], to=TensorProto.FLOAT),
    ]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    converted, _ = convert_to_fp16(model)
    onnx.checker.check_model(converted, full_check=True)
    x = rng.standard_normal((5, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(converted, {"x": x})[0], _run(model, {"x": x})[0], atol=5e-3)


def test_if_branches_are_converted_and_outer_inputs_cast_inside_them() -> None:
    then_branch = helper.make_graph([helper.make_node("Mul", ["x", "W"], ["t"])], "then", [],
                                    [helper.make_tensor_value_info("t", TensorProto.FLOAT, None)])
    else_branch = helper.make_graph([helper.make_node("Add", ["x", "W"], ["e"])], "else", [],
                                    [helper.make_tensor_value_info("e", TensorProto.FLOAT, None)])
    inits = [numpy_helper.from_array(np.array([1, 2, 3], np.float32), "W"),
             numpy_helper.from_array(np.array(0, np.float32), "zero")]
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["o"], then_branch=then_branch, else_branch=else_branch)]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("o", TensorProto.FLOAT, [3])], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    converted, _ = convert_to_fp16(model)
    onnx.checker.check_model(converted, full_check=True)
    for x in (np.array([1, 2, 3], np.float32), np.array([-1, -2, -3], np.float32)):
        np.testing.assert_array_equal(_run(converted, {"x": x})[0], _run(model, {"x": x})[0])


def test_values_beyond_fp16_range_are_clipped_and_counted() -> None:
    w = numpy_helper.from_array(np.array([[1e6], [1.0]], np.float32), "W")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    converted, report = convert_to_fp16(model)
    assert report.clipped_values == 1
    assert float(numpy_helper.to_array(converted.graph.initializer[0]).max()) == 65504.0


def _custom_op_model(*, custom_last: bool) -> onnx.ModelProto:
    relu = ["x", "r"] if custom_last else ["g", "y"]
    gelu = ["r", "y"] if custom_last else ["x", "g"]
    nodes = [helper.make_node("Relu", [relu[0]], [relu[1]]),
             helper.make_node("Gelu", [gelu[0]], [gelu[1]], domain="com.microsoft")]
    if not custom_last:
        nodes.reverse()
    return helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], []),
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])


def test_custom_op_without_a_schema_stays_fp32() -> None:
    model = _custom_op_model(custom_last=True)
    converted, report = convert_to_fp16(model)
    assert report.kept_fp32 == ("Gelu (no ONNX schema (custom op or local function))",)
    gelu = next(n for n in converted.graph.node if n.op_type == "Gelu")
    producers = {o: n for n in converted.graph.node for o in n.output}
    cast = producers[gelu.input[0]]
    assert cast.op_type == "Cast" and cast.attribute[0].i == TensorProto.FLOAT
    x = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    np.testing.assert_allclose(_run(converted, {"x": x})[0], _run(model, {"x": x})[0], atol=5e-3)


def test_tensor_of_unknown_type_refuses_conversion() -> None:
    # The custom op's output feeds Relu and has no declared type: converting would be a guess.
    with pytest.raises(BuildError) as info:
        convert_to_fp16(_custom_op_model(custom_last=False))
    assert "'g'" in info.value.message and "cannot be inferred" in info.value.message
