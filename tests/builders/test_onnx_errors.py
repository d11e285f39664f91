"""Bad input to ``tritonkit build onnx``: one clear error with its fix, exit 2, and nothing half-written."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support import onnx_models as models
from tritonkit.builders import make_demo_model
from tritonkit.builders.staging import STAGING_PREFIX
from tritonkit.cli import main


def _build(tmp_path: Path, model: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["build", "onnx", str(model), "--repo", str(tmp_path / "repo"),
                                     "--runtime", "python", *args])


@pytest.fixture(autouse=True)
def _private_temp_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Staging for a new model goes to the temporary folder: give each test its own, to check it is emptied."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))


def _no_staging_left(tmp_path: Path) -> bool:
    return not list((tmp_path / "tmp").iterdir()) and not list(tmp_path.rglob(STAGING_PREFIX + "*"))


def _assert_clean_failure(result: Result, tmp_path: Path, *, expect: str, fix: str) -> None:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.startswith(("error:", "  fix:"))]
    assert len(lines) == 2, result.stderr
    assert lines[0].startswith("error: ") and expect in lines[0], lines[0]
    assert lines[1].startswith("  fix: ") and fix in lines[1], lines[1]
    repo = tmp_path / "repo"
    assert not repo.exists() or not any(repo.iterdir()), "something was written into the repository"
    assert _no_staging_left(tmp_path), "a staging folder was left behind"


def test_missing_file(tmp_path: Path) -> None:
    result = _build(tmp_path, tmp_path / "nope.onnx", "--name", "m")
    _assert_clean_failure(result, tmp_path, expect="ONNX model not found", fix="check the path")


def test_corrupt_onnx_file(tmp_path: Path) -> None:
    good = make_demo_model(tmp_path / "good.onnx").read_bytes()
    (tmp_path / "cut.onnx").write_bytes(good[: len(good) // 3])
    result = _build(tmp_path, tmp_path / "cut.onnx", "--name", "m")
    _assert_clean_failure(result, tmp_path, expect="corrupt", fix="re-export")


def test_file_that_is_not_onnx(tmp_path: Path) -> None:
    (tmp_path / "weights.onnx").write_bytes(b"PK\x03\x04 this is a zip, maybe a torch checkpoint")
    result = _build(tmp_path, tmp_path / "weights.onnx", "--name", "m")
    _assert_clean_failure(result, tmp_path, expect="not an ONNX model", fix="torch.onnx.export")


def test_unsupported_dtype(tmp_path: Path) -> None:
    path = models.save(models.make_complex_input(), tmp_path / "complex.onnx")
    result = _build(tmp_path, path, "--name", "m")
    _assert_clean_failure(result, tmp_path, expect="COMPLEX64", fix="Cast node")


def test_batch_fixed_to_one_with_max_batch_size_64(tmp_path: Path) -> None:
    path = models.save(models.make_fixed_batch_reshape(), tmp_path / "fixed.onnx")
    result = _build(tmp_path, path, "--name", "m", "--max-batch-size", "64")
    _assert_clean_failure(result, tmp_path, expect="batch axis is fixed to 1",
                          fix="re-export with a dynamic batch axis")
    assert "--max-batch-size 64" in result.stderr and "Reshape" in result.stderr


def test_model_that_mixes_samples_is_refused_for_dynamic_batching(tmp_path: Path) -> None:
    path = models.save(models.make_mixes_batch(), tmp_path / "mix.onnx")
    result = _build(tmp_path, path, "--name", "m", "--max-batch-size", "8")
    _assert_clean_failure(result, tmp_path, expect="refused for --max-batch-size 8",
                          fix="--max-batch-size 0")
    assert "batch consistency: 4 samples as one batch vs one by one" in result.stderr  # the table came first


@pytest.mark.parametrize("name", ["../escape", "a/b", "..", ".hidden", "a\nb"])
def test_name_that_would_escape_the_repository(tmp_path: Path, name: str) -> None:
    path = make_demo_model(tmp_path / "demo.onnx")
    result = _build(tmp_path, path, "--name", name)
    _assert_clean_failure(result, tmp_path, expect="model name", fix="no '/', no '..'")
    assert not (tmp_path / "escape").exists()


def test_existing_model_is_not_replaced_without_force(tmp_path: Path) -> None:
    path = make_demo_model(tmp_path / "demo.onnx")
    assert _build(tmp_path, path, "--name", "demo").exit_code == 0
    config = (tmp_path / "repo" / "demo" / "config.pbtxt").read_text()
    result = _build(tmp_path, path, "--name", "demo", "--max-batch-size", "2")
    assert result.exit_code == 2 and "already has version 1" in result.stderr and "--force" in result.stderr
    assert "--version 2" in result.stderr
    assert (tmp_path / "repo" / "demo" / "config.pbtxt").read_text() == config
    assert _no_staging_left(tmp_path)


def test_bad_option_values_are_refused_before_any_work(tmp_path: Path) -> None:
    path = make_demo_model(tmp_path / "demo.onnx")
    for args, expect in ((["--batch-window", "5"], "with a unit"), (["--max-batch-size", "-1"], "--max-batch-size '-1': too small"),
                         (["--instances", "0"], "--instances '0': too small"), (["--version", "0"], "--version '0': too small"),
                         (["--kind", "cpu", "--cuda-graphs"], "GPU instances only")):
        result = _build(tmp_path, path, "--name", "demo", *args)
        assert result.exit_code == 2, (args, result.output)
        assert expect in result.stderr, (args, result.stderr)
    assert not (tmp_path / "repo").exists()
