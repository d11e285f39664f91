"""Decoupled models that stream in shapes tritonkit's own models do not: timing and token counts stay right.

Three custom python models, each sending ``TOKENS`` data responses ``FIRST_MS`` after the request
and then one every ``INTERVAL_MS`` (sleeps to deadlines from one start, so no drift):

* ``cumulative`` (``text_input`` → ``text_output``): each response carries the *whole text so
  far*, not the new piece, and the stream closes with a response repeating the full text with
  the final flag — no new text, so no token;
* ``renamed_ids``: token ids in an INT32 output called ``generated_ids``, two per response (as a
  model that accepts draft tokens sends them), then the empty final response;
* ``final_on_data``: the final flag rides on the last data response; no empty response follows;
* ``pieces``: two tokens per response in an INT32 output whose name says nothing: one token per
  response unless the user names the output (``token_output``).

Served by the real server, driven by the real perf_analyzer; the pure test reads responses of
the same shapes as perf_analyzer exports them.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.pymodels import write_python_model
from tests.support.stream_models import stream_model_py
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm
from tritonkit.perf.llm.metrics import count_output_tokens, load_export_records
from tritonkit.perf.llm.prompts import synthetic_prompts
from tritonkit.server import TritonServer

FIRST_MS, INTERVAL_MS, TOKENS = 40.0, 20.0, 4

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "{input}" data_type: {input_type} dims: [ 1 ] }} ]
output [ {{ name: "{output}" data_type: {output_type} dims: [ -1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""

_KINDS: dict[str, dict[str, object]] = {
    "cumulative": dict(
        input="text_input", input_type="TYPE_STRING", output="text_output", output_type="TYPE_STRING",
        tensor='text = " ".join("w%d" % i for i in range(k + 1))\n'
               'return pb_utils.Tensor("text_output", np.array([text.encode()], dtype=np.object_))',
        closing=f"sender.send(pb_utils.InferenceResponse([tensor({TOKENS} - 1)]), flags=FINAL)"),
    "renamed_ids": dict(
        input="INPUT0", input_type="TYPE_FP32", output="generated_ids", output_type="TYPE_INT32",
        tensor='return pb_utils.Tensor("generated_ids", np.array([2 * k + 7, 2 * k + 8], dtype=np.int32))'),
    "pieces": dict(
        input="INPUT0", input_type="TYPE_FP32", output="pieces", output_type="TYPE_INT32",
        tensor='return pb_utils.Tensor("pieces", np.array([k, k], dtype=np.int32))'),
    "final_on_data": dict(
        input="INPUT0", input_type="TYPE_FP32", output="OUT", output_type="TYPE_FP32",
        tensor='return pb_utils.Tensor("OUT", np.array([float(k)], dtype=np.float32))', closing="", final_on_data=True),
}


def test_token_counts_of_each_stream_kind_as_perf_analyzer_exports_them() -> None:
    cumulative = [{"text_output": ["w0"]}, {"text_output": ["w0 w1"]}, {"text_output": ["w0 w1 w2"]},
                  {"text_output": ["w0 w1 w2"]}]
    assert count_output_tokens(cumulative) == ((1, 1, 1, 0), "responses")
    # Deltas that repeat a piece are new tokens each time (a model may emit the same token twice).
    assert count_output_tokens([{"text_output": [" the"]}, {"text_output": [" the"]}]) == ((1, 1), "responses")
    # perf_analyzer exports the empty final response's output as "".
    renamed: list[dict[str, object]] = [{"generated_ids": [7, 8]}, {"generated_ids": [9, 10]}, {"generated_ids": ""}]
    assert count_output_tokens(renamed) == ((2, 2, 0), "output_ids")
    # An integer output not named like token ids is no token count (a status code, an index…).
    assert count_output_tokens([{"status": [0]}, {"status": [0]}]) == ((1, 1), "responses")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("stream_kinds_repo")
    for name, kind in _KINDS.items():
        io = {key: kind[key] for key in ("input", "input_type", "output", "output_type")}
        source = stream_model_py(str(kind["tensor"]), responses=TOKENS, first_ms=FIRST_MS, interval_ms=INTERVAL_MS,
                                 closing=str(kind.get("closing", "sender.send(flags=FINAL)")),
                                 final_on_data=bool(kind.get("final_on_data", False)))
        write_python_model(repo, name, config_pbtxt=_CONFIG.format(name=name, **io), model_py=source)
    with TritonServer(repo) as running:
        yield running


@pytest.mark.server
@pytest.mark.perf_analyzer
@pytest.mark.parametrize(("name", "tokens", "source", "responses"), [
    ("cumulative", TOKENS, "responses", TOKENS + 1),     # + the closing full-text response
    ("renamed_ids", 2 * TOKENS, "output_ids", TOKENS + 1),  # + the empty final response
    ("final_on_data", TOKENS, "responses", TOKENS),      # nothing after the last data response
])
def test_each_stream_kind_is_timed_and_counted_right(
    server: TritonServer, tmp_path: Path, name: str, tokens: int, source: str, responses: int
) -> None:
    result = run_llm(name, server.grpc_url, synthetic_prompts(2, input_tokens_mean=3),
                     LLMPlan(concurrency=(2,), requests_per_level=4, warmup_rounds=0, settle_s=0.0),
                     results_dir=tmp_path)
    [step] = result.steps
    m = step.metrics
    assert m is not None and step.measured and step.failures.total == 0, (step.failure_note, step.warnings)
    assert m.answered_count == 4 and m.token_source == source
    assert m.output_tokens is not None and m.output_tokens.min == m.output_tokens.max == tokens
    assert m.ttft_ms is not None and m.ttft_ms.min >= FIRST_MS  # the models never answer sooner
    # Latency runs to the last response, which no model sends before its last deadline.
    assert m.latency_ms is not None and m.latency_ms.min >= FIRST_MS + (TOKENS - 1) * INTERVAL_MS
    assert m.itl_ms is not None and m.itl_ms.count == 4
    records, _source = load_export_records(tmp_path / "c2.json")
    # Every response perf_analyzer saw is timed — none dropped, none invented (the final flag on data).
    assert [len(r.response_ns) for r in records] == [responses] * 4
    for r in records:  # TTFT is the first response's time, latency the last one's
        assert r.ttft_ms == (r.response_ns[0] - r.sent_ns) / 1e6 and r.latency_ms == (r.response_ns[-1] - r.sent_ns) / 1e6


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_an_output_named_as_the_tokens_is_counted_by_its_elements(server: TritonServer, tmp_path: Path) -> None:
    plan = LLMPlan(concurrency=(1,), requests_per_level=2, warmup_rounds=0, settle_s=0.0)
    prompts = synthetic_prompts(1)
    plain = run_llm("pieces", server.grpc_url, prompts, plan, results_dir=tmp_path / "plain")
    named = run_llm("pieces", server.grpc_url, prompts, plan, results_dir=tmp_path / "named", token_output="pieces")
    with pytest.raises(ConfigError, match=r"model 'pieces' has no output 'ids' to count tokens in; it has pieces"):
        run_llm("pieces", server.grpc_url, prompts, plan, results_dir=tmp_path / "bad", token_output="ids")
    [p], [n] = plain.steps, named.steps
    assert p.metrics is not None and n.metrics is not None
    assert p.metrics.output_tokens_total == 2 * TOKENS and p.metrics.token_source == "responses"
    assert n.metrics.output_tokens_total == 2 * 2 * TOKENS and n.metrics.token_source == "output_ids"
    assert named.served["token_output"] == "pieces"
    assert not (tmp_path / "bad").exists() or not list((tmp_path / "bad").glob("*.json"))  # nothing was sent
