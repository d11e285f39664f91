"""``perf run MODEL --llm --protocol openai``: LLM load tests over OpenAI-compatible HTTP endpoints.

The server is a stand-in of known timing (tests/support/openai_standin.py: OpenAI's streaming
contract as vLLM 0.32 speaks it, first token after a set delay, each next after another), driven
by the real perf_analyzer in its OpenAI mode; the real engine (vLLM's CPU build) is in
tests/perf/llm/test_vllm_engine.py.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.openai_standin import openai_standin
from tests.support.processes import pid_alive
from tritonkit.cli import main
from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError
from tritonkit.perf.llm.openai import (
    OpenAITarget,
    check_openai_server,
    openai_body,
    records_from_openai_export,
    split_events,
)
from tritonkit.perf.llm.prompts import Prompt


def _running_with(text: str) -> list[int]:
    """Live processes whose command line mentions ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if text.encode() in (entry / "cmdline").read_bytes() and pid_alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _run(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(main, ["perf", "run", *args], catch_exceptions=False)


def _sse(*chunks: dict[str, object], done: bool = True) -> list[str]:
    events = [f"data: {json.dumps(c)}\n\n" for c in chunks]
    return [*events, "data: [DONE]\n\n"] if done else events


def _chat(text: str, usage: dict[str, int] | None = None) -> dict[str, object]:
    chunk: dict[str, object] = {"choices": [{"index": 0, "delta": {"content": text}}] if text else []}
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def _export(*requests: tuple[list[str], list[int]], stream: bool = True) -> dict[str, object]:
    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "a b c"}], "stream": stream})
    return {"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": [
        {"timestamp": 1_000_000_000, "request_inputs": {"payload": payload},
         "response_timestamps": times, "response_outputs": [{"response": r} for r in responses]}
        for responses, times in requests]}]}


# ---- pure: requests, events, token counts -------------------------------------------------------


