"""The bundled tritonserver in a place of its own: ``tritonkit install server``.

The bundled server is the Triton Inference Server 2.51 build inside the ``nvidia-pytriton`` 0.7.0
wheel: its binary, backends, the python-backend stubs (one per Python, 3.8–3.13) and its private
libraries. That wheel's own Python package pins ``numpy<2``; tritonkit needs none of its Python code,
so the wheel is fetched *without its dependencies* and only the server's files are unpacked, into
``<sys.prefix>/share/tritonkit/tritonserver`` (the wheel's own layout, so the binaries' relative
library paths hold). The environment keeps whatever numpy it has.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write
from tritonkit.errors import MissingComponentError
from tritonkit.provision._steps import Progress, replace_dir, run_step, say, tail

__all__ = ["BUNDLED_WHEEL", "bundled_dir", "bundled_record", "install_server"]

#: The wheel that carries the bundled server, and the build whose layout tritonkit knows.
BUNDLED_WHEEL = ("nvidia-pytriton", "0.7.0")
_PLATFORM = "manylinux_2_35_x86_64"
#: What of the wheel is the server: the binary, backends and stubs, and the libraries they link.
_MEMBERS = ("pytriton/tritonserver/", "nvidia_pytriton.libs/")
_RECORD = "install.json"


def bundled_dir(prefix: str | os.PathLike[str] | None = None) -> Path:
    """``<prefix>/share/tritonkit/tritonserver`` (prefix: this environment's ``sys.prefix``)."""
    return Path(prefix or sys.prefix) / "share" / "tritonkit" / "tritonserver"


def bundled_record(prefix: str | os.PathLike[str] | None = None) -> dict[str, Any] | None:
    """The install's record (wheel, version, when), or ``None`` when no complete install is there."""
    directory = bundled_dir(prefix)
    try:
        record = json.loads((directory / _RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    binary = directory / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    return record if isinstance(record, dict) and binary.is_file() else None


def install_server(*, prefix: str | os.PathLike[str] | None = None, wheel: str | os.PathLike[str] | None = None,
                   force: bool = False, progress: Progress | None = None) -> Path:
    """Install the bundled tritonserver into :func:`bundled_dir` (idempotent); return that folder.

    ``wheel`` unpacks a local ``nvidia_pytriton-0.7.0-*.whl`` instead of downloading one. The old
    install stays usable until the new one is complete (unpacked beside it, then swapped in).
    Raises ``MissingComponentError`` naming the failing step.
    """
    directory = bundled_dir(prefix)
    name, version = BUNDLED_WHEEL
    record = bundled_record(prefix)
    if record is not None and not force and record.get("version") == version:
        say(progress, f"tritonserver (from {name} {version}) already installed in {directory}")
        return directory
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".tritonserver-", dir=directory.parent))
    try:
        source = Path(wheel) if wheel is not None else _download(staging / "wheel", progress)
        say(progress, f"unpacking the server from {source.name} (about 150 MB)")
        _unpack(source, staging / "tree")
        atomic_write(staging / "tree" / _RECORD, json.dumps({
            "wheel": source.name, "version": version,
            "installed_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}, indent=2) + "\n")
        replace_dir(staging / "tree", directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    say(progress, f"installed tritonserver 2.51 (from {name} {version}) in {directory}")
    return directory


def _download(dest: Path, progress: Progress | None) -> Path:
    """Fetch the wheel alone (no dependencies: its numpy<2 pin never reaches this environment)."""
    name, version = BUNDLED_WHEEL
    dest.mkdir(parents=True)
    say(progress, f"downloading {name} {version} with pip (the server's files only; about 120 MB)")
    proc = run_step([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                     "--platform", _PLATFORM, "--disable-pip-version-check", "-q", "-d", str(dest),
                     f"{name}=={version}"], timeout_s=900)
    wheels = sorted(dest.glob("nvidia_pytriton-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise MissingComponentError(
            f"pip could not download {name}=={version}: {tail(proc.stderr or proc.stdout)}",
            hint="check access to PyPI, or pass a downloaded wheel: tritonkit install server --wheel FILE")
    return wheels[0]


def _unpack(wheel: Path, tree: Path) -> None:
    """The server's members of ``wheel`` under ``tree``, with their permissions (zipfile drops them)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            members = [info for info in archive.infolist() if info.filename.startswith(_MEMBERS)
                       and "__pycache__" not in info.filename and ".." not in Path(info.filename).parts]
            if not any(info.filename.endswith("bin/tritonserver") for info in members):
                raise MissingComponentError(f"{wheel} holds no tritonserver binary: it is not {BUNDLED_WHEEL[0]} "
                                            f"{BUNDLED_WHEEL[1]}", hint="pass that version's wheel, or no --wheel")
            for info in members:
                target = Path(archive.extract(info, tree))
                if not info.is_dir():  # executables stay executable; nothing is left writable by others
                    target.chmod(0o755 if (info.external_attr >> 16) & stat.S_IXUSR else 0o644)
    except (zipfile.BadZipFile, OSError) as exc:
        raise MissingComponentError(f"cannot unpack {wheel}: {exc}",
                                    hint="download it again (tritonkit install server --force)") from exc
