"""What the writer produces is what a real tritonserver loads; the linter can read a running server."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from click.testing import CliRunner

from tests.support.pymodels import ADD_SUB_PY
from tritonkit.cli import main
from tritonkit.repository import (
    DynamicBatching,
    EnsembleStep,
    Hardware,
    ModelRepository,
    ModelSpec,
    QueuePolicy,
    TensorSpec,
    Warmup,
    WarmupInput,
    instance_groups_for,
)
from tritonkit.repository.lint import Severity, lint_repository, target_from_server
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

TENSORS = {
    "inputs": [TensorSpec(name="INPUT0", dtype=np.float32, dims=[4]), TensorSpec(name="INPUT1", dtype="FP32", dims=[4])],
    "outputs": [TensorSpec(name="OUTPUT0", dtype="TYPE_FP32", dims=[4]), TensorSpec(name="OUTPUT1", dtype="FP32", dims=[4])],
}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ModelRepository, TritonServer]]:
    repo = ModelRepository.init(tmp_path_factory.mktemp("written") / "repo")
    model_py = textwrap.dedent(ADD_SUB_PY).lstrip()
    repo.add_model(ModelSpec(
        name="add_sub", backend="python", max_batch_size=8, **TENSORS,  # type: ignore[arg-type]
        dynamic_batching=DynamicBatching(window="10ms", default_queue_policy=QueuePolicy(max_queue_size=32)),
        instance_groups=instance_groups_for(Hardware.cpu(cores=2), threads_per_instance=2),
        warmup=[Warmup(name="zeros", batch_size=2, inputs={
            "INPUT0": WarmupInput(dtype="FP32", dims=[4]), "INPUT1": WarmupInput(dtype="FP32", dims=[4], data="random")})],
    ), files={"model.py": model_py})
    repo.add_model(ModelSpec(name="add_sub_flat", backend="python", **TENSORS),  # type: ignore[arg-type]
                   files={"model.py": model_py})
    repo.add_model(ModelSpec(
        name="pipeline", max_batch_size=8, **TENSORS,  # type: ignore[arg-type]
        ensemble_steps=[EnsembleStep(model_name="add_sub", input_map={"INPUT0": "INPUT0", "INPUT1": "INPUT1"},
                                     output_map={"OUTPUT0": "OUTPUT0", "OUTPUT1": "OUTPUT1"})],
    ))
    with TritonServer(repo.root) as server:
        yield repo, server


def test_written_repository_lints_without_errors(served: tuple[ModelRepository, TritonServer]) -> None:
    repo, server = served
    from tritonkit.repository.lint import target_from_install

    report = lint_repository(repo.root, target=target_from_install(server.install))
    assert report.ok, report.to_text()


def test_server_sees_the_config_the_writer_wrote(served: tuple[ModelRepository, TritonServer]) -> None:
    _, server = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    cfg = client.get_model_config("add_sub").config
    assert cfg.max_batch_size == 8
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 10000
    assert cfg.dynamic_batching.default_queue_policy.max_queue_size == 32
    assert [(g.kind, g.count) for g in cfg.instance_group] == [(2, 1)]  # KIND_CPU, 2 cores / 2 threads
    flat = client.get_model_config("add_sub_flat").config
    assert flat.max_batch_size == 0 and not flat.HasField("dynamic_batching")


def test_written_ensemble_serves_requests(served: tuple[ModelRepository, TritonServer]) -> None:
    _, server = served
    client = grpcclient.InferenceServerClient(server.grpc_url)
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    inputs = [grpcclient.InferInput("INPUT0", [2, 4], "FP32"), grpcclient.InferInput("INPUT1", [2, 4], "FP32")]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(np.ones_like(a))
    result = client.infer("pipeline", inputs)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + 1)


def test_target_from_a_running_server_reads_backends_and_gpus(served: tuple[ModelRepository, TritonServer]) -> None:
    _, server = served
    target = target_from_server(server.grpc_url, metrics_url=server.metrics_url)
    assert target.backends == frozenset({"python", "ensemble"}) and not target.backends_complete
    assert target.gpu_count == 0 and target.kind == "cpu"
    assert any("no API listing backends" in note for note in target.notes)


def test_lint_against_a_server_url_flags_a_backend_it_does_not_use(
        served: tuple[ModelRepository, TritonServer], tmp_path: Path) -> None:
    _, server = served
    other = ModelRepository.init(tmp_path / "other")
    other.add_model(ModelSpec(name="onnx_model", backend="onnxruntime", max_batch_size=8, **TENSORS,  # type: ignore[arg-type]
                              instance_groups=[]))
    result = CliRunner().invoke(main, ["repo", "lint", str(other.root), "--server", server.grpc_url,
                                       "--metrics-url", server.metrics_url, "--format", "json", "--ignore", "TK009"])
    data = json.loads(result.output)
    (finding,) = [f for f in data["findings"] if f["rule"] == "TK601"]
    assert finding["severity"] == Severity.WARNING.value and "may be missing" in finding["message"]
    assert data["target"]["gpu_count"] == 0 and result.exit_code == 0


def test_lint_against_an_address_where_nothing_listens_is_a_clean_error(tmp_path: Path) -> None:
    from tritonkit.server import free_ports

    (port,) = free_ports(1)
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--server", f"127.0.0.1:{port}"])
    assert result.exit_code == 2 and "Traceback" not in result.output and "cannot read server" in result.output
