"""Provision the real perf_analyzer into this Python environment, and find it again.

``pip install perf-analyzer`` on Python < 3.12 resolves to a placeholder; the real binary is in
the ``perf-analyzer`` wheels tagged ``manylinux_2_38_x86_64`` (``perf_analyzer/bin/perf_analyzer``
inside the zip). It needs glibc >= 2.38 and a libstdc++ with GLIBCXX_3.4.32, and links the
system's libssl 3, libcrypto 3 and zlib. ``install_perf_analyzer`` therefore:

1. takes the binary out of the wheel (downloaded with this interpreter's pip, or given);
2. runs it as is when it works here (Debian 13, any glibc >= 2.38 system): mode ``native``;
3. otherwise (Debian 12, glibc 2.36) fetches Debian stable's ``libc6``, ``libstdc++6`` and
   ``libgcc-s1`` (plus ``libssl3t64`` / ``zlib1g`` only when the system lacks them) with
   ``apt-get download`` against a *private* sources list, state and cache folder, unpacks them
   with ``dpkg-deb -x`` into a private folder and runs the binary through that folder's
   loader: mode ``private-runtime`` (see :mod:`tritonkit.provision._glibc_runtime`). The
   system's libraries and apt state are never touched.

Everything lands in ``<sys.prefix>/share/tritonkit/perf_analyzer/`` with an ``install.json``
record and a ``perf_analyzer`` wrapper script. Re-running is fast (the record is checked,
the binary asked for its version). ``--perf-analyzer PATH`` or ``$TRITONKIT_PERF_ANALYZER``
selects another build instead (an SDK container's, for instance).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, expand_user, is_regular_file, shown_path
from tritonkit.errors import MissingComponentError, PerfError
from tritonkit.provision._glibc_runtime import (
    DEBIAN_MIRROR_ENV,
    debian_archive_uri,
    loader_argv,
    loader_layout,
    provision_runtime,
)
from tritonkit.provision._steps import INSTALL_HINT, Progress, replace_dir, run_step, say, tail

__all__ = [
    "DEBIAN_MIRROR_ENV",
    "PERF_ANALYZER_ENV",
    "PERF_ANALYZER_VERSION",
    "PerfAnalyzerInstall",
    "debian_archive_uri",
    "default_install_dir",
    "install_perf_analyzer",
    "locate_perf_analyzer",
]

#: Environment variable naming another perf_analyzer (binary or wrapper script) to run.
PERF_ANALYZER_ENV = "TRITONKIT_PERF_ANALYZER"
#: The perf-analyzer wheel version ``install_perf_analyzer`` fetches by default.
PERF_ANALYZER_VERSION = "2.60.0"

_WHEEL_PLATFORM = "manylinux_2_38_x86_64"
_WHEEL_MEMBER = "perf_analyzer/bin/perf_analyzer"
_RECORD = "install.json"
_RECORD_SCHEMA = 1


@dataclass(frozen=True)
class PerfAnalyzerInstall:
    """How to run perf_analyzer here: ``argv`` is the prefix to put before its options.

    ``source``: ``"--perf-analyzer"``, ``"TRITONKIT_PERF_ANALYZER"`` or ``"installed"``;
    ``mode``: ``"native"``, ``"private-runtime"`` (through a private glibc loader) or
    ``"external"`` (a user-supplied build, run as given).
    """

    argv: tuple[str, ...]
    source: str
    mode: str
    binary: Path
    version: str | None = None
    install_dir: Path | None = None
    notes: tuple[str, ...] = field(default=())

    def describe(self) -> str:
        """One line for ``doctor``: which perf_analyzer runs and how."""
        how = {
            "native": "runs natively",
            "private-runtime": "runs through a private glibc/libstdc++ loader; system libraries untouched",
            "external": "run as given",
        }.get(self.mode, self.mode)
        version = f" {self.version}" if self.version else ""
        return f"perf_analyzer{version} ({self.source}) at {self.binary}: {how}"

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``tritonkit perf install --json``)."""
        return {"binary": str(self.binary), "argv": list(self.argv), "mode": self.mode, "version": self.version,
                "source": self.source, "install_dir": str(self.install_dir) if self.install_dir else None}


def default_install_dir(prefix: str | os.PathLike[str] | None = None) -> Path:
    """``<prefix>/share/tritonkit/perf_analyzer`` (prefix: this environment's ``sys.prefix``)."""
    return Path(prefix or sys.prefix) / "share" / "tritonkit" / "perf_analyzer"


