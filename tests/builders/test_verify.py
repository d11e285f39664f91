"""Numeric verification: error tables, tolerances, samples, and the batch-consistency check."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.support import onnx_models as models
from tritonkit.builders import (
    FP32_TOLERANCE,
    Tolerance,
    analyze_onnx,
    check_batch_consistency,
    compare_outputs,
    load_samples,
    make_samples,
    ort_runner,
)
from tritonkit.errors import BuildError, ConfigError


def test_errors_are_absolute_and_relative_to_the_output_scale() -> None:
    want = {"y": np.array([[10.0, -20.0], [0.0, 5.0]], np.float32)}
    got = {"y": want["y"] + np.array([[0.0, 0.1], [0.0, 0.0]], np.float32)}
    table = compare_outputs(got, want, tolerance=Tolerance(atol=0.0, rtol=0.01), title="t", samples=2)
    row = table.rows[0]
    assert row.max_abs_error == pytest.approx(0.1, rel=1e-4)
    assert row.max_rel_error == pytest.approx(0.1 / 20.0, rel=1e-4)
    assert row.limit == pytest.approx(0.2) and row.ok


def test_error_past_the_limit_fails_and_the_table_says_so() -> None:
    want = {"y": np.ones((2, 3), np.float32)}
    got = {"y": np.full((2, 3), 1.5, np.float32)}
    table = compare_outputs(got, want, tolerance=FP32_TOLERANCE, title="ONNX Runtime vs reference", samples=2)
    assert not table.ok
    text = table.table()
    assert text.splitlines()[0] == "ONNX Runtime vs reference (2 samples)"
    assert "output  shape   max abs err  max rel err  limit (abs)  result" in text
    assert "FAIL" in text and table.failures() == ["y: max abs err 0.5 > 0.00011"]  # 1e-5 + 1e-4 * 1


def test_integer_outputs_must_match_exactly() -> None:
    want = {"count": np.array([[1], [2]], np.int64)}
    assert compare_outputs({"count": want["count"].copy()}, want, tolerance=FP32_TOLERANCE, title="t", samples=2).ok
    off = compare_outputs({"count": np.array([[1], [3]], np.int64)}, want, tolerance=FP32_TOLERANCE, title="t",
                          samples=2)
    assert not off.ok and "exact match required" in off.rows[0].note


def test_shape_mismatch_and_nan_placement_fail() -> None:
    want = {"y": np.array([1.0, np.nan], np.float32)}
    assert not compare_outputs({"y": np.array([1.0, 2.0], np.float32)}, want, tolerance=FP32_TOLERANCE,
                               title="t", samples=1).ok
    assert compare_outputs({"y": np.array([1.0, np.nan], np.float32)}, want, tolerance=FP32_TOLERANCE,
                           title="t", samples=1).ok
    assert "shape" in compare_outputs({"y": np.zeros(3, np.float32)}, want, tolerance=FP32_TOLERANCE,
                                      title="t", samples=1).rows[0].note


def test_generated_samples_follow_the_declared_shapes_and_are_deterministic(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_two_inputs(), tmp_path / "two.onnx"))
    a = make_samples(analysis.inputs, count=3, batched=True)
    b = make_samples(analysis.inputs, count=3, batched=True)
    assert a["a"].shape == (3, 4) and a["a"].dtype == np.float32
    assert a["mask"].dtype == np.bool_
    np.testing.assert_array_equal(a["a"], b["a"])


def test_batch_consistency_passes_for_a_per_sample_model(tmp_path: Path) -> None:
    path = models.save(models.make_cnn(), tmp_path / "cnn.onnx")
    samples = make_samples(analyze_onnx(path).inputs, count=4, batched=True)
    result = check_batch_consistency(ort_runner(path), samples, k=4, tolerance=FP32_TOLERANCE)
    assert result.ok and result.rows[0].shape == (4, 5)


def test_batch_consistency_catches_a_model_that_mixes_samples(tmp_path: Path) -> None:
    path = models.save(models.make_mixes_batch(), tmp_path / "mix.onnx")
    samples = make_samples(analyze_onnx(path).inputs, count=4, batched=True)
    result = check_batch_consistency(ort_runner(path), samples, k=4, tolerance=FP32_TOLERANCE)
    assert not result.ok and result.rows[0].max_abs_error > 0.1


def test_samples_file_is_checked_against_the_inputs(tmp_path: Path) -> None:
    analysis = analyze_onnx(models.save(models.make_two_inputs(), tmp_path / "two.onnx"))
    good = tmp_path / "good.npz"
    np.savez(good, a=np.zeros((2, 4), np.float64), mask=np.ones((2, 4), bool))
    loaded = load_samples(good, analysis.inputs, batched=True)
    assert loaded["a"].dtype == np.float32  # float64 → float32 is a safe same-kind cast
    missing = tmp_path / "missing.npz"
    np.savez(missing, a=np.zeros((2, 4), np.float32))
    with pytest.raises(ConfigError, match="no array for input"):
        load_samples(missing, analysis.inputs, batched=True)
    wrong = tmp_path / "wrong.npz"
    np.savez(wrong, a=np.zeros((2, 5), np.float32), mask=np.ones((2, 4), bool))
    with pytest.raises(ConfigError, match="axis 1 is 5"):
        load_samples(wrong, analysis.inputs, batched=True)


def test_onnx_runtime_load_failure_is_a_build_error(tmp_path: Path) -> None:
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"\x08\x01")  # a ModelProto with only ir_version
    with pytest.raises(BuildError, match="ONNX Runtime cannot load"):
        ort_runner(path)
