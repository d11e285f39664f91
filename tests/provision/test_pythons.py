"""tritonkit installs where Python services live: the lowest and the highest Python it supports, from binary
wheels only, beside numpy 2 — and the bundled server serves the demo there.

Each test makes a virtual environment with another Python (pyenv's, or ``pythonX.Y`` on PATH) and installs
this checkout into it with pip from PyPI, as a user would (minutes when pip's cache is cold).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonkit.provision.perf_analyzer import locate_perf_analyzer

REPO_ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.install


def _python(version: str) -> Path:
    roots = [Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv") / "versions"]
    found = sorted(p for root in roots if root.is_dir() for p in root.glob(f"{version}.*/bin/python3"))
    if found:
        return found[-1]
    which = shutil.which(f"python{version}")
    if which is None:
        pytest.skip(f"no Python {version} on this machine (pyenv's or python{version} on PATH)")
    return Path(which)


def _run(argv: list[str | Path], *, cwd: Path | None = None, env: dict[str, str] | None = None,
         timeout: float = 900) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    return subprocess.run([str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=timeout,
                          env={**clean, **(env or {})}, stdin=subprocess.DEVNULL, check=False)


def _venv(version: str, where: Path, *first: str) -> Path:
    """A new environment of Python ``version`` with ``first`` installed, then this checkout's ``[cpu,server]``
    from binary wheels only."""
    made = _run([_python(version), "-m", "venv", where])
    assert made.returncode == 0, made.stderr
    pip = [where / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary", ":all:"]
    if first:
        done = _run([*pip, *first])
        assert done.returncode == 0, done.stderr[-3000:]
    done = _run([*pip, f"{REPO_ROOT}[cpu,server]"])
    assert done.returncode == 0, done.stderr[-3000:]
    assert "does not provide the extra" not in done.stderr
    return where / "bin"


def _numpy_major(bin_dir: Path) -> int:
    out = _run([bin_dir / "python", "-c", "import numpy; print(numpy.__version__)"])
    assert out.returncode == 0, out.stderr
    return int(out.stdout.split(".")[0])


def _core_works(bin_dir: Path, tmp: Path) -> None:
    """The client, a builder and the linter, run as commands in that environment."""
    make = ("import onnx, onnx.helper as h\n"
            "x = h.make_tensor_value_info('x', onnx.TensorProto.FLOAT, ['batch', 4])\n"
            "y = h.make_tensor_value_info('y', onnx.TensorProto.FLOAT, ['batch', 4])\n"
            "g = h.make_graph([h.make_node('Relu', ['x'], ['y'])], 'g', [x], [y])\n"
            "onnx.save(h.make_model(g, opset_imports=[h.make_opsetid('', 17)], ir_version=8), 'relu.onnx')\n"
            "import tritonkit as tk; assert tk.Client and tk.AsyncClient\n")
    assert (made := _run([bin_dir / "python", "-c", make], cwd=tmp)).returncode == 0, made.stderr
    built = _run([bin_dir / "tritonkit", "build", "onnx", "relu.onnx", "--name", "relu", "--repo", "repo",
                  "--runtime", "onnxruntime"], cwd=tmp)
    assert built.returncode == 0, built.stdout + built.stderr
    linted = _run([bin_dir / "tritonkit", "repo", "lint", "repo"], cwd=tmp)
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert "0 error(s)" in linted.stdout


@pytest.fixture(scope="module")
def highest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    yield _venv("3.13", tmp_path_factory.mktemp("py313") / "venv")


def test_the_lowest_python_keeps_the_numpy_2_it_has(tmp_path: Path) -> None:
    bin_dir = _venv("3.10", tmp_path / "venv", "numpy>=2")
    assert _numpy_major(bin_dir) == 2
    _core_works(bin_dir, tmp_path)


def test_the_highest_python_installs_from_wheels_with_numpy_2(highest: Path, tmp_path: Path) -> None:
    assert _numpy_major(highest) >= 2
    _core_works(highest, tmp_path)


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_the_demo_installs_the_server_itself_and_passes_on_the_highest_python(highest: Path, tmp_path: Path) -> None:
    # perf_analyzer is this environment's (its install is tested in test_perf_analyzer.py); the server is
    # installed by the demo itself, from pip's download of the wheel.
    found = locate_perf_analyzer()
    wrapper = found.install_dir / "perf_analyzer" if found.install_dir is not None else found.binary
    env = {"TRITONKIT_PERF_ANALYZER": str(wrapper), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    ran = _run([highest / "tritonkit", "demo", "--concurrency", "1,2", "--instances", "1", "--batch-window", "5ms",
                "--window-ms", "300"], cwd=tmp_path, env=env, timeout=600)
    assert "[install] the bundled tritonserver is not installed: installing it" in ran.stderr
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "verdict" in ran.stdout and "Traceback" not in ran.stderr
    assert (highest.parent / "share" / "tritonkit" / "tritonserver" / "install.json").is_file()
