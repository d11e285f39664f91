"""Find a tritonserver binary and assemble what it needs to run here.

The default is the real Triton Inference Server shipped inside the ``nvidia-pytriton``
wheel, installed into a place of its own by ``tritonkit install server``
(:mod:`tritonkit.provision.bundled`; an importable ``pytriton`` is used when that is absent). Any
other build (a production install, an NGC container's ``/opt/tritonserver``) is used by path,
given as an argument or in ``TRITONKIT_SERVER_BIN``.

Its backends: the folder given (``backend_dir``, else ``TRITONKIT_BACKEND_DIR``), else the
``backends`` folder of the binary's own install prefix. The bundled server always gets the
python backend tritonkit assembles (its stub runs this interpreter) beside a user's backends, in
:func:`backends_cache`, written only when a server starts (:meth:`ServerInstall.assembled`): finding
a server and inspecting its backends reads files and writes none.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass, field, replace
from pathlib import Path

from tritonkit._fs import atomic_folder, expand_user, is_regular_file, shown_path
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.provision.backends import (
    BACKEND_DIR_ENV,
    BackendInfo,
    backend_info,
    backend_names,
    merged_folder,
    python_backend_info,
    with_python_backend,
)
from tritonkit.provision.bundled import bundled_dir, bundled_record

__all__ = ["BACKEND_DIR_ENV", "SERVER_BIN_ENV", "BackendAssembly", "ServerInstall", "backends_cache", "bundled_root",
           "locate_server", "model_python_env"]

#: Environment variable naming another tritonserver binary to use.
SERVER_BIN_ENV = "TRITONKIT_SERVER_BIN"

_INSTALL_HINT = "run 'tritonkit install server' (or scripts/demo), or pass --server-bin PATH"


def backends_cache() -> Path:
    """The one cache tritonkit keeps: ``$XDG_CACHE_HOME/tritonkit/backends`` (else ``~/.cache/…``), where
    the bundled server's backends folder is assembled when a server starts (docs/backends.md)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tritonkit" / "backends"


@dataclass(frozen=True)
class BackendAssembly:
    """The backends folder the bundled server needs, made only when it starts: its python backend with
    the stub for this Python (nvidia-pytriton ships one stub per Python version beside the backend;
    Triton looks for ``triton_python_backend_stub`` next to ``libtriton_python.so``), beside the
    backends of ``user_backends`` when a folder is named. Inspecting it reads those sources."""

    python_backend: Path
    stub: Path
    #: The python backend's folder in the cache: one per server build and Python version.
    name: str
    user_backends: Path | None = None

    def names(self) -> list[str]:
        """The backends the assembled folder holds."""
        return sorted({"python", *(backend_names(self.user_backends) if self.user_backends is not None else ())})

    def info(self, name: str) -> BackendInfo:
        """Backend ``name`` as its source files describe it."""
        if name == "python":
            return python_backend_info(self.python_backend, self.stub)
        return backend_info(self.user_backends or self.python_backend.parent, name)

    def folder(self, cache: Path) -> Path:
        """Where the folder is, or will be, under ``cache`` (nothing is written)."""
        python = cache / self.name
        return python if self.user_backends is None else merged_folder(self.user_backends, python / "python", cache)

    def build(self, cache: Path) -> Path:
        """The folder, made once under ``cache`` (atomically; cached per content)."""
        def fill(staging: Path) -> None:
            shutil.copytree(self.python_backend, staging / "python", ignore=shutil.ignore_patterns("__pycache__"))
            shutil.copy2(self.stub, staging / "python" / "triton_python_backend_stub")
        python = atomic_folder(cache / self.name, fill, prefix=".backends-",
                               ready=lambda at: (at / "python" / "triton_python_backend_stub").is_file())
        if self.user_backends is None:
            return python
        return with_python_backend(self.user_backends, python / "python", cache)


