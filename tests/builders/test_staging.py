"""Landing a build in the repository: staging never in the repository root, swaps safe against
interruption at every step, versions kept, leftovers of killed builds cleaned, clear errors on paths."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritonkit.builders.staging import STAGING_PREFIX, StagedModel
from tritonkit.errors import ConfigError
from tritonkit.repository import ModelRepository, ModelSpec, TensorSpec, VersionPolicy, read_config


def _spec(dims: list[int], *, dtype: str = "FP32", max_batch_size: int = 8) -> ModelSpec:
    return ModelSpec(name="m", backend="python", max_batch_size=max_batch_size,
                     inputs=[TensorSpec(name="x", dtype=dtype, dims=dims)],
                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])])


def _existing(repo: Path) -> Path:
    """Model ``m`` with versions 1 and 2 (files saying which) and a user's file beside them."""
    entry = ModelRepository.init(repo).add_model(_spec([16]), files={"model.py": "old v1"}, version=1)
    (entry.version_path(2)).mkdir()
    (entry.version_path(2) / "model.py").write_text("old v2")
    (entry.root / "labels.txt").write_text("cat\ndog\n")
    return entry.root


def _stage(stage: StagedModel, content: str, dims: list[int] | None = None) -> None:
    (stage.version_dir / "model.py").write_text(content)
    ModelRepository(stage.staging_root).add_model(_spec(dims or [16], max_batch_size=4), version=stage.version)


def _leftovers(*folders: Path) -> list[Path]:
    return [p for folder in folders for p in folder.rglob(STAGING_PREFIX + "*")]


def test_a_new_model_is_staged_outside_the_repository_and_moved_in_whole(tmp_path: Path) -> None:
    repo, temp = tmp_path / "repo", tmp_path / "tmp"
    temp.mkdir()
    with StagedModel(repo, "m", 1, force=False, temp_dirs=[temp]) as stage:
        assert stage.staging_root.parent == temp
        assert not (repo / "m").exists() and [p.name for p in repo.iterdir()] == []
        _stage(stage, "new")
        stage.commit()
    assert stage.outcome == "new model, version 1"
    assert (repo / "m" / "1" / "model.py").read_text() == "new"
    assert not list(temp.iterdir())