def test_chat_and_completions_bodies_ask_for_exact_lengths_and_usage_in_the_stream() -> None:
    prompt = Prompt("hello there", 2, 7)
    chat = openai_body(prompt, "tiny", OpenAITarget())
    assert chat == {"model": "tiny", "messages": [{"role": "user", "content": "hello there"}], "max_tokens": 7,
                    "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}
    completion = openai_body(prompt, "tiny", OpenAITarget(endpoint="/v1/completions/", stream=False))
    assert completion == {"model": "tiny", "prompt": "hello there", "max_tokens": 7, "ignore_eos": True,
                          "stream": False}


def test_an_unknown_endpoint_or_a_key_given_as_a_variable_name_is_refused() -> None:
    with pytest.raises(ConfigError, match="v1/chat/completions"):
        OpenAITarget(endpoint="v1/embeddings")
    with pytest.raises(ConfigError, match="not an environment variable's name"):
        OpenAITarget(api_key_env="sk-123 456")


def test_an_unset_api_key_variable_is_named_and_its_value_never_printed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TK_TEST_KEY", raising=False)
    with pytest.raises(ConfigError, match="TK_TEST_KEY: the variable is unset") as caught:
        OpenAITarget(api_key_env="TK_TEST_KEY").api_key()
    assert caught.value.hint is not None and "export TK_TEST_KEY" in caught.value.hint
    monkeypatch.setenv("TK_TEST_KEY", "s3cret-value")
    prefix = OpenAITarget(api_key_env="TK_TEST_KEY").command_prefix(["/bin/pa"])
    assert prefix[-3:] == ["TK_TEST_KEY", "--", "/bin/pa"] and "s3cret-value" not in " ".join(prefix)


def test_events_split_across_reads_belong_to_the_read_that_completed_them() -> None:
    events, rest = split_events(["data: {\"a\"", ": 1}\n\ndata: [DO", "NE]\n\n", "data: {tail"])
    assert events == [(1, 'data: {"a": 1}'), (2, "data: [DONE]")]
    assert rest == "data: {tail"


def test_token_counts_come_from_the_servers_usage_else_the_tokenizer_else_chunks() -> None:
    responses = _sse(_chat("one"), _chat(" two"), _chat(" three"), _chat("", {"completion_tokens": 5, "prompt_tokens": 9}))
    times = [1_100_000_000, 1_120_000_000, 1_140_000_000, 1_150_000_000, 1_160_000_000]
    by_usage = records_from_openai_export(_export((responses, times)))
    assert by_usage.token_source == "usage" and by_usage.problems == []
    record = by_usage.records[0]
    assert record.output_tokens == 5 and record.input_tokens == 9
    assert record.ttft_ms == pytest.approx(100.0) and record.latency_ms == pytest.approx(160.0)
    no_usage = _sse(_chat("one"), _chat(" two"), _chat(" three"))
    with_tokenizer = records_from_openai_export(_export((responses, times)), count_text=lambda t: len(t.split()) * 2)
    assert with_tokenizer.token_source == "usage" and with_tokenizer.records[0].output_tokens == 5
    assert with_tokenizer.records[0].input_tokens == 6  # "a b c", counted by the tokenizer the prompts were made with
    by_tokenizer = records_from_openai_export(_export((no_usage, times[:4])), count_text=lambda t: len(t.split()) * 2)
    assert by_tokenizer.token_source == "tokenizer" and by_tokenizer.records[0].output_tokens == 6
    by_chunks = records_from_openai_export(_export((no_usage, times[:4])))
    assert by_chunks.token_source == "chunks" and by_chunks.records[0].output_tokens == 3


def test_a_stream_without_done_or_with_a_broken_event_is_a_failed_request_not_a_measurement() -> None:
    cut = _sse(_chat("one"), _chat(" two"), done=False)
    broken = ["data: {not json\n\n", *_sse(_chat("x"))]
    error = _sse({"error": {"message": "engine died", "code": 500}})
    found = records_from_openai_export(_export((cut, [1, 2]), (broken, [1, 2, 3]), (error, [1, 2])))
    assert [r.answered for r in found.records] == [False, False, False]
    assert len(found.problems) == 3
    joined = " | ".join(found.problems)
    assert "ended before data: [DONE]" in joined and "no JSON" in joined and "engine died" in joined


def test_a_whole_answer_without_streaming_counts_its_usage() -> None:
    body = json.dumps({"choices": [{"message": {"content": "a b c d"}}], "usage": {"completion_tokens": 4}})
    found = records_from_openai_export(_export(([body], [1_300_000_000]), stream=False))
    assert found.records[0].output_tokens == 4 and found.records[0].ttft_ms == pytest.approx(300.0)


def test_openai_protocol_without_llm_and_endpoint_without_openai_are_usage_errors(tmp_path: Path) -> None:
    result = _run("tiny", "--protocol", "openai", "--url", "127.0.0.1:9", "--out", str(tmp_path / "a"))
    assert result.exit_code == 2 and "needs --llm" in result.output
    result = _run("tiny", "--llm", "--endpoint", "v1/completions", "--url", "127.0.0.1:9", "--out", str(tmp_path / "b"))
    assert result.exit_code == 2 and "only apply to an OpenAI-compatible server" in result.output
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_nothing_listening_is_a_connect_error_naming_the_url() -> None:
    with pytest.raises(ConnectError, match=r"127\.0\.0\.1:9"):
        check_openai_server("tiny", "127.0.0.1:9", OpenAITarget(), timeout_s=2)


# ---- the stand-in of known timing, the real perf_analyzer ---------------------------------------


def test_the_preflight_names_the_models_a_server_serves_and_refuses_a_wrong_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TK_STANDIN_KEY", "right")
    with openai_standin("--api-key-env", "TK_STANDIN_KEY") as server:
        assert check_openai_server("standin", server.url, OpenAITarget(api_key_env="TK_STANDIN_KEY")) == ["standin"]
        with pytest.raises(ModelNotReadyError, match="it serves: standin"):
            check_openai_server("other", server.url, OpenAITarget(api_key_env="TK_STANDIN_KEY"))
        monkeypatch.setenv("TK_STANDIN_KEY", "wrong")
        with pytest.raises(ConfigError, match="refused the API key"):
            check_openai_server("standin", server.url, OpenAITarget(api_key_env="TK_STANDIN_KEY"))


@pytest.mark.perf_analyzer
@pytest.mark.serial
@pytest.mark.parametrize("endpoint", ["v1/chat/completions", "v1/completions"])
def test_ttft_and_itl_match_the_servers_known_timing_at_concurrency_1(tmp_path: Path, endpoint: str) -> None:
    """Truth: first token 80 ms after the request, each next 20 ms after the one before. Tolerance:
    TTFT within 15 %, mean ITL within 10 % (the Triton path's bounds)."""
    out = tmp_path / "run"
    with openai_standin("--first-ms", "80", "--next-ms", "20") as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--endpoint", endpoint,
                      "--concurrency", "1", "--requests", "10", "--input-tokens", "16", "--output-tokens", "12",
                      "--sla", "ttft_p99<=2s", "--out", str(out))
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    metrics = saved["steps"][0]["metrics"]
    assert metrics["ttft_ms"]["mean"] == pytest.approx(80.0, rel=0.15)
    assert metrics["itl_ms"]["mean"] == pytest.approx(20.0, rel=0.10)
    assert metrics["token_source"] == "usage" and metrics["output_tokens_total"] == 10 * 12
    assert saved["layout"].startswith(f"OpenAI {endpoint}")
    argv = json.loads((out / "c1.argv.json").read_text())
    assert argv[argv.index("--service-kind") + 1] == "openai" and argv[argv.index("--endpoint") + 1] == endpoint


