"""Names checked once: the writer refuses what the linter reports, for models, tensors and instance groups."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.repository import InstanceGroup, ModelRepository, ModelSpec, TensorSpec, model_folder
from tritonkit.repository.names import check_name, name_problem


@pytest.mark.parametrize(("name", "kind", "problem"), [
    ("", "tensor", "is empty"),
    ("a\nb", "tensor", "holds the control character '\\n'"),
    ('x\n"evil\0', "tensor", "holds the control character '\\n'"),
    ("a\0", "model", "holds the control character '\\x00'"),
    ("a\u2028b", "instance group", "holds the control character '\\u2028'"),
    ("a/b", "model", "is not a plain folder name inside the repository"),
    (".hidden", "model", "is not a plain folder name inside the repository"),
    ("..", "model", "is not a plain folder name inside the repository"),
    ("x" * 256, "model", "is longer than a folder name can be (255 bytes)"),
])
def test_unusable_names_are_named_with_their_problem(name: str, kind: str, problem: str) -> None:
    assert name_problem(name, kind) == problem  # type: ignore[arg-type]


@pytest.mark.parametrize(("name", "kind"), [("input_1/x:0", "tensor"), ("résumé", "model"), ("INPUT0", "tensor"),
                                            ("group 1", "instance group"), ("model.onnx", "model")])
def test_names_real_exporters_write_pass(name: str, kind: str) -> None:
    assert name_problem(name, kind) is None  # type: ignore[arg-type]
    assert check_name(name, kind, "here") == name  # type: ignore[arg-type]


def _spec(**changes: object) -> ModelSpec:
    fields: dict[str, object] = dict(name="m", backend="python", max_batch_size=8,
                                     inputs=[TensorSpec(name="x", dtype="FP32", dims=[4])],
                                     outputs=[TensorSpec(name="y", dtype="FP32", dims=[4])])
    fields.update(changes)
    return ModelSpec(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("changes", "words"), [
    ({"inputs": [TensorSpec(name="x\n", dtype="FP32", dims=[4])]}, "input: tensor name 'x\\n' holds"),
    ({"outputs": [TensorSpec(name="y\0", dtype="FP32", dims=[4])]}, "output: tensor name 'y\\x00' holds"),
    ({"name": "a\tb"}, "model name 'a\\tb' holds"),
    ({"instance_groups": [InstanceGroup(count=1, kind="cpu", name="g\n")]}, "instance group name 'g\\n' holds"),
    ({"max_batch_size": 2**31}, "max_batch_size 2147483648: too large"),
    ({"inputs": [TensorSpec(name="x", dtype="FP32", dims=[2**63])]}, "dims 9223372036854775808: too large"),
])
def test_the_writer_refuses_what_protobuf_or_the_linter_would_not_take(tmp_path: Path, changes: dict[str, object],
                                                                      words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("\\", "\\\\").replace("(", r"\(")) as info:
        ModelRepository.init(tmp_path / "repo").add_model(_spec(**changes))
    assert info.value.hint
    assert not (tmp_path / "repo" / "m").exists()


def test_a_model_folder_name_with_a_newline_never_becomes_a_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="holds the control character"):
        model_folder(tmp_path, "a\nb")
