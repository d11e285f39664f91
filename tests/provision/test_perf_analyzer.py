"""Provisioning the real perf_analyzer: a fresh install into a throw-away prefix, and finding it.

The fresh install really downloads the perf-analyzer wheel (pip) and, where glibc < 2.38, Debian
stable's runtime packages through a private apt state; the machine's own apt state and libraries
must be untouched afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tritonkit.errors import MissingComponentError
from tritonkit.provision.perf_analyzer import (
    PERF_ANALYZER_ENV,
    PerfAnalyzerInstall,
    debian_archive_uri,
    default_install_dir,
    install_perf_analyzer,
    locate_perf_analyzer,
)

_SYSTEM_STATE = [
    Path("/var/lib/apt/lists"),
    Path("/var/cache/apt"),
    Path("/var/lib/dpkg/status"),
    Path("/etc/apt/sources.list.d"),
    Path("/lib/x86_64-linux-gnu/libc.so.6"),
    Path("/lib/x86_64-linux-gnu/libstdc++.so.6"),
]


def _state() -> dict[str, tuple[int, int] | None]:
    found: dict[str, tuple[int, int] | None] = {}
    for path in _SYSTEM_STATE:
        try:
            stat = path.stat()
            found[str(path)] = (stat.st_mtime_ns, stat.st_size)
        except OSError:
            found[str(path)] = None
    for folder in (Path("/var/cache/apt"), Path("/var/lib/apt/lists")):
        for child in folder.glob("*") if folder.is_dir() else []:
            stat = child.stat()
            found[str(child)] = (stat.st_mtime_ns, stat.st_size)
    return found


def _glibc() -> tuple[int, int]:
    text = os.confstr("CS_GNU_LIBC_VERSION") or "glibc 0.0"
    major, minor = text.split()[-1].split(".")[:2]
    return int(major), int(minor)


@dataclass
class FreshInstall:
    prefix: Path
    install: PerfAnalyzerInstall
    state_before: dict[str, tuple[int, int] | None]
    state_after: dict[str, tuple[int, int] | None]
    progress: list[str]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FreshInstall]:
    prefix = tmp_path_factory.mktemp("prefix")
    before = _state()
    lines: list[str] = []
    installed = install_perf_analyzer(prefix=prefix, progress=lines.append)
    yield FreshInstall(prefix, installed, before, _state(), lines)


def test_fresh_install_runs_the_real_binary(fresh: FreshInstall) -> None:
    install = fresh.install
    assert install.install_dir == default_install_dir(fresh.prefix)
    assert install.binary == fresh.prefix / "share" / "tritonkit" / "perf_analyzer" / "bin" / "perf_analyzer"
    proc = subprocess.run([*install.argv, "--version"], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0 and (proc.stdout + proc.stderr).startswith("Perf Analyzer Version")
    expected_mode = "native" if _glibc() >= (2, 38) else "private-runtime"
    assert install.mode == expected_mode
    assert install.version == "2.60.0"


def test_fresh_install_writes_a_record_and_a_wrapper_script(fresh: FreshInstall) -> None:
    folder = default_install_dir(fresh.prefix)
    record = json.loads((folder / "install.json").read_text())
    assert record["argv"] == list(fresh.install.argv)
    assert record["mode"] == fresh.install.mode
    if record["mode"] == "private-runtime":
        assert set(record["runtime_packages"]) >= {"libc6", "libstdc++6", "libgcc-s1"}
        assert fresh.install.argv[0].startswith(str(folder / "runtime"))
        assert fresh.install.argv[1] == "--library-path"
    wrapper = folder / "perf_analyzer"
    proc = subprocess.run([str(wrapper), "--version"], capture_output=True, text=True, timeout=30, check=False)
    assert proc.returncode == 0 and "Perf Analyzer" in proc.stdout + proc.stderr  # it prints to stderr
    # No staging or apt leftovers beside or inside the install.
    assert sorted(p.name for p in folder.parent.iterdir()) == ["perf_analyzer"]
    assert not (folder / "apt").exists()


def test_install_leaves_the_systems_apt_state_and_libraries_untouched(fresh: FreshInstall) -> None:
    assert fresh.state_after == fresh.state_before


def test_second_install_is_fast_and_keeps_the_first(fresh: FreshInstall) -> None:
    record = default_install_dir(fresh.prefix) / "install.json"
    first = record.read_text()
    started = time.monotonic()
    lines: list[str] = []
    again = install_perf_analyzer(prefix=fresh.prefix, progress=lines.append)
    assert time.monotonic() - started < 5
    assert again == fresh.install
    assert record.read_text() == first
    assert lines and lines[0].startswith("perf_analyzer already installed")


def test_locate_prefers_the_option_then_the_environment_then_the_install(
    fresh: FreshInstall, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PERF_ANALYZER_ENV, raising=False)
    assert locate_perf_analyzer(prefix=fresh.prefix).source == "installed"
    wrapper = default_install_dir(fresh.prefix) / "perf_analyzer"
    monkeypatch.setenv(PERF_ANALYZER_ENV, str(wrapper))
    from_env = locate_perf_analyzer(prefix=fresh.prefix, check=True)
    assert (from_env.source, from_env.mode, from_env.argv) == (PERF_ANALYZER_ENV, "external", (str(wrapper),))
    assert from_env.version is not None and from_env.version.startswith("Perf Analyzer Version")
    other = tmp_path / "pa"
    other.write_text(f'#!/bin/sh\nexec "{wrapper}" "$@"\n')
    other.chmod(0o755)
    chosen = locate_perf_analyzer(other, prefix=fresh.prefix, check=True)
    assert chosen.source == "--perf-analyzer" and chosen.argv == (str(other),)
    assert "(--perf-analyzer)" in chosen.describe()


def test_locate_without_an_install_says_how_to_get_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PERF_ANALYZER_ENV, raising=False)
    with pytest.raises(MissingComponentError) as info:
        locate_perf_analyzer(prefix=tmp_path)
    assert str(tmp_path) in info.value.message
    assert info.value.hint is not None and "tritonkit perf install" in info.value.hint


def test_locate_refuses_a_path_that_is_not_executable(tmp_path: Path) -> None:
    not_exec = tmp_path / "perf_analyzer"
    not_exec.write_text("#!/bin/sh\n")
    with pytest.raises(MissingComponentError, match="not executable"):
        locate_perf_analyzer(not_exec)
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 1\n")
    broken.chmod(0o755)
    with pytest.raises(MissingComponentError, match="does not run here"):
        locate_perf_analyzer(broken, check=True)


def test_install_refuses_a_wheel_without_the_binary(tmp_path: Path) -> None:
    # Shaped like the 2 KB placeholder pip resolves on Python < 3.12: Python files, no binary.
    wheel = tmp_path / "perf_analyzer-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("perf_analyzer/__init__.py", "")
    with pytest.raises(MissingComponentError, match="no perf_analyzer/bin/perf_analyzer"):
        install_perf_analyzer(prefix=tmp_path / "prefix", wheel=wheel)
    assert not default_install_dir(tmp_path / "prefix").exists()


def test_debian_archive_comes_from_the_machines_sources_or_the_override(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITONKIT_DEBIAN_MIRROR", raising=False)
    uri = debian_archive_uri()
    assert uri.startswith(("http://", "https://")) and "/debian" in uri and "security" not in uri
    monkeypatch.setenv("TRITONKIT_DEBIAN_MIRROR", "http://mirror.example/debian/")
    assert debian_archive_uri() == "http://mirror.example/debian"


def test_a_binary_that_runs_natively_is_installed_without_private_libraries(tmp_path: Path) -> None:
    """Fake on purpose: the native branch needs glibc >= 2.38 (Debian 13), which this machine may
    lack, so the wheel carries a tiny script in the binary's place that answers --version."""
    wheel = tmp_path / "perf_analyzer-9.9.9-py3-none-manylinux_2_38_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        info = zipfile.ZipInfo("perf_analyzer/bin/perf_analyzer")
        archive.writestr(info, "#!/bin/sh\necho 'Perf Analyzer Version 9.9.9 (commit test)' >&2\n")
    installed = install_perf_analyzer(prefix=tmp_path / "prefix", wheel=wheel)
    folder = default_install_dir(tmp_path / "prefix")
    assert (installed.mode, installed.version) == ("native", "9.9.9")
    assert installed.argv == (str(folder / "bin" / "perf_analyzer"),)
    assert not (folder / "runtime").exists()
    record = json.loads((folder / "install.json").read_text())
    assert record["runtime_packages"] == {} and record["binary_version"].endswith("(commit test)")