@dataclass(frozen=True)
class ServerInstall:
    """Where a tritonserver lives and what it needs to start.

    ``backend_dir`` is the folder passed as ``--backend-directory``; for the bundled server it is
    assembled (``assembly``, a user's backends beside its python backend) only when the server starts:
    :meth:`assembled` makes it. ``backends_from`` says where the backends came
    from (``--backend-dir DIR``, ``$TRITONKIT_BACKEND_DIR``, the install prefix, the bundle).
    """

    binary: Path
    backend_dir: Path
    lib_dirs: tuple[Path, ...] = ()
    source: str = "nvidia-pytriton"
    notes: tuple[str, ...] = field(default=())
    #: The server's version as known before it starts (``2.51``, ``2.68.0``), or ``None``:
    #: the bundled wheel's line, or an install's ``TRITON_VERSION`` file (see :func:`_install_version`).
    version: str | None = None
    backends_from: str = ""
    #: The bundled server's backends folder still to be made (``backend_dir`` names where); ``None`` once made.
    assembly: BackendAssembly | None = None

    def backends(self) -> list[str]:
        """Backends this server can load: folders holding ``libtriton_<name>.so`` or a ``model.py`` backend."""
        return self.assembly.names() if self.assembly is not None else backend_names(self.backend_dir)

    def backend_details(self) -> list[BackendInfo]:
        """Each backend with what its files say about its version (the onnxruntime backend's ONNX Runtime)."""
        return [self._info(name) for name in self.backends()]

    def backend(self, name: str) -> BackendInfo | None:
        """Backend ``name`` of this server with its version, or ``None`` when the server has none."""
        return self._info(name) if name in self.backends() else None

    def _info(self, name: str) -> BackendInfo:
        return self.assembly.info(name) if self.assembly is not None else backend_info(self.backend_dir, name)

    def assembled(self, cache: Path | None = None) -> ServerInstall:
        """This install with its backends folder made, under ``cache`` (default :func:`backends_cache`):
        what starting the server needs. Only a server's start calls it; inspecting never does."""
        if self.assembly is None:
            return self
        return replace(self, backend_dir=self.assembly.build(cache or backends_cache()), assembly=None)


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


def locate_server(server_bin: str | os.PathLike[str] | None = None, *,
                  backend_dir: str | os.PathLike[str] | None = None) -> ServerInstall:
    """Return the tritonserver to run: ``server_bin``, else ``$TRITONKIT_SERVER_BIN``, else the bundled one,
    with its backends: ``backend_dir``, else ``$TRITONKIT_BACKEND_DIR``, else its install prefix's.

    A binary reached through symbolic links keeps the backends of the prefix it was named in
    (``<prefix>/bin/tritonserver`` → ``<prefix>/backends``) when that prefix has them, else those of the
    first link target's prefix that does, down to the real file's. The bundled binary, however it
    is named, runs with its own libraries and the python backend tritonkit assembles beside the
    backends chosen. Raises ``MissingComponentError`` with the install command when no server is
    found, ``ConfigError`` when a named backends folder is not a folder.
    """
    chosen_backends, backends_from = _named_backends(backend_dir)
    chosen = server_bin or os.environ.get(SERVER_BIN_ENV)
    if chosen:
        path = expand_user(chosen)
        source = "--server-bin" if server_bin else SERVER_BIN_ENV
        if not is_regular_file(path) or not os.access(path, os.X_OK):
            raise MissingComponentError(
                f"tritonserver binary {shown_path(path)} (from {source}) does not exist or is not executable",
                hint="point it at an executable tritonserver, e.g. /opt/tritonserver/bin/tritonserver",
            )
        prefix_backends = _prefix_backends(path)
        bundled = bundled_root()
        if bundled is not None and path.resolve() == (bundled / "bin" / "tritonserver").resolve():
            # The bundled binary under another name: it still needs its libraries and the python stub.
            if chosen_backends is None and prefix_backends.resolve() != (bundled / "backends").resolve():
                chosen_backends, backends_from = prefix_backends, f"beside {path} ({prefix_backends})"
            return replace(_bundled_server(chosen_backends, backends_from), binary=path, source=source)
        if chosen_backends is None:
            chosen_backends, backends_from = prefix_backends, f"the install prefix of {path}"
        return ServerInstall(binary=path, backend_dir=chosen_backends, source=source, backends_from=backends_from,
                             version=_install_version(path))
    return _bundled_server(chosen_backends, backends_from)


def _named_backends(backend_dir: str | os.PathLike[str] | None) -> tuple[Path | None, str]:
    """The backends folder the caller or the environment names (checked), and which of them named it."""
    if backend_dir is not None:
        named, origin = expand_user(backend_dir), "--backend-dir"
    elif os.environ.get(BACKEND_DIR_ENV):
        named, origin = expand_user(os.environ[BACKEND_DIR_ENV]), f"${BACKEND_DIR_ENV}"
    else:
        return None, ""
    if not named.is_dir():
        raise ConfigError(f"backends folder {named} (from {origin}) is not a folder",
                          hint="name the folder that holds one sub-folder per backend, e.g. "
                               "/opt/tritonserver/backends in an NGC container")
    return named, f"{origin} {named}"


