"""Client and AsyncClient round trips on a real server; bad requests refused before sending."""

from __future__ import annotations

import asyncio
import inspect
import json
import re
from collections.abc import Iterator

import numpy as np
import pytest

import tritonkit.client as client_pkg
from tests.support.client_models import requests_seen, write_counter
from tests.support.pymodels import write_add_sub, write_python_model
from tritonkit.client import AsyncClient, Client, ModelMetadata
from tritonkit.errors import ClientError, ConfigError, InvalidInputError
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

# Echoes what the server passed on: request id and custom parameters (as JSON in a BYTES output).
INSPECT_CONFIG = """
name: "inspect"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "INFO" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
INSPECT_PY = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            info = {"id": request.request_id(), "params": json.loads(request.parameters() or "{}")}
            blob = np.array([json.dumps(info).encode()], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("INFO", blob)]))
        return out
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("client_infer_repo")
    write_add_sub(repo)
    write_python_model(repo, "inspect", config_pbtxt=INSPECT_CONFIG, model_py=INSPECT_PY)
    write_counter(repo, "tokens")  # decoupled: unary infer must refuse it
    with TritonServer(repo) as started:
        yield started


A = np.arange(8, dtype=np.float32).reshape(2, 4)
B = np.ones((2, 4), dtype=np.float32)


def test_client_round_trip_returns_every_output_as_numpy(server: TritonServer) -> None:
    with Client(server.grpc_url, timeouts=10) as client:
        outputs = client.infer("add_sub", {"INPUT0": A, "INPUT1": B})
    assert set(outputs) == {"OUTPUT0", "OUTPUT1"}
    np.testing.assert_array_equal(outputs["OUTPUT0"], A + B)
    np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)
    assert outputs["OUTPUT0"].dtype == np.float32


def test_client_returns_only_the_selected_outputs(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        outputs = client.infer("add_sub", {"INPUT0": A, "INPUT1": B}, outputs=["OUTPUT1"])
    assert list(outputs) == ["OUTPUT1"]
    np.testing.assert_array_equal(outputs["OUTPUT1"], A - B)


def test_async_client_round_trip_with_many_calls_in_flight(server: TritonServer) -> None:
    async def run() -> list[dict[str, np.ndarray]]:
        async with AsyncClient(server.grpc_url, timeouts=10) as client:
            batches = [np.full((1, 4), i, dtype=np.float32) for i in range(16)]
            return await asyncio.gather(
                *(client.infer("add_sub", {"INPUT0": b, "INPUT1": b}) for b in batches)
            )

    results = asyncio.run(run())
    for i, outputs in enumerate(results):
        np.testing.assert_array_equal(outputs["OUTPUT0"], np.full((1, 4), 2 * i, dtype=np.float32))


def test_client_passes_request_id_and_parameters_to_the_model(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        outputs = client.infer(
            "inspect",
            {"X": np.array([1, 2], dtype=np.int32)},
            request_id="req-42",
            priority=1,
            parameters={"temperature": 0.5, "user": "ada", "top_k": 3, "stream": False},
        )
    info = json.loads(outputs["INFO"][0])
    assert info["id"] == "req-42"
    assert info["params"] == {"temperature": 0.5, "user": "ada", "top_k": 3, "stream": False}


def test_client_caches_the_model_spec_from_metadata_and_config(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        spec = client.model_metadata("add_sub")
        assert client.model_metadata("add_sub") is spec
    assert isinstance(spec, ModelMetadata)
    assert spec.max_batch_size == 8
    assert [(t.name, t.datatype, t.dims) for t in spec.inputs] == [
        ("INPUT0", "FP32", (4,)),
        ("INPUT1", "FP32", (4,)),
    ]
    assert [t.name for t in spec.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert not spec.decoupled


BAD_REQUESTS = {
    "unknown": ({"INPUT0": A, "INPUT1": B, "INPUT9": B}, "unknown input 'INPUT9'"),
    "missing": ({"INPUT0": A}, "missing input 'INPUT1'"),
    "dtype": (
        {"INPUT0": A.astype(np.float64), "INPUT1": B},
        "input 'INPUT0' has dtype float64, the model expects FP32",
    ),
    "shape": (
        {"INPUT0": A[:, :3], "INPUT1": B[:, :3]},
        "input 'INPUT0' has shape [2, 3], the model expects [batch<=8, 4]",
    ),
    "no_batch_dim": ({"INPUT0": A[0], "INPUT1": B[0]}, "input 'INPUT0' has shape [4]"),
    "batch": (
        {"INPUT0": np.zeros((9, 4), np.float32), "INPUT1": np.zeros((9, 4), np.float32)},
        "batch size 9 is above the model's max_batch_size 8",
    ),
    "not_numpy": (
        {"INPUT0": [[1.0, 2.0, 3.0, 4.0]], "INPUT1": B[:1]},
        "input 'INPUT0' is a list, not a numpy array",
    ),
    "batch_mismatch": ({"INPUT0": A, "INPUT1": B[:1]}, "inputs disagree on the batch size"),
}


@pytest.mark.parametrize("case", sorted(BAD_REQUESTS))
def test_client_refuses_bad_input_before_sending_and_lists_what_the_model_expects(
    server: TritonServer, case: str
) -> None:
    inputs, expected = BAD_REQUESTS[case]
    before = requests_seen(server.grpc_url, "add_sub")
    with Client(server.grpc_url) as client, pytest.raises(InvalidInputError) as caught:
        client.infer("add_sub", inputs)
    message = str(caught.value)
    assert expected in message
    assert "The model expects: INPUT0 FP32 [batch<=8, 4]; INPUT1 FP32 [batch<=8, 4]" in message
    assert caught.value.model == "add_sub"
    assert caught.value.hint
    assert requests_seen(server.grpc_url, "add_sub") == before, "a refused request reached the server"


class _ArrayLookalike:
    """Has an ndarray's dtype and shape, but is no ndarray."""

    dtype = A.dtype
    shape = A.shape


