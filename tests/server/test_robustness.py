"""The server launcher under hard failures: SIGKILLed parents, busy or foreign ports, broken models."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.processes import pid_alive
from tests.support.pymodels import write_add_sub, write_python_model
from tests.support.signals import default_sigint
from tests.support.sweep_models import write_sleepy
from tritonkit.errors import ConfigError, ServerError
from tritonkit.server import TritonServer, port_is_free

pytestmark = pytest.mark.server

def _cli(args: list[str]):  # type: ignore[no-untyped-def]
    from tritonkit.cli import main

    return CliRunner().invoke(main, args)


BROKEN_CONFIG = """
name: "broken"
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 4 ] } ]
dynamic_batching { preferred_batch_size: [ 16 ] }
"""


def _children_of(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (read from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: list[int] = []
    frontier = [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current:
                found.append(child)
                frontier.append(child)
    return found


def _wait_gone(pids: list[int], timeout_s: float) -> list[int]:
    deadline = time.monotonic() + timeout_s
    alive = [p for p in pids if pid_alive(p)]
    while alive and time.monotonic() < deadline:
        time.sleep(0.2)
        alive = [p for p in alive if pid_alive(p)]
    return alive


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def _start_and_sigkill_parent(script: str, tmp_path: Path) -> tuple[list[int], int]:
    """Run ``script`` in a child Python that prints its server's pid and grpc port, then SIGKILL it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    _, server_pid, grpc_port = line.split()
    descendants = _children_of(proc.pid)
    assert int(server_pid) in descendants
    assert any(p != int(server_pid) for p in descendants), "expected a python backend stub below the server"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    return descendants, int(grpc_port)


def test_sigkill_of_the_python_process_that_started_a_server_leaves_no_server_or_stub(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    script = """
        import sys, time
        from tritonkit.server import TritonServer
        server = TritonServer(sys.argv[1]).start()
        print("READY", server.pid, server.grpc_port, flush=True)
        time.sleep(600)
    """
    descendants, grpc_port = _start_and_sigkill_parent(script, tmp_path)
    try:
        assert _wait_gone(descendants, timeout_s=30) == []
        assert port_is_free(grpc_port)
    finally:
        _kill_all(descendants)


def test_the_stubs_of_a_server_killed_outright_die_with_the_process_that_started_it(tmp_path: Path) -> None:
    """As Ray does to the children of a worker whose node died: the server is SIGKILLed while its
    python stub executes a request (2.51's stub is then left running for good), then the process
    that started it; the stub must go too."""
    write_sleepy(tmp_path, "slow", base_ms=3000, window_us=None)
    script = """
        import sys, threading, time
        import numpy as np
        from tritonkit.client import Client
        from tritonkit.server import TritonServer
        server = TritonServer(sys.argv[1]).start()
        def call():
            try:
                with Client(server.grpc_url) as client:
                    client.infer("slow", {"INPUT0": np.ones((1, 16), dtype=np.float32)})
            except Exception:
                pass
        threading.Thread(target=call, daemon=True).start()
        time.sleep(1.0)  # the stub is inside execute()
        print("READY", server.pid, server.grpc_port, flush=True)
        time.sleep(600)
    """
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), str(tmp_path)], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("READY"), line
    server_pid = int(line.split()[1])
    descendants = _children_of(proc.pid)
    assert [p for p in descendants if p != server_pid], "expected a python backend stub below the server"
    try:
        os.kill(server_pid, signal.SIGKILL)
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_gone(descendants, timeout_s=30) == []
    finally:
        _kill_all(descendants)


def test_a_server_started_from_a_thread_that_ends_keeps_running_and_still_dies_with_the_process(
    tmp_path: Path,
) -> None:
    """The kernel's parent-death signal follows the forking *thread*: the launcher must not tie it to a worker."""
    write_add_sub(tmp_path)
    script = """
        import sys, threading, time
        from tritonkit.server import TritonServer
        holder = []
        worker = threading.Thread(target=lambda: holder.append(TritonServer(sys.argv[1]).start()))
        worker.start(); worker.join()
        time.sleep(2.0)
        server = holder[0]
        assert server.is_running() and server.model_ready("add_sub"), "server died with its starting thread"
        print("READY", server.pid, server.grpc_port, flush=True)
        time.sleep(600)
    """
    descendants, _ = _start_and_sigkill_parent(script, tmp_path)
    try:
        assert _wait_gone(descendants, timeout_s=30) == []
    finally:
        _kill_all(descendants)


