"""Models built by ``build_onnx`` load in the real bundled tritonserver and answer like ONNX Runtime.

One repository holds every model (MLP, CNN, two inputs, dynamic spatial dims, a graph that mixes
the batch, fixed batches of 1 and 3 made dynamic, an opset-6 model converted, a rank-1 sequence
input, FP16 converted, FP16 end to end, external data, a torch module); one real server serves
them all for the whole module.
"""

from __future__ import annotations

import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import numpy as np
import onnx
import pytest
import torch
import tritonclient.grpc as grpcclient
from tritonclient.grpc import model_config_pb2 as mc

from tests.support import onnx_models as models
from tritonkit.builders import OnnxBuildResult, build_onnx, build_torch, make_demo_model, ort_runner
from tritonkit.builders.staging import STAGING_PREFIX
from tritonkit.repository import read_config
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server


class _TorchMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(6, 16)
        self.fc2 = torch.nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc2(torch.relu(self.fc1(x))))


@pytest.fixture(scope="module")
def torch_module() -> _TorchMLP:
    return _TorchMLP().eval()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, torch_module: _TorchMLP) -> dict[str, OnnxBuildResult]:
    src = tmp_path_factory.mktemp("onnx_src")
    repo = tmp_path_factory.mktemp("build_serve") / "model_repository"
    results: dict[str, OnnxBuildResult] = {}
    # runtime="auto": the bundled server has only the python backend, so auto must pick python.
    results["mlp"] = build_onnx(make_demo_model(src / "mlp.onnx"), name="mlp", repo=repo, runtime="auto")
    plain = {
        "cnn": models.make_cnn(),
        "two_inputs": models.make_two_inputs(),
        "dyn_spatial": models.make_dynamic_spatial_cnn(),
        "mixes_batch": models.make_mixes_batch(),
        "fixed_linear": models.make_fixed_batch_linear(),
        "fp16_io": models.make_fp16_io(),
        "old_opset": models.make_opset6_linear(),
        "fixed3": models.make_fixed_batch3_linear(),
        "sequence": models.make_sequence_input(),
    }
    for name, model in plain.items():
        results[name] = build_onnx(models.save(model, src / f"{name}.onnx"), name=name, repo=repo, runtime="python")
    results["fp16_resize"] = build_onnx(models.save(models.make_resize_cnn(), src / "resize.onnx"),
                                        name="fp16_resize", repo=repo, runtime="python", fp16=True)
    results["external"] = build_onnx(models.save(models.make_cnn(), src / "ext" / "cnn_ext.onnx", external_data=True),
                                     name="external", repo=repo, runtime="python")
    results["torch_mlp"] = build_torch(torch_module, torch.randn(3, 6), name="torch_mlp", input_names=["x"],
                                       output_names=["y"], repo=repo, runtime="python")
    return results


@pytest.fixture(scope="module")
def server(built: dict[str, OnnxBuildResult]) -> Iterator[TritonServer]:
    repo = next(iter(built.values())).repo
    # A build of mlp's version 2 in progress: its staging folder sits inside the model folder.
    in_progress = built["mlp"].model_dir / f"{STAGING_PREFIX}inprogress" / "mlp" / "2"
    in_progress.mkdir(parents=True)
    (in_progress / "model.onnx").write_bytes(b"half written")
    with TritonServer(repo, startup_timeout_s=180.0) as running:
        yield running


@pytest.fixture(scope="module")
def client(server: TritonServer) -> Iterator[grpcclient.InferenceServerClient]:
    c = grpcclient.InferenceServerClient(server.grpc_url)
    yield c
    c.close()


_TRITON = {np.dtype(np.float32): "FP32", np.dtype(np.float16): "FP16", np.dtype(np.bool_): "BOOL",
           np.dtype(np.int64): "INT64"}


