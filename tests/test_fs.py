"""Atomic writes: whole files or nothing, readable like any other file; a user's files read safely."""

from __future__ import annotations

import errno
import os
import stat
import time
from pathlib import Path

import pytest

from tritonkit._fs import (
    STALE_TEMP_S,
    atomic_folder,
    atomic_write,
    clean_stale_temps,
    is_regular_file,
    path_error,
    read_json,
    read_user_file,
    read_user_text,
    user_path_errors,
)
from tritonkit.errors import ConfigError


def test_atomic_write_gives_the_mode_a_plain_open_would(tmp_path: Path) -> None:
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    written = atomic_write(tmp_path / "sub" / "atomic.txt", "héllo")
    assert written.read_text(encoding="utf-8") == "héllo"
    assert stat.S_IMODE(written.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_atomic_folder_is_filled_once_and_a_failed_fill_leaves_nothing(tmp_path: Path) -> None:
    target, calls = tmp_path / "cache" / "made", []

    def fill(staging: Path) -> None:
        calls.append(staging)
        (staging / "marker").write_text("x")

    def ready(at: Path) -> bool:
        return (at / "marker").is_file()

    assert atomic_folder(target, fill, ready=ready, prefix=".t-") == target
    assert atomic_folder(target, fill, ready=ready, prefix=".t-") == target
    assert len(calls) == 1 and (target / "marker").read_text() == "x"

    def broken(staging: Path) -> None:
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_folder(tmp_path / "cache" / "other", broken, ready=ready, prefix=".t-")
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["made"]


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


# ---- reading a user's files -------------------------------------------------------------------


def test_a_user_file_is_read_whole_when_it_is_a_regular_file(tmp_path: Path) -> None:
    path = tmp_path / "sla.yaml"
    path.write_text("p99: 50ms\n")
    assert read_user_text(path, what="SLA file") == "p99: 50ms\n"
    link = tmp_path / "link.yaml"
    link.symlink_to(path)
    assert read_user_file(link, what="SLA file") == b"p99: 50ms\n"  # a symlink to a file is that file


@pytest.mark.parametrize(("kind", "words"), [
    ("fifo", "is a FIFO (named pipe), not a regular file"),
    ("device", "is a character device, not a regular file"),
    ("folder", "is a folder, not a regular file"),
    ("missing", "not found"),
    ("long", "path is too long for the file system"),
    ("nul", "holds a NUL character"),
    ("loop", "is a loop of symbolic links"),
])
def test_anything_but_a_regular_file_is_refused_at_once_saying_what_it_is(tmp_path: Path, kind: str,
                                                                          words: str) -> None:
    path = tmp_path / "config.pbtxt"
    if kind == "fifo":
        os.mkfifo(path)  # opened without blocking: an ordinary open would wait for a writer forever
    elif kind == "device":
        path.symlink_to("/dev/zero")  # never read: it would read until memory ran out
    elif kind == "folder":
        path.mkdir()
    elif kind == "long":
        path = tmp_path / ("x" * 5000)
    elif kind == "nul":
        path = tmp_path / "a\0b"
    elif kind == "loop":
        path.symlink_to(tmp_path / "other")
        (tmp_path / "other").symlink_to(path)
    with pytest.raises(ConfigError) as info:
        read_user_text(path, what="model config", hint="give the file")
    assert words in info.value.message and info.value.hint
    assert len(info.value.message) < 400  # an over-long path is shown cut short
    assert not is_regular_file(path)  # and the existence check never raises


def test_a_file_over_the_cap_is_refused_with_its_size(tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(ConfigError, match="2048 bytes, more than the 1024 read"):
        read_user_file(path, what="prompt file", max_bytes=1024)


def test_a_file_that_is_not_utf8_names_the_byte_not_the_content(tmp_path: Path) -> None:
    path = tmp_path / "sla.yaml"
    path.write_bytes(b"p99: 50ms\n\xff\xfesecret")
    with pytest.raises(ConfigError) as info:
        read_user_text(path, what="SLA file")
    assert "is not UTF-8 text (byte 10)" in info.value.message and "secret" not in info.value.message


def test_json_nested_too_deep_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ConfigError, match="nests too deeply|not valid JSON"):
        read_json(path, what="saved plan", hint="pass the plan JSON")


def test_atomic_write_refuses_to_replace_a_fifo_and_leaves_it_as_it_was(tmp_path: Path) -> None:
    """Writing over a FIFO or a device would replace the node itself (``--out /dev/stdout``; as root
    ``/dev/null`` for everyone): refused, naming it, and the node stays."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="is a FIFO") as caught:
        atomic_write(fifo, "data")
    assert caught.value.hint
    assert stat.S_ISFIFO(os.stat(fifo).st_mode) and sorted(p.name for p in tmp_path.iterdir()) == ["pipe"]
