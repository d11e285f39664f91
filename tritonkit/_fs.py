"""Writing files so that a reader never sees half of one; reading a user's files safely; failures on a
user's path as clear errors.

Every file a user names (a ``config.pbtxt``, an SLA file, prompts, a replay log, input data, a label
file a lint rule looks for) is read through :func:`read_user_file` (or checked with
:func:`regular_file` / :func:`is_regular_file` when only its existence matters): a regular file of at
most a stated size, or a :class:`ConfigError` that says what the path is instead — a FIFO (which
would block the read forever), a device (``/dev/zero`` would read until memory ran out), a folder, a
path too long for the file system — never a hang, a traceback, or the whole file in the message.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError

__all__ = [
    "MAX_USER_FILE_BYTES",
    "STALE_TEMP_S",
    "atomic_folder",
    "atomic_write",
    "clean_stale_temps",
    "expand_user",
    "is_folder",
    "is_regular_file",
    "non_finite_at",
    "open_user_file",
    "path_error",
    "path_exists",
    "read_json",
    "read_user_file",
    "read_user_text",
    "regular_file",
    "shown_path",
    "user_path_errors",
]

#: A temp file of ours untouched this long belongs to a writer that died (a write takes well under a
#: second to the rename, and the file's mtime moves while data is written).
STALE_TEMP_S = 600.0


def _current_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before threads exist.
    mask = os.umask(0)
    os.umask(mask)
    return mask


_FILE_MODE = 0o666 & ~_current_umask()


def atomic_write(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) to ``path``: a temp file in the same folder, fsync, ``os.replace``.

    The folder is created when missing. The file gets the mode a plain ``open()`` would give
    it (``mkstemp`` alone makes 0600 files, unreadable to the CI uploader or a web server).
    On any failure the temp file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    _refuse_special(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        clean_stale_temps(target)
        fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
    except OSError as exc:  # named by the file asked for, not by the temp file beside it
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    try:
        os.fchmod(fd, _FILE_MODE)
        with os.fdopen(fd, "wb") as handle:
            handle.write(raw)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _refuse_special(target: Path) -> None:
    """Refuse to write over a FIFO, a device or a socket (``--out /dev/stdout``): the rename would
    replace the node itself — as root, ``/dev/null`` for everyone — instead of writing into it."""
    try:
        mode = os.stat(target).st_mode
    except (OSError, ValueError):
        return  # nothing there (or a path that cannot be): the write itself says what is wrong
    if not stat.S_ISREG(mode) and not stat.S_ISDIR(mode):
        raise ConfigError(f"cannot write {shown_path(target)}: it is {_kind(mode)}, not a regular file",
                          hint="give the path of a file to create or replace (or leave --out out where the "
                               "command prints instead)")


def atomic_folder(target: Path, fill: Callable[[Path], None], *, ready: Callable[[Path], bool], prefix: str) -> Path:
    """``target``, made once: unless ``ready(target)``, ``fill`` a staging folder (named ``prefix…``)
    beside it and rename that into place. Another process that renamed its own first wins: theirs
    is as good as ours."""
    if ready(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=target.parent))
    try:
        fill(staging)
        try:
            os.replace(staging, target)
        except OSError:
            if not ready(target):
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def _temp_prefix(target: Path) -> str:
    return f".{target.name}."


def clean_stale_temps(target: str | os.PathLike[str], *, older_than_s: float = STALE_TEMP_S) -> list[Path]:
    """Remove the temp files :func:`atomic_write` left beside ``target`` when its writer was killed.

    Only ours (``.<name>.<random>.tmp`` beside ``target``, and the ``.<name>.tmp`` of a copy) and
    only stale (not modified for ``older_than_s``): a writer at work right now keeps its file.
    Returns what was removed; a file that cannot be removed is left (the next write tries again).
    """
    path = Path(target)
    prefix = _temp_prefix(path)
    removed: list[Path] = []
    cutoff = time.time() - older_than_s
    try:
        candidates = [p for p in path.parent.iterdir()
                      if p.name.startswith(prefix) and p.name.endswith(".tmp") and p.name != path.name]
    except (OSError, ValueError):  # a folder that cannot be listed, a NUL in the path: nothing to clean
        return removed
    for candidate in candidates:
        try:
            if candidate.is_file() and not candidate.is_symlink() and candidate.stat().st_mtime < cutoff:
                candidate.unlink()
                removed.append(candidate)
        except OSError:
            continue
    return removed


# ---- reading a user's files -------------------------------------------------------------------

#: The largest file read whole by default: far above any config, SLA or prompt file, far below memory.
MAX_USER_FILE_BYTES = 256 * 1024 * 1024
#: How much of a path an error message shows.
_SHOWN_PATH_CHARS = 160


def shown_path(path: str | os.PathLike[str]) -> str:
    """``path`` as an error message shows it: whole when it is of a sane length, else its start."""
    text = os.fspath(path)
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if len(text) > _SHOWN_PATH_CHARS or any(ord(c) < 32 for c in text):
        short = text[: _SHOWN_PATH_CHARS - 1] + ("…" if len(text) > _SHOWN_PATH_CHARS else "")
        return repr(short)
    return text


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def _open_error(exc: OSError, what: str, source: str | os.PathLike[str], hint: str | None) -> ConfigError:
    shown = shown_path(source)
    if exc.errno == errno.ENOENT:
        return ConfigError(f"{what} not found: {shown}", hint=hint or "check the path")
    if exc.errno == errno.ENAMETOOLONG:
        return ConfigError(f"{what} path is too long for the file system: {shown}",
                           hint="give a shorter path (each name at most 255 bytes)")
    if exc.errno == errno.ELOOP:
        return ConfigError(f"{what} {shown} is a loop of symbolic links", hint="point the link at a real file")
    if exc.errno == errno.ENOTDIR:
        return ConfigError(f"{what} {shown}: a part of the path is a file, not a folder", hint=hint or "check the path")
    return path_error(exc, f"read {what}", shown)


def regular_file(path: str | os.PathLike[str], *, what: str, hint: str | None = None) -> Path:
    """``path`` when it names a regular file (following symlinks); else a :class:`ConfigError`
    saying what it is instead. For files handed on to a reader that would block on a FIFO or read a
    device forever (ONNX Runtime, numpy, onnx); :func:`read_user_file` checks as it reads."""
    try:
        mode = os.stat(path).st_mode
    except ValueError:  # an embedded NUL
        raise ConfigError(f"{what} path {shown_path(path)} holds a NUL character", hint="check the path") from None
    except OSError as exc:
        raise _open_error(exc, what, path, hint) from exc
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{what} {shown_path(path)} is {_kind(mode)}, not a regular file",
                          hint=hint or "give the path of a regular file")
    return Path(path)


def _mode(path: str | os.PathLike[str]) -> int | None:
    """``path``'s mode (following symlinks); ``None`` when it cannot be read, for any reason."""
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` names a regular file; False for anything else, never an error (a name too
    long, a NUL in it, a FIFO, no permission): for checks that a file is there."""
    return stat.S_ISREG(_mode(path) or 0)  # mode 0: no kind of file at all


def is_folder(path: str | os.PathLike[str]) -> bool:
    """True when ``path`` names a folder; False otherwise, never an error (see :func:`is_regular_file`)."""
    return stat.S_ISDIR(_mode(path) or 0)


def path_exists(path: str | os.PathLike[str]) -> bool:
    """True when something is at ``path`` (following symlinks); False otherwise, never an error."""
    return _mode(path) is not None


@contextlib.contextmanager
def open_user_file(path: str | os.PathLike[str], *, what: str, hint: str | None = None,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> Iterator[int]:
    """A descriptor of the user's file ``path`` open for reading (``os.read``, ``os.pread`` in pieces).

    Anything but a regular file is refused before it is opened (opening a device can act on it; a FIFO
    with no writer would block an ordinary open forever), and again on the open file, opened without
    blocking, in case the path changed between: a :class:`ConfigError` saying what it is, as are a file
    over ``max_bytes``, a missing file, a path too long, a symlink loop and a permission refused.
    """
    regular_file(path, what=what, hint=hint)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise _open_error(exc, what, path, hint) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{what} {shown_path(path)} is {_kind(info.st_mode)}, not a regular file",
                              hint=hint or "give the path of a regular file")
        if info.st_size > max_bytes:
            raise ConfigError(f"{what} {shown_path(path)} is {info.st_size} bytes, more than the {max_bytes} read",
                              hint=hint or "give the right file (this one is far larger than expected)")
        yield fd
    except OSError as exc:
        raise _open_error(exc, what, path, hint) from exc
    finally:
        os.close(fd)


def read_user_file(path: str | os.PathLike[str], *, what: str, hint: str | None = None,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> bytes:
    """The bytes of the user's file ``path`` (``what`` names it in messages: ``"SLA file"``), opened and
    checked as :func:`open_user_file` says; the file's content is never part of a message.
    """
    with open_user_file(path, what=what, hint=hint, max_bytes=max_bytes) as fd:
        chunks: list[bytes] = []
        size = 0
        while size <= max_bytes:  # a file growing while read stops at the cap too
            chunk = os.read(fd, min(1 << 20, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:
            raise ConfigError(f"{what} {shown_path(path)} grew past {max_bytes} bytes while read",
                              hint=hint or "give a file that is not being written")
        return b"".join(chunks)


def read_user_text(path: str | os.PathLike[str], *, what: str, hint: str | None = None,
                   max_bytes: int = MAX_USER_FILE_BYTES) -> str:
    """:func:`read_user_file` as UTF-8 text; a file that is not UTF-8 is a :class:`ConfigError`
    naming the first byte that is not (never its content)."""
    data = read_user_file(path, what=what, hint=hint, max_bytes=max_bytes)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{what} {shown_path(path)} is not UTF-8 text (byte {exc.start})",
                          hint=hint or "give a text file") from exc


def read_json(path: str | os.PathLike[str], *, what: str, hint: str, finite: bool = False) -> Any:
    """Parse the JSON file at ``path``; a missing, unreadable or malformed file is a ``ConfigError``.

    ``what`` names the file in the message (``"perf result"``), ``hint`` says what to pass instead.
    ``finite``: a number that is not finite (``NaN``, ``Infinity``, ``1e999``: Python's reader takes
    them, strict JSON has none) is a ``ConfigError`` naming where it stands in the file.
    """
    text = read_user_text(path, what=what, hint=hint)
    try:
        data = json.loads(text)
        if finite:
            where = non_finite_at(data)
            if where is not None:
                raise ConfigError(f"{what} {shown_path(path)}: {where} is not a finite number (NaN, Infinity or "
                                  "past a float's range)", hint=f"write a real number there; {hint}")
        return data
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} {shown_path(path)} is not valid JSON (line {exc.lineno}): {exc.msg}",
                          hint=hint) from exc
    except RecursionError:
        raise ConfigError(f"{what} {shown_path(path)} nests too deeply to read", hint=hint) from None
    except ValueError as exc:  # a whole number of more digits than Python converts (4300)
        raise ConfigError(f"{what} {shown_path(path)} holds a number too long to read: {exc}", hint=hint) from None


def expand_user(path: str | os.PathLike[str]) -> Path:
    """``path`` with a leading ``~`` or ``~user`` expanded, as a shell does; a ``~name`` naming no user
    (or ``~`` with no home) stays as written, as the shell leaves it, instead of ``RuntimeError``."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        return Path(path)


def non_finite_at(data: Any, where: str = "") -> str | None:
    """Where in ``data`` (parsed JSON) a number that is not finite stands (``'hidden_size'``,
    ``'text_config'.'rope_theta'``, ``item 3``), or ``None`` when every number is finite."""
    if isinstance(data, float):
        return None if math.isfinite(data) else (where or "the document")
    items = data.items() if isinstance(data, dict) else enumerate(data) if isinstance(data, list) else ()
    for key, value in items:
        step = repr(key) if isinstance(key, str) else f"item {key}"
        found = non_finite_at(value, f"{where}.{step}" if where else step)
        if found is not None:
            return found
    return None


def read_jsonl(path: str | os.PathLike[str], *, what: str, example: str) -> list[tuple[str, Any]]:
    """The values of a JSON Lines file, each with where it stands (``"FILE line N"``); blank lines skipped.

    An unreadable file or a line that is not JSON is a ``ConfigError`` naming the file (and line);
    ``what`` names the file in messages, ``example`` shows one good line.
    """
    source = shown_path(path)
    lines = read_user_text(path, what=what, hint=f"pass a JSONL file, one line like {example}").splitlines()
    values: list[tuple[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source} line {number}"
        try:
            values.append((where, json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where} is not JSON: {exc.msg}", hint=f"e.g. {example}") from exc
        except RecursionError:
            raise ConfigError(f"{where} nests too deeply to read", hint=f"e.g. {example}") from None
        except ValueError as exc:  # a whole number of more digits than Python converts
            raise ConfigError(f"{where} holds a number too long to read: {exc}", hint=f"e.g. {example}") from None
    return values


def path_error(exc: OSError, action: str, path: Path | str | None = None) -> ConfigError:
    """A :class:`ConfigError` for an ``OSError`` on a user's path: what failed, the path, and a fix.

    ``path`` names the path when the error's own would mislead (a rename fails on its source's name).
    """
    # A copy that fails for want of room or write access fails on its destination (shutil puts
    # the source in ``filename`` and the destination in ``filename2``): name the one to act on.
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)
    path = path or (exc.filename2 if full and exc.filename2 else exc.filename) or "?"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        hint = (f"make {path} writable for this user (chmod u+w, or chown), or choose another location"
                if exc.errno != errno.EROFS else f"{path} is on a read-only file system: choose another location")
    elif exc.errno in (errno.ENOSPC, errno.EDQUOT):
        hint = f"free space on the file system of {path}, or choose another location"
    else:
        hint = "check the path and its permissions, or choose another location"
    return ConfigError(f"cannot {action}: {path}: {exc.strerror or exc}", hint=hint)


@contextlib.contextmanager
def user_path_errors(action: str, path: Path | str | None = None) -> Iterator[None]:
    """Turn an ``OSError`` on a user's path into a :class:`ConfigError` naming the path and a fix.

    A connection error or a timeout (``OSError`` subclasses too) is not about the path: it passes."""
    try:
        yield
    except (ConnectionError, TimeoutError):
        raise
    except OSError as exc:
        raise path_error(exc, action, path) from exc


_STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


@contextlib.contextmanager
def folder_write_errors(action: str, folder: Path | str) -> Iterator[None]:
    """Like :func:`user_path_errors` for the writes into ``folder`` over a long operation: an
    ``OSError`` becomes a :class:`ConfigError` naming the folder only when it is about storage (a
    full disk, a read-only file system) or names a path inside ``folder``; any other (a tool that
    cannot be started, a socket) passes unchanged rather than be blamed on the folder."""
    try:
        yield
    except (ConnectionError, TimeoutError):
        raise
    except OSError as exc:
        inside = any(str(name).startswith(str(folder)) for name in (exc.filename, exc.filename2) if name)
        if exc.errno in _STORAGE_ERRNOS or inside:
            raise path_error(exc, action, folder) from exc
        raise

