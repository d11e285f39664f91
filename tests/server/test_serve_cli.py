"""``tritonkit serve`` refuses what it cannot serve as asked: names outside the repository, models that
did not load under ``--strict``, with the server's own reason (real server, CliRunner)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.pymodels import write_add_sub
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
