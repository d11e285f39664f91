"""The readers of what other programs answer: perf_analyzer's exports (its ``-f`` CSV and its
``--profile-export-file`` JSON, classic, Triton generate stream and OpenAI), a server's ``/metrics``
text, and an OpenAI-compatible server's ``/v1/models`` answer (a loopback server in the test answers
the mutated bytes). Each is held to its parse function's typed error, naming the file (or the URL).
Same shape as :mod:`tests.fuzz.readers`: the campaign and the suite take both.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

from tests.fuzz.readers import DATA, Reader, library
from tests.support.loopback import answering
from tritonkit.errors import (
    ConfigError,
    ConnectError,
    ModelNotReadyError,
    PerfError,
    ServerError,
    TritonKitError,
)
from tritonkit.perf.llm.aiperf_export import records_from_aiperf
from tritonkit.perf.llm.engine_metrics import cache_config, engine_figures
from tritonkit.perf.llm.metrics import compute_metrics, load_export_records
from tritonkit.perf.llm.openai import OpenAITarget, check_openai_server, load_openai_records
from tritonkit.perf.measure.metrics import parse_metrics, scrape_metrics, server_gpus, step_metrics
from tritonkit.perf.measure.parse import parse_csv, parse_profile_export
from tritonkit.server.admin import ServerAdmin

MS = 1_000_000


def _csv(folder: Path) -> Path:
    return Path(shutil.copy(DATA / "concurrency_verbose.csv", folder / "pa.csv"))


def _read_csv(_folder: Path, path: Path) -> None:
    rows = library(lambda: parse_csv(path), errors=PerfError, named=str(path))
    for row in rows or []:
        assert math.isfinite(row.load_value) and math.isfinite(row.throughput_per_s), row


def _export(folder: Path) -> Path:
    """The real export of tests/data/perf, cut to its first requests per step (a mutant stays small)."""
    data = json.loads((DATA / "concurrency_verbose.json").read_text())
    for experiment in data["experiments"]:
        experiment["requests"] = experiment["requests"][:8]
        experiment["window_boundaries"] = experiment["window_boundaries"][:5]
    path = folder / "export.json"
    path.write_text(json.dumps(data))
    return path


def _read_export(_folder: Path, path: Path) -> None:
    for experiment in library(lambda: parse_profile_export(path), errors=PerfError, named=str(path)) or []:
        experiment.windows()


def _generate_stream(folder: Path) -> Path:
    """A Triton generate-stream export (decoupled model: several responses per request)."""
    requests = [{"timestamp": (1 + i) * MS, "request_inputs": {"text_input": "a b c", "max_tokens": 3},
                 "response_timestamps": [(5 + i) * MS, (6 + i) * MS, (7 + i) * MS],
                 "response_outputs": [{"text_output": "x", "output_ids": [1]}, {"text_output": "y", "output_ids": [2]},
                                      {"text_output": "z", "output_ids": [3]}]} for i in range(4)]
    path = folder / "llm_export.json"
    path.write_text(json.dumps({"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": requests}]}))
    return path


def _read_generate_stream(_folder: Path, path: Path) -> None:
    read = library(lambda: load_export_records(path), errors=PerfError, named=str(path))
    if read is not None:
        compute_metrics(read[0], token_source=read[1])


def _openai_export(responses: list[str], stream: bool) -> dict[str, object]:
    payload = json.dumps({"model": "m", "messages": [{"role": "user", "content": "a b c"}], "stream": stream})
    requests = [{"timestamp": (1 + i) * MS, "request_inputs": {"payload": payload},
                 "response_timestamps": [(5 + i + k) * MS for k in range(len(responses))],
                 "response_outputs": [{"response": r} for r in responses]} for i in range(3)]
    return {"experiments": [{"experiment": {"mode": "concurrency", "value": 1}, "requests": requests}]}


CHUNKS = [{"choices": [{"index": 0, "delta": {"content": t}}]} for t in ("He", "llo", "!")] + [
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 3}}]
STREAM = "".join(f"data: {json.dumps(c)}\n\n" for c in CHUNKS) + "data: [DONE]\n\n"
BODY = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}


def _openai(folder: Path) -> Path:
    path = folder / "openai_export.json"
    path.write_text(json.dumps(_openai_export(STREAM.split("\n\n"), True)))
    return path


def _stream(folder: Path) -> Path:
    path = folder / "stream.txt"
    path.write_text(STREAM)
    return path


def _body(folder: Path) -> Path:
    path = folder / "body.json"
    path.write_text(json.dumps(BODY))
    return path


def _read_openai(_folder: Path, path: Path) -> None:
    export = library(lambda: load_openai_records(path, count_text=lambda t: len(t.split())), errors=PerfError,
                     named=str(path))
    if export is not None:
        compute_metrics(export.records, token_source=export.token_source)


def _read_answer(folder: Path, path: Path, stream: bool) -> None:
    """The engine's answer, as perf_analyzer records it (a stream: one response per event it read)."""
    text = path.read_bytes().decode("utf-8", errors="replace")
    responses = [part + "\n\n" for part in text.split("\n\n")] if stream else [text]
    export = folder / "openai_export.json"
    export.write_text(json.dumps(_openai_export(responses, stream)))
    _read_openai(folder, export)


