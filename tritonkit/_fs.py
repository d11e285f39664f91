"""Writing files so that a reader never sees half of one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError

__all__ = ["atomic_write", "read_json"]


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
    raw = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
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