def test_client_checks_every_request_after_a_good_one_with_the_same_names(server: TritonServer) -> None:
    # The builder reuses the layout of the request before when names, dtypes and shapes
    # match; a request that differs in any of them must still get the full check.
    before = requests_seen(server.grpc_url, "add_sub")
    with Client(server.grpc_url) as client:
        good = {"INPUT0": A, "INPUT1": B}
        assert np.array_equal(client.infer("add_sub", good)["OUTPUT0"], A + B)
        cases = [*BAD_REQUESTS.values(), ({"INPUT0": _ArrayLookalike(), "INPUT1": B}, "is a _ArrayLookalike")]
        for inputs, expected in cases:
            client.infer("add_sub", good)  # the layout to reuse is the good one again
            with pytest.raises(InvalidInputError, match=re.escape(expected)):
                client.infer("add_sub", inputs)
    assert requests_seen(server.grpc_url, "add_sub") == before + 1 + len(cases)


def test_async_client_refuses_bad_input_before_sending(server: TritonServer) -> None:
    before = requests_seen(server.grpc_url, "add_sub")

    async def run() -> None:
        async with AsyncClient(server.grpc_url) as client:
            await client.infer("add_sub", {"INPUT0": A})

    with pytest.raises(InvalidInputError, match="missing input 'INPUT1'"):
        asyncio.run(run())
    assert requests_seen(server.grpc_url, "add_sub") == before