def test_without_a_writable_place_outside_a_new_model_stages_in_its_own_folder(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    with StagedModel(repo, "m", 1, force=False, temp_dirs=[]) as stage:
        # Inside the model's folder, under a name Triton never reads as a version; nothing in the repository root.
        assert stage.staging_root.parent == repo / "m" and not stage.staging_root.name.isdigit()
        assert [p.name for p in repo.iterdir()] == ["m"]
        _stage(stage, "new")
        stage.commit()
    assert stage.outcome == "new model, version 1"
    assert sorted(p.name for p in (repo / "m").iterdir()) == ["1", "config.pbtxt"]


def test_a_failed_new_model_leaves_no_folder_behind(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    with pytest.raises(RuntimeError), StagedModel(repo, "m", 1, force=False, temp_dirs=[]) as stage:
        _stage(stage, "new")
        raise RuntimeError("verification failed")
    assert not repo.exists()  # neither the model folder nor the repository it created


def test_adding_a_version_keeps_the_others_and_the_users_files(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")
    with StagedModel(tmp_path / "repo", "m", 3, force=False) as stage:
        assert stage.staging_root.parent == model and stage.staging_root.name.startswith(STAGING_PREFIX)
        _stage(stage, "new v3")
        stage.commit()
    assert stage.outcome == "added version 3 beside 1, 2"
    assert sorted(p.name for p in model.iterdir()) == ["1", "2", "3", "config.pbtxt", "labels.txt"]
    assert (model / "1" / "model.py").read_text() == "old v1" and (model / "3" / "model.py").read_text() == "new v3"
    assert read_config(model / "config.pbtxt").max_batch_size == 4  # the config follows the newest build


def test_an_existing_version_is_replaced_only_with_force(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")
    with pytest.raises(ConfigError, match="already has version 2") as info:
        StagedModel(tmp_path / "repo", "m", 2, force=False)
    assert info.value.hint and "--force" in info.value.hint and "--version 3" in info.value.hint
    with StagedModel(tmp_path / "repo", "m", 2, force=True) as stage:
        _stage(stage, "new v2")
        stage.commit()
    assert stage.outcome == "replaced version 2 (kept 1)"
    assert (model / "2" / "model.py").read_text() == "new v2" and (model / "1" / "model.py").read_text() == "old v1"
    assert (model / "labels.txt").exists() and not _leftovers(model)


STEPS = ["staged", "aside", "swapped", "config"]


@pytest.mark.parametrize("exchange", [True, False], ids=["renameat2-exchange", "two-renames"])
@pytest.mark.parametrize("step", STEPS)
def test_an_interrupted_swap_leaves_the_old_or_the_new_version_whole(tmp_path: Path, step: str,
                                                                     exchange: bool) -> None:
    model = _existing(tmp_path / "repo")
    old_config = (model / "config.pbtxt").read_text()
    reached: list[str] = []

    def interrupt(name: str) -> None:
        reached.append(name)
        if name == step:
            raise KeyboardInterrupt

    try:
        with StagedModel(tmp_path / "repo", "m", 2, force=True, fault_hook=interrupt, exchange=exchange) as stage:
            _stage(stage, "new v2")
            stage.commit()
    except KeyboardInterrupt:
        pass
    v2 = (model / "2" / "model.py").read_text()
    if step in reached and step != "config":
        assert v2 == "old v2" and (model / "config.pbtxt").read_text() == old_config  # rolled back whole
    else:
        assert v2 == "new v2" and read_config(model / "config.pbtxt").max_batch_size == 4
    assert sorted(p.name for p in (model / "2").iterdir()) == ["model.py"]
    assert (model / "1" / "model.py").read_text() == "old v1" and (model / "labels.txt").exists()
    assert not _leftovers(model)


def test_an_interrupted_add_removes_the_half_added_version(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")

    def interrupt(name: str) -> None:
        if name == "swapped":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt), \
            StagedModel(tmp_path / "repo", "m", 3, force=False, fault_hook=interrupt) as stage:
        _stage(stage, "new v3")
        stage.commit()
    assert sorted(p.name for p in model.iterdir()) == ["1", "2", "config.pbtxt", "labels.txt"]


def test_a_version_with_other_inputs_is_refused_naming_model_tensor_and_both_shapes(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")
    before = (model / "config.pbtxt").read_text()
    with pytest.raises(ConfigError) as info, StagedModel(tmp_path / "repo", "m", 3, force=False) as stage:
        _stage(stage, "new v3", dims=[8])
        stage.commit()
    message = info.value.message
    assert "model 'm'" in message and "input 'x'" in message
    assert "TYPE_FP32 [-1, 16]" in message and "TYPE_FP32 [-1, 8]" in message and "1, 2" in message
    assert info.value.hint and "--name" in info.value.hint
    assert not (model / "3").exists() and (model / "config.pbtxt").read_text() == before
    assert not _leftovers(model)


def test_replacing_the_only_version_may_change_the_inputs(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    ModelRepository.init(repo).add_model(_spec([16]), files={"model.py": "old"})
    with StagedModel(repo, "m", 1, force=True) as stage:
        _stage(stage, "new", dims=[8])
        stage.commit()
    assert list(read_config(repo / "m" / "config.pbtxt").input[0].dims) == [8]


def test_the_version_policy_of_the_existing_config_is_kept(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    spec = ModelSpec(name="m", backend="python", max_batch_size=8, version_policy=VersionPolicy.all(),
                     inputs=[TensorSpec(name="x", dtype="FP32", dims=[16])],
                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])])
    ModelRepository.init(repo).add_model(spec, files={"model.py": "v1"})
    with StagedModel(repo, "m", 2, force=False) as stage:
        _stage(stage, "v2")
        stage.commit()
    assert read_config(repo / "m" / "config.pbtxt").version_policy.HasField("all")


def test_leftovers_of_a_killed_build_are_cleaned_and_a_version_set_aside_is_restored(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    # What a SIGKILL between "aside" and "swapped" of the two-rename swap leaves.
    leftover = model / f"{STAGING_PREFIX}killed"
    leftover.mkdir()
    (leftover / "owner.pid").write_text(str(dead.pid))
    (leftover / "version").write_text("2")
    os.replace(model / "2", leftover / "replaced")
    with StagedModel(tmp_path / "repo", "m", 3, force=False) as stage:
        _stage(stage, "v3")
        stage.commit()
    assert (model / "2" / "model.py").read_text() == "old v2"
    assert not _leftovers(model)


def test_a_live_builds_staging_is_left_alone(tmp_path: Path) -> None:
    model = _existing(tmp_path / "repo")
    other = model / f"{STAGING_PREFIX}busy"
    other.mkdir()
    (other / "owner.pid").write_text(str(os.getpid()))
    with StagedModel(tmp_path / "repo", "m", 3, force=False) as stage:
        _stage(stage, "v3")
        stage.commit()
    assert other.is_dir()