def _probe_version(argv: Sequence[str]) -> tuple[bool, str]:
    """(works, version-or-error) for a perf_analyzer argv prefix."""
    try:
        proc = subprocess.run(
            [*argv, "--version"], capture_output=True, text=True, timeout=30, check=False,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    text = (proc.stdout + proc.stderr).strip()
    if proc.returncode == 0 and "Perf Analyzer" in text:
        return True, text.splitlines()[-1].strip()
    return False, text[-500:] or f"exit status {proc.returncode}"


def _read_record(directory: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((directory / _RECORD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) and data.get("schema_version") == _RECORD_SCHEMA else None


def _from_record(directory: Path, record: dict[str, Any]) -> PerfAnalyzerInstall:
    return PerfAnalyzerInstall(
        argv=tuple(record["argv"]),
        source="installed",
        mode=str(record["mode"]),
        binary=Path(record["binary"]),
        version=record.get("version"),
        install_dir=directory,
        notes=tuple(record.get("notes") or ()),
    )


def locate_perf_analyzer(
    path: str | os.PathLike[str] | None = None,
    *,
    prefix: str | os.PathLike[str] | None = None,
    check: bool = False,
) -> PerfAnalyzerInstall:
    """Which perf_analyzer to run: ``path``, else ``$TRITONKIT_PERF_ANALYZER``, else the installed one.

    ``check=True`` also runs ``--version`` and raises ``MissingComponentError`` if it fails.
    Raises ``MissingComponentError`` (hint: ``tritonkit perf install``) when none is found.
    """
    chosen = path or os.environ.get(PERF_ANALYZER_ENV)
    if chosen:
        source = "--perf-analyzer" if path else PERF_ANALYZER_ENV
        binary = expand_user(chosen)
        if not is_regular_file(binary) or not os.access(binary, os.X_OK):
            raise MissingComponentError(
                f"perf_analyzer {shown_path(binary)} (from {source}) does not exist or is not executable",
                hint="point it at an executable perf_analyzer binary or wrapper script",
            )
        found = PerfAnalyzerInstall(argv=(str(binary.absolute()),), source=source, mode="external", binary=binary)
    else:
        directory = default_install_dir(prefix)
        record = _read_record(directory)
        if record is None:
            raise MissingComponentError(f"perf_analyzer is not installed in {directory}", hint=INSTALL_HINT)
        found = _from_record(directory, record)
        missing = [p for p in (found.binary, Path(found.argv[0])) if not p.exists()]
        if missing:
            raise MissingComponentError(
                f"perf_analyzer install in {directory} is incomplete ({missing[0]} is missing)",
                hint="run 'tritonkit perf install --force'",
            )
    if check:
        works, detail = _probe_version(found.argv)
        if not works:
            raise MissingComponentError(
                f"perf_analyzer ({found.describe()}) does not run here: {detail}",
                hint="run 'tritonkit perf install --force', or pass another build with --perf-analyzer",
            )
        if found.version is None:
            found = PerfAnalyzerInstall(
                argv=found.argv, source=found.source, mode=found.mode, binary=found.binary,
                version=detail, install_dir=found.install_dir, notes=found.notes,
            )
    return found


def install_perf_analyzer(
    *,
    version: str = PERF_ANALYZER_VERSION,
    prefix: str | os.PathLike[str] | None = None,
    wheel: str | os.PathLike[str] | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> PerfAnalyzerInstall:
    """Install perf_analyzer ``version`` into ``<prefix>/share/tritonkit/perf_analyzer`` (idempotent).

    ``wheel`` installs from a local ``perf_analyzer-*.whl`` instead of downloading one.
    Returns how to run it; raises ``MissingComponentError`` / ``PerfError`` with the failing step.
    """
    directory = default_install_dir(prefix)
    record = _read_record(directory)
    wanted = _wheel_version(Path(wheel)) if wheel is not None else version
    if record is not None and not force and record.get("wheel_version") == wanted:
        existing = _from_record(directory, record)
        if existing.binary.is_file() and _probe_version(existing.argv)[0]:
            say(progress, f"perf_analyzer already installed: {existing.describe()}")
            return existing
    directory.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".perf_analyzer-", dir=directory.parent))
    try:
        wheel_path = Path(wheel) if wheel is not None else _download_wheel(version, staging / "wheel", progress)
        wheel_version = _wheel_version(wheel_path)
        binary = staging / "bin" / "perf_analyzer"
        _extract_binary(wheel_path, binary)
        final_binary = directory / "bin" / "perf_analyzer"
        notes: list[str] = []
        native_ok, native_detail = _probe_version([str(binary)])
        if native_ok:
            say(progress, "perf_analyzer runs natively here")
            mode = "native"
            argv_final = [str(final_binary)]
            packages: dict[str, str] = {}
            binary_version = native_detail
        else:
            say(progress, f"perf_analyzer does not run natively here ({_why_not_native(native_detail)})")
            mode = "private-runtime"
            runtime = staging / "runtime"
            packages = provision_runtime(binary, runtime, staging / "apt", progress)
            loader_rel, libpath_rel = loader_layout(runtime)
            ok, binary_version = _probe_version(loader_argv(runtime, loader_rel, libpath_rel, binary))
            if not ok:
                raise PerfError(
                    f"perf_analyzer does not start even through the private runtime: {binary_version}",
                    hint="pass a perf_analyzer that runs here with --perf-analyzer PATH",
                )
            argv_final = loader_argv(directory / "runtime", loader_rel, libpath_rel, final_binary)
            notes.append("system libraries and apt state untouched; runtime from Debian stable")
        shutil.rmtree(staging / "apt", ignore_errors=True)
        shutil.rmtree(staging / "wheel", ignore_errors=True)
        wrapper = staging / "perf_analyzer"
        wrapper.write_text("#!/bin/sh\n# Written by 'tritonkit perf install'.\nexec " + shlex.join(argv_final) + ' "$@"\n')
        wrapper.chmod(0o755)
        new_record = {
            "schema_version": _RECORD_SCHEMA,
            "wheel_version": wheel_version,
            "version": wheel_version,
            "binary_version": binary_version,
            "mode": mode,
            "binary": str(final_binary),
            "argv": argv_final,
            "wrapper": str(directory / "perf_analyzer"),
            "runtime_packages": packages,
            "glibc": os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else None,
            "installed_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "notes": notes,
        }
        atomic_write(staging / _RECORD, json.dumps(new_record, indent=2) + "\n")
        replace_dir(staging, directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    installed = _from_record(directory, new_record)
    say(progress, f"installed {installed.describe()}")
    return installed


def _why_not_native(detail: str) -> str:
    """The loader's complaint in a few words, e.g. "needs GLIBC_2.38, GLIBCXX_3.4.32"."""
    versions = sorted(set(re.findall(r"version `([^']+)' not found", detail)))
    if versions:
        return "needs " + ", ".join(versions)
    libs = sorted(set(re.findall(r"(\S+\.so[.\d]*): cannot open shared object file", detail)))
    if libs:
        return "lacks " + ", ".join(libs)
    lines = detail.strip().splitlines()
    return lines[-1][-200:] if lines else "no output"


def _download_wheel(version: str, dest: Path, progress: Progress | None) -> Path:
    """Fetch the manylinux_2_38 wheel with this interpreter's pip (any Python version may run this)."""
    dest.mkdir(parents=True, exist_ok=True)
    say(progress, f"downloading perf-analyzer {version} ({_WHEEL_PLATFORM} wheel) with pip")
    argv = [
        sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
        # WAR: the real binary is only in wheels that declare Requires-Python >= 3.12; on other
        # versions pip resolves the 2 KB placeholder. The binary itself does not use Python.
        "--python-version", "3.12", "--platform", _WHEEL_PLATFORM,
        "--disable-pip-version-check", "-q", "-d", str(dest), f"perf-analyzer=={version}",
    ]
    proc = run_step(argv, timeout_s=600)
    wheels = sorted(dest.glob("perf_analyzer-*.whl"))
    if proc.returncode != 0 or not wheels:
        raise MissingComponentError(
            f"pip could not download perf-analyzer=={version}: {tail(proc.stderr or proc.stdout)}",
            hint="check network access to PyPI, or pass a downloaded wheel: tritonkit perf install --wheel FILE",
        )
    return wheels[0]


def _wheel_version(wheel: Path) -> str:
    match = re.match(r"perf_analyzer-([^-]+)-", wheel.name)
    return match.group(1) if match else "unknown"


def _extract_binary(wheel: Path, target: Path) -> None:
    try:
        with zipfile.ZipFile(wheel) as archive:
            try:
                data = archive.read(_WHEEL_MEMBER)
            except KeyError as exc:
                raise MissingComponentError(
                    f"{wheel} has no {_WHEEL_MEMBER}: it is not a wheel with the real binary "
                    "(the Python < 3.12 placeholder?)",
                    hint=f"use a perf_analyzer-*-{_WHEEL_PLATFORM}.whl",
                ) from exc
    except (OSError, zipfile.BadZipFile) as exc:
        raise MissingComponentError(f"cannot read wheel {wheel}: {exc}", hint="download it again") from exc
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)
    target.chmod(0o755)
