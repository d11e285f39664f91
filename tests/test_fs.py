"""Atomic writes: whole files or nothing, readable like any other file."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from tritonkit._fs import atomic_write, path_error, user_path_errors
from tritonkit.errors import ConfigError


def test_atomic_write_gives_the_mode_a_plain_open_would(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = atomic_write(tmp_path / "sub" / "atomic.txt", "héllo")
    assert written.read_text(encoding="utf-8") == "héllo"
    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_a_failed_write_leaves_what_was_there_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "result.json"
    target.mkdir()  # os.replace of a file onto a folder fails after the temp file is written
    (target / "keep").write_text("old")
    with pytest.raises(OSError):
        atomic_write(target, "new")
    assert (target / "keep").read_text() == "old"
    assert sorted(os.listdir(tmp_path)) == ["result.json"]


def test_an_os_error_on_a_user_path_becomes_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nope" / "file.txt"
    with pytest.raises(ConfigError) as info, user_path_errors("read the notes"):
        missing.read_text()
    assert info.value.message.startswith("cannot read the notes: ") and str(missing) in info.value.message
    assert "No such file" in info.value.message and info.value.hint


def test_a_permission_error_says_how_to_make_the_path_writable() -> None:
    error = path_error(PermissionError(errno.EACCES, "Permission denied", "/srv/repo"), "write model 'm'")
    assert error.message == "cannot write model 'm': /srv/repo: Permission denied"
    assert error.hint and "make /srv/repo writable" in error.hint
    full = path_error(OSError(errno.ENOSPC, "No space left on device", "/srv/repo/m"), "write", "/srv/repo")
    assert full.hint and "free space" in full.hint and "/srv/repo" in full.hint
