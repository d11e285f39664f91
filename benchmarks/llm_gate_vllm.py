"""The LLM gate's noise on a real engine: how far identical LLM runs spread on vLLM's CPU build, and how
often ``perf compare`` raises a false alarm between them, beside the defaults ``--run-noise`` (5 %) and
``--tail-run-noise`` (10 %) that were measured on the reference engine (``llm_gate_truth.py``).

One engine (vLLM's CPU build serving a tiny Llama made on the spot, tests/support/vllm_engine.py, with
its KV cache large enough that nothing queues), ``--runs`` identical runs of tritonkit over its OpenAI
endpoint (``run_llm``, chat, streamed, ``--concurrency`` levels × ``--requests``), one after another on
the same engine (a fresh engine per run costs ~50 s here; the spread between engines is not measured).
Printed: each metric's coefficient of variation over the runs (what ``--run-noise`` /
``--tail-run-noise`` stand for) and, for every ordered pair of runs, ``perf compare``'s verdict with
the default noise (false alarms: "regression" between identical runs; goal ≤ 5 %).

    .venv/bin/python benchmarks/llm_gate_vllm.py --runs 5 --requests 200
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.vllm_engine import tiny_vllm  # noqa: E402
from tritonkit.perf.llm.compare import compare_llm_results  # noqa: E402
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm  # noqa: E402
from tritonkit.perf.llm.openai import OpenAITarget  # noqa: E402
from tritonkit.perf.llm.prompts import synthetic_prompts  # noqa: E402
from tritonkit.perf.llm.result import LLMResult  # noqa: E402
from tritonkit.perf.llm.tokens import load_tokenizer  # noqa: E402

FIGURES = ("ttft_p99", "itl_p99", "tokens_per_s", "ttft_mean", "itl_mean")


def _figures(result: LLMResult) -> dict[str, dict[str, float | None]]:
    out = {}
    for step in result.steps:
        values = step.metrics.sla_values() if step.metrics is not None else {}
        out[f"c{step.load_value:g}"] = {name: values.get(name) for name in FIGURES}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--output-tokens", type=int, default=24)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    levels = tuple(int(v) for v in args.concurrency.split(","))
    with tempfile.TemporaryDirectory(prefix="tk-gate-vllm-") as tmp, \
            tiny_vllm(Path(tmp), max_num_seqs=max(levels), num_gpu_blocks_override=None, max_model_len=1024) as engine:
        tokenizer = load_tokenizer(engine.model_dir)
        prompts = synthetic_prompts(args.requests, input_tokens_mean=32, output_tokens_mean=args.output_tokens, seed=7,
                                    tokenizer=tokenizer)
        runs = [run_llm(engine.model, engine.url, prompts,
                        LLMPlan(concurrency=levels, requests_per_level=args.requests, settle_s=0.0),
                        results_dir=Path(tmp) / f"run{i}", openai=OpenAITarget(), tokenizer=tokenizer)
                for i in range(args.runs)]
    figures = [_figures(r) for r in runs]
    spread: dict[str, dict[str, float | None]] = {}
    for step in figures[0]:
        spread[step] = {}
        for name in FIGURES:
            values = [v for f in figures if (v := f[step][name]) is not None]
            spread[step][name] = (statistics.stdev(values) / statistics.mean(values)
                                  if len(values) > 1 and statistics.mean(values) else None)
    verdicts: dict[str, int] = {}
    for base, new in itertools.permutations(runs, 2):
        outcome = compare_llm_results(base, new).outcome
        verdicts[outcome] = verdicts.get(outcome, 0) + 1
    pairs = sum(verdicts.values())
    report = {"runs": args.runs, "requests": args.requests, "figures": figures, "cv": spread, "verdicts": verdicts,
              "false_alarm_share": verdicts.get("regression", 0) / pairs if pairs else None}
    if args.json:
        print(json.dumps(report, indent=1))
        return
    print(f"{args.runs} identical runs × {args.requests} requests per level on one vLLM CPU engine")
    for step, cvs in spread.items():
        text = ", ".join(f"{n} {100 * v:.1f} %" for n, v in cvs.items() if v is not None)
        print(f"  {step}: coefficient of variation over runs: {text}")
    print(f"  perf compare over {pairs} ordered pairs (default noise): {verdicts}; "
          f"false alarms {100 * (report['false_alarm_share'] or 0):.1f} % (goal ≤ 5 %)")


if __name__ == "__main__":
    main()