def _infer(client: grpcclient.InferenceServerClient, model: str, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    inputs = []
    for name, array in feeds.items():
        tensor = grpcclient.InferInput(name, list(array.shape), _TRITON[array.dtype])
        tensor.set_data_from_numpy(array)
        inputs.append(tensor)
    result = client.infer(model, inputs)
    return {o["name"]: result.as_numpy(o["name"]) for o in result.get_response(as_json=True)["outputs"]}


def _served_model(built: dict[str, OnnxBuildResult], name: str) -> Path:
    return built[name].model_dir / "1" / "model.onnx"


def _assert_same_as_ort(built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, name: str,
                        feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    served = _infer(client, name, feeds)
    expected = ort_runner(_served_model(built, name))(feeds)
    assert served.keys() == expected.keys()
    for key in expected:
        assert served[key].dtype == expected[key].dtype, key
        np.testing.assert_array_equal(served[key], expected[key], err_msg=f"{name}.{key}")
    return served


def test_every_built_model_loads_in_the_bundled_server(built: dict[str, OnnxBuildResult], server: TritonServer) -> None:
    for name in built:
        assert server.model_ready(name), name


def test_a_staging_folder_inside_a_model_folder_is_ignored_by_the_server(
        built: dict[str, OnnxBuildResult], server: TritonServer) -> None:
    assert any(p.name.startswith(STAGING_PREFIX) for p in built["mlp"].model_dir.iterdir())
    assert server.model_ready("mlp")


def test_auto_runtime_picks_python_for_the_bundled_server_and_batches_the_mlp(built: dict[str, OnnxBuildResult]) -> None:
    config = read_config(built["mlp"].model_dir / "config.pbtxt")
    assert built["mlp"].runtime == "python"
    assert config.backend == "python"
    assert config.max_batch_size == 8
    assert config.dynamic_batching.max_queue_delay_microseconds == 5000
    assert [list(t.dims) for t in config.input] == [[16]]
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
    assert config.model_warmup[0].inputs["x"].random_data
    assert built["mlp"].files == ["model.onnx", "model.py"]
    assert (built["mlp"].model_dir / "1" / "model.py").read_text().startswith('"""Triton python-backend model')


def test_mlp_answers_equal_onnx_runtime(built: dict[str, OnnxBuildResult],
                                        client: grpcclient.InferenceServerClient) -> None:
    x = np.random.default_rng(1).standard_normal((3, 16)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "mlp", {"x": x})
    np.testing.assert_allclose(served["y"].sum(axis=1), 1.0, rtol=1e-5)  # softmax rows


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    rng = np.random.default_rng(2)
    requests = [rng.standard_normal((1 + i % 3, 16)).astype(np.float32) for i in range(12)]
    answers: queue.Queue[tuple[int, Any, Any]] = queue.Queue()
    before = client.get_inference_statistics("mlp").model_stats[0]
    for i, x in enumerate(requests):
        tensor = grpcclient.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        client.async_infer("mlp", [tensor], callback=lambda result, error, i=i: answers.put((i, result, error)))
    got = [answers.get(timeout=60) for _ in requests]
    run = ort_runner(_served_model(built, "mlp"))
    for i, result, error in got:
        assert error is None, error
        # Merged with other requests into one ONNX Runtime call: same numbers up to float32 rounding.
        np.testing.assert_allclose(result.as_numpy("y"), run({"x": requests[i]})["y"], rtol=1e-5, atol=1e-6)
    after = client.get_inference_statistics("mlp").model_stats[0]
    assert after.inference_count - before.inference_count == sum(len(x) for x in requests)
    # Fewer executions than requests: the dynamic batcher merged some, and model.py split them back.
    assert after.execution_count - before.execution_count < len(requests)


def test_cnn_answers_equal_onnx_runtime(built: dict[str, OnnxBuildResult],
                                        client: grpcclient.InferenceServerClient) -> None:
    img = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    _assert_same_as_ort(built, client, "cnn", {"img": img})
    config = read_config(built["cnn"].model_dir / "config.pbtxt")
    assert list(config.input[0].dims) == [3, 8, 8] and list(config.output[0].dims) == [5]


def test_two_inputs_with_bool_and_int64_answer_like_onnx_runtime(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    rng = np.random.default_rng(4)
    feeds = {"a": rng.standard_normal((3, 4)).astype(np.float32), "mask": rng.random((3, 4)) < 0.5}
    served = _assert_same_as_ort(built, client, "two_inputs", feeds)
    np.testing.assert_array_equal(served["count"][:, 0], feeds["mask"].sum(axis=1))
    config = read_config(built["two_inputs"].model_dir / "config.pbtxt")
    assert [mc.DataType.Name(t.data_type) for t in config.input] == ["TYPE_FP32", "TYPE_BOOL"]
    assert [mc.DataType.Name(t.data_type) for t in config.output] == ["TYPE_FP32", "TYPE_FP32", "TYPE_INT64"]


def test_dynamic_spatial_dims_are_minus_one_and_serve_two_sizes(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    config = read_config(built["dyn_spatial"].model_dir / "config.pbtxt")
    assert list(config.input[0].dims) == [3, -1, -1]
    # The warmup needs concrete sizes: the verified sample's.
    assert list(config.model_warmup[0].inputs["img"].dims) == [3, 16, 16]
    rng = np.random.default_rng(5)
    for h, w in ((8, 8), (13, 7)):
        _assert_same_as_ort(built, client, "dyn_spatial", {"img": rng.standard_normal((2, 3, h, w)).astype(np.float32)})


def test_graph_that_mixes_the_batch_is_served_without_batching(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    result = built["mixes_batch"]
    assert result.max_batch_size == 0
    assert "different answers than one by one" in result.batch_note
    config = read_config(result.model_dir / "config.pbtxt")
    assert config.max_batch_size == 0 and not config.HasField("dynamic_batching")
    assert list(config.input[0].dims) == [-1, 4]
    x = np.random.default_rng(6).standard_normal((5, 4)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "mixes_batch", {"x": x})
    np.testing.assert_allclose(served["y"].mean(axis=0), 0.0, atol=1e-6)


def test_fixed_batch_of_one_is_made_dynamic_and_serves_batches(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, tmp_path: Path) -> None:
    result = built["fixed_linear"]
    assert result.max_batch_size == 8 and "made dynamic" in result.batch_note
    assert [c.title.split(" (")[0] for c in result.comparisons] == [
        "ONNX Runtime vs reference", "batch consistency: 4 samples as one batch vs one by one"]
    x = np.random.default_rng(7).standard_normal((3, 4)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "fixed_linear", {"x": x})
    original = ort_runner(models.save(models.make_fixed_batch_linear(), tmp_path / "orig.onnx"))
    row_by_row = np.concatenate([original({"x": x[i:i + 1]})["y"] for i in range(3)])
    np.testing.assert_allclose(served["y"], row_by_row, rtol=1e-6)


def test_fp16_conversion_keeps_fp32_io_and_answers_equal_onnx_runtime(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, tmp_path: Path) -> None:
    result = built["fp16_resize"]
    assert result.fp16 is not None and result.fp16.converted_tensors == 2
    assert any(k.startswith("Resize") for k in result.fp16.kept_fp32)
    config = read_config(result.model_dir / "config.pbtxt")
    assert config.input[0].data_type == mc.TYPE_FP32 and config.output[0].data_type == mc.TYPE_FP32
    assert result.verified
    img = np.random.default_rng(8).standard_normal((2, 3, 8, 8)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "fp16_resize", {"img": img})
    fp32 = ort_runner(models.save(models.make_resize_cnn(), tmp_path / "fp32.onnx"))({"img": img})["out"]
    np.testing.assert_allclose(served["out"], fp32, atol=0.02 * float(np.abs(fp32).max()))
    assert not np.array_equal(served["out"], fp32)  # it really ran in FP16


def test_fp16_model_end_to_end_is_served_as_type_fp16(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    config = read_config(built["fp16_io"].model_dir / "config.pbtxt")
    assert config.input[0].data_type == mc.TYPE_FP16 and config.output[0].data_type == mc.TYPE_FP16
    x = np.random.default_rng(9).standard_normal((4, 8)).astype(np.float16)
    _assert_same_as_ort(built, client, "fp16_io", {"x": x})


def test_external_data_model_is_served_with_its_data_file(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    result = built["external"]
    assert result.analysis.external_data == ("cnn_ext.onnx.data",)
    assert (result.model_dir / "1" / "cnn_ext.onnx.data").is_file()
    img = np.random.default_rng(10).standard_normal((2, 3, 8, 8)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "external", {"img": img})
    np.testing.assert_array_equal(served["logits"], _infer(client, "cnn", {"img": img})["logits"])


def test_torch_module_is_exported_with_a_dynamic_batch_and_served(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, torch_module: _TorchMLP) -> None:
    result = built["torch_mlp"]
    assert result.analysis.batch.kind == "dynamic" and result.max_batch_size == 8
    assert result.comparisons[0].title.startswith("ONNX Runtime vs reference (torch module)")
    assert result.verified
    x = np.random.default_rng(11).standard_normal((5, 6)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "torch_mlp", {"x": x})
    with torch.no_grad():
        expected = torch_module(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(served["y"], expected, rtol=1e-4, atol=1e-5)


def test_an_opset_6_model_is_converted_verified_by_the_reference_evaluator_and_served(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, tmp_path: Path) -> None:
    from onnx.reference import ReferenceEvaluator

    result = built["old_opset"]
    assert any("converted from opset 6 to opset 13" in note for note in result.notes)
    assert result.comparisons[0].title.startswith("ONNX Runtime vs reference (ONNX reference evaluator")
    assert result.verified and result.max_batch_size == 8
    served_model = onnx.load(str(_served_model(built, "old_opset")))
    assert [o.version for o in served_model.opset_import if o.domain in ("", "ai.onnx")] == [13]
    x = np.random.default_rng(12).standard_normal((3, 4)).astype(np.float32)
    served = _infer(client, "old_opset", {"x": x})
    original = ReferenceEvaluator(models.make_opset6_linear())
    row_by_row = np.concatenate([cast(list[np.ndarray], original.run(None, {"x": x[i:i + 1]}))[0] for i in range(3)])
    np.testing.assert_allclose(served["y"], row_by_row, rtol=1e-5, atol=1e-6)


def test_a_batch_fixed_to_3_is_verified_on_multiples_of_3_and_serves_any_batch(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient, tmp_path: Path) -> None:
    result = built["fixed3"]
    assert result.verified and result.max_batch_size == 8 and "fixed to 3" in result.batch_note
    assert result.comparisons[0].samples % 3 == 0
    x = np.random.default_rng(13).standard_normal((2, 4)).astype(np.float32)
    served = _assert_same_as_ort(built, client, "fixed3", {"x": x})
    weights = onnx.numpy_helper.to_array(models.make_fixed_batch3_linear().graph.initializer[0])
    np.testing.assert_allclose(served["y"], x @ weights, rtol=1e-5)


def test_a_rank_1_sequence_input_is_not_taken_as_the_batch_and_takes_any_length(
        built: dict[str, OnnxBuildResult], client: grpcclient.InferenceServerClient) -> None:
    result = built["sequence"]
    assert result.max_batch_size == 0 and "'L'" in result.batch_note and "--batch-axis" in result.batch_note
    assert "not batchable" in result.summary()
    config = read_config(result.model_dir / "config.pbtxt")
    assert list(config.input[0].dims) == [-1]
    tokens = np.linspace(-1, 1, 10, dtype=np.float32)  # ten elements: more than any default max batch size
    served = _infer(client, "sequence", {"tokens": tokens})
    np.testing.assert_array_equal(served["out"], np.maximum(tokens, 0))