@pytest.mark.perf_analyzer
def test_the_api_key_reaches_the_server_and_no_written_file_holds_it(tmp_path: Path) -> None:
    key = "sk-tritonkit-test-0123456789"
    env = {"TK_RUN_KEY": key}
    out = tmp_path / "run"
    with openai_standin("--first-ms", "10", "--next-ms", "2", "--api-key-env", "TK_RUN_KEY", env=env) as server:
        os.environ["TK_RUN_KEY"] = key
        try:
            result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--api-key-env",
                          "TK_RUN_KEY", "--requests", "3", "--output-tokens", "4", "--out", str(out))
        finally:
            del os.environ["TK_RUN_KEY"]
    assert result.exit_code == 0, result.output
    assert json.loads((out / "llm_result.json").read_text())["steps"][0]["metrics"]["answered_count"] == 3
    assert key not in result.output
    for written in out.rglob("*"):
        if written.is_file():
            assert key.encode() not in written.read_bytes(), written
    assert "TK_RUN_KEY" in (out / "c1.argv.json").read_text()


@pytest.mark.perf_analyzer
@pytest.mark.parametrize(("fault", "words"), [
    (("--fault", "close-early", "--fault-after", "2"), "ended before data: [DONE]"),
    (("--fault", "malformed", "--fault-after", "1"), "no JSON"),
])
def test_a_broken_stream_is_counted_as_a_failure_and_fails_the_sla(tmp_path: Path, fault: tuple[str, ...],
                                                                  words: str) -> None:
    out = tmp_path / "run"
    with openai_standin("--first-ms", "10", "--next-ms", "2", *fault) as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--requests", "3",
                      "--output-tokens", "6", "--sla", "ttft_p99<=5s", "--out", str(out))
    assert result.exit_code == 1, result.output
    step = json.loads((out / "llm_result.json").read_text())["steps"][0]
    assert step["failures"]["counts"]["server_error"] == 3 and step["metrics"] is None
    assert words in " ".join(step["failures"]["evidence"])
    json.loads((out / "llm_report.md").with_name("llm_result.json").read_text())  # whole, not half-written


@pytest.mark.perf_analyzer
@pytest.mark.parametrize("status", ["429", "503"])
def test_a_refusing_server_is_a_server_rejection_and_no_perf_analyzer_is_left_running(tmp_path: Path,
                                                                                     status: str) -> None:
    out = tmp_path / "run"
    with openai_standin("--fault", f"status-{status}") as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--requests", "3",
                      "--output-tokens", "4", "--sla", "ttft_p99<=5s", "--out", str(out))
    assert result.exit_code == 1, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    step = saved["steps"][0]
    assert step["failures"]["hit"] == "server_rejection"
    assert f"HTTP code {status}" in " ".join(step["failures"]["evidence"])
    assert saved["verdict"]["status"] == "fail"
    assert _running_with(str(out)) == []  # perf_analyzer's group was stopped with the step


@pytest.mark.perf_analyzer
def test_a_stall_between_tokens_is_measured_in_the_itl_not_dropped(tmp_path: Path) -> None:
    """One 300 ms stall before the 4th token of each 8-token answer: mean ITL = (7 × 5 + 300) / 7 ≈ 48 ms."""
    out = tmp_path / "run"
    with openai_standin("--first-ms", "20", "--next-ms", "5", "--fault", "stall", "--fault-after", "3",
                        "--stall-ms", "300") as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--requests", "3",
                      "--output-tokens", "8", "--out", str(out))
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "llm_result.json").read_text())["steps"][0]["metrics"]
    assert metrics["itl_ms"]["mean"] == pytest.approx((7 * 5 + 300) / 7, rel=0.15)
    assert metrics["answered_count"] == 3


