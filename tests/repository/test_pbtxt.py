"""config.pbtxt text: stable rendering, parse errors with line and column, exact round trips, atomic writes."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.paths import LINT_CORPUS
from tritonkit.errors import ConfigError
from tritonkit.repository import (
    ConfigSyntaxError,
    DynamicBatching,
    InstanceGroup,
    ModelSpec,
    TensorSpec,
    parse_config,
    read_config,
    render_config,
    write_config,
)
from tritonkit.repository.pbtxt import field_lines

SPEC = ModelSpec(
    name="m", backend="onnxruntime", max_batch_size=8,
    inputs=[TensorSpec(name="x", dtype=np.float32, dims=[3, -1])],
    outputs=[TensorSpec(name="y", dtype="INT64", dims=[1])],
    dynamic_batching=DynamicBatching(window="10ms"),
    instance_groups=[InstanceGroup(kind="cpu", count=2)],
    parameters={"b": "2", "a": "1"},
)


def test_render_starts_with_identity_then_tensors_then_scheduling() -> None:
    text = render_config(SPEC.to_proto())
    keys = [line.split()[0].rstrip(":") for line in text.splitlines() if line[:1].isalpha()]
    assert keys[:6] == ["name", "backend", "max_batch_size", "input", "output", "dynamic_batching"]
    assert keys.index("instance_group") < keys.index("parameters")


def test_repeated_scalars_are_written_as_lists() -> None:
    text = render_config(SPEC.to_proto())
    assert "  dims: [ 3, -1 ]\n" in text and "  dims: [ 1 ]\n" in text


def test_render_is_stable() -> None:
    assert render_config(SPEC.to_proto()) == render_config(SPEC.to_proto())


def test_max_batch_size_zero_is_written_explicitly() -> None:
    text = render_config(ModelSpec(name="flat", backend="python").to_proto())
    assert "max_batch_size: 0\n" in text
    assert "max_batch_size: 0" not in text_format.MessageToString(mc.ModelConfig(name="flat"))  # the quirk itself


def test_written_config_parses_back_identical(tmp_path: Path) -> None:
    cfg = SPEC.to_proto()
    path = write_config(cfg, tmp_path / "m")
    assert path == tmp_path / "m" / "config.pbtxt"
    again = mc.ModelConfig()
    text_format.Parse(path.read_text(), again)  # Triton's own parser, not ours
    assert again == cfg


def _parses(path: Path) -> bool:
    try:
        read_config(path)
    except ConfigSyntaxError:
        return False  # a syntax error on purpose (the syntax tests below cover those)
    return True


def _corpus_configs() -> list[Path]:
    return sorted(p for p in LINT_CORPUS.glob("*/*/config.pbtxt") if _parses(p))


@pytest.mark.parametrize("path", _corpus_configs(), ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_read_write_read_is_identical_for_every_corpus_config(path: Path, tmp_path: Path) -> None:
    first = read_config(path)
    written = write_config(first, tmp_path / "config.pbtxt")
    second = read_config(written)
    assert second == first
    assert render_config(second) == written.read_text()


def test_syntax_error_reports_file_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text('name: "m"\nmax_batch_size: 8\ndynamic_batching {\n  max_queue_delay_microseconds: "5ms"\n}\n')
    with pytest.raises(ConfigSyntaxError) as info:
        read_config(path)
    assert (info.value.line, info.value.column) == (4, 33)
    assert f"{path}:4:33" in str(info.value)
    assert info.value.hint


def test_unknown_field_is_a_syntax_error_naming_the_field() -> None:
    with pytest.raises(ConfigSyntaxError, match="max_queue_delay_ms") as info:
        parse_config('name: "m"\nmax_queue_delay_ms: 5\n')
    assert info.value.line == 2


def test_reading_a_missing_config_says_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="model config not found: .*nope") as info:
        read_config(tmp_path / "nope")
    assert info.value.hint


def test_write_is_atomic_and_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "config.pbtxt"
    target.write_text("old")
    write_config(SPEC.to_proto(), target)
    assert read_config(target) == SPEC.to_proto()
    assert os.listdir(tmp_path) == ["config.pbtxt"]


def test_failed_write_keeps_the_old_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "config.pbtxt"
    target.write_text("old")

    def broken_replace(src: str, dst: str) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", broken_replace)
    with pytest.raises(OSError):
        write_config(SPEC.to_proto(), target)
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["config.pbtxt"]


def test_field_lines_find_repeated_singular_and_map_fields() -> None:
    text = (
        'name: "a"\n'
        "input [\n"
        '  { name: "x" dims: [ 4 ] },\n'
        '  { name: "y"\n'
        "    dims: [ 2, 16 ] }\n"
        "]\n"
        "dynamic_batching {\n"
        "  preferred_batch_size: [ 2, 16 ]\n"
        "}\n"
        'parameters { key: "k" value { string_value: "v" } }\n'
        "instance_group { kind: KIND_GPU gpus: 0 }\n"
    )
    lines = field_lines(text)
    assert lines.line_of("input[1].dims[1]") == 5
    assert lines.line_of("dynamic_batching.preferred_batch_size[1]") == 8
    assert lines.line_of('parameters["k"]') == 10
    assert lines.line_of("instance_group[0].gpus") == 11
    assert lines.line_of("instance_group[0].count") == 11  # not written: the enclosing field's line
    assert lines.has("instance_group[0].kind") and not lines.has("instance_group[0].count")


def test_field_lines_never_raise_on_broken_text() -> None:
    assert field_lines("input [ { name: ").line_of("input[0]") in (1, None)


def test_a_config_pbtxt_that_is_a_folder_is_named_once(tmp_path: Path) -> None:
    """Read as the file or through its model folder, the error names ``…/config.pbtxt`` as a folder."""
    model = tmp_path / "m"
    (model / "config.pbtxt").mkdir(parents=True)
    for given in (model, model / "config.pbtxt"):
        with pytest.raises(ConfigError) as info:
            read_config(given)
        assert info.value.message == f"model config {model / 'config.pbtxt'} is a folder, not a regular file"
