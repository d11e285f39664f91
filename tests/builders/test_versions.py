"""``tritonkit build onnx --version N``: versions are added beside the others, ``--force`` replaces only
one, conflicting inputs are refused by name, and the output says what happened."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result

from tests.support import onnx_models as models
from tritonkit.builders import make_demo_model
from tritonkit.cli import main
from tritonkit.repository import read_config


def _build(model: Path, repo: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["build", "onnx", str(model), "--name", "demo", "--repo", str(repo),
                                     "--runtime", "python", "--kind", "cpu", *args])


def _model_with_two_versions(tmp_path: Path) -> tuple[Path, Path]:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    assert _build(model, repo).exit_code == 0
    added = _build(model, repo, "--version", "2")
    assert added.exit_code == 0, added.output
    assert "(added version 2 beside 1:" in added.stdout
    (repo / "demo" / "README.md").write_text("my notes\n")
    return model, repo


def test_force_replaces_only_the_named_version_and_keeps_the_rest(tmp_path: Path) -> None:
    model, repo = _model_with_two_versions(tmp_path)
    version_1 = (repo / "demo" / "1" / "model.onnx").read_bytes()
    result = _build(model, repo, "--version", "2", "--force", "--batch-window", "10ms")
    assert result.exit_code == 0, result.output
    assert "(replaced version 2 (kept 1):" in result.stdout
    assert sorted(p.name for p in (repo / "demo").iterdir()) == ["1", "2", "README.md", "config.pbtxt"]
    assert (repo / "demo" / "1" / "model.onnx").read_bytes() == version_1
    assert (repo / "demo" / "README.md").read_text() == "my notes\n"
    assert read_config(repo / "demo" / "config.pbtxt").dynamic_batching.max_queue_delay_microseconds == 10_000


def test_a_version_with_other_inputs_is_refused_with_both_shapes(tmp_path: Path) -> None:
    _model, repo = _model_with_two_versions(tmp_path)
    config = (repo / "demo" / "config.pbtxt").read_text()
    other = models.save(models.make_fixed_batch_linear(), tmp_path / "other.onnx")  # x: [1, 4], not [batch, 16]
    result = _build(other, repo, "--version", "3")
    assert result.exit_code == 2, result.output
    error = next(line for line in result.stderr.splitlines() if line.startswith("error: "))
    assert "model 'demo'" in error and "input 'x'" in error
    assert "TYPE_FP32 [-1, 16]" in error and "TYPE_FP32 [-1, 4]" in error
    assert "  fix: " in result.stderr and "--name" in result.stderr
    assert not (repo / "demo" / "3").exists() and (repo / "demo" / "config.pbtxt").read_text() == config


def test_a_new_version_inherits_the_models_max_batch_size(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    assert _build(model, repo, "--max-batch-size", "4").exit_code == 0
    assert _build(model, repo, "--version", "2").exit_code == 0
    assert read_config(repo / "demo" / "config.pbtxt").max_batch_size == 4


def test_a_larger_max_batch_size_than_the_other_versions_is_refused(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    assert _build(model, repo, "--max-batch-size", "4").exit_code == 0
    result = _build(model, repo, "--version", "2", "--max-batch-size", "16")
    assert result.exit_code == 2 and "max_batch_size 16 exceeds the 4" in result.stderr
    assert "--max-batch-size 4" in result.stderr


def test_a_version_for_another_runtime_is_refused(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    assert _build(model, repo).exit_code == 0
    result = CliRunner().invoke(main, ["build", "onnx", str(model), "--name", "demo", "--repo", str(repo),
                                       "--runtime", "onnxruntime", "--kind", "cpu", "--version", "2"])
    assert result.exit_code == 2
    assert "backend python" in result.stderr and "platform onnxruntime_onnx" in result.stderr
    assert not (repo / "demo" / "2").exists()
