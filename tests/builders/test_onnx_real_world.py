"""Models as older or unusual exporters write them: old opsets, a batch fixed to 3, operators this
ONNX Runtime lacks. Each builds, or fails naming the user's file (never a staging path) and a fix."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tests.support import onnx_models as models
from tritonkit.builders import build_onnx
from tritonkit.builders.staging import STAGING_PREFIX
from tritonkit.errors import BuildError, ConfigError


def test_an_old_opset_the_converter_cannot_handle_is_refused_with_a_fix(tmp_path: Path) -> None:
    old = models.make_opset6_linear()
    for value_info in (old.graph.input[0], old.graph.output[0]):
        value_info.type.tensor_type.shape.dim[0].dim_param = "N"  # the converter needs fixed dims for Add(6)
    path = tmp_path / "old_symbolic.onnx"
    onnx.save_model(old, str(path))
    with pytest.raises(BuildError) as info:
        build_onnx(path, name="old", repo=tmp_path / "repo", runtime="python", kind="cpu")
    assert str(path) in info.value.message and "opset 6" in info.value.message
    assert info.value.hint and "re-export" in info.value.hint
    assert not (tmp_path / "repo" / "old").exists()


def test_errors_from_the_candidate_name_the_users_file_not_the_staging_folder(tmp_path: Path) -> None:
    # A valid graph with an operator from a domain ONNX Runtime does not know: it fails to load the candidate.
    graph = helper.make_graph([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.example")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.example", 1)])
    model.ir_version = 8
    path = tmp_path / "custom_op.onnx"
    onnx.save_model(model, str(path))
    with pytest.raises(BuildError) as info:
        build_onnx(path, name="custom", repo=tmp_path / "repo", runtime="python", kind="cpu")
    assert STAGING_PREFIX not in info.value.message and "tritonkit-build" not in info.value.message
    assert str(path) in info.value.message and "Frobnicate" in info.value.message


def test_samples_for_a_batch_fixed_to_3_are_cut_to_a_multiple_of_3(tmp_path: Path) -> None:
    path = models.save(models.make_fixed_batch3_linear(), tmp_path / "fixed3.onnx")
    samples = tmp_path / "samples.npz"
    np.savez(samples, x=np.random.default_rng(0).standard_normal((7, 4)).astype(np.float32))
    result = build_onnx(path, name="f3", repo=tmp_path / "repo", runtime="python", kind="cpu", samples=samples)
    assert result.verified and result.comparisons[0].samples == 6


def test_fewer_samples_than_a_fixed_batch_of_3_is_a_clear_error(tmp_path: Path) -> None:
    path = models.save(models.make_fixed_batch3_linear(), tmp_path / "fixed3.onnx")
    samples = tmp_path / "samples.npz"
    np.savez(samples, x=np.zeros((2, 4), np.float32))
    with pytest.raises(ConfigError) as info:
        build_onnx(path, name="f3", repo=tmp_path / "repo", runtime="python", kind="cpu", samples=samples)
    assert str(samples) in info.value.message and "fixed to that size" in info.value.message
    assert info.value.hint and "at least 3" in info.value.hint


def test_batch_axis_option_batches_a_rank_1_input_and_says_so(tmp_path: Path) -> None:
    path = models.save(models.make_sequence_input(), tmp_path / "seq.onnx")
    result = build_onnx(path, name="seq", repo=tmp_path / "repo", runtime="python", kind="cpu", batch_axis=True)
    assert result.max_batch_size == 8 and "--batch-axis" in result.plan.axis_note
    assert "batch axis: first axis taken as the batch axis (--batch-axis)" in result.summary()
