"""A private glibc/libstdc++ runtime from Debian stable, for a perf_analyzer that needs a newer glibc.

``apt-get download`` runs against a *private* sources list, state and cache folder; the packages
are unpacked with ``dpkg-deb -x`` into a private folder and the binary runs through that folder's
loader. The system's libraries and apt state are never touched.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
from pathlib import Path

from tritonkit.errors import MissingComponentError, PerfError
from tritonkit.provision._steps import Progress, run_step, say, tail

__all__ = ["DEBIAN_MIRROR_ENV", "debian_archive_uri", "loader_argv", "loader_layout", "provision_runtime"]

#: Environment variable overriding the Debian archive the private runtime libraries come from.
DEBIAN_MIRROR_ENV = "TRITONKIT_DEBIAN_MIRROR"

_RUNTIME_PACKAGES = ("libc6", "libstdc++6", "libgcc-s1")
# Shared objects the binary links beyond the C/C++ runtime, and the Debian packages that
# provide them (newest name first: trixie renamed libssl3 for the 64-bit time_t transition).
_EXTRA_PROVIDERS: dict[str, tuple[str, ...]] = {
    "libssl.so.3": ("libssl3t64", "libssl3"),
    "libcrypto.so.3": ("libssl3t64", "libssl3"),
    "libz.so.1": ("zlib1g",),
}


def debian_archive_uri() -> str:
    """The Debian archive this machine's own apt uses (read only), or deb.debian.org."""
    override = os.environ.get(DEBIAN_MIRROR_ENV)
    if override:
        return override.rstrip("/")
    candidates: list[str] = []
    sources_d = Path("/etc/apt/sources.list.d")
    files = sorted(sources_d.glob("*.sources")) if sources_d.is_dir() else []
    for file in files:
        try:
            text = file.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in re.finditer(r"^URIs:\s*(.+)$", text, re.MULTILINE):
            candidates.extend(match.group(1).split())
    for legacy in [Path("/etc/apt/sources.list"), *(sorted(sources_d.glob("*.list")) if sources_d.is_dir() else [])]:
        try:
            text = legacy.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        for match in re.finditer(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)", text, re.MULTILINE):
            candidates.append(match.group(1))
    for uri in candidates:
        if uri.startswith(("http://", "https://")) and "security" not in uri and "/debian" in uri:
            return uri.rstrip("/")
    return "http://deb.debian.org/debian"


def private_apt_options(apt_dir: Path) -> list[str]:
    """apt-get options that confine every file apt reads or writes (besides keys) to ``apt_dir``."""
    options = {
        "Dir::Etc::SourceList": str(apt_dir / "sources.list"),
        "Dir::Etc::SourceParts": "/dev/null",
        "Dir::Etc::Preferences": "/dev/null",
        "Dir::Etc::PreferencesParts": "/dev/null",
        "Dir::State": str(apt_dir / "state"),
        "Dir::State::Lists": str(apt_dir / "state" / "lists"),
        "Dir::Cache": str(apt_dir / "cache"),
        "APT::Get::List-Cleanup": "false",
    }
    if os.getuid() == 0:
        # apt would drop to user _apt, who cannot write our private folder; stay who we are.
        options["APT::Sandbox::User"] = pwd.getpwuid(os.getuid()).pw_name
    flat: list[str] = []
    for key, value in options.items():
        flat += ["-o", f"{key}={value}"]
    return flat


