"""Naming the backends a server loads: a second backends folder, a symlinked binary, a missing backend
named with the fix, and — with TRITONKIT_TEST_BACKEND_DIR — Triton's real onnxruntime backend.

The project ships no backend binary: the real-backend tests run where a folder holding Triton's
onnxruntime backend is given (an NGC container's /opt/tritonserver/backends), and say so when skipped.
Everything else runs on the bundled server.
"""

from __future__ import annotations

import os
import shlex
import shutil
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.support.onnx_models import make_cnn, save
from tests.support.pymodels import write_add_sub
from tritonkit.builders import build_onnx
from tritonkit.builders.verify import ort_runner
from tritonkit.cli import main
from tritonkit.client import Client
from tritonkit.perf.measure.runtime import served_runtime
from tritonkit.provision.doctor import run_checks
from tritonkit.server import TritonServer, locate_server

pytestmark = pytest.mark.server

#: A folder holding Triton's real backends (at least onnxruntime), for the tests that need them.
TEST_BACKEND_DIR_ENV = "TRITONKIT_TEST_BACKEND_DIR"
_REAL = os.environ.get(TEST_BACKEND_DIR_ENV)
needs_real_backends = pytest.mark.skipif(
    not _REAL, reason=f"no real backends folder: set {TEST_BACKEND_DIR_ENV} to one holding Triton's onnxruntime "
                      "backend (an NGC container's /opt/tritonserver/backends) to run these against it")


def _add_sub_answers(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        ones = np.ones((1, 4), dtype=np.float32)
        outputs = client.infer("add_sub", {"INPUT0": ones, "INPUT1": ones})
    assert np.array_equal(outputs["OUTPUT0"], 2 * ones)


def test_a_second_backends_folder_named_with_backend_dir_serves_beside_the_launchers_python_backend(
        tmp_path: Path) -> None:
    mine = tmp_path / "backends"
    shutil.copytree(locate_server().assembled().backend_dir / "python", mine / "python")
    write_add_sub(tmp_path / "repo")
    with TritonServer(tmp_path / "repo", backend_dir=mine) as server:
        assert server.install.backends_from.startswith(f"--backend-dir {mine}")
        assert server.install.backend_dir != mine  # the launcher's python backend stands beside them
        _add_sub_answers(server)


def test_a_symlinked_bundled_binary_still_starts_with_its_libraries_and_python_backend(tmp_path: Path) -> None:
    link = tmp_path / "prefix" / "bin" / "tritonserver"
    link.parent.mkdir(parents=True)
    link.symlink_to(locate_server().binary)
    write_add_sub(tmp_path / "repo")
    with TritonServer(tmp_path / "repo", server_bin=link) as server:
        assert server.install.binary == link
        _add_sub_answers(server)


def test_serve_names_the_missing_backend_and_its_fix_lints_against_the_servers_backends(tmp_path: Path) -> None:
    source = save(make_cnn(), tmp_path / "cnn.onnx")
    build_onnx(source, name="cnn", repo=tmp_path / "repo", runtime="onnxruntime")
    result = CliRunner().invoke(main, ["serve", str(tmp_path / "repo"), "--strict", "--startup-timeout-s", "60"])
    assert result.exit_code == 1, result.output
    assert "this server has no onnxruntime backend" in result.output
    assert "--backend-dir DIR" in result.output
    fix = result.output.split("fix: `", 1)[1].split("`", 1)[0]
    assert fix.startswith("tritonkit repo lint ") and "--bundled" in fix
    # The lint the fix names flags the missing backend: it never sends the user to a lint that passes.
    linted = CliRunner().invoke(main, shlex.split(fix)[1:])
    assert linted.exit_code == 1, linted.output
    assert "TK601" in linted.output and "--backend-dir" in linted.output


@needs_real_backends
def test_doctor_lists_the_real_onnxruntime_backend_with_its_onnx_runtime_version() -> None:
    checks = {c.name: c for c in run_checks(backend_dir=_REAL)}
    backends = checks["backends"]
    details = {d["name"]: d for d in backends.data["details"]}
    assert "onnxruntime" in details and details["onnxruntime"]["runtime_version"], backends.detail
    assert f"ONNX Runtime {details['onnxruntime']['runtime_version']}" in backends.detail
    assert checks["tritonserver start"].ok, checks["tritonserver start"].detail


@needs_real_backends
def test_a_model_built_for_the_real_backend_answers_as_onnx_runtime_and_results_name_that_backend(
        tmp_path: Path) -> None:
    assert _REAL is not None
    source = save(make_cnn(), tmp_path / "cnn.onnx")
    built = build_onnx(source, name="cnn", repo=tmp_path / "repo", runtime="auto", backend_dir=Path(_REAL))
    assert built.runtime == "onnxruntime" and built.onnxruntime_target is not None
    inputs = {"img": np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    with TritonServer(tmp_path / "repo", backend_dir=_REAL) as server:
        with Client(server.grpc_url) as client:
            got = client.infer("cnn", inputs)
        runtime = served_runtime(server.grpc_url, "cnn")
    want = ort_runner(tmp_path / "repo" / "cnn" / "1" / "model.onnx")(inputs)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=1e-5, atol=1e-5)
    assert runtime is not None and runtime.backend == "onnxruntime" and not runtime.stand_in
    assert runtime.engine_version is not None and runtime.engine == "ONNX Runtime"
