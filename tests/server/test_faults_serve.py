"""``serve`` / ``TritonServer`` settings that used to start a server only to fail on it (or to
wait forever): one port for two endpoints, a start-up timeout that is not a positive number.
Each is refused before anything starts, naming the setting. Pure: no server is started."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.faults import run_cli
from tritonkit.errors import ConfigError
from tritonkit.server import TritonServer


def test_one_port_for_grpc_and_http_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    done = run_cli("serve", str(tmp_path), "--grpc-port", "18123", "--http-port", "18123")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "grpc_port and http_port are both 18123" in done.stderr
    assert "tritonserver" not in done.stdout  # nothing was started, nothing served


@pytest.mark.parametrize("timeout_s", [0.0, -1.0, float("nan"), float("inf")])
def test_a_start_up_timeout_that_is_not_a_positive_number_is_refused(tmp_path: Path, timeout_s: float) -> None:
    with pytest.raises(ConfigError, match="startup_timeout_s .* is not a positive number"):
        TritonServer(tmp_path, startup_timeout_s=timeout_s)
