"""The real bundled tritonserver: start, serve, report failures by model, stop without orphans."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient

from tests.support.processes import pid_alive
from tests.support.pymodels import ADD_SUB_PY, write_add_sub, write_python_model
from tests.support.served import serve_models
from tests.support.signals import default_sigint
from tritonkit.errors import ConfigError, ModelLoadError, ServerError
from tritonkit.server import TritonServer, find_load_failures, locate_server, server_argv

pytestmark = pytest.mark.server


def _inputs(module, a: np.ndarray, b: np.ndarray) -> list:  # type: ignore[no-untyped-def]
    first = module.InferInput("INPUT0", list(a.shape), "FP32")
    first.set_data_from_numpy(a)
    second = module.InferInput("INPUT1", list(b.shape), "FP32")
    second.set_data_from_numpy(b)
    return [first, second]


def _metric(text: str, name: str, model: str) -> float:
    for line in text.splitlines():
        if line.startswith(f'{name}{{model="{model}"'):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} for {model} not in metrics")


@pytest.fixture(scope="module")
def add_sub_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """One server for the tests that only look at a running one; only the first test infers on it."""
    with serve_models(tmp_path_factory.mktemp("add_sub_repo"), write_add_sub) as server:
        yield server


def test_server_serves_grpc_and_http_and_counts_them_in_metrics(add_sub_server: TritonServer) -> None:
    server = add_sub_server
    assert server.version().startswith("2.")
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.ones((2, 4), dtype=np.float32)

    grpc = grpcclient.InferenceServerClient(server.grpc_url)
    result = grpc.infer("add_sub", _inputs(grpcclient, a, b))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    grpc.close()

    http = httpclient.InferenceServerClient(server.http_url)
    result = http.infer("add_sub", _inputs(httpclient, a, b))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)
    http.close()

    metrics = urllib.request.urlopen(server.metrics_url, timeout=5).read().decode()
    assert _metric(metrics, "nv_inference_request_success", "add_sub") == 2


def test_server_binds_loopback_only(add_sub_server: TritonServer) -> None:
    server = add_sub_server
    argv = Path(f"/proc/{server.pid}/cmdline").read_bytes().split(b"\0")
    for flag in (b"--http-address=127.0.0.1", b"--grpc-address=127.0.0.1", b"--metrics-address=127.0.0.1"):
        assert flag in argv


def test_python_models_import_numpy_from_the_project_env_even_from_a_clean_environment(tmp_path: Path) -> None:
    """The stub follows PATH: a server started from a bare environment must still see the venv's numpy."""
    report = tmp_path / "report.json"
    repo = tmp_path / "repo"
    write_python_model(
        repo,
        "whereami",
        config_pbtxt=f"""
            name: "whereami"
            backend: "python"
            max_batch_size: 0
            input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
            output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
            parameters {{ key: "report" value: {{ string_value: "{report}" }} }}
        """,
        model_py="""
            import json, sys
            import numpy


            class TritonPythonModel:
                def initialize(self, args):
                    path = json.loads(args["model_config"])["parameters"]["report"]["string_value"]
                    with open(path, "w") as handle:
                        json.dump({"executable": sys.executable, "numpy": numpy.__file__}, handle)

                def execute(self, requests):
                    return []
        """,
    )
    script = textwrap.dedent(
        f"""
        from tritonkit.server import TritonServer
        with TritonServer({str(repo)!r}) as server:
            print("ready", server.pid)
        """
    )
    clean_env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    done = subprocess.run(
        [sys.executable, "-c", script], env=clean_env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    info = json.loads(report.read_text())
    assert Path(info["numpy"]).is_relative_to(Path(sys.prefix))
    assert Path(info["executable"]).parent == Path(sys.executable).parent


def test_model_the_server_rejects_is_named_with_the_servers_reason(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    write_python_model(
        tmp_path,
        "too_big",
        config_pbtxt="""
            name: "too_big"
            backend: "python"
            max_batch_size: 4
            input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
            output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
            dynamic_batching { preferred_batch_size: [ 16 ] }
        """,
        model_py=ADD_SUB_PY,
    )
    server = TritonServer(tmp_path)
    with pytest.raises(ModelLoadError) as caught:
        server.start()
    assert caught.value.model == "too_big"
    assert "preferred size must be <= max batch size" in caught.value.reason
    assert caught.value.log_path is not None and caught.value.log_path.exists()
    assert str(caught.value.log_path) in str(caught.value)
    assert not server.is_running()


def test_explicit_load_of_a_broken_model_names_it_and_keeps_the_server_up(tmp_path: Path, start_server) -> None:  # type: ignore[no-untyped-def]
    write_add_sub(tmp_path)
    write_python_model(
        tmp_path,
        "bad_dtype",
        config_pbtxt="""
            name: "bad_dtype"
            backend: "python"
            max_batch_size: 4
            input [ { name: "X" data_type: TYPE_INVALID dims: [ 4 ] } ]
            output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
        """,
        model_py=ADD_SUB_PY,
    )
    server = start_server(tmp_path, model_control="explicit", models=["add_sub"])
    assert server.model_ready("add_sub")
    assert not server.model_ready("bad_dtype")
    with pytest.raises(ModelLoadError) as caught:
        server.load_model("bad_dtype")
    assert caught.value.model == "bad_dtype"
    assert "must specify 'data_type'" in caught.value.reason
    assert server.is_running() and server.model_ready("add_sub")


def test_exception_inside_the_context_leaves_no_server_process(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    pid = None
    with pytest.raises(RuntimeError), TritonServer(tmp_path) as server:
        pid = server.pid
        assert pid is not None and pid_alive(pid)
        raise RuntimeError("boom")
    assert pid is not None
    assert not pid_alive(pid)


def test_sigterm_to_a_cli_serve_stops_the_whole_process_group(tmp_path: Path) -> None:
    """`tritonkit serve` run as a child: SIGTERM makes it stop its server and exit."""
    write_add_sub(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonkit.cli", "serve", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,  # SIGINT is sent below: it must not stay ignored in a background suite
    )
    try:
        assert proc.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            lines.append(line)
            if "Press Ctrl-C" in line or not line:
                break
        text = "".join(lines)
        assert "gRPC     127.0.0.1:" in text, text
        server_pid = int(text.split("(pid ")[1].split(")")[0])
        assert pid_alive(server_pid)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert not pid_alive(server_pid)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_two_servers_side_by_side_get_distinct_free_ports(tmp_path: Path, add_sub_server: TritonServer,
                                                         start_server: Callable[..., TritonServer]) -> None:
    write_add_sub(tmp_path)
    first = add_sub_server
    second = start_server(tmp_path)
    ports = {first.http_port, first.grpc_port, first.metrics_port, second.http_port, second.grpc_port,
             second.metrics_port}
    assert len(ports) == 6
    assert first.model_ready("add_sub") and second.model_ready("add_sub")


def test_a_port_in_use_is_reported_as_such(tmp_path: Path, add_sub_server: TritonServer) -> None:
    write_add_sub(tmp_path)
    first = add_sub_server
    with pytest.raises(ServerError, match="port .* is already in use"):
        TritonServer(tmp_path, grpc_port=first.grpc_port, http_port=None).start()


def test_missing_repository_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a folder"):
        TritonServer(tmp_path / "nope")


def test_server_argv_is_a_list_with_loopback_and_explicit_models(tmp_path: Path) -> None:
    install = locate_server()
    argv = server_argv(
        install, [tmp_path], host="127.0.0.1", http_port=1, grpc_port=2, metrics_port=3,
        model_control="explicit", models=["a", "b"], exit_on_error=False,
    )
    assert argv[0] == str(install.binary)
    assert f"--model-repository={tmp_path}" in argv
    assert "--model-control-mode=explicit" in argv
    assert argv[-2:] == ["--load-model=a", "--load-model=b"]
    assert "--exit-on-error=false" in argv


def test_log_parser_finds_each_failed_model_once() -> None:
    log = (
        'E1129 10:01:02.345 77 model_lifecycle.cc:654] "failed to load \'m1\' version 1: Invalid argument: x"\n'
        "| m1 | 1 | UNAVAILABLE: Invalid argument: x |\n"
        'E1129 10:01:02.345 77 model_repository_manager.cc:1] "Poll failed for model directory \'m2\': bad"\n'
    )
    failures = find_load_failures(log)
    assert [(f.model, f.reason) for f in failures] == [("m1", "Invalid argument: x"), ("m2", "bad")]


def test_a_load_that_never_answers_says_the_server_is_still_running(tmp_path: Path, start_server) -> None:  # type: ignore[no-untyped-def]
    """A python model without model.py makes 2.51's stub hang: the error must not read as a crash."""
    (tmp_path / "no_code" / "1").mkdir(parents=True)
    (tmp_path / "no_code" / "config.pbtxt").write_text(
        'name: "no_code"\nbackend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
    )
    server = start_server(tmp_path, model_control="explicit", stop_grace_s=2.0)
    with pytest.raises(ServerError, match="no answer within 3 s while loading model 'no_code'") as caught:
        server.load_model("no_code", timeout_s=3)
    assert "still running" in str(caught.value)
    pid = server.pid
    server.stop()
    assert pid is not None and not pid_alive(pid)
