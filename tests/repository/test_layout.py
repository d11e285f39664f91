"""Repository layout: model folders, integer version folders, model files copied in."""

from __future__ import annotations

from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository import ModelRepository, ModelSpec, TensorSpec, expected_model_filename, read_config

SPEC = ModelSpec(name="add", backend="python", max_batch_size=4,
                 inputs=[TensorSpec(name="x", dtype="FP32", dims=[2])], outputs=[TensorSpec(name="y", dtype="FP32", dims=[2])])


def test_add_model_writes_config_and_version_folder_with_files(tmp_path: Path) -> None:
    repo = ModelRepository.init(tmp_path / "repo")
    source = tmp_path / "model.py"
    source.write_text("# model\n")
    entry = repo.add_model(SPEC, files={"model.py": source, "extra.txt": "hello", "blob.bin": b"\x00\x01"}, version=3)
    assert entry.config_path == tmp_path / "repo" / "add" / "config.pbtxt"
    assert read_config(entry.config_path) == SPEC.to_proto()
    assert entry.versions() == [3]
    assert entry.files(3) == ["blob.bin", "extra.txt", "model.py"]
    assert (entry.version_path(3) / "model.py").read_text() == "# model\n"
    assert (entry.version_path(3) / "blob.bin").read_bytes() == b"\x00\x01"


def test_add_model_copies_a_folder_whole(tmp_path: Path) -> None:
    saved = tmp_path / "model.savedmodel"
    (saved / "variables").mkdir(parents=True)
    (saved / "saved_model.pb").write_bytes(b"pb")
    repo = ModelRepository.init(tmp_path / "repo")
    entry = repo.add_model(SPEC, files={"model.savedmodel": saved})
    assert (entry.version_path(1) / "model.savedmodel" / "saved_model.pb").read_bytes() == b"pb"


def test_adding_an_existing_model_needs_overwrite(tmp_path: Path) -> None:
    repo = ModelRepository.init(tmp_path)
    repo.add_model(SPEC)
    with pytest.raises(ConfigError, match="already exists") as info:
        repo.add_model(SPEC)
    assert info.value.hint and "overwrite" in info.value.hint
    repo.add_model(SPEC, overwrite=True, version=2)
    assert repo.model("add").versions() == [1, 2]


def test_ensemble_gets_an_empty_version_folder(tmp_path: Path) -> None:
    cfg = mc.ModelConfig(name="ens", platform="ensemble")
    entry = ModelRepository.init(tmp_path).add_model(cfg)
    assert entry.versions() == [1] and entry.files(1) == []


def test_only_canonical_integer_folders_are_versions(tmp_path: Path) -> None:
    entry = ModelRepository.init(tmp_path).add_model(SPEC, version=0)
    for name in ("2", "01", "v3", "10"):
        (entry.root / name).mkdir()
    assert entry.versions() == [0, 2, 10]


def test_negative_version_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="non-negative"):
        ModelRepository.init(tmp_path).add_model(SPEC, version=-1)


def test_model_names_and_missing_model(tmp_path: Path) -> None:
    repo = ModelRepository.init(tmp_path)
    repo.add_model(SPEC)
    (tmp_path / ".hidden").mkdir()
    assert repo.model_names() == ["add"] and "add" in repo and "nope" not in repo
    with pytest.raises(ConfigError, match="not found") as info:
        repo.model("nope")
    assert info.value.hint and "add" in info.value.hint


def test_init_refuses_a_file(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="not a folder"):
        ModelRepository.init(tmp_path / "f")


def test_listing_a_missing_repository_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        ModelRepository(tmp_path / "nope").model_names()
    assert info.value.hint and "repo init" in info.value.hint


@pytest.mark.parametrize(
    ("fields", "filename"),
    [({"backend": "onnxruntime"}, "model.onnx"), ({"platform": "onnxruntime_onnx"}, "model.onnx"),
     ({"platform": "tensorrt_plan"}, "model.plan"), ({"backend": "python"}, "model.py"),
     ({"platform": "onnxruntime_onnx", "backend": "python"}, "model.py"),
     ({"backend": "python", "default_model_filename": "run.py"}, "run.py"),
     ({"platform": "ensemble"}, None), ({"backend": "tensorrtllm"}, None)],
)
def test_expected_model_filename_follows_backend_then_platform(fields: dict[str, str], filename: str | None) -> None:
    assert expected_model_filename(mc.ModelConfig(**fields)) == filename


def test_a_file_in_the_way_of_a_model_folder_is_a_clear_error(tmp_path: Path) -> None:
    repo = ModelRepository.init(tmp_path)
    (tmp_path / "add").write_text("not a folder")
    with pytest.raises(ConfigError) as info:
        repo.write_config(SPEC)
    assert "config of model 'add'" in info.value.message and str(tmp_path / "add") in info.value.message
    assert info.value.hint
    with pytest.raises(ConfigError, match="cannot write model 'add'"):
        repo.add_model(SPEC)
