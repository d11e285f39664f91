"""The rule runner: a rule that fails is an internal error of its own, never a silent crash or a lost report;
configs that only a number-accepting parser takes (enum numbers, control characters in names) are findings."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.repository import read_config
from tritonkit.repository.lint import RULES, lint_repository
from tritonkit.repository.lint.core import LintContext, ModelInfo

GOOD = """
name: "m"
backend: "python"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000 preferred_batch_size: [ 16 ] }
"""


def _model(repo: Path, config: str, name: str = "m") -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("# model\n")
    (folder / "config.pbtxt").write_text(config)
    return folder


def _boom(ctx: LintContext, m: ModelInfo) -> None:
    raise KeyError("a bug in the rule")


def test_a_rule_that_raises_is_an_internal_error_naming_rule_and_file_and_the_others_still_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _model(tmp_path, GOOD)
    monkeypatch.setitem(RULES, "TK312", dataclasses.replace(RULES["TK312"], check=_boom))
    report = lint_repository(tmp_path)
    (failed,) = report.internal_errors
    assert failed.rule_id == "TK312" and failed.file == "m/config.pbtxt" and failed.internal
    assert "internal error: rule TK312" in failed.message and "KeyError" in failed.message
    assert "--ignore TK312" in failed.hint
    assert "TK101" in report.rule_ids()  # preferred_batch_size 16 > 8: the other rules still ran
    assert "not fully checked" in report.summary()

    text = CliRunner().invoke(main, ["repo", "lint", str(tmp_path)])
    assert text.exit_code == 3, text.output  # not 1 ("errors found"): the linter itself failed
    assert "Traceback" not in text.output and "TK101" in text.output
    data = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--format", "json"])
    assert data.exit_code == 3
    found = json.loads(data.stdout)
    assert found["internal_errors"] == 1
    assert [f["rule"] for f in found["findings"] if f.get("internal")] == ["TK312"]


def test_lint_exit_codes_are_documented_in_its_help() -> None:
    shown = CliRunner().invoke(main, ["repo", "lint", "--help"])
    assert "3 a rule failed" in " ".join(shown.output.split())


@pytest.mark.parametrize(("config", "field"), [
    ('input [ { name: "x" data_type: -3 dims: [ 1 ] } ]', "input[0].data_type: -3 is not a DataType"),
    ('instance_group [ { kind: 12 count: 1 } ]', "instance_group[0].kind: 12 is not a Kind"),
    ('input [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\nmodel_warmup [ { name: "w" batch_size: 1 '
     'inputs { key: "x" value: { data_type: 99 dims: [ 1 ] zero_data: true } } } ]',
     'model_warmup[0].inputs["x"].data_type: 99 is not a DataType'),
])
def test_an_enum_written_as_an_unknown_number_is_a_syntax_finding_naming_the_field(
    tmp_path: Path, config: str, field: str
) -> None:
    folder = _model(tmp_path, f'name: "m"\nbackend: "python"\n{config}\n')
    report = lint_repository(tmp_path)
    assert not report.internal_errors
    (finding,) = [f for f in report.findings if f.rule_id == "TK002"]
    assert field in finding.message and finding.line is not None
    with pytest.raises(ConfigError, match=field.replace("[", r"\[").replace("]", r"\]")) as info:
        read_config(folder)
    assert info.value.hint
    shown = CliRunner().invoke(main, ["repo", "show", str(folder)])
    assert shown.exit_code == 2 and "error: " in shown.stderr and "  fix: " in shown.stderr


@pytest.mark.parametrize(("name", "rule"), [
    ('"x\\n\\"evil\\0"', "TK312"),  # an input name as an ONNX exporter might write it
    ('"a\\tb"', "TK312"),
])
def test_a_tensor_name_with_a_control_character_is_an_error(tmp_path: Path, name: str, rule: str) -> None:
    _model(tmp_path, f'name: "m"\nbackend: "python"\ninput [ {{ name: {name} data_type: TYPE_FP32 dims: [ 1 ] }} ]\n'
                     'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n')
    report = lint_repository(tmp_path)
    (finding,) = [f for f in report.errors if f.rule_id == rule]
    assert "holds the control character" in finding.message and finding.field == "input[0].name"


def test_a_model_folder_name_with_a_newline_is_an_error(tmp_path: Path) -> None:
    _model(tmp_path, 'name: "a\\nb"\nbackend: "python"\n', name="a\nb")
    report = lint_repository(tmp_path)
    assert any(f.rule_id == "TK004" and "holds the control character '\\n'" in f.message for f in report.errors)


def test_an_enum_number_past_int32_is_a_syntax_finding_not_a_crash(tmp_path: Path) -> None:
    """protobuf raises a bare ValueError for it (outside its ParseError): found by the fuzz test."""
    folder = _model(tmp_path, 'name: "m"\nbackend: "python"\ninstance_group [ { kind: 99999999999999999999 } ]\n')
    (finding,) = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK002"]
    assert "a number out of range for its field" in finding.message
    shown = CliRunner().invoke(main, ["repo", "show", str(folder)])
    assert shown.exit_code == 2 and "  fix: " in shown.stderr and "Traceback" not in shown.output
