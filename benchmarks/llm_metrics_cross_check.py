"""tritonkit's LLM metrics against GenAI-Perf's, and what tritonkit costs over a bare perf_analyzer run.

One served decoupled model (a simulated LLM streaming one token per response with ``output_ids``,
first token after a set delay, then one per set interval), one load (closed loop at a
concurrency, a fixed number of requests, the same prompts and output lengths):

1. **Same load, two tools.** ``tritonkit`` (``run_llm``) and GenAI-Perf (``genai-perf profile``,
   which drives the same perf_analyzer) each run it; TTFT, ITL, output token throughput and
   request throughput side by side with their ratios (target: within 2 %). Two runs differ by
   run-to-run noise as well as by definitions, so the script also reads **GenAI-Perf's own
   profile export** with tritonkit's metric code: on the same requests the two must agree
   to rounding, which checks the definitions alone.
2. **Second anchor: AIPerf 0.13** (NVIDIA's successor of GenAI-Perf) on the same load and prompts.
   Its transport is HTTP, so it reaches Triton through the generate_stream extension (a template
   body, each server-sent event's ``text_output`` one chunk) while tritonkit streams over gRPC:
   the two runs differ by transport as well as by noise. AIPerf defines TTFT, ITL (= (request
   latency − TTFT) / (output tokens − 1), what GenAI-Perf calls it; vLLM's benchmark calls that
   quantity TPOT and means by "ITL" the gap between consecutive chunks, which AIPerf reports as
   "inter chunk latency"), output token throughput and request throughput as tritonkit does.
   tritonkit's metric code also reads **AIPerf's own per-request export** (``profile_export.jsonl``,
   :mod:`tritonkit.perf.llm.aiperf_export`): TTFT and ITL must agree to rounding; AIPerf divides
   token and request counts by its profiling phase's window (``start_time`` → ``end_time`` of its
   summary, which opens before the first send and closes after the last record is processed),
   tritonkit by first send → last response, so those two ratios sit a little below 1 (the
   printed window ratio is the whole difference), and over AIPerf's window they are 1.0000.
   **What the protocol costs the server**: Triton's own counters (``/metrics``, scraped before
   and after each run) give the server-side time per request (request, queue and compute time
   over successes) under perf_analyzer's gRPC streaming and under AIPerf's HTTP generate_stream.
   Read them knowing what Triton times: for the simulated model (its ``execute`` hands each request
   to a thread and returns) a request's duration ends when ``execute`` returns, so it holds no
   generation; for the reference ensemble it spans the whole stream. With client and server on
   the same few cores, the tool's own CPU use (AIPerf runs several Python processes) slows the
   server too: the figure is the protocol's cost and the tool's together.
3. **Overhead.** tritonkit's run (prompts, input file, perf_analyzer, /metrics scraping, export
   parsing, metrics) against a bare perf_analyzer run with the same options: wall time and CPU
   seconds (this process plus its children).

GenAI-Perf lives in its own environment (``.bench-venv-genai/``: ``python -m venv
.bench-venv-genai && .bench-venv-genai/bin/pip install genai-perf``), AIPerf in another
(``.bench-venv-aiperf/``, ``pip install aiperf==0.13.0``); it needs a tokenizer, and
this machine reaches no model hub, so the script writes a word-level one (for either tool) (the simulated model's
tokens and the prompt words, one token each) and points ``--tokenizer`` at it. Without that
environment the script says why and prints the rest.

``--target reference`` serves the CPU reference TensorRT-LLM repository instead (prompts of the
asked length in its tokenizer's tokens; the tools count with that tokenizer too) and prints the
server-side time of each model of the pipeline.

    .venv/bin/python benchmarks/llm_metrics_cross_check.py
    .venv/bin/python benchmarks/llm_metrics_cross_check.py --target reference --output-tokens 32
    .venv/bin/python benchmarks/llm_metrics_cross_check.py --concurrency 8 --requests 128 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # the simulated LLM is the tests' own model, reused, not copied

from tests.support.llm_models import write_llm_sim  # noqa: E402
from tritonkit.perf.llm.aiperf_export import records_from_aiperf  # noqa: E402
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm  # noqa: E402
from tritonkit.perf.llm.metrics import LLMMetrics, compute_metrics, load_export_records  # noqa: E402
from tritonkit.perf.llm.prompts import WORDS, detect_layout, synthetic_prompts, write_llm_input_data  # noqa: E402
from tritonkit.perf.measure.metrics import MetricsSnapshot, scrape_metrics  # noqa: E402
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, to_argv  # noqa: E402
from tritonkit.provision.perf_analyzer import locate_perf_analyzer  # noqa: E402
from tritonkit.server import TritonServer  # noqa: E402

GENAI_VENV = REPO_ROOT / ".bench-venv-genai"
AIPERF_VENV = REPO_ROOT / ".bench-venv-aiperf"
# AIPerf reaches Triton through its HTTP generate_stream extension: a template body in, each
# server-sent event's text_output read as one streamed chunk.
AIPERF_PAYLOAD = '{"text_input": {{ text|tojson }}, "max_tokens": %d, "stream": true}'
TARGET_RATIO_PCT = 2.0
#: The tokenizer the tools count with: a word-level one written per run, or the served pipeline's.
TOOL_TOKENIZER: Path | None = None

TOKENIZER_SCRIPT = """
import sys
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast
words = sys.argv[2].split()
vocab = {"[UNK]": 0, "!": 1}
for w in words + ["w%d" % i for i in range(1000, 9000)]:
    vocab.setdefault(w, len(vocab))
tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
# Punctuation split: GenAI-Perf prefixes each response with "!" to count its tokens.
tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]").save_pretrained(sys.argv[1])
"""


def _cpu_s() -> tuple[float, float]:
    """(this process, its reaped children) CPU seconds, user + system."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def _ours(server: TritonServer, args: argparse.Namespace, prompts: list[Any], folder: Path) -> tuple[LLMMetrics, float, float]:
    own0, kids0 = _cpu_s()
    start = time.perf_counter()
    result = run_llm(args.model, server.grpc_url, prompts,
                     LLMPlan(concurrency=(args.concurrency,), requests_per_level=args.requests, settle_s=0.0,
                             warmup_rounds=0),  # the bare run sends no warm-up either
                     results_dir=folder, metrics_url=server.metrics_url)
    wall = time.perf_counter() - start
    own1, kids1 = _cpu_s()
    metrics = result.steps[0].metrics
    if metrics is None:
        raise SystemExit(f"tritonkit measured nothing: {result.steps[0].failures} {result.steps[0].warnings}")
    return metrics, wall, (own1 - own0) + (kids1 - kids0)


def _bare(server: TritonServer, args: argparse.Namespace, prompts: list[Any], folder: Path) -> tuple[float, float]:
    folder.mkdir(parents=True, exist_ok=True)
    layout = detect_layout(["text_input", "max_tokens", "stream"], max_batch_size=8, model=args.model)
    data = write_llm_input_data(folder / "inputs.json", prompts, layout, streaming=True)
    argv = [*locate_perf_analyzer().argv,
            *to_argv(PerfSpec(args.model, server.grpc_url, load=ConcurrencyRange(args.concurrency), streaming=True,
                              async_mode=True, input_data=data, request_count=args.requests,
                              profile_export_file=folder / "bare.json"))]
    own0, kids0 = _cpu_s()
    start = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    wall = time.perf_counter() - start
    own1, kids1 = _cpu_s()
    return wall, (own1 - own0) + (kids1 - kids0)


