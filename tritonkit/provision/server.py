"""Find a tritonserver binary and assemble what it needs to run here.

The default is the real Triton Inference Server shipped inside the
``nvidia-pytriton`` wheel (extra ``server``). Any other build (a production
install, an NGC container's ``/opt/tritonserver``) is used by path, given as an
argument or in ``TRITONKIT_SERVER_BIN``.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tritonkit._fs import is_regular_file, shown_path
from tritonkit.errors import MissingComponentError

__all__ = ["SERVER_BIN_ENV", "ServerInstall", "locate_server", "model_python_env"]

#: Environment variable naming another tritonserver binary to use.
SERVER_BIN_ENV = "TRITONKIT_SERVER_BIN"

_INSTALL_HINT = "pip install 'tritonkit[server]' (or run scripts/demo), or pass --server-bin PATH"


@dataclass(frozen=True)
class ServerInstall:
    """Where a tritonserver lives and what it needs to start.

    ``backend_dir`` is the folder passed as ``--backend-directory``; for the
    bundled server it is assembled on first use (see ``_assemble_bundled_backends``).
    """

    binary: Path
    backend_dir: Path
    lib_dirs: tuple[Path, ...] = ()
    source: str = "nvidia-pytriton"
    notes: tuple[str, ...] = field(default=())

    def backends(self) -> list[str]:
        """Backends this server can load: folders holding ``libtriton_<name>.so`` or a ``model.py`` backend."""
        names = []
        if self.backend_dir.is_dir():
            for entry in sorted(self.backend_dir.iterdir()):
                if entry.is_dir() and (
                    (entry / f"libtriton_{entry.name}.so").exists() or (entry / "model.py").exists()
                ):
                    names.append(entry.name)
        return names


def model_python_env() -> dict[str, str]:
    """The environment variables that make python-backend models run in *this* interpreter's environment.

    The python-backend stub embeds libpython and finds its prefix through the
    ``python3`` first on ``PATH``; ``PYTHONPATH`` and ``VIRTUAL_ENV`` are not honoured.
    So the running interpreter's ``bin/`` goes first on ``PATH``, and its
    ``LIBDIR`` (which holds ``libpython3.X.so``) goes on ``LD_LIBRARY_PATH``.
    """
    bin_dir = str(Path(sys.executable).parent)
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    return {"PATH": bin_dir, "LD_LIBRARY_PATH": libdir}


def locate_server(server_bin: str | os.PathLike[str] | None = None, *, backend_dir: Path | None = None) -> ServerInstall:
    """Return the tritonserver to run: ``server_bin``, else ``$TRITONKIT_SERVER_BIN``, else the bundled one.

    Raises ``MissingComponentError`` with the install command when none is found.
    """
    chosen = server_bin or os.environ.get(SERVER_BIN_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        source = "--server-bin" if server_bin else SERVER_BIN_ENV
        if not is_regular_file(path) or not os.access(path, os.X_OK):
            raise MissingComponentError(
                f"tritonserver binary {shown_path(path)} (from {source}) does not exist or is not executable",
                hint="point it at an executable tritonserver, e.g. /opt/tritonserver/bin/tritonserver",
            )
        # A standard install keeps backends in <prefix>/backends next to bin/.
        backends = backend_dir or path.resolve().parent.parent / "backends"
        return ServerInstall(binary=path, backend_dir=backends, source=source)
    return _bundled_server(backend_dir)


def _bundled_server(backend_dir: Path | None) -> ServerInstall:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise MissingComponentError("no tritonserver found: nvidia-pytriton is not installed", hint=_INSTALL_HINT)
    root = Path(next(iter(spec.submodule_search_locations))) / "tritonserver"
    binary = root / "bin" / "tritonserver"
    libs = root.parent.parent / "nvidia_pytriton.libs"
    if not binary.is_file():
        raise MissingComponentError(f"nvidia-pytriton is installed but {binary} is missing", hint=_INSTALL_HINT)
    backends = backend_dir or _assemble_bundled_backends(root)
    notes = (f"python backend stub for Python {sys.version_info.major}.{sys.version_info.minor}",)
    return ServerInstall(
        binary=binary,
        backend_dir=backends,
        lib_dirs=(libs,) if libs.is_dir() else (),
        source="nvidia-pytriton",
        notes=notes,
    )


def _assemble_bundled_backends(root: Path) -> Path:
    """Build (once) a backend folder: the python backend plus the stub for this Python version.

    nvidia-pytriton ships one stub per Python version beside the backend; Triton
    looks for ``triton_python_backend_stub`` next to ``libtriton_python.so``.
    The folder is cached per server build and Python version, and made atomically.
    """
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    source = root / "backends" / "python"
    stub = root / "python_backend_stubs" / pyver / "triton_python_backend_stub"
    if not stub.is_file():
        raise MissingComponentError(
            f"the bundled tritonserver has no python-backend stub for Python {pyver} ({stub})",
            hint="use a Python version nvidia-pytriton ships a stub for (3.8–3.13)",
        )
    key = hashlib.sha256(f"{root.resolve()}|{stub.stat().st_mtime_ns}|{pyver}".encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tritonkit" / "backends"
    target = cache / f"{key}-py{pyver}"
    if (target / "python" / "triton_python_backend_stub").is_file():
        return target
    cache.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".backends-", dir=cache))
    try:
        python_dir = staging / "python"
        shutil.copytree(source, python_dir, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copy2(stub, python_dir / "triton_python_backend_stub")
        try:
            os.replace(staging, target)
        except OSError:
            # Another process assembled it first; theirs is as good as ours.
            if not (target / "python" / "triton_python_backend_stub").is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
