"""A backends folder: what is in it and which version each backend is, read from its own files; where
a server's backends come from (--backend-dir, TRITONKIT_BACKEND_DIR, the binary's own prefix)."""

from __future__ import annotations

import sys
from pathlib import Path

import onnxruntime
import pytest

from tritonkit.errors import ConfigError
from tritonkit.provision.backends import (
    BACKEND_DIR_ENV,
    backend_info,
    backend_names,
    onnxruntime_library_version,
)
from tritonkit.provision.server import locate_server


def _installed_onnxruntime_library() -> Path:
    capi = Path(onnxruntime.__file__).parent / "capi"
    found = sorted(capi.glob("libonnxruntime.so.*"))
    if not found:
        pytest.skip(f"the installed onnxruntime {onnxruntime.__version__} ships no libonnxruntime.so (wheels from 1.19 do)")
    return found[0]


def test_the_onnx_runtime_version_is_read_from_the_library_itself(tmp_path: Path) -> None:
    """The onnxruntime backend links a libonnxruntime.so; here the PyPI wheel's copy of that real
    library stands in the folder under the backend's own file name."""
    folder = tmp_path / "onnxruntime"
    folder.mkdir()
    (folder / "libonnxruntime.so").symlink_to(_installed_onnxruntime_library())
    found = onnxruntime_library_version(folder)
    assert found is not None
    version, how = found
    assert version == onnxruntime.__version__
    assert "version string" in how


def test_without_a_library_to_ask_the_versioned_file_name_is_read(tmp_path: Path) -> None:
    folder = tmp_path / "onnxruntime"
    folder.mkdir()
    (folder / "libonnxruntime.so.1.19.2").write_bytes(b"not a library")
    assert onnxruntime_library_version(folder) == ("1.19.2", "the file name libonnxruntime.so.1.19.2")


def test_a_backend_is_a_folder_with_its_library_or_model_py_and_its_version_is_said_only_when_read(
        tmp_path: Path) -> None:
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "libtriton_tensorrt.so").write_bytes(b"")
    (tmp_path / "vllm").mkdir()
    (tmp_path / "vllm" / "model.py").write_text("")
    (tmp_path / "notes").mkdir()
    assert backend_names(tmp_path) == ["tensorrt", "vllm"]
    info = backend_info(tmp_path, "tensorrt")
    assert info.runtime_version is None and info.describe() == "tensorrt (version not in its files)"


def test_the_bundled_servers_python_backend_names_the_python_its_stub_embeds() -> None:
    install = locate_server()
    python = install.backend("python")
    assert python is not None and python.runtime == "Python"
    assert python.runtime_version == f"{sys.version_info.major}.{sys.version_info.minor}"


def test_a_backends_folder_that_is_not_a_folder_is_refused_naming_where_it_was_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="--backend-dir"):
        locate_server(backend_dir=tmp_path / "missing")
    monkeypatch.setenv(BACKEND_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match=BACKEND_DIR_ENV):
        locate_server()


def test_the_environment_names_the_backends_when_no_option_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "tensorrt").mkdir()
    (tmp_path / "tensorrt" / "libtriton_tensorrt.so").write_bytes(b"")
    monkeypatch.setenv(BACKEND_DIR_ENV, str(tmp_path))
    install = locate_server()
    # The bundled server keeps the python backend tritonkit assembles beside the named folder's backends.
    assert install.backends() == ["python", "tensorrt"]
    assert install.backends_from.startswith(f"${BACKEND_DIR_ENV}")


def test_a_python_backend_in_the_named_folder_gives_way_to_tritonkits_for_the_bundled_server(tmp_path: Path) -> None:
    (tmp_path / "python").mkdir()
    (tmp_path / "python" / "libtriton_python.so").write_bytes(b"")
    install = locate_server(backend_dir=tmp_path)
    assert install.backends() == ["python"]
    assert (install.assembled().backend_dir / "python" / "triton_python_backend_stub").is_file()
    assert "in place of theirs" in install.backends_from


def _executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def test_a_binary_reached_through_a_link_keeps_the_backends_of_the_prefix_it_was_named_in(tmp_path: Path) -> None:
    """Only where locate_server looks is tested here (no server starts): the binaries are scripts."""
    real = _executable(tmp_path / "real" / "bin" / "tritonserver")
    (tmp_path / "real" / "backends").mkdir()
    prefix = tmp_path / "prefix"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "tritonserver").symlink_to(real)
    (prefix / "backends").mkdir()
    assert locate_server(prefix / "bin" / "tritonserver").backend_dir == prefix / "backends"
    # A link from a folder with no backends (/usr/local/bin) leads to the real install's.
    (tmp_path / "usr" / "bin").mkdir(parents=True)
    (tmp_path / "usr" / "bin" / "tritonserver").symlink_to(real)
    assert locate_server(tmp_path / "usr" / "bin" / "tritonserver").backend_dir == tmp_path / "real" / "backends"


def test_the_bundled_binary_reached_through_a_link_keeps_its_libraries_and_python_backend(tmp_path: Path) -> None:
    bundled = locate_server()
    prefix = tmp_path / "triton"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "tritonserver").symlink_to(bundled.binary)
    install = locate_server(prefix / "bin" / "tritonserver")
    assert install.lib_dirs == bundled.lib_dirs and install.backends() == ["python"]
    # With backends of its own beside the link, those are served, the python backend still beside them.
    (prefix / "backends" / "tensorrt").mkdir(parents=True)
    (prefix / "backends" / "tensorrt" / "libtriton_tensorrt.so").write_bytes(b"")
    install = locate_server(prefix / "bin" / "tritonserver")
    assert install.backends() == ["python", "tensorrt"] and str(prefix / "backends") in install.backends_from