VLLM_METRICS = """# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.25
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.01",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 10.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 10.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.5
# TYPE vllm:cache_config_info gauge
vllm:cache_config_info{block_size="16",num_gpu_blocks="2048"} 1.0
"""


def _metrics(folder: Path) -> Path:
    path = folder / "metrics.txt"
    path.write_text((DATA / "metrics.txt").read_text() + VLLM_METRICS)
    return path


def _read_metrics(_folder: Path, path: Path) -> None:
    text = path.read_bytes().decode("utf-8", errors="replace")  # as scrape_metrics decodes it
    before = parse_metrics(_metrics_text(), monotonic_s=0.0)
    after = library(lambda: parse_metrics(text, monotonic_s=1.0), errors=ServerError, named="/metrics")
    if after is not None:
        step_metrics([before, after], "add_one")
        server_gpus(after)
        engine_figures([before, after], "m")
        cache_config(after)


def _metrics_text() -> str:
    return (DATA / "metrics.txt").read_text() + VLLM_METRICS


def _models(folder: Path) -> Path:
    path = folder / "models.json"
    path.write_text(json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "owned_by": "vllm",
                                                            "max_model_len": 2048}]}))
    return path


def _scrape(folder: Path) -> Path:
    """A whole HTTP answer to ``GET /metrics``: status line, headers and the page (its framing mutated too)."""
    page = _metrics_text().encode()
    path = folder / "metrics.http"
    path.write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: %d\r\n"
                     b"Connection: close\r\n\r\n%s" % (len(page), page))
    return path


def _read_scrape(_folder: Path, path: Path) -> None:
    with answering(path.read_bytes(), raw=True) as address:
        url = f"http://{address}/metrics"
        library(lambda: scrape_metrics(url, timeout_s=5.0), errors=ServerError, named=url, also=OSError)


def _models_http(folder: Path) -> Path:
    """A whole HTTP answer to ``GET /v1/models`` (its framing mutated too)."""
    body = _models(folder).read_bytes()
    path = folder / "models.http"
    path.write_bytes(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                     % (len(body), body))
    return path


def _ask_models(_folder: Path, path: Path, raw: bool = False) -> None:
    with answering(path.read_bytes(), raw=raw) as url:
        library(lambda: check_openai_server("m", url, OpenAITarget(), timeout_s=5.0),
                errors=(ConnectError, ModelNotReadyError), named=url)