@pytest.mark.perf_analyzer
def test_a_traffic_shape_and_perf_compare_work_on_an_openai_endpoint(tmp_path: Path) -> None:
    """A ramp on the stand-in, then the same run against a stand-in 3× slower to its first token.
    ``perf compare`` holds endpoint runs to an engine's noise unless one is named (without one, this
    change sits at the edge of it: regression or inside the noise, never a pass); with the stand-in's
    own (it answers on a fixed schedule), the TTFT regression is called (exit 1)."""
    fast, slow = tmp_path / "fast", tmp_path / "slow"
    args = ["--llm", "--protocol", "openai", "--requests", "40", "--output-tokens", "6", "--concurrency", "2"]
    with openai_standin("--first-ms", "20", "--next-ms", "5") as server:
        ramp = _run("standin", *args[:3], "--url", server.url, "--traffic", "ramp:2-8/s,2,2", "--output-tokens", "6",
                    "--out", str(tmp_path / "ramp"))
        assert ramp.exit_code == 0, ramp.output
        assert json.loads((tmp_path / "ramp/llm_result.json").read_text())["steps"][0]["load_mode"] == "ramp"
        assert _run("standin", *args, "--url", server.url, "--out", str(fast)).exit_code == 0
    with openai_standin("--first-ms", "60", "--next-ms", "5") as server:
        assert _run("standin", *args, "--url", server.url, "--out", str(slow)).exit_code == 0
    unnamed = CliRunner().invoke(main, ["perf", "compare", str(fast), str(slow)], catch_exceptions=False)
    assert unnamed.exit_code in (1, 3) and "25.0% between single runs" in unnamed.output, unnamed.output
    compare = CliRunner().invoke(main, ["perf", "compare", str(fast), str(slow), "--run-noise", "5%",
                                        "--tail-run-noise", "10%"], catch_exceptions=False)
    assert compare.exit_code == 1, compare.output
    assert "ttft" in compare.output.lower() and "REGRESSION" in compare.output


@pytest.mark.perf_analyzer
def test_without_streaming_each_answer_is_one_response_and_its_usage_counts_the_tokens(tmp_path: Path) -> None:
    """The stand-in answers a whole completion after 30 + 7 × 5 = 65 ms: TTFT is the whole answer's time."""
    out = tmp_path / "run"
    with openai_standin("--first-ms", "30", "--next-ms", "5") as server:
        result = _run("standin", "--llm", "--protocol", "openai", "--url", server.url, "--endpoint", "v1/completions",
                      "--no-stream", "--requests", "4", "--output-tokens", "8", "--out", str(out))
    assert result.exit_code == 0, result.output
    saved = json.loads((out / "llm_result.json").read_text())
    metrics = saved["steps"][0]["metrics"]
    assert saved["streaming"] is False and saved["layout"].endswith("(one answer)")
    assert metrics["output_tokens_total"] == 32 and metrics["token_source"] == "usage"
    assert metrics["ttft_ms"]["min"] >= 65.0
    # The stand-in serves no /metrics: no engine figure is guessed, and the run says so.
    assert saved["steps"][0]["engine"] == {} and any(n.startswith("no engine view: http://") for n in saved["notes"])
    assert any("could not scrape" in w for w in saved["steps"][0]["warnings"])
    payload = json.loads((out / "c1.inputs.json").read_text())["data"][0]["payload"][0]
    assert payload["stream"] is False and "stream_options" not in payload


def test_a_keyed_command_is_taken_apart_for_a_clusters_clients_and_a_jobs_key_never_shows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from tritonkit.perf.cluster.remote import ClientJob
    from tritonkit.perf.llm._keyed import key_environment, keyed_command, split_keyed

    command = keyed_command("TK_KEY", ["/bin/pa", "-m", "tiny"], python="/py")
    assert command == ["/py", "-m", "tritonkit.perf.llm._keyed", "TK_KEY", "--", "/bin/pa", "-m", "tiny"]
    assert split_keyed(command) == ("TK_KEY", ["/bin/pa", "-m", "tiny"])
    assert split_keyed(["/bin/pa", "-m", "tiny"]) == (None, ["/bin/pa", "-m", "tiny"])
    monkeypatch.delenv("TK_KEY", raising=False)
    with pytest.raises(ValueError, match="TK_KEY is unset"):
        key_environment("TK_KEY")
    monkeypatch.setenv("TK_KEY", "sk-never-shown")
    job = ClientJob(index=0, name="c1", start_at_ns=0, argv=("-m", "tiny"), key_env="TK_KEY",
                    env=key_environment("TK_KEY"))
    assert job.env == {"TK_KEY": "sk-never-shown"}
    assert "sk-never-shown" not in repr(job) and "TK_KEY" in repr(job)
