"""The one admin layer, against the real server over both protocols: index, load with a config,
unload, statistics, config, liveness — and tritonclient's / urllib's errors as tritonkit errors."""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
import tritonclient.http as httpclient

from tests.support.pymodels import write_add_sub, write_python_model
from tritonkit.errors import ConfigError, ConnectError, ModelLoadError, ModelNotReadyError
from tritonkit.server import TritonServer
from tritonkit.server.admin import ServerAdmin
from tritonkit.server.ports import free_ports

pytestmark = pytest.mark.server

BROKEN_PY = """
class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("deliberately broken at load")
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> TritonServer:  # type: ignore[misc]
    repo = tmp_path_factory.mktemp("admin_repo")
    write_add_sub(repo)
    write_python_model(repo, "broken", config_pbtxt='name: "broken" backend: "python" max_batch_size: 0 '
                       'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] '
                       'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]', model_py=BROKEN_PY)
    with TritonServer(repo, model_control="explicit", models=["add_sub"]) as running:
        yield running


def _admins(server: TritonServer) -> list[ServerAdmin]:
    return [ServerAdmin(server.http_url, protocol="http"), ServerAdmin(server.grpc_url, protocol="grpc")]


def test_health_index_and_config_read_the_same_over_both_protocols(server: TritonServer) -> None:
    for admin in _admins(server):
        with contextlib.closing(admin):
            assert admin.is_live() and admin.is_ready() and admin.model_ready("add_sub"), admin.protocol
            states = {s.name: s for s in admin.index()}
            assert states["add_sub"].ready and not states["broken"].ready, admin.protocol
            config = admin.model_config("add_sub")
            assert (config.name, config.max_batch_size, [t.name for t in config.input]) == (
                "add_sub", 8, ["INPUT0", "INPUT1"]), admin.protocol
            assert admin.server_metadata()["version"].startswith("2."), admin.protocol


def test_a_load_with_a_config_replaces_the_file_for_that_load_and_unload_waits(server: TritonServer) -> None:
    for admin in _admins(server):
        with contextlib.closing(admin):
            config = admin.model_config("add_sub")
            config.max_batch_size = 4
            del config.dynamic_batching.preferred_batch_size[:]  # the server filled in [8]: above 4
            admin.load("add_sub", config=config)
            assert admin.model_config("add_sub").max_batch_size == 4, admin.protocol
            admin.unload("add_sub", wait=True)
            assert not admin.model_ready("add_sub"), admin.protocol
            admin.load("add_sub")  # back to the file's config
            assert admin.model_config("add_sub").max_batch_size == 8, admin.protocol


def test_statistics_count_executions_by_batch_size(server: TritonServer) -> None:
    client = httpclient.InferenceServerClient(server.http_url)
    inputs = []
    for name in ("INPUT0", "INPUT1"):
        tensor = httpclient.InferInput(name, [3, 4], "FP32")
        tensor.set_data_from_numpy(np.ones((3, 4), dtype=np.float32))
        inputs.append(tensor)
    for admin in _admins(server):
        with contextlib.closing(admin):
            before = admin.exec_stats("add_sub")
            client.infer("add_sub", inputs)
            after = admin.exec_stats("add_sub")
            assert after[3][0] == before.get(3, (0, 0))[0] + 1, admin.protocol
            assert after[3][1] > before.get(3, (0, 0))[1], admin.protocol
    client.close()


def test_an_unknown_model_is_model_not_ready_over_both_protocols(server: TritonServer) -> None:
    for admin in _admins(server):
        with contextlib.closing(admin):
            assert not admin.model_ready("no_such_model")
            with pytest.raises(ModelNotReadyError, match="no_such_model"):
                admin.model_config("no_such_model")
            with pytest.raises(ModelNotReadyError, match="no_such_model"):
                admin.model_metadata("no_such_model")


def test_a_refused_load_carries_the_servers_reason_over_both_protocols(server: TritonServer) -> None:
    for admin in _admins(server):
        with contextlib.closing(admin), pytest.raises(ModelLoadError) as info:
            admin.load("broken")
        assert info.value.model == "broken" and info.value.reason, admin.protocol
    # The server wrapper adds the model's own words from the log.
    with pytest.raises(ModelLoadError, match="deliberately broken at load"):
        server.load_model("broken")


def test_nothing_listening_is_a_connect_error_not_a_timeout() -> None:
    [port] = free_ports(1)
    for protocol in ("http", "grpc"):
        with contextlib.closing(ServerAdmin(f"127.0.0.1:{port}", protocol=protocol, timeout_s=2.0)) as admin:  # type: ignore[arg-type]
            assert not admin.is_live()
            with pytest.raises(ConnectError, match=f"127.0.0.1:{port}"):
                admin.index()


def test_a_name_that_leads_outside_the_repository_is_refused_before_asking(server: TritonServer) -> None:
    for name in ("../admin_repo0", "a/b", "..", ".hidden"):
        with pytest.raises(ConfigError, match="plain folder name"):
            server.load_model(name)
    with pytest.raises(ConfigError, match="model name '' is empty"):
        server.load_model("")
    with pytest.raises(ConfigError, match="plain folder name"):
        TritonServer(server.repositories[0], model_control="explicit", models=["../x"])