def _tool_inputs(venv: Path, exe_name: str, package: str, prompts: list[Any], folder: Path) -> tuple[Path, Path, Path]:
    """(the tool, its word-level tokenizer, the prompts as JSONL) for a tool living in ``venv``."""
    exe = venv / "bin" / exe_name
    if not exe.exists():
        raise RuntimeError(f"{exe} is missing: python -m venv {venv.name} && {venv.name}/bin/pip install {package}")
    folder.mkdir(parents=True, exist_ok=True)
    tokenizer = folder / "tokenizer"
    if TOOL_TOKENIZER is not None:  # the served pipeline's own (--target reference)
        tokenizer = TOOL_TOKENIZER
    else:
        subprocess.run([str(venv / "bin" / "python"), "-c", TOKENIZER_SCRIPT, str(tokenizer), " ".join(WORDS)],
                       check=True, capture_output=True, timeout=300)
    prompt_file = folder / "prompts.jsonl"
    prompt_file.write_text("".join(json.dumps({"text": p.text}) + "\n" for p in prompts))
    return exe, tokenizer, prompt_file


def _aiperf(server: TritonServer, args: argparse.Namespace, prompts: list[Any], folder: Path) -> dict[str, Any]:
    """Run AIPerf 0.13 on the same load over Triton's HTTP generate_stream; its summary."""
    exe, tokenizer, prompt_file = _tool_inputs(AIPERF_VENV, "aiperf", "aiperf==0.13.0", prompts, folder)
    template = folder / "payload.j2"  # a file: --extra-inputs splits an inline value on its commas
    template.write_text(AIPERF_PAYLOAD % args.output_tokens)
    artifacts = folder / "artifacts"
    cmd = [str(exe), "profile", "--model", args.model, "--url", f"http://{server.http_url.removeprefix('http://')}",
           "--endpoint-type", "template", "--custom-endpoint", f"/v2/models/{args.model}/generate_stream",
           "--streaming", "--extra-inputs", f"payload_template:{template}", "--extra-inputs", "response_field:text_output",
           "--input-file", str(prompt_file), "--custom-dataset-type", "single_turn",
           "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", "0",
           "--concurrency", str(args.concurrency), "--request-count", str(args.requests),
           # Its own HTTP connections are new: warm them as tritonkit's side was warmed (not measured).
           "--warmup-request-count", str(args.concurrency),
           "--tokenizer", str(tokenizer), "--artifact-dir", str(artifacts), "--ui-type", "none"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"aiperf exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    summary = artifacts / "profile_export_aiperf.json"  # the top-level one: the profiling phase's
    return {"summary": json.loads(summary.read_text()), "export": artifacts / "profile_export.jsonl"}


# Triton's cumulative per-model counters (µs and counts) whose deltas give the time per request.
_SERVER_COUNTERS = ("nv_inference_request_success", "nv_inference_request_duration_us",
                    "nv_inference_queue_duration_us", "nv_inference_compute_infer_duration_us")


def _server_side(
    before: MetricsSnapshot, after: MetricsSnapshot, models: list[str]
) -> dict[str, dict[str, float | None]]:
    """Per model of the pipeline: server-side ms per successful request between two scrapes."""
    return {model: _per_request(before, after, model) for model in models}


def _per_request(before: MetricsSnapshot, after: MetricsSnapshot, model: str) -> dict[str, float | None]:
    """Server-side ms per successful request of ``model`` between two scrapes (Triton's own counters)."""
    delta = {}
    for name in _SERVER_COUNTERS:
        first, last = before.total(name, model=model), after.total(name, model=model)
        delta[name] = None if first is None or last is None else last - first
    done = delta["nv_inference_request_success"]
    per = {"requests": done}
    for name, label in (("nv_inference_request_duration_us", "request_ms"),
                        ("nv_inference_queue_duration_us", "queue_ms"),
                        ("nv_inference_compute_infer_duration_us", "compute_infer_ms")):
        value = delta[name]
        per[label] = None if value is None or not done else value / done / 1000.0
    return per


def _aiperf_window_s(summary: dict[str, Any]) -> float | None:
    """AIPerf's profiling window (its summary's start_time → end_time), which its throughputs divide by."""
    from datetime import datetime

    try:
        return (datetime.fromisoformat(summary["end_time"]) - datetime.fromisoformat(summary["start_time"])).total_seconds()
    except (KeyError, TypeError, ValueError):
        return None


def _same_aiperf_export(export: Path, summary: dict[str, Any]) -> list[dict[str, Any]]:
    """tritonkit's metric code on AIPerf's per-request export, against AIPerf's summary of it."""
    same = compute_metrics(records_from_aiperf(export), token_source="responses")
    rows = _compare(same, summary)
    window = _aiperf_window_s(summary)
    if window:
        rows.append(_row("tokens/s, AIPerf window", same.output_tokens_total / window,
                         summary.get("output_token_throughput", {}).get("avg")))
        rows.append(_row("requests/s, AIPerf window", same.answered_count / window,
                         summary.get("request_throughput", {}).get("avg")))
        rows.append(_row("window (s)", same.duration_s, window))
    return rows


def _genai_perf(server: TritonServer, args: argparse.Namespace, prompts: list[Any], folder: Path) -> dict[str, Any]:
    """Run GenAI-Perf on the same load; its summary and the path of its profile export."""
    exe, tokenizer, prompt_file = _tool_inputs(GENAI_VENV, "genai-perf", "genai-perf", prompts, folder)
    # GenAI-Perf runs "perf_analyzer" from PATH: the same binary tritonkit runs, through a wrapper.
    bindir = folder / "bin"
    bindir.mkdir(exist_ok=True)
    wrapper = bindir / "perf_analyzer"
    wrapper.write_text("#!/bin/sh\nexec " + " ".join(f"'{a}'" for a in locate_perf_analyzer().argv) + ' "$@"\n')
    wrapper.chmod(0o755)
    artifacts = folder / "artifacts"
    cmd = [str(exe), "profile", "-m", args.model, "--endpoint-type", "kserve", "--backend", "tensorrtllm",
           "--streaming", "-u", server.grpc_url, "--concurrency", str(args.concurrency),
           "--request-count", str(args.requests), "--tokenizer", str(tokenizer), "--input-file", str(prompt_file),
           "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", "0",
           "--artifact-dir", str(artifacts)]
    env = {**os.environ, "PATH": f"{bindir}:{os.environ.get('PATH', '')}"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"genai-perf exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    summary = next(artifacts.rglob("profile_export_genai_perf.json"))
    return {"summary": json.loads(summary.read_text()), "export": summary.parent / "profile_export.json"}


def _row(name: str, ours: float | None, theirs: float | None) -> dict[str, Any]:
    ratio = None if not ours or not theirs else ours / theirs
    return {"metric": name, "tritonkit": ours, "anchor": theirs, "ratio": ratio,
            "within_target": None if ratio is None else abs(ratio - 1.0) * 100.0 <= TARGET_RATIO_PCT}


def _compare(ours: LLMMetrics, g: dict[str, Any]) -> list[dict[str, Any]]:
    def mean(key: str) -> float | None:
        return g[key]["avg"] if key in g else None

    def pct(key: str, q: str) -> float | None:
        return g[key].get(q) if key in g else None

    assert ours.ttft_ms is not None and ours.itl_ms is not None
    return [
        _row("TTFT mean (ms)", ours.ttft_ms.mean, mean("time_to_first_token")),
        _row("TTFT p50 (ms)", ours.ttft_ms.p50, pct("time_to_first_token", "p50")),
        _row("TTFT p99 (ms)", ours.ttft_ms.p99, pct("time_to_first_token", "p99")),
        _row("ITL mean (ms)", ours.itl_ms.mean, mean("inter_token_latency")),
        _row("ITL p99 (ms)", ours.itl_ms.p99, pct("inter_token_latency", "p99")),
        _row("output tokens/s", ours.output_token_throughput_per_s, mean("output_token_throughput")),
        _row("requests/s", ours.request_throughput_per_s, mean("request_throughput")),
        _row("OSL mean (tokens)", ours.output_tokens.mean if ours.output_tokens else None,
             mean("output_sequence_length")),
    ]


def _print_rows(title: str, rows: list[dict[str, Any]], anchor: str = "genai-perf") -> None:
    print(f"\n{title}")
    print(f"  {'metric':<20} {'tritonkit':>12} {anchor:>12} {'ratio':>8}  within {TARGET_RATIO_PCT:g} %")
    for r in rows:
        ours = "–" if r["tritonkit"] is None else f"{r['tritonkit']:.3f}"
        theirs = "–" if r["anchor"] is None else f"{r['anchor']:.3f}"
        ratio = "–" if r["ratio"] is None else f"{r['ratio']:.4f}"
        ok = {True: "yes", False: "NO", None: "–"}[r["within_target"]]
        print(f"  {r['metric']:<20} {ours:>12} {theirs:>12} {ratio:>8}  {ok}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=16)
    parser.add_argument("--input-tokens", type=int, default=32)
    parser.add_argument("--first-token-ms", type=float, default=100.0)
    parser.add_argument("--token-interval-ms", type=float, default=20.0)
    parser.add_argument("--target", choices=("sim", "reference"), default="sim",
                        help="sim: the simulated LLM (known timing); reference: the CPU reference TensorRT-LLM "
                             "ensemble (preprocessing → tensorrt_llm → postprocessing), prompts counted by its tokenizer")
    parser.add_argument("--json", action="store_true", help="print one JSON document")
    args = parser.parse_args()
    global TOOL_TOKENIZER
    report: dict[str, Any] = {"load": {"concurrency": args.concurrency, "requests": args.requests,
                                       "input_tokens": args.input_tokens, "output_tokens": args.output_tokens,
                                       "first_token_ms": args.first_token_ms,
                                       "token_interval_ms": args.token_interval_ms, "target": args.target}}
    with tempfile.TemporaryDirectory(prefix="tk-llm-bench-") as tmp:
        root = Path(tmp)
        repo = root / "repo"
        tokenizer = None
        if args.target == "reference":
            from tritonkit.builders.trtllm import build_reference_repository
            from tritonkit.perf.llm.tokens import load_tokenizer

            ref = build_reference_repository(repo)
            args.model, args.pipeline = ref.ensemble, [ref.ensemble, "preprocessing", "tensorrt_llm", "postprocessing"]
            TOOL_TOKENIZER = ref.tokenizer_dir
            tokenizer = load_tokenizer(ref.tokenizer_dir)
        else:
            args.model = "llm_sim"
            args.pipeline = [args.model]
            write_llm_sim(repo, args.model, first_token_ms=args.first_token_ms,
                          token_interval_ms=args.token_interval_ms, max_batch=8, concurrent=True)
        prompts = synthetic_prompts(args.requests, input_tokens_mean=args.input_tokens,
                                    output_tokens_mean=args.output_tokens, seed=0, tokenizer=tokenizer)
        with TritonServer(repo) as server:
            _bare(server, args, prompts, root / "warmup")  # first requests pay for stub start-up
            before = scrape_metrics(server.metrics_url)
            ours, our_wall, our_cpu = _ours(server, args, prompts, root / "ours")
            server_side = {"grpc_streaming (perf_analyzer)": _server_side(before, scrape_metrics(server.metrics_url),
                                                                          args.pipeline)}
            bare_wall, bare_cpu = _bare(server, args, prompts, root / "bare")
            report["overhead"] = {"tritonkit_wall_s": our_wall, "tritonkit_cpu_s": our_cpu,
                                  "bare_perf_analyzer_wall_s": bare_wall, "bare_perf_analyzer_cpu_s": bare_cpu,
                                  "wall_ratio": our_wall / bare_wall, "cpu_ratio": our_cpu / bare_cpu if bare_cpu else None}
            report["tritonkit"] = ours.to_dict()
            try:
                genai = _genai_perf(server, args, prompts, root / "genai")
            except (RuntimeError, OSError, subprocess.SubprocessError, StopIteration) as exc:
                report["genai_perf_error"] = str(exc)
                genai = None
            if genai is not None:
                report["independent_runs"] = _compare(ours, genai["summary"])
                records, source = load_export_records(genai["export"])
                same = compute_metrics(records, token_source=source)
                report["same_export"] = _compare(same, genai["summary"])
            try:
                before = scrape_metrics(server.metrics_url)
                aiperf = _aiperf(server, args, prompts, root / "aiperf")
                # AIPerf's warm-up requests are in these counters too: they are few and alike.
                server_side["http_generate_stream (aiperf)"] = _server_side(
                    before, scrape_metrics(server.metrics_url), args.pipeline)
                report["aiperf_runs"] = _compare(ours, aiperf["summary"])
                report["aiperf_same_export"] = _same_aiperf_export(aiperf["export"], aiperf["summary"])
            except (RuntimeError, OSError, subprocess.SubprocessError, StopIteration, KeyError) as exc:
                report["aiperf_error"] = str(exc)
            report["server_side"] = server_side
    if args.json:
        print(json.dumps(report, indent=1, default=str))
        return 0
    load = report["load"]
    model = (f"model: first token {load['first_token_ms']:g} ms, then one per {load['token_interval_ms']:g} ms"
             if load["target"] == "sim" else f"model: the CPU reference TensorRT-LLM ensemble {args.model!r}, "
             "prompts counted by its tokenizer (the tools count with it too)")
    print(f"load: concurrency {load['concurrency']}, {load['requests']} requests, {load['input_tokens']} input / "
          f"{load['output_tokens']} output tokens; {model}")
    m = LLMMetrics.from_dict(report["tritonkit"])
    assert m.ttft_ms is not None and m.itl_ms is not None
    print(f"\ntritonkit: TTFT mean {m.ttft_ms.mean:.2f} ms (p99 {m.ttft_ms.p99:.2f}), ITL mean {m.itl_ms.mean:.3f} ms, "
          f"{m.output_token_throughput_per_s:.2f} output tokens/s, {m.request_throughput_per_s:.3f} requests/s")
    if "genai_perf_error" in report:
        print(f"\nGenAI-Perf could not run here: {report['genai_perf_error']}")
    else:
        _print_rows("Independent runs of the same load (run-to-run noise included):", report["independent_runs"])
        _print_rows("tritonkit's metric code on GenAI-Perf's own profile export (definitions only):",
                    report["same_export"])
    if "aiperf_error" in report:
        print(f"\nAIPerf could not run here: {report['aiperf_error']}")
    else:
        _print_rows("AIPerf 0.13 on the same load, over HTTP generate_stream (tritonkit: gRPC streaming):",
                    report["aiperf_runs"], anchor="aiperf")
        _print_rows("tritonkit's metric code on AIPerf's own per-request export (profile_export.jsonl):",
                    report["aiperf_same_export"], anchor="aiperf")
    print("\nserver side (Triton's own counters, per successful request, ms; AIPerf's warm-up requests included):")
    print(f"  {'transport (tool)':<32} {'model':<16} {'requests':>8} {'request':>9} {'queue':>9} {'compute':>9}")
    for transport, models in report.get("server_side", {}).items():
        for model, per in models.items():
            cells = [("–" if per[k] is None else f"{per[k]:.3f}") for k in ("request_ms", "queue_ms", "compute_infer_ms")]
            done = "–" if per["requests"] is None else f"{per['requests']:.0f}"
            print(f"  {transport:<32} {model:<16} {done:>8} {cells[0]:>9} {cells[1]:>9} {cells[2]:>9}")
    if len(report.get("server_side", {})) == 2:
        grpc, http = report["server_side"].values()
        top = args.pipeline[0]
        if grpc[top]["request_ms"] and http[top]["request_ms"]:
            print(f"  {top}: HTTP generate_stream / gRPC streaming server time per request = "
                  f"{http[top]['request_ms'] / grpc[top]['request_ms']:.4f}")
    o = report["overhead"]
    cpu_ratio = "–" if o["cpu_ratio"] is None else f"{o['cpu_ratio']:.2f}"
    print(f"\noverhead: tritonkit run {o['tritonkit_wall_s']:.2f} s wall, {o['tritonkit_cpu_s']:.2f} s CPU; bare "
          f"perf_analyzer {o['bare_perf_analyzer_wall_s']:.2f} s wall, {o['bare_perf_analyzer_cpu_s']:.2f} s CPU; "
          f"ratio wall {o['wall_ratio']:.2f}, CPU {cpu_ratio}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