def _prefix_backends(binary: Path) -> Path:
    """``<prefix>/backends`` for ``<prefix>/bin/tritonserver``: the prefix the binary was named in when it
    has a backends folder, else each symbolic link's target's in turn, else the real file's."""
    hop = Path(os.path.abspath(binary))
    for _ in range(40):  # the kernel's own limit on links followed
        candidate = hop.parent.parent / "backends"
        if candidate.is_dir():
            return candidate
        if not hop.is_symlink():
            break
        hop = Path(os.path.abspath(hop.parent / os.readlink(hop)))
    return binary.resolve().parent.parent / "backends"


def bundled_root() -> Path | None:
    if bundled_record() is not None:
        return bundled_dir() / "pytriton" / "tritonserver"
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations))) / "tritonserver"


def _bundled_server(backend_dir: Path | None, backends_from: str = "") -> ServerInstall:
    root = bundled_root()
    if root is None:
        raise MissingComponentError("no tritonserver found: the bundled server is not installed", hint=_INSTALL_HINT)
    binary = root / "bin" / "tritonserver"
    libs = root.parent.parent / "nvidia_pytriton.libs"
    if not binary.is_file():
        raise MissingComponentError(f"the bundled server is installed but {binary} is missing", hint=_INSTALL_HINT)
    assembly = _bundled_assembly(root, backend_dir)
    if backend_dir is None:
        backends_from = "assembled by tritonkit (the bundled python backend)"
    else:
        replaced = "python" in backend_names(backend_dir)
        backends_from += (", with tritonkit's python backend in place of theirs (its stub runs this interpreter)"
                          if replaced else ", beside tritonkit's python backend")
    notes = (f"python backend stub for Python {sys.version_info.major}.{sys.version_info.minor}",)
    return ServerInstall(
        binary=binary,
        backend_dir=assembly.folder(backends_cache()),
        lib_dirs=(libs,) if libs.is_dir() else (),
        source="nvidia-pytriton",
        notes=notes,
        version=_bundled_version(),
        backends_from=backends_from,
        assembly=assembly,
    )


def _bundled_version() -> str | None:
    """The tritonserver line the installed nvidia-pytriton wheel bundles, when tritonkit knows it."""
    import importlib.metadata

    from tritonkit.triton_releases import PYTRITON_SERVER_LINES

    record = bundled_record()
    try:
        wheel = record["version"] if record is not None else importlib.metadata.version("nvidia-pytriton")
        return PYTRITON_SERVER_LINES.get(wheel)
    except importlib.metadata.PackageNotFoundError:
        return None


def _install_version(binary: Path) -> str | None:
    """``<prefix>/TRITON_VERSION`` of a standard install (``<prefix>/bin/tritonserver``): the server's
    build.py copies that file into the install folder (/opt/tritonserver in the NGC images)."""
    try:
        text = (binary.resolve().parent.parent / "TRITON_VERSION").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return text or None


def _bundled_assembly(root: Path, user_backends: Path | None) -> BackendAssembly:
    """What the bundled server's backends folder is made of (checked, nothing written): its python backend,
    the stub for this Python version, and ``user_backends``; named per server build and Python version."""
    pyver = f"{sys.version_info.major}.{sys.version_info.minor}"
    stub = root / "python_backend_stubs" / pyver / "triton_python_backend_stub"
    if not stub.is_file():
        stubs = sorted((p.parent.name for p in stub.parent.parent.glob("*/triton_python_backend_stub") if p.is_file()),
                       key=lambda v: tuple(int(n) for n in v.split(".") if n.isdigit()))
        raise MissingComponentError(
            f"the bundled tritonserver cannot run python-backend models on Python {pyver}: its stubs are for "
            f"Python {', '.join(stubs) or 'none'}",
            hint=f"run tritonkit from a Python it supports ({stubs[0] if stubs else '3.8'}–"
                 f"{stubs[-1] if stubs else '3.13'}), or serve on another build with --server-bin "
                 "(an NGC container's /opt/tritonserver/bin/tritonserver)",
        )
    key = hashlib.sha256(f"{root.resolve()}|{stub.stat().st_mtime_ns}|{pyver}".encode()).hexdigest()[:16]
    return BackendAssembly(root / "backends" / "python", stub, f"{key}-py{pyver}", user_backends)
