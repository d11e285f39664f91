"""A server's backends folder: what is in it, which version each backend is, and the python backend beside it.

Triton loads backend ``NAME`` from ``<backend-directory>/NAME/libtriton_NAME.so`` (or a python-based
backend's ``model.py``). The bundled server has only the python backend; a user brings the others
in a folder of their own (an NGC container's ``/opt/tritonserver/backends``), named with
``--backend-dir`` or ``TRITONKIT_BACKEND_DIR``. Versions are read from the backend's own files,
never guessed, and never by running them (a library's constructors run when it is loaded): the
onnxruntime backend's ONNX Runtime from its ``libonnxruntime.so``'s symbol version (``VERS_1.19.2``,
see ``_ORT_SYMBOL_VERSION``), else the versioned file name the backend's build links
(``libonnxruntime.so.1.19.2``); a python backend's Python from the ``libpython`` its stub embeds. A
FIFO, a device or an oversized file in their place is not read: its version is unknown, and ``how`` says why.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tritonkit._fs import atomic_folder, is_folder, is_regular_file, read_user_file
from tritonkit.errors import ConfigError
from tritonkit.provision._elf import symbol_versions

__all__ = [
    "BACKEND_DIR_ENV",
    "BackendInfo",
    "backend_info",
    "backend_names",
    "merged_folder",
    "onnxruntime_library_version",
    "python_backend_info",
    "with_python_backend",
]

#: Environment variable naming the folder of backends a server loads (as ``--backend-dir``).
BACKEND_DIR_ENV = "TRITONKIT_BACKEND_DIR"

_ORT_FILE = re.compile(r"^libonnxruntime\.so\.(\d+\.\d+\.\d+)$")
_LIBPYTHON = re.compile(rb"libpython(\d+\.\d+)")

#: ONNX Runtime's exported symbols are versioned after the release itself: its linker version script
#: opens ``VERS_<VERSION_NUMBER>`` (onnxruntime tools/ci_build/gen_def.py, from 1.x), the number its
#: ``GetVersionString()`` returns (``ORT_VERSION``). Only a version the library *defines* counts.
_ORT_SYMBOL_VERSION = re.compile(r"VERS_(\d+\.\d+\.\d+)")
_UNREAD_ORT = "no libonnxruntime.so whose version could be read"
_LIBRARY_HINT = "put the backend's own libonnxruntime.so there, a regular file"


@dataclass(frozen=True)
class BackendInfo:
    """One backend of a folder: its name, where it is, and what its files say about its version.

    ``runtime`` names the engine the backend runs when its files tell (``"ONNX Runtime"``,
    ``"Python"``), ``runtime_version`` that engine's version; ``how`` says how it was read, or why not.
    """

    name: str
    path: Path
    runtime: str | None = None
    runtime_version: str | None = None
    how: str = ""

    def describe(self) -> str:
        """``onnxruntime (ONNX Runtime 1.19.2)`` or ``tensorrt (version not in its files)``."""
        if self.runtime and self.runtime_version:
            return f"{self.name} ({self.runtime} {self.runtime_version})"
        return f"{self.name} ({self.how or 'version not in its files'})"

    def to_dict(self) -> dict[str, str | None]:
        """JSON-ready."""
        return {"name": self.name, "path": str(self.path), "runtime": self.runtime,
                "runtime_version": self.runtime_version, "how": self.how}


def backend_names(folder: Path) -> list[str]:
    """Backends in ``folder``: sub-folders holding ``libtriton_<name>.so`` or a python-based ``model.py``."""
    names = []
    if folder.is_dir():
        for entry in sorted(folder.iterdir()):
            if entry.is_dir() and ((entry / f"libtriton_{entry.name}.so").exists() or (entry / "model.py").exists()):
                names.append(entry.name)
    return names


def backend_info(folder: Path, name: str) -> BackendInfo:
    """What ``folder/name``'s files say about the backend's version."""
    path = folder / name
    if name == "onnxruntime":
        version, how = _read_onnxruntime(path)
        return BackendInfo(name, path, "ONNX Runtime" if version else None, version, how)
    if name == "python":
        return python_backend_info(path, path / "triton_python_backend_stub")
    return BackendInfo(name, path, how="version not in its files")


def python_backend_info(path: Path, stub: Path) -> BackendInfo:
    """The python backend at ``path`` whose ``stub`` (``triton_python_backend_stub``) embeds a libpython."""
    if not is_regular_file(stub):
        return BackendInfo("python", path, how="no triton_python_backend_stub")
    try:
        found = _LIBPYTHON.search(read_user_file(stub, what="python backend stub"))
    except ConfigError as exc:
        return BackendInfo("python", path, how=f"{exc.message}: not read")
    if found is None:
        return BackendInfo("python", path, how="its stub names no libpython")
    return BackendInfo("python", path, "Python", found.group(1).decode(), "the libpython its stub embeds")


def onnxruntime_library_version(folder: Path) -> tuple[str, str] | None:
    """The ONNX Runtime version of the ``libonnxruntime.so`` in ``folder`` and how it was read, or ``None``.

    Read from the library's file (its symbol version, else its versioned name), never by loading it."""
    version, how = _read_onnxruntime(folder)
    return (version, how) if version else None


def _read_onnxruntime(folder: Path) -> tuple[str | None, str]:
    """The ONNX Runtime version ``folder``'s library gives and how it was read, or ``None`` and why not."""
    if not is_folder(folder):
        return None, _UNREAD_ORT
    candidates = sorted(p for p in folder.iterdir() if p.name == "libonnxruntime.so" or _ORT_FILE.match(p.name))
    refused = []
    for library in candidates:
        try:
            defined = symbol_versions(library, what="ONNX Runtime library", hint=_LIBRARY_HINT)
        except ConfigError as exc:
            refused.append(f"{exc.message}: not read" + (f" ({exc.hint})" if exc.hint else ""))
            continue
        for name in defined:
            if (named := _ORT_SYMBOL_VERSION.fullmatch(name)) is not None:
                return named.group(1), f"{library.name}: the version string its symbols are defined under ({name})"
    for library in candidates:
        if (named := _ORT_FILE.match(library.name)) is not None:
            return named.group(1), f"the file name {library.name}"
    return None, "; ".join(refused) or _UNREAD_ORT


def with_python_backend(backends: Path, python_backend: Path, cache: Path) -> Path:
    """A folder (under ``cache``, made once per content, at :func:`merged_folder`) holding every backend of
    ``backends`` and, as ``python``, ``python_backend``: the bundled server's python backend, whose stub runs
    this interpreter, beside a user's backends. A ``python`` backend in ``backends`` is left out: its stub
    embeds the Python it was built for (an NGC container's), which is not the one models here run in."""
    source = backends.resolve()

    def fill(staging: Path) -> None:
        for name in _merged_entries(source):
            os.symlink(source / name, staging / name, target_is_directory=True)
        os.symlink(python_backend, staging / "python", target_is_directory=True)
    return atomic_folder(merged_folder(backends, python_backend, cache), fill,
                         ready=lambda at: (at / "python").exists(), prefix=".merge-")


def merged_folder(backends: Path, python_backend: Path, cache: Path) -> Path:
    """Where :func:`with_python_backend` makes its folder for these backends (a path: nothing is written)."""
    source = backends.resolve()
    key = hashlib.sha256(f"{source}|{python_backend}|{','.join(_merged_entries(source))}".encode()).hexdigest()[:16]
    return cache / f"with-python-{key}"


def _merged_entries(source: Path) -> list[str]:
    return [name for name in backend_names(source) if name != "python"]
