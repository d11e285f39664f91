"""``tritonkit serve`` refuses what it cannot serve as asked: names outside the repository, models that
did not load under ``--strict``, with the server's own reason (real server, CliRunner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.pymodels import ADD_SUB_CONFIG, ADD_SUB_PY, write_add_sub, write_python_model
from tritonkit.cli import main


def _serve(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["serve", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_a_load_model_name_leading_outside_the_repository_is_refused_before_starting(tmp_path: Path) -> None:
    repo, outside = tmp_path / "repo", tmp_path / "x"
    write_add_sub(repo)
    write_add_sub(tmp_path, "x")  # a servable model folder beside the repository: must not be served
    code, out = _serve(str(repo), "--explicit", "--load-model", "../x")
    assert code == 2 and "'../x' is not a plain folder name inside the repository" in out
    assert outside.is_dir() and "(none loaded)" not in out and "serving" not in out


@pytest.mark.server
def test_strict_with_a_model_that_does_not_exist_fails_with_the_reason(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    code, out = _serve(str(tmp_path), "--explicit", "--load-model", "add_sub", "--load-model", "nosuch", "--strict")
    assert code == 1, out
    assert "error: model 'nosuch' failed to load: model not found in any model repository" in out
    assert "stopping: --strict was given" in out


def _write_with_metrics(repo: Path, name: str) -> None:
    config = ADD_SUB_CONFIG.format(name=name) + (
        'model_metrics { metric_control [ { metric_identifier { family: "nv_inference_first_response_histogram_ms" } '
        "histogram_options { buckets: [ 10, 100 ] } } ] }\n")
    write_python_model(repo, name, config_pbtxt=config, model_py=ADD_SUB_PY)


@pytest.mark.server
def test_a_field_the_running_release_cannot_read_sends_to_a_lint_for_that_release_which_finds_it(tmp_path: Path) -> None:
    """The bundled 2.51 cannot read model_metrics; lint for the newest release passes it, so the fix
    line names the server's release, and that lint really fails."""
    _write_with_metrics(tmp_path, "metrics")
    code, out = _serve(str(tmp_path))
    assert code == 1 and "error: model 'metrics' failed to load: failed to read text proto" in out
    fix = next(line for line in out.splitlines() if line.strip().startswith("fix:"))
    assert f"tritonkit repo lint {tmp_path} --bundled --server-version 2.51" in fix and "1 error(s) in metrics" in fix
    linted = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--bundled", "--server-version", "2.51"])
    assert linted.exit_code == 1 and "TK801" in linted.output
    assert CliRunner().invoke(main, ["repo", "lint", str(tmp_path)]).exit_code == 0, "clean for the newest release"


@pytest.mark.server
def test_a_failure_lint_cannot_see_is_not_sent_to_lint(tmp_path: Path) -> None:
    write_python_model(tmp_path, "broken", config_pbtxt=ADD_SUB_CONFIG.format(name="broken"), model_py="""
        class TritonPythonModel:
            def initialize(self, args):
                raise RuntimeError("the weights are corrupt")
    """)
    code, out = _serve(str(tmp_path))
    assert code == 1 and "the weights are corrupt" in out
    fix = next(line for line in out.splitlines() if line.strip().startswith("fix:"))
    assert "repo lint" not in fix and "the server's reason above" in fix


def test_a_server_flag_newer_than_the_bundled_release_is_refused_before_starting(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    code, out = _serve(str(tmp_path), "--server-arg=--allow-client-shm=true")
    assert code == 2 and "--allow-client-shm is new in Triton 2.68 (NGC 26.04)" in out
    assert "tritonserver 2.51" in out and "serving" not in out
