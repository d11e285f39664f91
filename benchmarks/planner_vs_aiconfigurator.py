"""The planner's own search beside NVIDIA's performance model (AIConfigurator), case by case.

For each case (a model config under tests/data/planner, a GPU both cover, a request rate and a
per-token time) the planner is run twice through ``plan_capacity``: with its own search
(``performance_model="own"``) and asking AIConfigurator (``"aiconfigurator"``); the GPUs each
needs, their deployments and the time each took are printed. Needs AIConfigurator in a venv of
its own, named by ``TRITONKIT_AICONFIGURATOR`` (``pip install aiconfigurator``); each of its answers
takes 25–45 s on 2 cores.

    TRITONKIT_AICONFIGURATOR=/tmp/aicfg/bin/aiconfigurator .venv/bin/python benchmarks/planner_vs_aiconfigurator.py
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from tritonkit.planner import PlanRequest, Workload, plan_capacity
from tritonkit.planner.external import find_tool
from tritonkit.planner.search import SearchSpace

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "planner"
#: (config, GPU, req/s, input tokens, output tokens, tokens/s per user, TTFT ms)
CASES = (
    ("llama-3-70b", "H200", 16, 1024, 256, 33.3, 2000),
    ("llama-3-70b", "H100-SXM", 8, 1024, 256, 20, 1000),
    ("llama-3-8b", "H100-SXM", 50, 1024, 256, 40, 1000),
    ("llama-3-8b", "L40S", 10, 512, 256, 25, 1000),
    ("mixtral-8x7b", "H200", 20, 1024, 256, 30, 2000),
)


def _plan(name: str, gpu: str, qps: float, isl: int, osl: int, tps: float, ttft: float, who: str) -> dict:  # type: ignore[type-arg]
    started = time.perf_counter()
    plan = plan_capacity(PlanRequest(
        hf_config=DATA / f"{name}.json", gpu=gpu, search=SearchSpace(), performance_model=who,
        workload=Workload(target_qps=qps, input_tokens=isl, output_tokens=osl, tokens_per_s_per_user=tps,
                          ttft_ms=ttft)))
    line = plan.line("gpus_needed")
    return {"gpus": line.value, "how": line.note, "answered_by": plan.value("performance_model")
            if any(item.key == "performance_model" for item in plan.lines) else "tritonkit search",
            "seconds": round(time.perf_counter() - started, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    if find_tool() is None:
        sys.exit("AIConfigurator not found: set TRITONKIT_AICONFIGURATOR to its aiconfigurator executable")
    rows = []
    for case in CASES:
        own = _plan(*case, "own")
        theirs = _plan(*case, "aiconfigurator")
        rows.append({"case": f"{case[0]} on {case[1]}, {case[2]} req/s, {case[3]}/{case[4]} tokens, "
                             f"{case[5]} tok/s/user, TTFT {case[6]} ms", "own": own, "aiconfigurator": theirs,
                     "ratio": round(own["gpus"] / theirs["gpus"], 2) if theirs["gpus"] else None})
        if not args.json:
            r = rows[-1]
            print(f"{r['case']}\n  own: {own['gpus']} GPUs ({own['how']}; {own['seconds']} s)\n"
                  f"  {theirs['answered_by']}: {theirs['gpus']} GPUs ({theirs['how']}; {theirs['seconds']} s)\n"
                  f"  own / theirs = {r['ratio']}")
    if args.json:
        print(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
