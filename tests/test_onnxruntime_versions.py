"""The ONNX Runtime each Triton release's onnxruntime backend runs, and what each ONNX Runtime loads."""

from __future__ import annotations

import pytest

from tritonkit.errors import ConfigError
from tritonkit.onnxruntime_versions import (
    ONNXRUNTIME_LIMITS,
    limits_for,
    model_problems,
    onnxruntime_for_release,
    release_line,
)
from tritonkit.triton_releases import KNOWN_LINES


def test_every_release_from_2_51_to_2_73_names_its_onnxruntime_with_the_branch_it_was_read_at() -> None:
    assert list(KNOWN_LINES) == [f"2.{minor}" for minor in range(51, 74)]
    for fact in map(onnxruntime_for_release, KNOWN_LINES):
        assert fact.branch.startswith("r2") and "build.py" in fact.source
        assert limits_for(fact.onnxruntime) is not None, f"{fact.line}: no limits for ONNX Runtime {fact.onnxruntime}"


def test_triton_2_51_runs_onnx_runtime_1_19_2_which_loads_ir_10_and_opset_21() -> None:
    fact = onnxruntime_for_release("2.51")
    assert (fact.onnxruntime, fact.branch) == ("1.19.2", "r24.10")
    limits = limits_for(fact.onnxruntime)
    assert limits is not None and (limits.max_ir_version, limits.max_opset, limits.max_ml_opset) == (10, 21, 5)


def test_limits_never_shrink_from_one_onnx_runtime_to_the_next() -> None:
    rows = list(ONNXRUNTIME_LIMITS.values())
    for older, newer in zip(rows, rows[1:], strict=False):
        assert newer.max_ir_version >= older.max_ir_version and newer.max_opset >= older.max_opset


@pytest.mark.parametrize(("text", "line"), [("2.51", "2.51"), ("2.51.0", "2.51"), ("24.10", "2.51"),
                                           ("r26.08", "2.72"), ("25.07", "2.59"), ("v2.60.0", "2.60")])
def test_a_release_is_named_by_version_ngc_tag_or_branch(text: str, line: str) -> None:
    assert release_line(text) == line


@pytest.mark.parametrize("text", ["2.50", "3.0", "nonsense", "23.12"])
def test_a_release_tritonkit_does_not_know_is_refused_listing_the_known_ones(text: str) -> None:
    with pytest.raises(ConfigError, match="is not a Triton release") as caught:
        release_line(text)
    assert caught.value.hint is not None and "2.51 (NGC 24.10)" in caught.value.hint


def test_the_onnx_packages_defaults_are_refused_by_the_2_51_onnx_runtime_for_their_ir_version() -> None:
    problems = model_problems(14, {"": 21}, "1.19.2")
    assert problems == ["IR version 14 (ONNX Runtime 1.19.2 loads IR 10 and older)"]
    assert model_problems(10, {"": 21, "ai.onnx.ml": 3}, "1.19.2") == []
    assert model_problems(10, {"": 22, "ai.onnx.ml": 6}, "1.19.2") == [
        "ai.onnx opset 22 (ONNX Runtime 1.19.2 loads opset 21 and older)",
        "ai.onnx.ml opset 6 (ONNX Runtime 1.19.2 loads opset 5 and older)"]


def test_an_onnx_runtime_without_a_record_is_not_checked_rather_than_guessed() -> None:
    assert limits_for("1.99.0") is None and model_problems(99, {"": 99}, "1.99.0") == []
