"""Atomic writes: whole files or nothing, readable like any other file."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tritonkit._fs import atomic_write


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
