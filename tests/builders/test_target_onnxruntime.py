"""A model is checked against the ONNX Runtime its target server runs: refused naming the limit and
the fix, or converted down when asked (and verified); lint says the same (TK702). A batch-only
output's shape change is said in the build output."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from tritonkit.builders import build_onnx
from tritonkit.errors import BuildError
from tritonkit.repository.lint import lint_repository
from tritonkit.repository.lint.core import Target


def _onnx_defaults_model(path: Path) -> Path:
    """A model saved as the onnx package saves by default: IR version 14 (onnx 1.23), opset 21."""
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 14  # what onnx 1.23 writes by default; set, so an older onnx writes the same file
    onnx.save(model, path)
    return path


def test_a_model_newer_than_triton_2_51s_onnx_runtime_is_refused_naming_the_limit_and_the_fix(tmp_path: Path) -> None:
    source = _onnx_defaults_model(tmp_path / "m.onnx")
    with pytest.raises(BuildError) as caught:
        build_onnx(source, name="m", repo=tmp_path / "repo", runtime="onnxruntime", server_version="2.51")
    assert "IR version 14 (ONNX Runtime 1.19.2 loads IR 10 and older)" in caught.value.message
    assert "r24.10" in caught.value.message
    assert caught.value.hint is not None and "--convert-onnx" in caught.value.hint
    assert not (tmp_path / "repo" / "m").exists()


def test_convert_onnx_writes_what_the_targets_onnx_runtime_loads_verified_and_said(tmp_path: Path) -> None:
    source = _onnx_defaults_model(tmp_path / "m.onnx")
    result = build_onnx(source, name="m", repo=tmp_path / "repo", runtime="onnxruntime", server_version="24.10",
                        convert_onnx=True)
    served = onnx.load(tmp_path / "repo" / "m" / "1" / "model.onnx")
    assert served.ir_version == 10
    assert any("converted for ONNX Runtime 1.19.2 (IR 14 → 10" in note for note in result.notes)
    assert result.verified and result.comparisons[0].title.startswith("ONNX Runtime vs reference (original")
    assert result.onnxruntime_target is not None and result.onnxruntime_target[0] == "1.19.2"


def test_no_triton_release_up_to_2_72_loads_the_onnx_packages_default_ir_version(tmp_path: Path) -> None:
    source = _onnx_defaults_model(tmp_path / "m.onnx")
    with pytest.raises(BuildError, match=r"IR version 14 \(ONNX Runtime 1.28.0 loads IR 13 and older\)"):
        build_onnx(source, name="m", repo=tmp_path / "repo", runtime="onnxruntime", server_version="2.72")


def test_a_model_the_target_loads_says_so_and_no_named_target_means_the_newest_release(tmp_path: Path) -> None:
    model = onnx.load(_onnx_defaults_model(tmp_path / "m.onnx"))
    model.ir_version = 10
    onnx.save(model, tmp_path / "ir10.onnx")
    loads = build_onnx(tmp_path / "ir10.onnx", name="m", repo=tmp_path / "repo", runtime="onnxruntime",
                       server_version="2.51")
    assert any(note.startswith("loads on ONNX Runtime 1.19.2") for note in loads.notes)
    # No release named and no onnxruntime backend here: checked for the newest line, which says so.
    with pytest.raises(BuildError, match=r"IR version 14 .*Triton 2\.73's onnxruntime backend \(the newest release"):
        build_onnx(tmp_path / "m.onnx", name="m2", repo=tmp_path / "repo", runtime="onnxruntime")
    newest = build_onnx(tmp_path / "ir10.onnx", name="m3", repo=tmp_path / "repo", runtime="onnxruntime")
    assert any(note.startswith("loads on ONNX Runtime 1.28.0") for note in newest.notes)


def test_lint_refuses_a_model_its_targets_onnx_runtime_cannot_load(tmp_path: Path) -> None:
    source = _onnx_defaults_model(tmp_path / "m.onnx")
    # Written by hand: the builder itself refuses this model for every release it knows.
    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    shutil.copyfile(source, folder / "1" / "model.onnx")
    (folder / "config.pbtxt").write_text(
        'name: "m"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
        'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')
    old = Target(kind="cpu", gpu_count=0).with_onnxruntime("1.19.2", "an NGC 24.10 backends folder")
    report = lint_repository(tmp_path / "repo", target=old)
    findings = [f for f in report.findings if f.rule_id == "TK702"]
    assert len(findings) == 1 and "IR version 14" in findings[0].message
    assert findings[0].hint is not None and "--convert-onnx" in findings[0].hint
    # Without the backend's own version, the target release's ONNX Runtime: the newest line's 1.28 loads IR 13.
    newest = [f for f in lint_repository(tmp_path / "repo", target=Target(kind="cpu", gpu_count=0)).findings
              if f.rule_id == "TK702"]
    assert len(newest) == 1 and "Triton 2.73's: ONNX Runtime 1.28.0" in newest[0].message


def test_a_batch_only_output_is_declared_with_one_dim_and_the_build_says_clients_receive_n_by_1(tmp_path: Path) -> None:
    """skl2onnx writes a classifier's ``label`` as [N]: Triton needs a dim, so clients get [N, 1]."""
    import skl2onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    features, labels = rng.standard_normal((40, 4)).astype(np.float32), rng.integers(0, 2, 40)
    classifier = LogisticRegression().fit(features, labels)
    exported = skl2onnx.to_onnx(classifier, features[:1], options={id(classifier): {"zipmap": False}},
                                target_opset={"": 17, "ai.onnx.ml": 3})
    source = tmp_path / "lr.onnx"
    source.write_bytes(exported.SerializeToString())
    result = build_onnx(source, name="lr", repo=tmp_path / "repo", runtime="python")
    said = [note for note in result.notes if note.startswith("output 'label'")]
    assert said and "clients receive [N, 1]" in said[0]
    label = next(t for t in result.config.output if t.name == "label")
    assert list(label.dims) == [1] and list(label.reshape.shape) == []
    assert said[0] in result.summary()
