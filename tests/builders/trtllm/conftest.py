"""The TensorRT-LLM builder's tests: one served reference repository per version line."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tritonkit.server import TritonServer
from tritonkit.trtllm_versions import ENGINE_LINES, TRTLLM_INTERFACES

# ---- one served TensorRT-LLM reference repository per version line, for the whole session ------
# test_contract and test_clients only send requests to it (no loads, no statistics
# read), so they share one server per line instead of starting one each: pytest groups the tests
# of both modules by line, and only one of these servers runs at a time.


# One line per distinct engine interface: 1.0 and 1.1 declare the names of 1.2 (trtllm_versions says
# where each was read), so serving 1.2 covers them; 0.18's inputs are 0.17's but it is its own release.
SERVED_ENGINE_LINES = tuple(line for line in ENGINE_LINES if line not in ("1.0", "1.1"))
assert {TRTLLM_INTERFACES[v].engine_input_names for v in ENGINE_LINES} == \
    {TRTLLM_INTERFACES[v].engine_input_names for v in SERVED_ENGINE_LINES}


@pytest.fixture(scope="session", params=SERVED_ENGINE_LINES)
def trtllm_served(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """``(ReferenceRepository, TritonServer)``: the reference repository of one version line, served.

    max_seq_len 512 holds GenAI-Perf's default 256 output tokens; 0.2 ms steps keep 256 tokens cheap.
    """
    from tritonkit.builders.trtllm import ReferenceEngine, build_reference_repository

    engine = ReferenceEngine(max_batch_size=8, max_input_len=128, max_seq_len=512, step_ms=0.2, per_sequence_ms=0.0)
    ref = build_reference_repository(tmp_path_factory.mktemp(f"trtllm_served_{request.param}"), engine=engine,
                                     trtllm_version=request.param)
    with TritonServer(ref.repo) as server:
        yield ref, server
