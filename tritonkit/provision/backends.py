"""A server's backends folder: what is in it, which version each backend is, and the python backend beside it.

Triton loads backend ``NAME`` from ``<backend-directory>/NAME/libtriton_NAME.so`` (or a python-based
backend's ``model.py``). The bundled server has only the python backend; a user brings the others
in a folder of their own (an NGC container's ``/opt/tritonserver/backends``), named with
``--backend-dir`` or ``TRITONKIT_BACKEND_DIR``. Versions are read from the backend's own files,
never guessed: the onnxruntime backend's ONNX Runtime from its ``libonnxruntime.so`` (the library's
own ``OrtGetApiBase()->GetVersionString()``, asked in a child process; else the versioned file name
the backend's build links, ``libonnxruntime.so.1.19.2``), a python backend's Python from the
``libpython`` its stub embeds.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from tritonkit._fs import atomic_folder

__all__ = [
    "BACKEND_DIR_ENV",
    "BackendInfo",
    "backend_info",
    "backend_names",
    "onnxruntime_library_version",
    "with_python_backend",
]

#: Environment variable naming the folder of backends a server loads (as ``--backend-dir``).
BACKEND_DIR_ENV = "TRITONKIT_BACKEND_DIR"

_ORT_FILE = re.compile(r"^libonnxruntime\.so\.(\d+\.\d+\.\d+)$")
_LIBPYTHON = re.compile(rb"libpython(\d+\.\d+)")

# Asks the library itself: OrtGetApiBase() returns {GetApi, GetVersionString} (onnxruntime_c_api.h).
_ORT_PROBE = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
class Base(ctypes.Structure):
    _fields_ = [("GetApi", ctypes.c_void_p), ("GetVersionString", ctypes.CFUNCTYPE(ctypes.c_char_p))]
lib.OrtGetApiBase.restype = ctypes.POINTER(Base)
print(lib.OrtGetApiBase().contents.GetVersionString().decode())
"""


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
        found = onnxruntime_library_version(path)
        if found is None:
            return BackendInfo(name, path, how="no libonnxruntime.so whose version could be read")
        version, how = found
        return BackendInfo(name, path, "ONNX Runtime", version, how)
    if name == "python":
        stub = path / "triton_python_backend_stub"
        python = _stub_python(stub)
        if python is None:
            how = "no triton_python_backend_stub" if not stub.is_file() else "its stub names no libpython"
            return BackendInfo(name, path, how=how)
        return BackendInfo(name, path, "Python", python, "the libpython its stub embeds")
    return BackendInfo(name, path, how="version not in its files")


def onnxruntime_library_version(folder: Path) -> tuple[str, str] | None:
    """The ONNX Runtime version of the ``libonnxruntime.so`` in ``folder`` and how it was read, or ``None``."""
    if not folder.is_dir():
        return None
    candidates = sorted(p for p in folder.iterdir() if p.name == "libonnxruntime.so" or _ORT_FILE.match(p.name))
    for library in candidates:
        asked = _ask_library(str(library.resolve()), library.stat().st_mtime_ns)
        if asked is not None:
            return asked, f"{library.name}: the library's own version string"
    for library in candidates:
        named = _ORT_FILE.match(library.name)
        if named is not None:
            return named.group(1), f"the file name {library.name}"
    return None


@functools.lru_cache(maxsize=32)
def _ask_library(path: str, _mtime_ns: int) -> str | None:
    """``GetVersionString()`` of the ONNX Runtime library at ``path``, asked in a child process (a library
    loaded into this one would stay, beside the onnxruntime Python package's own)."""
    try:
        done = subprocess.run([sys.executable, "-c", _ORT_PROBE, path], capture_output=True, text=True,
                              timeout=60, check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = done.stdout.strip()
    return text if done.returncode == 0 and re.fullmatch(r"\d+\.\d+\.\d+\S*", text) else None


def _stub_python(stub: Path) -> str | None:
    """The Python version (``3.11``) whose libpython the python-backend stub links."""
    try:
        data = stub.read_bytes()
    except OSError:
        return None
    found = _LIBPYTHON.search(data)
    return found.group(1).decode() if found else None


def with_python_backend(backends: Path, python_backend: Path, cache: Path) -> Path:
    """A folder (under ``cache``, made once per content) holding every backend of ``backends`` and, as
    ``python``, ``python_backend``: the bundled server's python backend, whose stub runs this interpreter,
    beside a user's backends. A ``python`` backend in ``backends`` is left out: its stub embeds the
    Python it was built for (an NGC container's), which is not the one models here run in."""
    source = backends.resolve()
    entries = [name for name in backend_names(source) if name != "python"]
    key = hashlib.sha256(f"{source}|{python_backend}|{','.join(entries)}".encode()).hexdigest()[:16]

    def fill(staging: Path) -> None:
        for name in entries:
            os.symlink(source / name, staging / name, target_is_directory=True)
        os.symlink(python_backend, staging / "python", target_is_directory=True)
    return atomic_folder(cache / f"with-python-{key}", fill, ready=lambda at: (at / "python").exists(),
                         prefix=".merge-")