def provision_runtime(binary: Path, runtime: Path, apt_dir: Path, progress: Progress | None) -> dict[str, str]:
    """Fetch and unpack Debian stable's C/C++ runtime (and any missing linked library) into ``runtime``."""
    for tool in ("apt-get", "dpkg-deb"):
        if shutil.which(tool) is None:
            raise MissingComponentError(
                f"perf_analyzer needs glibc >= 2.38 here and '{tool}' is not available to fetch a private copy",
                hint="run on Debian/Ubuntu, use a glibc >= 2.38 system, or pass a build with --perf-analyzer",
            )
    for sub in ("state/lists/partial", "cache/archives/partial", "debs"):
        (apt_dir / sub).mkdir(parents=True, exist_ok=True)
    uri = debian_archive_uri()
    (apt_dir / "sources.list").write_text(f"deb [arch=amd64] {uri} stable main\n")
    options = private_apt_options(apt_dir)
    say(progress, f"fetching the Debian stable package index from {uri} (private apt state in {apt_dir})")
    proc = run_step(["apt-get", *options, "-q", "update"], timeout_s=600)
    if proc.returncode != 0:
        raise MissingComponentError(
            f"apt-get update against {uri} (private state) failed: {tail(proc.stderr or proc.stdout)}",
            hint=f"check network access to {uri}, or set {DEBIAN_MIRROR_ENV} to a reachable Debian mirror",
        )
    packages: dict[str, str] = {}
    _download_debs(list(_RUNTIME_PACKAGES), apt_dir, options, packages, progress)
    runtime.mkdir(parents=True, exist_ok=True)
    _unpack(apt_dir / "debs", runtime)
    missing = _missing_libraries(binary, runtime)
    if missing:
        say(progress, f"the system lacks {', '.join(missing)}: fetching them privately too")
        wanted: list[tuple[str, ...]] = []
        for soname in missing:
            providers = _EXTRA_PROVIDERS.get(soname)
            if providers is None:
                raise MissingComponentError(
                    f"perf_analyzer needs {soname}, which neither the system nor the private runtime provides",
                    hint="install the library that provides it, or pass a build with --perf-analyzer",
                )
            if providers not in wanted:
                wanted.append(providers)
        for providers in wanted:
            _download_first(providers, apt_dir, options, packages, progress)
        _unpack(apt_dir / "debs", runtime)
        still = _missing_libraries(binary, runtime)
        if still:
            raise MissingComponentError(
                f"perf_analyzer still cannot find {', '.join(still)} after fetching {', '.join(packages)}",
                hint="install the libraries, or pass a build with --perf-analyzer",
            )
    return packages


def _download_debs(
    names: list[str], apt_dir: Path, options: list[str], packages: dict[str, str], progress: Progress | None
) -> None:
    say(progress, f"downloading {', '.join(names)} from Debian stable")
    proc = run_step(["apt-get", *options, "-q", "download", *names], timeout_s=600, cwd=apt_dir / "debs")
    if proc.returncode != 0:
        raise MissingComponentError(
            f"apt-get download {' '.join(names)} failed: {tail(proc.stderr or proc.stdout)}",
            hint=f"check network access, or set {DEBIAN_MIRROR_ENV} to a reachable Debian mirror",
        )
    for deb in (apt_dir / "debs").glob("*.deb"):
        name, _, rest = deb.name.partition("_")
        packages[name] = rest.rsplit("_", 1)[0].replace("%3a", ":")


def _download_first(
    providers: tuple[str, ...], apt_dir: Path, options: list[str], packages: dict[str, str], progress: Progress | None
) -> None:
    errors = []
    for name in providers:
        try:
            _download_debs([name], apt_dir, options, packages, progress)
            return
        except MissingComponentError as exc:
            errors.append(exc.message)
    raise MissingComponentError("; ".join(errors), hint="install the library on the system instead")


def _unpack(debs: Path, runtime: Path) -> None:
    for deb in sorted(debs.glob("*.deb")):
        proc = run_step(["dpkg-deb", "-x", str(deb), str(runtime)], timeout_s=300)
        if proc.returncode != 0:
            raise PerfError(f"dpkg-deb -x {deb.name} failed: {tail(proc.stderr)}")


def loader_layout(runtime: Path) -> tuple[str, list[str]]:
    """(loader, library dirs) relative to ``runtime``, plus the system's own dirs (absolute)."""
    for rel in ("usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "usr/lib64/ld-linux-x86-64.so.2",
                "lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"):
        if (runtime / rel).exists():
            loader = rel
            break
    else:
        raise PerfError(f"the private runtime in {runtime} has no ld-linux-x86-64.so.2 (libc6 unpacked wrongly?)")
    libdirs = [rel for rel in ("usr/lib/x86_64-linux-gnu", "lib/x86_64-linux-gnu") if (runtime / rel).is_dir()]
    return loader, libdirs


def loader_argv(runtime: Path, loader_rel: str, libdirs_rel: list[str], binary: Path) -> list[str]:
    # Private dirs first, then the system's for what the private runtime does not carry (libssl, zlib).
    library_path = [str(runtime / rel) for rel in libdirs_rel] + ["/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu"]
    return [str(runtime / loader_rel), "--library-path", ":".join(library_path), str(binary)]


def _missing_libraries(binary: Path, runtime: Path) -> list[str]:
    """Sonames the loader cannot resolve for ``binary`` (``ld.so --list``)."""
    loader_rel, libdirs = loader_layout(runtime)
    argv = loader_argv(runtime, loader_rel, libdirs, binary)
    proc = run_step([argv[0], "--list", *argv[1:]], timeout_s=60)
    return sorted({m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", proc.stdout + proc.stderr, re.MULTILINE)})
