"""The LLM gate's noise on a real engine: how far identical LLM runs spread on vLLM's CPU build, how often
``perf compare`` raises a false alarm between them, and how often it catches a build slowed by a known
amount — for the rule as it stands and for candidate noise rules.

One engine (vLLM's CPU build serving a tiny Llama made on the spot, tests/support/vllm_engine.py, its KV
cache large enough that nothing queues) and ``--runs`` pairs of runs of tritonkit over its OpenAI endpoint
(``run_llm``, chat, streamed, ``--concurrency`` levels × ``--requests``), one after another on the same
engine: each pair an **identical** run through a relay of factor 1 (tests/support/slow_relay.py: it pays
the relay's own cost and slows nothing) and a **slowed** run through a relay of ``--factor`` (every
streamed piece held so the stream is that many times slower: TTFT and ITL × factor, tokens/s ÷ factor),
alternating so that the machine's drift falls on both alike. A fresh engine per run costs ~50 s here;
the spread between engines is not measured.

Printed: each metric's coefficient of variation over the identical runs (what ``--run-noise`` /
``--tail-run-noise`` stand for) and, for each candidate rule, the false alarms (a "regression" between
two identical runs, every ordered pair; goal ≤ 5 %) and the catches (a "regression" of a slowed run
against an identical one, every pair; goal ≥ 95 %). The ``--repeat 3`` rule combines three runs a side
(``combine_llm_runs``, as ``perf run --llm --repeat 3`` does): every split of six identical runs into two
threes, and every three identical against every three slowed.

    flock /work/notes/timing.lock .venv/bin/python benchmarks/llm_gate_vllm.py --runs 6 --requests 200 --keep /tmp/gate
    .venv/bin/python benchmarks/llm_gate_vllm.py --from /tmp/gate     # the same figures again, nothing run
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.slow_relay import SlowRelay  # noqa: E402
from tests.support.vllm_engine import tiny_vllm  # noqa: E402
from tritonkit.perf.judge.compare import DEFAULT_RUN_NOISE  # noqa: E402
from tritonkit.perf.llm.compare import (  # noqa: E402
    DEFAULT_TAIL_RUN_NOISE,
    ENGINE_RUN_NOISE,
    ENGINE_TAIL_RUN_NOISE,
    compare_llm_results,
)
from tritonkit.perf.llm.loadtest import LLMPlan, run_llm  # noqa: E402
from tritonkit.perf.llm.openai import OpenAITarget  # noqa: E402
from tritonkit.perf.llm.prompts import synthetic_prompts  # noqa: E402
from tritonkit.perf.llm.repeats import combine_llm_runs  # noqa: E402
from tritonkit.perf.llm.result import LLMResult  # noqa: E402
from tritonkit.perf.llm.tokens import load_tokenizer  # noqa: E402

FIGURES = ("tokens_per_s", "ttft_p99", "itl_p99", "ttft_mean", "itl_mean")
KINDS = ("identical", "slowed")


def measure(args: argparse.Namespace, keep: Path) -> dict[str, list[LLMResult]]:
    """``args.runs`` identical and slowed runs, alternating, their raw files in ``keep``."""
    levels = tuple(int(v) for v in args.concurrency.split(","))
    runs: dict[str, list[LLMResult]] = {kind: [] for kind in KINDS}
    with tempfile.TemporaryDirectory(prefix="tk-gate-vllm-") as tmp, \
            tiny_vllm(Path(tmp), max_num_seqs=max(levels), num_gpu_blocks_override=None, max_model_len=1024) as engine:
        print(f"engine ready in {engine.start_s:.0f} s", flush=True)
        tokenizer = load_tokenizer(engine.model_dir)
        prompts = synthetic_prompts(args.requests, input_tokens_mean=32, output_tokens_mean=args.output_tokens, seed=7,
                                    tokenizer=tokenizer)
        port = int(engine.url.rsplit(":", 1)[1])
        for index in range(args.runs):
            for kind in KINDS:
                began = time.monotonic()
                with SlowRelay(port, factor=args.factor if kind == "slowed" else 1.0) as relay:
                    result = run_llm(engine.model, relay.url, prompts,
                                     LLMPlan(concurrency=levels, requests_per_level=args.requests, settle_s=0.0),
                                     results_dir=keep / f"{kind}-{index}", openai=OpenAITarget(), tokenizer=tokenizer)
                runs[kind].append(result)
                shown = ", ".join(f"c{k[1:]} {v['tokens_per_s'] or 0:.1f} tok/s" for k, v in figures(result).items())
                print(f"{kind} run {index + 1}: {shown} ({time.monotonic() - began:.0f} s)", flush=True)
    return runs


def load(folder: Path) -> dict[str, list[LLMResult]]:
    runs: dict[str, list[LLMResult]] = {kind: [] for kind in KINDS}
    for kind in KINDS:
        index = 0
        while (folder / f"{kind}-{index}" / "llm_result.json").exists():
            runs[kind].append(LLMResult.load(folder / f"{kind}-{index}" / "llm_result.json"))
            index += 1
    if len(runs["identical"]) < 2 or not runs["slowed"]:
        raise SystemExit(f"{folder} holds {len(runs['identical'])} identical and {len(runs['slowed'])} slowed runs: "
                         "at least 2 and 1 are needed (made by --keep)")
    return runs


def figures(result: LLMResult) -> dict[str, dict[str, float | None]]:
    out = {}
    for step in result.steps:
        values = step.metrics.sla_values() if step.metrics is not None else {}
        out[f"c{step.load_value:g}"] = {name: values.get(name) for name in FIGURES}
    return out


def spread(results: Sequence[LLMResult]) -> dict[str, dict[str, float | None]]:
    """Each level's and figure's coefficient of variation over ``results``."""
    found = [figures(r) for r in results]
    out: dict[str, dict[str, float | None]] = {}
    for level in found[0]:
        out[level] = {}
        for name in FIGURES:
            values = [v for f in found if (v := f[level][name]) is not None]
            mean = statistics.mean(values) if values else 0.0
            out[level][name] = statistics.stdev(values) / mean if len(values) > 1 and mean else None
    return out


Rule = tuple[str, float, float, int]  # name, run noise, tail run noise, runs combined a side


def pairs(runs: dict[str, list[LLMResult]], combined: int) -> tuple[list[tuple[LLMResult, LLMResult]],
                                                                    list[tuple[LLMResult, LLMResult]]]:
    """(identical, identical) pairs for the false alarms and (identical, slowed) for the catches."""
    same, slowed = runs["identical"], runs["slowed"]
    if combined == 1:
        return list(itertools.permutations(same, 2)), [(a, b) for a in same for b in slowed]
    alarms = []
    for base in itertools.combinations(range(len(same)), combined):
        rest = [i for i in range(len(same)) if i not in base]
        for new in itertools.combinations(rest, combined):
            alarms.append((combine_llm_runs([same[i] for i in base]), combine_llm_runs([same[i] for i in new])))
    threes = [combine_llm_runs(list(c)) for c in itertools.combinations(same, combined)]
    slow_threes = [combine_llm_runs(list(c)) for c in itertools.combinations(slowed, combined)]
    return alarms, [(a, b) for a in threes for b in slow_threes]


def judge(rules: Sequence[Rule], runs: dict[str, list[LLMResult]]) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, noise, tail, combined in rules:
        alarms, catches = pairs(runs, combined)
        if not alarms or not catches:
            out[name] = {"skipped": f"needs {2 * combined} identical runs"}
            continue

        def outcome(pair: tuple[LLMResult, LLMResult], n: float = noise, t: float = tail) -> str:
            return compare_llm_results(pair[0], pair[1], run_noise=n, tail_run_noise=t).outcome

        def tally(found: list[str]) -> dict[str, int]:
            return {o: found.count(o) for o in ("regression", "inside the noise", "no regression")}

        alarm, caught = tally([outcome(p) for p in alarms]), tally([outcome(p) for p in catches])
        out[name] = {"run_noise": noise, "tail_run_noise": tail, "combined": combined,
                     "false_alarms": alarm["regression"], "identical_pairs": len(alarms), "identical": alarm,
                     "catches": caught["regression"], "slowed_pairs": len(catches), "slowed": caught}
    return out


def _ceil_to(value: float, step: float) -> float:
    return step * -(-value // step)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="identical and slowed runs each")
    parser.add_argument("--requests", type=int, default=200, help="requests per level and run")
    parser.add_argument("--concurrency", default="1,4")
    parser.add_argument("--output-tokens", type=int, default=24)
    parser.add_argument("--factor", type=float, default=1.2, help="the slowed build's relay factor")
    parser.add_argument("--keep", type=Path, help="keep every run's raw files and llm_result.json here")
    parser.add_argument("--from", dest="source", type=Path, help="judge the runs a --keep folder holds; run nothing")
    parser.add_argument("--json", type=Path, help="write the figures and verdicts here")
    args = parser.parse_args()
    if args.source is None and not (2 <= args.runs <= 12 and 1 <= args.requests <= 1000 and 1.0 <= args.factor <= 5.0):
        # bounded: each run is about a minute on 2 cores at 200 requests, and the machine is shared
        parser.error("keep it bounded: --runs 2..12, --requests 1..1000, --factor 1..5")
    began = time.monotonic()
    if args.source is not None:
        runs = load(args.source)
    elif args.keep is not None:
        runs = measure(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="tk-gate-vllm-runs-") as keep:
            runs = measure(args, Path(keep))
    cv = spread(runs["identical"])
    means = max((v for level in cv.values() for k, v in level.items() if k == "tokens_per_s" and v), default=0.0)
    tails = max((v for level in cv.values() for k, v in level.items() if k in ("ttft_p99", "itl_p99") and v),
                default=0.0)
    measured = (_ceil_to(means, 0.05), _ceil_to(tails, 0.05))
    rules: list[Rule] = [
        ("old defaults", DEFAULT_RUN_NOISE, DEFAULT_TAIL_RUN_NOISE, 1),
        ("engine defaults (compare.py)", ENGINE_RUN_NOISE, ENGINE_TAIL_RUN_NOISE, 1),
        ("20 % / 65 % (earlier measurement)", 0.20, 0.65, 1),
        (f"this measurement's CV, rounded up ({measured[0]:.0%} / {measured[1]:.0%})", *measured, 1),
        ("--repeat 3 each side", DEFAULT_RUN_NOISE, DEFAULT_TAIL_RUN_NOISE, 3),
    ]
    verdicts = judge(rules, runs)
    identical, slowed = len(runs["identical"]), len(runs["slowed"])
    report = {"identical_runs": identical, "slowed_runs": slowed, "factor": args.factor, "cv": cv,
              "figures": {k: [figures(r) for r in v] for k, v in runs.items()}, "rules": verdicts}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    show: Callable[[float | None], str] = lambda v: "-" if v is None else f"{100 * v:.1f} %"  # noqa: E731
    print(f"\n{identical} identical and {slowed} slowed runs on one vLLM CPU engine ({time.monotonic() - began:.0f} s)")
    for level, values in cv.items():
        print(f"  {level}: CV over identical runs: " + ", ".join(f"{n} {show(v)}" for n, v in values.items()))
    for name, found in verdicts.items():
        if "skipped" in found:
            print(f"  {name}: skipped ({found['skipped']})")
            continue
        alarms, pairs_same = int(found["false_alarms"]), int(found["identical_pairs"])  # type: ignore[call-overload]
        caught, pairs_slow = int(found["catches"]), int(found["slowed_pairs"])  # type: ignore[call-overload]
        print(f"  {name}: false alarms {alarms}/{pairs_same} = {alarms / pairs_same:.0%} (goal ≤ 5 %), "
              f"catches {caught}/{pairs_slow} = {caught / pairs_slow:.0%} (goal ≥ 95 %); "
              f"identical {found['identical']}, slowed {found['slowed']}")


if __name__ == "__main__":
    main()
