"""ONNX analysis: checker, opsets, I/O, batch axis, external data, and the files a model cannot be built from."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.support import onnx_models as models
from tritonkit.builders import analyze_onnx, make_batch_dynamic, make_demo_model
from tritonkit.errors import BuildError, ConfigError


def test_demo_model_is_deterministic_and_described(tmp_path: Path) -> None:
    a = make_demo_model(tmp_path / "a.onnx")
    b = make_demo_model(tmp_path / "b.onnx")
    assert a.read_bytes() == b.read_bytes()
    analysis = analyze_onnx(a)
    assert analysis.opset_report() == "IR 8, opsets ai.onnx 17; produced by tritonkit demo"
    assert [t.describe() for t in analysis.inputs] == ["x: FLOAT [batch, 16]"]
    assert [t.describe() for t in analysis.outputs] == ["y: FLOAT [batch, 4]"]
    assert analysis.batch.kind == "dynamic"
    assert analysis.inputs[0].config_dims(batched=True) == [16]
    assert analysis.inputs[0].config_dims(batched=False) == [-1, 16]


def test_analysis_maps_onnx_types_to_triton_types(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_two_inputs(), tmp_path / "two.onnx"))
    assert [t.triton_dtype for t in analysis.inputs] == ["TYPE_FP32", "TYPE_BOOL"]
    assert [t.triton_dtype for t in analysis.outputs] == ["TYPE_FP32", "TYPE_FP32", "TYPE_INT64"]


def test_dynamic_spatial_dims_become_minus_one(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_dynamic_spatial_cnn(), tmp_path / "dyn.onnx"))
    assert analysis.inputs[0].shape == ("N", 3, "H", "W")
    assert analysis.inputs[0].config_dims(batched=True) == [3, -1, -1]


def test_fixed_first_axis_is_reported_as_fixed(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_fixed_batch_linear(), tmp_path / "fixed.onnx"))
    assert analysis.batch.kind == "fixed" and analysis.batch.fixed_size == 1


def test_output_without_the_batch_axis_is_not_batchable(tmp_path: Path) -> None:
    axes = onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=0)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [4])], [axes]),
        opset_imports=[helper.make_opsetid("", 17)])
    analysis = analyze_onnx(models.save(model, tmp_path / "reduce.onnx"))
    assert analysis.batch.kind == "none"
    assert "output 's'" in analysis.batch.reason and "fixed first axis" in analysis.batch.reason


def test_make_batch_dynamic_renames_only_the_first_axis(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_fixed_batch_linear(), tmp_path / "fixed.onnx"))
    dynamic = make_batch_dynamic(analysis.skeleton, {"x"})
    dims = dynamic.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 4
    assert dynamic.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert analysis.skeleton.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 1  # original untouched


def test_external_data_is_found_and_counted(tmp_path: Path) -> None:
    path = models.save(models.make_cnn(), tmp_path / "ext.onnx", external_data=True)
    analysis = analyze_onnx(path)
    assert analysis.external_data == ("ext.onnx.data",)
    assert analysis.size_bytes == path.stat().st_size + (tmp_path / "ext.onnx.data").stat().st_size
    # The skeleton never holds the weights.
    assert all(t.data_location == TensorProto.EXTERNAL for t in analysis.skeleton.graph.initializer)


def test_missing_external_data_is_a_build_error(tmp_path: Path) -> None:
    path = models.save(models.make_cnn(), tmp_path / "ext.onnx", external_data=True)
    (tmp_path / "ext.onnx.data").unlink()
    with pytest.raises(BuildError) as info:
        analyze_onnx(path)
    assert "ext.onnx" in info.value.message and info.value.hint


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        analyze_onnx(tmp_path / "nope.onnx")
    assert "not found" in info.value.message and info.value.hint


def test_text_file_is_not_onnx(tmp_path: Path) -> None:
    path = tmp_path / "notes.onnx"
    path.write_text("this is not a model\n")
    with pytest.raises(BuildError) as info:
        analyze_onnx(path)
    assert "not an ONNX model" in info.value.message


def test_truncated_onnx_file_is_corrupt(tmp_path: Path) -> None:
    good = make_demo_model(tmp_path / "good.onnx").read_bytes()
    path = tmp_path / "cut.onnx"
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(BuildError) as info:
        analyze_onnx(path)
    assert "corrupt" in info.value.message


def test_unsupported_dtype_is_named_with_a_fix(tmp_path: Path) -> None:
    with pytest.raises(BuildError) as info:
        analyze_onnx(models.save(models.make_complex_input(), tmp_path / "complex.onnx"))
    assert "COMPLEX64" in info.value.message and "'z'" in info.value.message
    assert info.value.hint is not None and "Cast" in info.value.hint


def test_model_failing_the_checker_is_refused(tmp_path: Path) -> None:
    # MatMul of [N, 4] by a [5, 3] weight: the full checker's shape inference rejects it.
    w = onnx.numpy_helper.from_array(np.zeros((5, 3), np.float32), "W")
    model = helper.make_model(helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], [w]),
        opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "bad.onnx"
    onnx.save_model(model, str(path))
    with pytest.raises(BuildError) as info:
        analyze_onnx(path)
    assert "fails the ONNX checker" in info.value.message