def test_client_refuses_unknown_output_and_reserved_parameter(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        with pytest.raises(InvalidInputError, match="unknown output 'OUTPUT7'.*the model produces: OUTPUT0"):
            client.infer("add_sub", {"INPUT0": A, "INPUT1": B}, outputs=["OUTPUT7"])
        with pytest.raises(InvalidInputError, match="'priority' is reserved"):
            client.infer("add_sub", {"INPUT0": A, "INPUT1": B}, parameters={"priority": 2})


def test_client_refuses_unary_infer_on_a_decoupled_model(server: TritonServer) -> None:
    with (
        Client(server.grpc_url) as client,
        pytest.raises(InvalidInputError, match="decoupled.*client.stream"),
    ):
        client.infer("tokens", {"N": np.array([3], dtype=np.int32)})


def test_client_refuses_use_after_close(server: TritonServer) -> None:
    client = Client(server.grpc_url)
    with client:
        client.infer("add_sub", {"INPUT0": A, "INPUT1": B})
    assert client.closed
    client.close()  # idempotent
    with pytest.raises(ClientError, match="is closed"):
        client.infer("add_sub", {"INPUT0": A, "INPUT1": B})
    with pytest.raises(ClientError, match="is closed"):
        client.is_live()


def test_async_client_refuses_use_after_close(server: TritonServer) -> None:
    async def run() -> None:
        client = AsyncClient(server.grpc_url)
        async with client:
            assert await client.is_ready(model="add_sub")
        await client.close()
        await client.infer("add_sub", {"INPUT0": A, "INPUT1": B})

    with pytest.raises(ClientError, match="is closed"):
        asyncio.run(run())


def test_client_health_reports_live_and_ready(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        assert client.is_live()
        assert client.is_ready()
        assert client.is_ready(model="add_sub")
        assert not client.is_ready(model="no_such_model")
        client.wait_until_ready(5.0, model="add_sub")


def test_client_options_are_keyword_only() -> None:
    for method in (Client.__init__, AsyncClient.__init__, Client.infer, AsyncClient.infer, Client.stream):
        params = list(inspect.signature(method).parameters.values())
        positional = [p.name for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD]
        assert positional in (["self", "url"], ["self", "model", "inputs"]), (method, positional)
    with pytest.raises(TypeError):
        Client("127.0.0.1:1", 5.0)  # type: ignore[misc]


def test_client_rejects_a_non_grpc_url() -> None:
    with pytest.raises(ConfigError, match="not a gRPC address"):
        Client("http://127.0.0.1:8000")
    assert Client("localhost").url == "localhost:8001"
    assert Client("grpc://127.0.0.1:9001").url == "127.0.0.1:9001"


def test_client_package_all_is_complete() -> None:
    public = {name for name in dir(client_pkg) if not name.startswith("_") and name.isidentifier()}
    exported = {n for n in public if not isinstance(getattr(client_pkg, n), type(client_pkg))}
    assert set(client_pkg.__all__) == exported - {"annotations"}


def test_model_metadata_describes_optional_inputs_and_variable_dims() -> None:
    spec = ModelMetadata(
        name="m",
        version="1",
        max_batch_size=0,
        inputs=(client_pkg.TensorMetadata("X", "INT64", (-1, 3), optional=True),),
        outputs=(),
    )
    assert spec.expects() == "X INT64 [any, 3] (optional)"


def test_tensor_metadata_coerces_plain_values_to_its_dtype_in_one_place() -> None:
    fp32 = client_pkg.TensorMetadata("X", "FP32", (2,))
    coerced = fp32.coerce([[1, 2], [3, 4]])
    assert coerced.dtype == np.float32
    assert coerced.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    text = client_pkg.TensorMetadata("T", "BYTES", (1,)).coerce([["hi"], [b"raw"], [3]])
    assert text.dtype == object
    assert text.tolist() == [[b"hi"], [b"raw"], [b"3"]]
    with pytest.raises(InvalidInputError, match=r"input 'X' of model 'm': value does not convert to FP32"):
        fp32.coerce([["a", "b"]], model="m")


def test_a_request_built_on_the_fast_path_is_the_message_tritonclient_builds() -> None:
    """prepare_request sets a number array's bytes itself (see its WAR); the message must not change.

    Pure: compares the serialised ModelInferRequest with the one tritonclient's own
    set_data_from_numpy gives, for numbers (one not contiguous), booleans and BYTES.
    """
    from tritonclient.grpc import InferInput
    from tritonclient.grpc._utils import _get_inference_request

    from tritonkit.client._request import prepare_request

    meta = ModelMetadata(
        name="m",
        version="1",
        max_batch_size=4,
        inputs=(
            client_pkg.TensorMetadata("F", "FP32", (3,)),
            client_pkg.TensorMetadata("I", "INT64", (2,)),
            client_pkg.TensorMetadata("B", "BOOL", (1,)),
            client_pkg.TensorMetadata("T", "BYTES", (1,)),
        ),
        outputs=(client_pkg.TensorMetadata("Y", "FP32", (3,)),),
    )
    arrays = {
        "F": np.arange(6, dtype=np.float32).reshape(3, 2).T,  # not C-contiguous
        "I": np.array([[1, -2], [3, 4]], dtype=np.int64),
        "B": np.array([[True], [False]]),
        "T": np.array([["héllo"], ["x"]]),
    }
    fields = dict(
        outputs=None,
        request_id="r",
        priority=0,
        parameters=None,
        server_timeout_us=None,
        shm_threshold_bytes=None,
    )
    for _ in range(2):  # the first call checks and remembers the layout, the second reuses it
        prepared = prepare_request(meta, arrays, **fields)
        expected = [
            InferInput(name, list(array.shape), tensor.datatype).set_data_from_numpy(
                array.astype(object) if array.dtype.kind == "U" else array
            )
            for tensor, (name, array) in zip(meta.inputs, arrays.items(), strict=True)
        ]
        built = [
            _get_inference_request(
                model_name="m",
                inputs=tensors,
                model_version="",
                request_id="r",
                outputs=None,
                sequence_id=0,
                sequence_start=False,
                sequence_end=False,
                priority=0,
                timeout=None,
                parameters=None,
            ).SerializeToString(deterministic=True)
            for tensors in (prepared.inputs, expected)
        ]
        assert built[0] == built[1]
        assert [t._get_content() for t in prepared.inputs] == [t._get_content() for t in expected]
