"""``tritonkit install server``: the bundled server's files unpacked into a folder of their own, atomically,
and a Python the bundled python backend has no stub for refused at once, naming the Pythons it has.

The wheels here are small zips made by the test in the real wheel's layout (the real one, 120 MB, is
installed by the suite's set-up and by tests/provision/test_pythons.py)."""

from __future__ import annotations

import stat
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.errors import MissingComponentError
from tritonkit.provision.bundled import bundled_dir, bundled_record, install_server
from tritonkit.provision.server import _bundled_assembly


def _wheel(path: Path, members: dict[str, tuple[str, int]]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, (text, mode) in members.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (stat.S_IFREG | mode) << 16
            archive.writestr(info, text)
    return path


SERVER = {
    "pytriton/tritonserver/bin/tritonserver": ("#!/bin/sh\necho server\n", 0o777),
    "pytriton/tritonserver/backends/python/libtriton_python.so": ("so", 0o666),
    "nvidia_pytriton.libs/libtritonserver-1.so": ("so", 0o775),
    "pytriton/__init__.py": ("the package's Python code is left out", 0o644),
    "pytriton/tritonserver/../../escape.txt": ("never written outside", 0o644),
}


def test_the_server_files_alone_land_in_their_folder_with_safe_permissions(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl", SERVER)
    lines: list[str] = []
    folder = install_server(prefix=tmp_path / "env", wheel=wheel, progress=lines.append)
    assert folder == bundled_dir(tmp_path / "env")
    binary = folder / "pytriton" / "tritonserver" / "bin" / "tritonserver"
    assert stat.S_IMODE(binary.stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "nvidia_pytriton.libs" / "libtritonserver-1.so").stat().st_mode) == 0o755
    assert stat.S_IMODE((folder / "pytriton/tritonserver/backends/python/libtriton_python.so").stat().st_mode) == 0o644
    assert not (folder / "pytriton" / "__init__.py").exists()
    assert not (tmp_path / "escape.txt").exists() and not list(tmp_path.rglob("escape.txt"))
    record = bundled_record(tmp_path / "env")
    assert record is not None and record["version"] == "0.7.0"
    assert any("installed tritonserver" in line for line in lines)
    # Idempotent: the same version is kept; --force unpacks again.
    again: list[str] = []
    install_server(prefix=tmp_path / "env", wheel=wheel, progress=again.append)
    assert again == [f"tritonserver (from nvidia-pytriton 0.7.0) already installed in {folder}"]
    binary.write_text("changed")
    install_server(prefix=tmp_path / "env", wheel=wheel, force=True)
    assert binary.read_text() == "#!/bin/sh\necho server\n"
    assert sorted(p.name for p in folder.parent.iterdir()) == ["tritonserver"]  # no staging left


def test_a_wheel_without_the_server_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "other.whl", {"pytriton/__init__.py": ("", 0o644)})
    with pytest.raises(MissingComponentError, match=r"other\.whl holds no tritonserver binary"):
        install_server(prefix=tmp_path / "env", wheel=wheel)
    assert bundled_record(tmp_path / "env") is None
    assert list((tmp_path / "env" / "share" / "tritonkit").iterdir()) == []
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"PK\x03\x04 not a zip")
    with pytest.raises(MissingComponentError, match=r"cannot unpack .*broken\.whl"):
        install_server(prefix=tmp_path / "env", wheel=broken)


def test_a_python_without_a_stub_is_named_with_the_pythons_there_are(tmp_path: Path) -> None:
    root = tmp_path / "tritonserver"
    for version in ("3.8", "3.12", "3.9"):
        stub = root / "python_backend_stubs" / version / "triton_python_backend_stub"
        stub.parent.mkdir(parents=True)
        stub.write_text("")
    with pytest.raises(MissingComponentError) as caught:
        _bundled_assembly(root, None)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert f"cannot run python-backend models on Python {here}: its stubs are for Python 3.8, 3.9, 3.12" in str(caught.value)
    assert "(3.8–3.12)" in str(caught.value) and "--server-bin" in str(caught.value)


def test_the_install_command_names_what_its_wheel_option_is_for(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "w.whl", SERVER)
    result = CliRunner().invoke(main, ["install", "--wheel", str(wheel)])
    assert result.exit_code == 2
    assert "name 'server' alone" in result.output
