"""``repo show`` / ``repo diff`` on a model folder whose config.pbtxt is broken in a way no text
editor makes: a folder in its place, a symlink loop. Each is read and named (exit 2), never taken
for an empty repository ("no models", exit 0). Pure: no server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support.faults import run_cli


def _broken(tmp_path: Path, kind: str) -> Path:
    model = tmp_path / "repo" / "m"
    model.mkdir(parents=True)
    if kind == "folder":
        (model / "config.pbtxt").mkdir()
    else:
        os.symlink(model / "other", model / "config.pbtxt")
        os.symlink(model / "config.pbtxt", model / "other")
    return model


@pytest.mark.parametrize(("kind", "words"), [("folder", "is a folder, not a regular file"), ("loop", "is a loop of symbolic links")])
def test_a_broken_config_of_a_model_folder_is_named_not_taken_for_an_empty_repository(
    tmp_path: Path, kind: str, words: str
) -> None:
    model = _broken(tmp_path, kind)
    done = run_cli("repo", "show", str(model))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{model / 'config.pbtxt'}" in done.stderr and words in done.stderr
    assert "no models" not in done.stdout and "Traceback" not in done.stderr
