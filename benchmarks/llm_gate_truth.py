"""How often ``perf compare`` is right on LLM runs: its false alarms, its detection, and how far
single LLM runs of one build spread between fresh servers (what ``--run-noise`` stands for).

The CPU reference TensorRT-LLM repository (``build trtllm --engine reference``) is served in two
builds that differ only in the engine's cost: the **base** and one **25 % slower per decode step**
(every step cost × 1.25: ITL up by about a quarter, tokens/s down by about a fifth). Each is run
``--runs`` times, every run on a **fresh server** (start, ``perf run --llm``, stop), the two
interleaved so the machine's drift falls on both alike. Then, with ``perf compare``'s own rule on
LLM runs (:func:`tritonkit.perf.llm.compare.compare_llm_results`, default limits: TTFT / ITL p99 may
rise 10 %, tokens/s fall 5 %; ``--requests 400`` by default: a p99 of fewer than 381 requests is
inside the noise whatever it shows):

- **spread between runs**: each metric's coefficient of variation over the base's runs, beside
  the median half-width of one run's own bootstrap interval (what one run can see of it);
- **false alarms**: every pair of base runs (the earlier as baseline): the share of pairs with a
  "regression" (goal ≤ 5 %), and how many were "inside the noise";
- **detection**: every base run against every slower run: the share called "regression" (goal ≥ 95 %);
- the same verdicts with the tails held to the rates' spread (``--tail-run-noise 5%``) and with
  ``--run-noise 0 --tail-run-noise 0`` (the requests alone), the references; the point rule used
  before intervals (a change past the limit is a regression) raised the most false alarms of all.

    .venv/bin/python benchmarks/llm_gate_truth.py              # 6 runs per build: about 6 minutes on 2 cores
    .venv/bin/python benchmarks/llm_gate_truth.py --runs 3     # a reduced check that it works
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tritonkit.builders.trtllm.reference import ReferenceEngine, build_reference_repository  # noqa: E402
from tritonkit.perf.command import LoadTestSettings, llm_load_test  # noqa: E402
from tritonkit.perf.judge.compare import DEFAULT_RUN_NOISE  # noqa: E402
from tritonkit.perf.llm.compare import (  # noqa: E402
    DEFAULT_TAIL_RUN_NOISE,
    LLM_COMPARE_LIMITS,
    LLMComparison,
    compare_llm_results,
)
from tritonkit.perf.llm.result import LLMResult  # noqa: E402
from tritonkit.perf.llm.settings import LLMSettings  # noqa: E402
from tritonkit.server import TritonServer  # noqa: E402

#: Each build's decode-step cost relative to the base.
BUILDS = {"base": 1.0, "slow25": 1.25}
METRICS = tuple(name for name in LLM_COMPARE_LIMITS if name != "goodput")


def engine(scale: float) -> ReferenceEngine:
    base = ReferenceEngine()
    return replace(base, step_ms=base.step_ms * scale, per_sequence_ms=base.per_sequence_ms * scale,
                   per_kilotoken_context_ms=base.per_kilotoken_context_ms * scale,
                   prefill_per_kilotoken_ms=base.prefill_per_kilotoken_ms * scale)


def one_run(build: str, index: int, args: argparse.Namespace, root: Path) -> LLMResult:
    repo = root / f"repo-{build}"
    if not repo.exists():
        build_reference_repository(repo, engine=engine(BUILDS[build]))
    llm = LLMSettings(input_tokens=str(args.input_tokens), output_tokens=str(args.output_tokens),
                      concurrency=str(args.concurrency), requests=args.requests, num_prompts=args.requests)
    with TritonServer(repo) as server:
        test = llm_load_test("ensemble", llm, LoadTestSettings(url=server.grpc_url, out=root / f"run-{build}-{index}"))
    if test.run is None or test.run.error is not None:
        raise SystemExit(f"{build} run {index} measured nothing: {test.run.error if test.run else 'interrupted'}")
    return test.run.result


def figures(result: LLMResult) -> tuple[dict[str, float | None], dict[str, tuple[float, float]]]:
    metrics = result.steps[0].metrics
    assert metrics is not None, "a run without metrics"
    return metrics.sla_values(), metrics.sla_intervals()


def tally(pairs: list[LLMComparison]) -> str:
    outcomes = [c.outcome for c in pairs]
    return ", ".join(f"{name} {outcomes.count(name)}" for name in ("regression", "inside the noise", "no regression"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="fresh-server runs per build")
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=400, help="requests per run (381 give a p99 a known upper bound)")
    parser.add_argument("--input-tokens", type=int, default=64)
    parser.add_argument("--output-tokens", type=int, default=24)
    parser.add_argument("--json", type=Path, help="keep every run's figures and every pair's verdict here")
    args = parser.parse_args()
    started = time.monotonic()
    runs: dict[str, list[LLMResult]] = {name: [] for name in BUILDS}
    with tempfile.TemporaryDirectory(prefix="llm-gate-truth-") as tmp:
        for index in range(args.runs):
            for build in BUILDS:
                runs[build].append(one_run(build, index, args, Path(tmp)))
                values, _ = figures(runs[build][-1])
                print(f"{build} run {index + 1}: " + ", ".join(f"{m} {values[m] or 0:.4g}" for m in METRICS), flush=True)
    print(f"\n{args.runs} runs per build, concurrency {args.concurrency}, {args.requests} requests each, "
          f"{time.monotonic() - started:.0f} s")
    spread: dict[str, dict[str, float]] = {}
    for metric in METRICS:
        values = [v for r in runs["base"] if (v := figures(r)[0].get(metric)) is not None]
        halves = [(band[1] - band[0]) / 2 / v for r in runs["base"]
                  if (band := figures(r)[1].get(metric)) and (v := figures(r)[0].get(metric))]
        cv = statistics.stdev(values) / statistics.mean(values) if len(values) > 1 else float("nan")
        spread[metric] = {"cv_between_runs": cv, "median_run_half_width": statistics.median(halves) if halves else 0.0}
        print(f"base {metric}: between runs CV {cv:.1%}; one run's own 95% interval ±{spread[metric]['median_run_half_width']:.1%}")
    report: dict[str, object] = {"args": {k: str(v) for k, v in vars(args).items()}, "spread": spread}
    for noise, tail in ((DEFAULT_RUN_NOISE, DEFAULT_TAIL_RUN_NOISE), (DEFAULT_RUN_NOISE, DEFAULT_RUN_NOISE), (0.0, 0.0)):
        alarms = [compare_llm_results(a, b, run_noise=noise, tail_run_noise=tail)
                  for a, b in itertools.combinations(runs["base"], 2)]
        caught = [compare_llm_results(a, b, run_noise=noise, tail_run_noise=tail)
                  for a in runs["base"] for b in runs["slow25"]]
        false = sum(c.outcome == "regression" for c in alarms)
        hits = sum(c.outcome == "regression" for c in caught)
        print(f"\nperf compare's LLM rule with --run-noise {noise:.1%} --tail-run-noise {tail:.1%}:")
        print(f"false alarms (base vs base, {len(alarms)} pairs): {false}/{len(alarms)} = {false / len(alarms):.0%} "
              f"(goal ≤ 5%); {tally(alarms)}")
        print(f"detection (base vs 25% slower steps, {len(caught)} pairs): {hits}/{len(caught)} = "
              f"{hits / len(caught):.0%} (goal ≥ 95%); {tally(caught)}")
        report[f"run_noise_{noise:g}_tail_{tail:g}"] = {"false_alarms": [c.to_dict() for c in alarms],
                                          "detection": [c.to_dict() for c in caught]}
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()
