"""A built model owns its weights: the repository holds copies (never hard links) of every file the
export wrote, so rebuilding the same export (``--version N``, ``--force``, a second repository) works
on every layout, and overwriting the source afterwards changes nothing the repository holds.

Layouts: one self-contained file; ``model.onnx`` + one external-data file (what torch's exporter
writes for most models today); one data file per tensor (onnx's ``all_tensors_to_one_file=False``).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.support import onnx_models as models
from tritonkit.builders import build_onnx, ort_runner
from tritonkit.errors import BuildError

LAYOUTS = ("single_file", "external_data", "several_data_files")


def _export(layout: str, folder: Path) -> Path:
    path = folder / "model.onnx"
    model = models.make_cnn()
    folder.mkdir(parents=True, exist_ok=True)
    if layout == "single_file":
        onnx.save_model(model, str(path))
    elif layout == "external_data":
        models.save(model, path, external_data=True)
    else:
        onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=False,
                        size_threshold=0)
    return path


def _source_files(path: Path) -> list[Path]:
    return sorted(p for p in path.parent.iterdir() if p.is_file())


def _overwrite_in_place(path: Path) -> None:
    """Scribble over the file's own bytes (same inode), as an editor or a re-export into the same file may."""
    size = path.stat().st_size
    with path.open("r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\x7f" * (size - size // 2))


def _feeds() -> dict[str, np.ndarray]:
    return {"img": np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_layout_rebuilds_as_new_version_forced_version_and_second_repository(tmp_path: Path, layout: str) -> None:
    source = _export(layout, tmp_path / "export")
    repo = tmp_path / "repo"
    first = build_onnx(source, name="cnn", repo=repo, runtime="python", kind="cpu")
    assert first.outcome == "new model, version 1"
    second = build_onnx(source, name="cnn", repo=repo, runtime="python", kind="cpu", version=2)
    assert second.outcome.startswith("added version 2")
    forced = build_onnx(source, name="cnn", repo=repo, runtime="python", kind="cpu", version=1, force=True)
    assert forced.outcome.startswith("replaced version 1")
    other = build_onnx(source, name="cnn", repo=tmp_path / "other_repo", runtime="python", kind="cpu")
    assert other.outcome == "new model, version 1"
    for built in (repo / "cnn" / "1", repo / "cnn" / "2", tmp_path / "other_repo" / "cnn" / "1"):
        for file in built.iterdir():
            assert os.stat(file).st_nlink == 1, f"{file} shares its bytes with another file"
    for file in _source_files(source):
        assert os.stat(file).st_nlink == 1, f"the user's {file.name} was linked into a repository"


@pytest.mark.parametrize("layout", LAYOUTS)
def test_overwriting_the_source_after_a_build_leaves_the_repository_model_unchanged(tmp_path: Path,
                                                                                   layout: str) -> None:
    source = _export(layout, tmp_path / "export")
    expected = ort_runner(source)(_feeds())
    result = build_onnx(source, name="cnn", repo=tmp_path / "repo", runtime="python", kind="cpu")
    served = result.model_dir / "1" / "model.onnx"
    before = {p.name: p.read_bytes() for p in served.parent.iterdir()}
    for file in _source_files(source):
        _overwrite_in_place(file)
    assert {p.name: p.read_bytes() for p in served.parent.iterdir()} == before
    after = ort_runner(served)(_feeds())
    for name, values in expected.items():
        np.testing.assert_array_equal(after[name], values)


def test_a_source_hard_linked_by_an_older_build_is_refused_with_the_copy_command(tmp_path: Path) -> None:
    source = _export("external_data", tmp_path / "export")
    data = source.parent / "model.onnx.data"
    os.link(data, tmp_path / "old_repository_copy.data")  # what builds before this one left behind
    with pytest.raises(BuildError) as caught:
        build_onnx(source, name="cnn", repo=tmp_path / "repo", runtime="python", kind="cpu")
    assert "more than one hard link" in caught.value.message
    assert "model.onnx.data" in caught.value.message
    assert "cp F F.copy && mv F.copy F" in (caught.value.hint or "")
    assert "opset" not in (caught.value.hint or "")
