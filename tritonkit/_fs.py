"""Writing files so that a reader never sees half of one; failures on a user's path as clear errors."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError

__all__ = ["STALE_TEMP_S", "atomic_write", "clean_stale_temps", "path_error", "read_json", "user_path_errors"]

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
    target.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_temps(target)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(target), suffix=".tmp", dir=target.parent)
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
    except OSError:
        return removed
    for candidate in candidates:
        try:
            if candidate.is_file() and not candidate.is_symlink() and candidate.stat().st_mtime < cutoff:
                candidate.unlink()
                removed.append(candidate)
        except OSError:
            continue
    return removed


def read_json(path: str | os.PathLike[str], *, what: str, hint: str) -> Any:
    """Parse the JSON file at ``path``; a missing, unreadable or malformed file is a ``ConfigError``.

    ``what`` names the file in the message (``"perf result"``), ``hint`` says what to pass instead.
    """
    source = Path(path)
    try:
        return json.loads(source.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise ConfigError(f"{what} not found: {source}", hint=hint) from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{what} {source} is not valid JSON (line {exc.lineno}): {exc.msg}", hint=hint) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {source}: {exc}", hint=hint) from exc


def read_jsonl(path: str | os.PathLike[str], *, what: str, example: str) -> list[tuple[str, Any]]:
    """The values of a JSON Lines file, each with where it stands (``"FILE line N"``); blank lines skipped.

    An unreadable file or a line that is not JSON is a ``ConfigError`` naming the file (and line);
    ``what`` names the file in messages, ``example`` shows one good line.
    """
    source = Path(path)
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {what} {source}: {exc}", hint=f"pass a JSONL file, one line like {example}") from exc
    values: list[tuple[str, Any]] = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        where = f"{source} line {number}"
        try:
            values.append((where, json.loads(raw)))
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{where} is not JSON: {exc.msg}", hint=f"e.g. {example}") from exc
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