ADMIN = {
    "/v2": {"name": "triton", "version": "2.51.0", "extensions": ["classification", "model_repository"]},
    "/v2/repository/index": [{"name": "m", "version": "1", "state": "READY"},
                             {"name": "n", "state": "UNAVAILABLE", "reason": "unloaded"}],
    "/v2/models/m/config": {"name": "m", "backend": "python", "max_batch_size": 8,
                            "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}],
                            "instance_group": [{"count": 2, "kind": "KIND_CPU"}],
                            "dynamic_batching": {"max_queue_delay_microseconds": 500}},
    "/v2/models/m/stats": {"model_stats": [{"name": "m", "version": "1", "batch_stats": [
        {"batch_size": 1, "compute_infer": {"count": 10, "ns": 123456}},
        {"batch_size": 4, "compute_infer": {"count": 3, "ns": 99999}}]}]},
    "/v2/models/m": {"name": "m", "versions": ["1"], "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]},
}


def _admin(folder: Path) -> Path:
    """What a tritonserver answers its admin API, path by path (one JSON document holds them all)."""
    path = folder / "admin.json"
    path.write_text(json.dumps(ADMIN))
    return path


def _ask_admin(_folder: Path, path: Path) -> None:
    """Ask a server tritonkit did not start what ``perf run``, the sweep and ``repo lint --server``
    ask it: a typed error (naming its address) or an answer, whatever it says."""
    try:
        answers = json.loads(path.read_bytes())
    except (ValueError, RecursionError):
        answers = None
    if not isinstance(answers, dict):  # a server that answers the bytes to every path
        answers = {p: path.read_bytes() for p in ADMIN}
    bodies = {p: v if isinstance(v, bytes) else json.dumps(v).encode() for p, v in answers.items()}
    with answering(bodies) as url:
        admin = ServerAdmin(url, timeout_s=5.0)
        for call in (admin.server_metadata, admin.index, lambda: admin.model_config("m"),
                     lambda: admin.exec_stats("m"), lambda: admin.model_metadata("m"), lambda: admin.model_ready("m")):
            library(call, errors=TritonKitError, named=url)


def _aiperf(folder: Path) -> Path:
    """AIPerf 0.13's records export, in the shape tests/perf/llm/test_aiperf_export.py reads."""
    def line(start: int, ttft: float, gaps: list[float], tokens: int, phase: str = "profiling") -> dict[str, object]:
        return {"metadata": {"request_start_ns": start, "request_end_ns": start + 10**9, "benchmark_phase": phase,
                             "was_cancelled": False},
                "metrics": {"time_to_first_token": {"value": ttft, "unit": "ms"},
                            "inter_chunk_latency": {"value": gaps, "unit": "ms"},
                            "output_token_count": {"value": tokens, "unit": "tokens"},
                            "request_latency": {"value": ttft + sum(gaps), "unit": "ms"}}}
    lines = [line(0, 50.0, [5.0], 2, "warmup"), line(10**9, 100.0, [10.0, 10.0, 20.0], 4), line(11 * 10**8, 200.0, [60.0], 5),
             {"metadata": {"request_start_ns": 12 * 10**8, "benchmark_phase": "profiling"}, "metrics": {},
              "error": {"code": 500, "message": "boom"}}]
    path = folder / "profile_export.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _read_aiperf(_folder: Path, path: Path) -> None:
    records = library(lambda: records_from_aiperf(path), errors=ConfigError, named=path.name)
    if records:
        compute_metrics(records, token_source="responses")


RESPONSES = {r.name: r for r in [
    Reader("perf_analyzer csv", _csv, _read_csv),
    Reader("perf_analyzer export", _export, _read_export, as_json=True),
    Reader("generate stream export", _generate_stream, _read_generate_stream, as_json=True),
    Reader("openai export", _openai, _read_openai, as_json=True),
    Reader("openai stream", _stream, lambda f, p: _read_answer(f, p, True)),
    Reader("openai body", _body, lambda f, p: _read_answer(f, p, False), as_json=True),
    Reader("/metrics text", _metrics, _read_metrics),
    Reader("/metrics scrape", _scrape, _read_scrape),
    Reader("/v1/models answer", _models, _ask_models, as_json=True),
    Reader("/v1/models http", _models_http, lambda f, p: _ask_models(f, p, raw=True)),
    Reader("triton admin answers", _admin, _ask_admin, as_json=True),
    Reader("aiperf export", _aiperf, _read_aiperf, as_json=True),
]}
