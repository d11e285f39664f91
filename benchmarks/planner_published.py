"""The planner against published GPU measurements, in one command (no GPU needed).

Each case is a row of NVIDIA's TensorRT-LLM performance overview (source and figures in
``tritonkit/planner/published.py``): the planner is asked for the GPUs that serve ``--copies``
times the published load, and the answer is compared with ``--copies`` times the published GPUs.
Target: every case within 2× (``tests/planner/test_published.py`` holds it there). ``--grid``
also prints how the fit moves with the two efficiencies, the calibration behind their defaults.

    .venv/bin/python benchmarks/planner_published.py
    .venv/bin/python benchmarks/planner_published.py --copies 16 --grid --json
"""

from __future__ import annotations

import argparse
import json
import math
import time

from tritonkit.planner import PlanAssumptions
from tritonkit.planner.published import LATENCY_CASES, PUBLISHED_CASES, CaseCheck, check_case, check_latency


def _spread(checks: list[CaseCheck]) -> float:
    return sum(abs(math.log(c.ratio)) for c in checks) / len(checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=8, help="multiples of each published load to plan (default 8)")
    parser.add_argument("--grid", action="store_true", help="also scan the bandwidth and compute efficiencies")
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    checks = [check_case(case, copies=args.copies) for case in PUBLISHED_CASES]
    elapsed_s = time.perf_counter() - started
    grid = []
    if args.grid:
        for bw in (0.4, 0.5, 0.6, 0.7, 0.8):
            for cp in (0.35, 0.45, 0.55, 0.6):
                a = PlanAssumptions(bandwidth_efficiency=bw, compute_efficiency=cp)
                grid.append({"bandwidth_efficiency": bw, "compute_efficiency": cp,
                             "mean_abs_log_ratio": round(_spread([check_case(c, a, copies=args.copies)
                                                                  for c in PUBLISHED_CASES]), 3)})
    latency = [{"case": c.describe(), "source": c.source, "planned_over_published": round(check_latency(c), 2)}
               for c in LATENCY_CASES]
    if args.json:
        print(json.dumps({"cases": [c.to_dict() for c in checks], "mean_abs_log_ratio": round(_spread(checks), 3),
                          "plan_seconds": round(elapsed_s, 2), "grid": grid, "first_token": latency}, indent=2))
        return
    print(f"{'case':<72} {'published':>9} {'planned':>7} {'ratio':>6}  deployment")
    for c in checks:
        print(f"{c.case.describe():<72} {c.published_gpus:>9} {c.planned_gpus:>7} {c.ratio:>6.2f}  "
              f"{c.planned_deployment}")
    print(f"\nmean |log ratio| {_spread(checks):.3f}; worst ratio {max(checks, key=lambda c: abs(math.log(c.ratio))).ratio:.2f}; "
          f"{len(checks)} plans in {elapsed_s:.2f} s")
    print(f"source: {PUBLISHED_CASES[0].source}")
    print(f"\nfirst-token latency (planned prefill / published), source: {LATENCY_CASES[0].source}")
    for row in latency:
        print(f"  {row['case']:<72} {row['planned_over_published']:>6.2f}")
    for row in grid:
        print(f"  bandwidth {row['bandwidth_efficiency']:.2f} compute {row['compute_efficiency']:.2f}: "
              f"{row['mean_abs_log_ratio']:.3f}")


if __name__ == "__main__":
    main()
