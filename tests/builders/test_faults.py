"""Faults injected into ``tritonkit build onnx`` that no other test covers: a second writer of the
same model, a build killed with SIGKILL (no handler runs), and the disk filling up while the
external weights are copied.

The disk-full test mounts a small tmpfs (it needs root, as on the build machines; elsewhere it is
skipped with that reason). The killed build is a real child process killed while its files sit in
staging; the staging code is the real one, the ONNX conversion is left out to keep it cheap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.support.faults import run_cli, small_tmpfs
from tests.support.onnx_models import make_cnn, save
from tritonkit._lock import LockedError, model_folder_lock
from tritonkit.builders import build_onnx
from tritonkit.builders.staging import STAGING_PREFIX, StagedModel
from tritonkit.errors import ConfigError


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_a_build_of_a_model_another_process_is_writing_is_refused_and_leaves_it_untouched(tmp_path: Path) -> None:
    source, repo = save(make_cnn(), tmp_path / "cnn.onnx"), tmp_path / "repo"
    build_onnx(source, name="cnn", repo=repo, runtime="python", kind="cpu", verify=False)
    before = _tree(repo / "cnn")
    with model_folder_lock(repo / "cnn", purpose="perf sweep cnn"):
        done = run_cli("build", "onnx", str(source), "--repo", str(repo), "--name", "cnn", "--no-verify", "--force")
        assert done.returncode == 2, done.stderr
        assert "in use by another tritonkit process" in done.stderr and f"pid {os.getpid()}" in done.stderr
        assert "(perf sweep cnn)" in done.stderr and "Traceback" not in done.stderr
        assert {k: v for k, v in _tree(repo / "cnn").items() if k != ".tritonkit.lock"} == before


def test_two_builds_of_one_new_model_exclude_each_other_and_the_model_folder_appears_whole(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    with StagedModel(repo, "m", 1, force=False, temp_dirs=[tmp_path]) as first:
        with pytest.raises(LockedError, match=f"pid {os.getpid()}"):
            StagedModel(repo, "m", 1, force=False, temp_dirs=[tmp_path]).__enter__()
        # The lock of a model not built yet is outside the repository: it holds nothing until the commit.
        assert sorted(p.name for p in repo.iterdir()) == []
        (first.version_dir / "model.onnx").write_bytes(b"weights")
        (first.model_dir / "config.pbtxt").write_text('name: "m"\n')
        first.commit()
    assert sorted(p.name for p in repo.iterdir()) == ["m"]
    assert sorted(str(p.relative_to(repo)) for p in repo.rglob("*")) == ["m", "m/1", "m/1/model.onnx", "m/config.pbtxt"]


_KILLED_CHILD = """
import sys, time
from pathlib import Path
from tritonkit.builders.staging import StagedModel
with StagedModel(sys.argv[1], "m", 1, force=False, temp_dirs=[Path(sys.argv[2])]) as stage:
    (stage.version_dir / "model.onnx").write_bytes(b"half-written weights")
    print(stage.staging_root, flush=True)
    time.sleep(60)  # killed here
"""


def test_the_staging_of_a_new_model_build_killed_with_sigkill_is_removed_by_the_next_build(tmp_path: Path) -> None:
    repo, temp = tmp_path / "repo", tmp_path / "tmp"
    temp.mkdir()
    child = subprocess.Popen([sys.executable, "-c", _KILLED_CHILD, str(repo), str(temp)], stdout=subprocess.PIPE,
                             text=True, env={**os.environ, "PYTHONPATH": str(Path.cwd())})
    try:
        assert child.stdout is not None
        staging = Path(child.stdout.readline().strip())
        os.kill(child.pid, signal.SIGKILL)
        assert child.wait(timeout=30) == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert staging.parent == temp and staging.is_dir()  # SIGKILL runs no handler: the staging stays
    assert not (repo / "m").exists()  # but no partial model
    with StagedModel(repo, "other", 1, force=False, temp_dirs=[temp]) as stage:
        assert stage.staging_root.parent == temp
        assert not staging.exists()  # its owner is dead: cleared
    with StagedModel(repo, "m", 1, force=False, temp_dirs=[temp]) as stage:
        pass  # the killed build's lock is taken over, and removed with this one's
    assert sorted(p.name for p in temp.iterdir()) == []
    assert sorted(p.name for p in repo.iterdir()) == []


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with small_tmpfs(tmp_path / "small", "3m") as mount:
        yield mount


def test_a_disk_that_fills_while_the_weights_are_copied_names_the_repository_and_leaves_nothing(
    tmp_path: Path, small_disk: Path
) -> None:
    weights = numpy_helper.from_array(np.random.default_rng(0).random((1024, 1024), dtype=np.float32), "W")
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "W"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1024])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1024])], [weights])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    source = save(model, tmp_path / "src" / "big.onnx", external_data=True)  # 4 MiB of weights, 3 MiB of disk
    repo = small_disk / "repo"
    with pytest.raises(ConfigError) as info:
        build_onnx(source, name="big", repo=repo, runtime="python", kind="cpu", verify=False)
    assert "No space left on device" in info.value.message
    assert f"{repo}/big/1/" in info.value.message and STAGING_PREFIX not in str(info.value)
    assert str(tmp_path / "src") not in str(info.value)  # the source's disk is not the full one
    assert sorted(small_disk.rglob("*")) == []  # no partial model, no staging, no lock file