def test_sigkill_of_cli_serve_leaves_no_server_behind(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonkit.cli", "serve", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    descendants: list[int] = []
    try:
        assert proc.stdout is not None
        text = ""
        deadline = time.monotonic() + 90
        while "Press Ctrl-C" not in text and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            text += line
        assert "Press Ctrl-C" in text, text
        descendants = _children_of(proc.pid)
        assert descendants
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        assert _wait_gone(descendants, timeout_s=30) == []
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        _kill_all(descendants)


@pytest.fixture
def foreign_listener() -> Iterator[int]:
    """A loopback TCP service that is not Triton: it answers every connection with junk."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    stop = threading.Event()

    def answer() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except OSError:
                continue
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")

    thread = threading.Thread(target=answer, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    sock.close()


def test_serve_on_a_port_where_another_service_answers_is_a_clear_error(
    tmp_path: Path, foreign_listener: int
) -> None:
    write_add_sub(tmp_path)
    result = _cli(["serve", str(tmp_path), "--http-port", str(foreign_listener)])
    assert result.exit_code != 0
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert f"http port {foreign_listener} on 127.0.0.1 is already in use" in result.output
    assert "fix:" in result.output
    assert "Traceback" not in result.output


def test_the_library_refuses_a_fixed_port_held_by_another_service(tmp_path: Path, foreign_listener: int) -> None:
    write_add_sub(tmp_path)
    server = TritonServer(tmp_path, http_port=foreign_listener)
    with pytest.raises(ServerError, match="already in use"):
        server.start()
    assert not server.is_running()


@pytest.mark.parametrize("port", ["0", "70000", "-1"])
def test_serve_refuses_ports_outside_the_tcp_range(tmp_path: Path, port: str) -> None:
    write_add_sub(tmp_path)
    result = _cli(["serve", str(tmp_path), "--grpc-port", port])
    assert result.exit_code == 2
    assert "1<=x<=65535" in result.output or "65535" in result.output


def test_the_library_refuses_a_port_outside_the_tcp_range(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    with pytest.raises(ConfigError, match="grpc_port 70000 is not a TCP port"):
        TritonServer(tmp_path, grpc_port=70000)


def _serve_until_ready(repo: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tritonkit.cli", "serve", str(repo), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
        preexec_fn=default_sigint,  # the tests send SIGINT: it must not stay ignored in a background suite
    )
    assert proc.stdout is not None
    text = ""
    deadline = time.monotonic() + 90
    while "Press Ctrl-C" not in text and time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        text += line
    return proc, text


def test_serve_serves_the_models_that_load_and_names_each_one_that_does_not(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    write_python_model(tmp_path, "broken", config_pbtxt=BROKEN_CONFIG, model_py="class TritonPythonModel: pass\n")
    proc, text = _serve_until_ready(tmp_path)
    try:
        assert "Press Ctrl-C" in text, text
        assert "model 'broken' failed to load" in text
        assert "preferred size must be <= max batch size" in text
        assert "--explicit --load-model" in text
        assert "models   add_sub" in text
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_serve_strict_stops_with_status_1_when_any_model_fails(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    write_python_model(tmp_path, "broken", config_pbtxt=BROKEN_CONFIG, model_py="class TritonPythonModel: pass\n")
    result = _cli(["serve", str(tmp_path), "--strict"])
    assert result.exit_code == 1, result.output
    assert "model 'broken' failed to load" in result.output
    assert "--strict was given" in result.output


def test_serve_stops_with_status_1_when_no_model_loaded(tmp_path: Path) -> None:
    write_python_model(tmp_path, "broken", config_pbtxt=BROKEN_CONFIG, model_py="class TritonPythonModel: pass\n")
    result = _cli(["serve", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "model 'broken' failed to load" in result.output
    assert "no model loaded" in result.output


SLOW_PY = """
import time


class TritonPythonModel:
    def initialize(self, args):
        time.sleep(60)

    def execute(self, requests):
        return []
"""


def test_a_server_killed_from_outside_is_named_as_killed_not_as_a_model_crash(tmp_path: Path) -> None:
    write_add_sub(tmp_path)
    with TritonServer(tmp_path, model_control="explicit") as server:
        assert server.pid is not None
        os.killpg(server.pid, signal.SIGKILL)
        with pytest.raises(ServerError) as info:
            server.load_model("add_sub", timeout_s=10)
    assert type(info.value) is ServerError  # not a ModelLoadError: no model failed
    message, hint = info.value.message, info.value.hint or ""
    assert "tritonserver died while loading model 'add_sub': killed by SIGKILL" in message
    assert "something outside stopped the server" in hint and "crash" not in (message + hint).lower()


def test_a_server_killed_during_start_up_is_not_blamed_on_the_model_that_failed_before(tmp_path: Path) -> None:
    write_python_model(tmp_path, "broken", config_pbtxt=BROKEN_CONFIG, model_py="")
    write_python_model(tmp_path, "slow", config_pbtxt=BROKEN_CONFIG.replace('"broken"', '"slow"').replace(
        "dynamic_batching { preferred_batch_size: [ 16 ] }", ""), model_py=SLOW_PY)
    server = TritonServer(tmp_path, exit_on_error=False, startup_timeout_s=90)

    def kill_once_broken_is_logged() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            log = server.log_path.read_text(errors="replace") if server.log_path.is_file() else ""
            if "broken" in log and "preferred" in log and server.pid is not None:
                os.killpg(server.pid, signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_once_broken_is_logged)
    killer.start()
    try:
        with pytest.raises(ServerError) as info:
            server.start()
    finally:
        killer.join()
        server.stop()
    assert type(info.value) is ServerError, info.value
    assert "died during start-up: killed by SIGKILL" in info.value.message


def test_a_killed_servers_python_shared_memory_is_removed_when_it_is_stopped(tmp_path: Path) -> None:
    """SIGKILL skips the python backend's own clean-up: its stubs' regions stay in /dev/shm until
    stop() removes the ones under this launch's prefix (and only those)."""
    from tritonkit.server.process import SHM_DIR

    write_add_sub(tmp_path)
    stranger = SHM_DIR / "triton_python_backend_shm_region_not_ours"
    stranger.write_bytes(b"")
    try:
        server = TritonServer(tmp_path)
        with server:
            prefix = server._shm_prefix
            assert prefix is not None
            ours = sorted(SHM_DIR.glob(f"{prefix}*"))
            assert ours, "the model's stub keeps a region under the launch's prefix"
            assert server.pid is not None
            os.killpg(server.pid, signal.SIGKILL)
            deadline = time.monotonic() + 10
            while server.is_running and time.monotonic() < deadline:
                time.sleep(0.05)
            assert all(region.exists() for region in ours), "SIGKILL left them behind"
        assert not list(SHM_DIR.glob(f"{prefix}*"))
        assert stranger.exists(), "another server's region is not ours to remove"
    finally:
        stranger.unlink(missing_ok=True)
