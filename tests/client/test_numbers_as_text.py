"""Numeric outputs a model sends as text (TensorRT-LLM's LLM-API model.py, lines 1.1 and 1.2, sends
``cumulative_logprob`` and its timing outputs as ``str(value)`` while its config declares FP32 /
INT64): the client reads them as the numbers the config declares, on the real server; text that is
no such number is still a misfit.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from tests.support.pymodels import write_python_model
from tritonkit.client import AsyncClient, Client
from tritonkit.errors import ServerSideError
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

# Declares SCORE FP32 [1] and TIME_NS INT64 [1] (no batching, as the LLM-API model is written);
# sends both as object tensors of text, the text chosen by the request's MODE.
CONFIG = """
name: "as_text"
backend: "python"
max_batch_size: 0
input [ { name: "MODE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [
  { name: "SCORE" data_type: TYPE_FP32 dims: [ 1 ] },
  { name: "TIME_NS" data_type: TYPE_INT64 dims: [ 1 ] }
]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

TEXT = {b"numbers": ("-1.25", "1764633600123456789"), b"words": ("minus one", "soon"),
        b"typed": (None, None)}


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0]
            score, time_ns = TEXT[mode]
            if score is None:
                tensors = [pb_utils.Tensor("SCORE", np.array([0.5], np.float32)),
                           pb_utils.Tensor("TIME_NS", np.array([7], np.int64))]
            else:
                tensors = [pb_utils.Tensor("SCORE", np.array([score], dtype=object)),
                           pb_utils.Tensor("TIME_NS", np.array([time_ns], dtype=object))]
            responses.append(pb_utils.InferenceResponse(output_tensors=tensors))
        return responses
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("numbers_as_text")
    write_python_model(repo, "as_text", config_pbtxt=CONFIG, model_py=MODEL)
    with TritonServer(repo) as running:
        yield running


def _mode(text: str) -> dict[str, np.ndarray]:
    return {"MODE": np.array([text.encode()], dtype=object)}


def test_numbers_sent_as_text_come_back_as_the_declared_numbers(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        outputs = client.infer("as_text", _mode("numbers"))
    assert outputs["SCORE"].dtype == np.float32 and outputs["SCORE"].tolist() == [-1.25]
    # An INT64 beyond float precision arrives exactly (parsed as an integer, not through a float).
    assert outputs["TIME_NS"].dtype == np.int64 and outputs["TIME_NS"].tolist() == [1764633600123456789]


def test_typed_outputs_are_read_as_before(server: TritonServer) -> None:
    with Client(server.grpc_url) as client:
        outputs = client.infer("as_text", _mode("typed"))
    assert outputs["SCORE"].tolist() == [0.5] and outputs["TIME_NS"].tolist() == [7]


def test_text_that_is_no_number_is_still_refused_as_unlike_the_config(server: TritonServer) -> None:
    with Client(server.grpc_url) as client, pytest.raises(ServerSideError) as caught:
        client.infer("as_text", _mode("words"))
    assert "output 'SCORE' is not what the model's config declares" in caught.value.message
    assert "declares FP32" in caught.value.message and "returned BYTES" in caught.value.message


def test_the_async_client_reads_them_the_same(server: TritonServer) -> None:
    import asyncio

    async def call() -> dict[str, np.ndarray]:
        async with AsyncClient(server.grpc_url) as client:
            return await client.infer("as_text", _mode("numbers"))

    outputs = asyncio.run(call())
    assert outputs["SCORE"].tolist() == [-1.25] and outputs["TIME_NS"].tolist() == [1764633600123456789]
