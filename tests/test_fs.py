"""Atomic writes: whole files or nothing, readable like any other file."""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import pytest

from tritonkit._fs import STALE_TEMP_S, atomic_write, clean_stale_temps, path_error, user_path_errors
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


def _temp(folder: Path, name: str, *, age_s: float) -> Path:
    path = folder / name
    path.write_text("half a config")
    stamp = time.time() - age_s
    os.utime(path, (stamp, stamp))
    return path


def test_a_temp_file_left_by_a_killed_writer_is_cleaned_on_the_next_write(tmp_path: Path) -> None:
    # What a SIGKILL between mkstemp and os.replace leaves: a hidden temp of our own naming.
    stale = _temp(tmp_path, ".config.pbtxt.k3j9x_a1.tmp", age_s=STALE_TEMP_S + 60)
    copying = _temp(tmp_path, ".config.pbtxt.tmp", age_s=STALE_TEMP_S + 60)
    busy = _temp(tmp_path, ".config.pbtxt.fresh123.tmp", age_s=1)  # a writer at work right now
    others = [_temp(tmp_path, ".model.onnx.zz.tmp", age_s=STALE_TEMP_S + 60),  # another file's: its own write cleans it
              _temp(tmp_path, "config.pbtxt.bak.tmp", age_s=STALE_TEMP_S + 60)]  # not our naming
    atomic_write(tmp_path / "config.pbtxt", 'name: "m"\n')
    assert not stale.exists() and not copying.exists()
    assert busy.exists() and all(p.exists() for p in others)
    assert (tmp_path / "config.pbtxt").read_text() == 'name: "m"\n'


def test_a_stale_config_temp_is_cleaned_when_the_config_is_read(tmp_path: Path) -> None:
    from tritonkit.repository import read_config

    (tmp_path / "config.pbtxt").write_text('name: "m"\n')
    stale = _temp(tmp_path, ".config.pbtxt.abcdefgh.tmp", age_s=STALE_TEMP_S + 1)
    assert read_config(tmp_path).name == "m"
    assert not stale.exists()
    assert clean_stale_temps(tmp_path / "config.pbtxt") == []
