"""Prometheus and promtool from Debian's own package, in a private folder; checking rule files.

``install_prometheus`` fetches the ``prometheus`` package of *this machine's* Debian release
(2.42 on Debian 12; the binaries link the system's glibc, so the release must match) with
``apt-get download`` against a private sources list, state and cache, and unpacks it with
``dpkg-deb -x`` into ``<sys.prefix>/share/tritonkit/prometheus/``. Nothing is installed on the
system, no apt state outside that folder changes, and no service starts.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tritonkit._fs import atomic_write
from tritonkit.deploy._tools import Progress, run_step, share_dir
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.provision._glibc_runtime import private_apt_options
from tritonkit.provision.perf_analyzer import DEBIAN_MIRROR_ENV, debian_archive_uri

__all__ = [
    "PROMETHEUS_DIR_ENV",
    "PrometheusInstall",
    "PromtoolResult",
    "check_rules",
    "default_prometheus_dir",
    "install_prometheus",
    "locate_prometheus",
    "run_rule_tests",
]

#: Folder holding ``usr/bin/prometheus`` and ``usr/bin/promtool`` (overrides the default).
PROMETHEUS_DIR_ENV = "TRITONKIT_PROMETHEUS_DIR"

@dataclass(frozen=True)
class PrometheusInstall:
    """Where ``prometheus`` and ``promtool`` are, and which version."""

    prometheus: Path
    promtool: Path
    version: str
    source: str

    def describe(self) -> str:
        """One line for people."""
        return f"prometheus {self.version}: {self.prometheus} (promtool {self.promtool}; {self.source})"


def default_prometheus_dir(prefix: str | os.PathLike[str] | None = None) -> Path:
    """``<prefix>/share/tritonkit/prometheus`` (prefix: this environment's ``sys.prefix``)."""
    return share_dir("prometheus", prefix)


def _version(promtool: Path) -> str:
    try:
        proc = subprocess.run([str(promtool), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return ""
    first = (proc.stdout or proc.stderr).strip().splitlines()
    return first[0].split("version", 1)[-1].split()[0] if first and "version" in first[0] else ""


def _from_dir(root: Path, source: str) -> PrometheusInstall | None:
    prometheus, promtool = root / "usr" / "bin" / "prometheus", root / "usr" / "bin" / "promtool"
    if prometheus.is_file() and promtool.is_file():
        version = _version(promtool)
        if version:
            return PrometheusInstall(prometheus, promtool, version, source)
    return None


def locate_prometheus() -> PrometheusInstall:
    """The private install (or ``$TRITONKIT_PROMETHEUS_DIR``), else ``prometheus``/``promtool`` on PATH."""
    override = os.environ.get(PROMETHEUS_DIR_ENV)
    if override:
        found = _from_dir(Path(override), f"${PROMETHEUS_DIR_ENV}")
        if found is None:
            raise MissingComponentError(
                f"${PROMETHEUS_DIR_ENV}={override} holds no working usr/bin/prometheus and usr/bin/promtool",
                hint="unset it, or point it at an unpacked prometheus package; or run: tritonkit deploy install-prometheus",
            )
        return found
    found = _from_dir(default_prometheus_dir(), "private copy of Debian's package")
    if found is not None:
        return found
    on_path = shutil.which("promtool"), shutil.which("prometheus")
    if on_path[0] and on_path[1]:
        promtool = Path(on_path[0])
        return PrometheusInstall(Path(on_path[1]), promtool, _version(promtool) or "unknown", "PATH")
    raise MissingComponentError(
        "Prometheus (prometheus and promtool) is not installed in this environment",
        hint="run: tritonkit deploy install-prometheus  (Debian's package, unpacked privately; scripts/test does it)",
    )


def _release_codename() -> str:
    """This machine's Debian codename (its binaries must match the system's glibc), else ``stable``."""
    try:
        for line in Path("/etc/os-release").read_text(encoding="utf-8").splitlines():
            if line.startswith("VERSION_CODENAME=") and line.split("=", 1)[1].strip('"'):
                return line.split("=", 1)[1].strip('"')
    except OSError:
        pass
    return "stable"



def install_prometheus(*, force: bool = False, progress: Progress | None = None,
                       target: Path | None = None) -> PrometheusInstall:
    """Fetch and unpack Debian's ``prometheus`` package privately; quick when already there."""
    root = target or default_prometheus_dir()
    if not force:
        found = _from_dir(root, "private copy of Debian's package")
        if found is not None:
            return found
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise MissingComponentError(
                f"'{tool}' is not available to fetch Debian's prometheus package",
                hint=f"install prometheus and promtool yourself and set {PROMETHEUS_DIR_ENV} to the folder "
                     "holding usr/bin/prometheus and usr/bin/promtool",
            )
    say = progress or (lambda _message: None)
    staging = root.with_name(root.name + ".staging")
    shutil.rmtree(staging, ignore_errors=True)
    apt_dir = staging / "apt"
    for sub in ("state/lists/partial", "cache/archives/partial", "debs"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    uri, codename = debian_archive_uri(), _release_codename()
    (apt_dir / "sources.list").write_text(f"deb [arch=amd64] {uri} {codename} main\n")
    options = private_apt_options(apt_dir)
    hint = f"check network access to {uri}, or set {DEBIAN_MIRROR_ENV} to a reachable Debian mirror"
    say(f"fetching the Debian {codename} package index from {uri} (private apt state in {apt_dir})")
    run_step(["apt-get", *options, "-q", "update"], f"apt-get update against {uri} (private state)", hint)
    say("downloading the prometheus package")
    run_step(["apt-get", *options, "-q", "download", "prometheus"], "apt-get download prometheus", hint,
             cwd=apt_dir / "debs")
    debs = sorted((apt_dir / "debs").glob("prometheus_*.deb"))
    if not debs:
        raise MissingComponentError("apt-get download prometheus produced no .deb", hint=hint)
    unpacked = staging / "root"
    run_step(["dpkg-deb", "-x", str(debs[0]), str(unpacked)], f"dpkg-deb -x {debs[0].name}", hint)
    found = _from_dir(unpacked, "private copy of Debian's package")
    if found is None:
        raise MissingComponentError(f"{debs[0].name} unpacked, but its promtool does not run here",
                                    hint=f"set {PROMETHEUS_DIR_ENV} to a working prometheus install")
    atomic_write(unpacked / "install.json", json.dumps(
        {"package": debs[0].name, "version": found.version, "archive": f"{uri} {codename}"}, indent=2) + "\n")
    # Swap in whole, so a reader never sees half an install.
    shutil.rmtree(root, ignore_errors=True)
    unpacked.rename(root)
    shutil.rmtree(staging, ignore_errors=True)
    installed = _from_dir(root, "private copy of Debian's package")
    assert installed is not None  # just checked in the staging folder
    say(installed.describe())
    return installed


@dataclass(frozen=True)
class PromtoolResult:
    """What ``promtool`` said about a file."""

    ok: bool
    output: str


def _promtool(args: list[str], install: PrometheusInstall | None, cwd: Path | None = None) -> PromtoolResult:
    tool = (install or locate_prometheus()).promtool
    proc = subprocess.run([str(tool), *args], capture_output=True, text=True, timeout=120, cwd=cwd, check=False)
    return PromtoolResult(proc.returncode == 0, (proc.stdout + proc.stderr).strip())


def check_rules(path: str | Path, install: PrometheusInstall | None = None) -> PromtoolResult:
    """``promtool check rules --lint=all --lint-fatal PATH``: syntax, and no duplicate rules."""
    if not Path(path).is_file():
        raise ConfigError(f"rule file {path} does not exist")
    return _promtool(["check", "rules", "--lint=all", "--lint-fatal", str(path)], install)


def run_rule_tests(path: str | Path, install: PrometheusInstall | None = None) -> PromtoolResult:
    """``promtool test rules PATH`` (rule files it names are relative to its folder)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"rule test file {path} does not exist")
    return _promtool(["test", "rules", p.name], install, cwd=p.parent)
