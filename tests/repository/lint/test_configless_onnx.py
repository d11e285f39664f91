"""A model folder holding an ONNX file but no config.pbtxt is a lint error whose fix is the exact
``tritonkit build onnx`` command; running that command makes the folder pass."""

from __future__ import annotations

import shlex
from pathlib import Path

from click.testing import CliRunner

from tritonkit.builders import make_demo_model
from tritonkit.cli import main
from tritonkit.repository.lint import Severity, lint_repository


def test_a_configless_onnx_folder_is_an_error_naming_the_build_command_that_fixes_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    make_demo_model(repo / "demo" / "1" / "model.onnx")
    finding = next(f for f in lint_repository(repo).findings if f.rule_id == "TK001")
    assert finding.severity is Severity.ERROR
    assert "demo/1/model.onnx" in finding.message
    assert finding.hint.startswith("tritonkit build onnx ")
    command = shlex.split(finding.hint.split(" (", 1)[0])
    assert command[:3] == ["tritonkit", "build", "onnx"]
    result = CliRunner().invoke(main, [*command[1:], "--runtime", "python", "--kind", "cpu"])
    assert result.exit_code == 0, result.output
    assert (repo / "demo" / "config.pbtxt").is_file()
    assert not [f for f in lint_repository(repo).findings if f.rule_id == "TK001"]


def test_a_configless_python_folder_stays_a_warning(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "py" / "1").mkdir(parents=True)
    (repo / "py" / "1" / "model.py").write_text("class TritonPythonModel:\n    pass\n")
    finding = next(f for f in lint_repository(repo).findings if f.rule_id == "TK001")
    assert finding.severity is Severity.WARNING
