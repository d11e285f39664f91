"""Inspecting a backends folder reads its files and runs nothing from it: a library's version comes from
its ELF symbol versions (never by loading it, which would run its constructors), a FIFO in a library's
place is refused at once, and only starting a server writes the backends cache.

The planted libraries are real shared objects built here with ``cc`` (a test needing one says so when
skipped); the ONNX Runtime library is the installed wheel's own."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import onnxruntime
import pytest
from click.testing import CliRunner

from tests.support.onnx_models import make_cnn, save
from tests.support.planted import planted_library as _planted_library
from tests.support.pymodels import write_add_sub
from tritonkit.cli import main
from tritonkit.provision._elf import symbol_versions
from tritonkit.provision.backends import backend_info, onnxruntime_library_version
from tritonkit.server import TritonServer


def test_a_planted_librarys_version_is_read_from_its_symbol_versions_and_its_constructor_never_runs(
        tmp_path: Path) -> None:
    folder, marker = _planted_library(tmp_path, version_script="VERS_1.19.2 { global: OrtGetApiBase; local: *; };")
    assert symbol_versions(folder / "libonnxruntime.so", what="library") == ["VERS_1.19.2"]
    version, how = onnxruntime_library_version(folder) or (None, "")
    assert version == "1.19.2" and "VERS_1.19.2" in how
    info = backend_info(folder.parent, "onnxruntime")
    assert info.describe() == "onnxruntime (ONNX Runtime 1.19.2)"
    (tmp_path / "repo").mkdir()
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path / "repo"), "--backend-dir", str(folder.parent)])
    assert result.exit_code == 0, result.output
    assert not marker.exists()  # the library was read, never loaded


def test_only_a_version_the_library_defines_counts_not_a_version_like_string_in_its_data(tmp_path: Path) -> None:
    folder, marker = _planted_library(tmp_path, version_script=None)  # "VERS_9.9.9 1.2.3" only in .rodata
    assert b"VERS_9.9.9" in (folder / "libonnxruntime.so").read_bytes()
    assert symbol_versions(folder / "libonnxruntime.so", what="library") == []
    assert onnxruntime_library_version(folder) is None
    (folder / "libonnxruntime.so.1.18.0").write_bytes(b"\x7fELF not a library VERS_9.9.9")
    assert onnxruntime_library_version(folder) == ("1.18.0", "the file name libonnxruntime.so.1.18.0")
    assert not marker.exists()


def test_the_installed_onnx_runtime_librarys_file_gives_the_packages_own_version() -> None:
    capi = Path(onnxruntime.__file__).parent / "capi"
    library = sorted(capi.glob("libonnxruntime.so.*"))[0]
    assert symbol_versions(library, what="library") == [f"VERS_{onnxruntime.__version__}"]


def test_a_fifo_in_place_of_the_library_is_refused_at_once_and_lint_says_the_version_is_unknown(
        tmp_path: Path) -> None:
    folder = tmp_path / "backends" / "onnxruntime"
    folder.mkdir(parents=True)
    (folder / "libtriton_onnxruntime.so").write_bytes(b"")
    os.mkfifo(folder / "libonnxruntime.so")
    info = backend_info(folder.parent, "onnxruntime")
    assert info.runtime_version is None and "is a FIFO (named pipe), not a regular file" in info.how
    (tmp_path / "repo").mkdir()
    started = time.monotonic()
    # In a child, bounded: a reader that blocked on the FIFO would hang (it stalled for 61 s before).
    done = subprocess.run([sys.executable, "-m", "tritonkit.cli", "repo", "lint", str(tmp_path / "repo"),
                           "--backend-dir", str(folder.parent)], capture_output=True, text=True, timeout=45,
                          env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}, check=False)
    assert done.returncode == 0, done.stderr
    assert "target: onnxruntime backend's ONNX Runtime unknown: ONNX Runtime library" in done.stdout
    assert "FIFO" in done.stdout and time.monotonic() - started < 45
    assert not (tmp_path / "cache" / "tritonkit").exists()


def _fake_onnxruntime_backend(folder: Path) -> Path:
    (folder / "onnxruntime").mkdir(parents=True)
    (folder / "onnxruntime" / "libtriton_onnxruntime.so").write_bytes(b"")
    (folder / "onnxruntime" / "libonnxruntime.so.1.19.2").write_bytes(b"")
    return folder


def test_lint_and_build_with_a_backends_folder_leave_nothing_in_the_cache(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    backends = _fake_onnxruntime_backend(tmp_path / "backends")
    model = save(make_cnn(), tmp_path / "cnn.onnx")
    runner = CliRunner()
    built = runner.invoke(main, ["build", "onnx", str(model), "--name", "cnn", "--repo", str(tmp_path / "repo"),
                                 "--backend-dir", str(backends)])
    assert built.exit_code == 0, built.output
    assert 'platform: "onnxruntime_onnx"' in (tmp_path / "repo" / "cnn" / "config.pbtxt").read_text()
    linted = runner.invoke(main, ["repo", "lint", str(tmp_path / "repo"), "--backend-dir", str(backends)])
    assert linted.exit_code == 0, linted.output
    assert not (tmp_path / "cache" / "tritonkit").exists()


@pytest.mark.server
def test_doctor_leaves_no_cache_and_a_started_server_assembles_its_backends_in_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    backends = _fake_onnxruntime_backend(tmp_path / "backends")
    result = CliRunner().invoke(main, ["doctor", "--backend-dir", str(backends)])
    assert "onnxruntime (ONNX Runtime 1.19.2)" in result.output, result.output
    assert not (tmp_path / "cache" / "tritonkit").exists()
    write_add_sub(tmp_path / "repo")
    with TritonServer(tmp_path / "repo", backend_dir=backends) as server:
        assert server.install.backend_dir.parent == tmp_path / "cache" / "tritonkit" / "backends"
        assert sorted(p.name for p in server.install.backend_dir.iterdir()) == ["onnxruntime", "python"]
