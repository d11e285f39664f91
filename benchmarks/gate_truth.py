"""How often ``perf compare`` is right: its false-alarm rate, its detection rate, and whether the
intervals it decides with cover what they claim.

Three builds of one python-backend model differ only in the cost of a request, which this script
sets: the **base** (``--cost-ms``), one **20 % slower** (throughput × 0.80) and one **5 % slower**
(× 0.95). A request costs the server more than the model's own time (gRPC, the queue, the python
stub's hand-over), so a first, calibrating run of the base measures that overhead ``o`` from its
throughput, and a build ``s`` times as fast burns ``(o + cost) / s − o``: its whole time per request,
not only the model's, is ``1 / s`` times the base's. Each is run ``--runs`` times, every run on a **fresh server** (as CI
runs it: start, load, warm up, ``perf run``, stop), the three interleaved so the machine's drift
falls on all alike. Then, with ``perf compare``'s own rule (:func:`tritonkit.perf.judge.compare_results`,
default limits: a 5 % drop, gated on peak throughput within the SLA):

- **false alarms**: every pair of base runs compared (each pair once, the earlier as baseline):
  the share called "regression" (goal ≤ 5 %), with how many were "inside the noise";
- **detection at 20 %**: every base run against every 20 %-slower run: the share called
  "regression" (goal ≥ 95 %);
- **at 5 %**: the verdicts against the 5 %-slower runs (a change the size of the limit: "inside
  the noise" is the honest answer);
- **interval coverage**: for each build, the share of runs whose 95 % interval of the gated figure,
  widened by the spread between runs ``perf compare`` assumes (``--run-noise``, its default), holds
  the median of that build's runs (goal about 95 %); and the same for the interval of its
  windows alone, which is within one run.

The reference, printed from the same runs: every verdict again with ``--run-noise 0`` (the
windows alone, as if two fresh-server runs of one build never differed).

The cost is burnt on the CPU (``--cost-kind spin``, the default: what a build server's other jobs
take from) or slept (``sleep``). Printed: the machine's load while measuring, each build's figures
and spread, the four rates. ``--json FILE`` keeps every run's figures and every pair's verdict.

    .venv/bin/python benchmarks/gate_truth.py             # 8 runs per build, 24 servers: 8-15 minutes on 2 cores
    .venv/bin/python benchmarks/gate_truth.py --runs 3    # a reduced check that it works
    .venv/bin/python benchmarks/gate_truth.py --runs 6 --repeat 3   # each run the median of 3 ladders

With ``--repeat N`` every run is ``perf run --repeat N`` on its fresh server: its figures are the
medians of N ladders and its interval is taken over them, so ``perf compare`` adds no run noise to
it (the runs measure their spread); the coverage then says whether N ladders on one server show
the spread between fresh servers.

A run takes ~20 s on a quiet machine and up to ~40 s on a loaded one (a step perf_analyzer cannot
call stable is measured once more, over fixed windows).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tritonkit.perf.command import LoadTestSettings, load_test  # noqa: E402
from tritonkit.perf.judge.compare import DEFAULT_RUN_NOISE, compare_results  # noqa: E402
from tritonkit.perf.judge.verdict import stored_verdict  # noqa: E402
from tritonkit.perf.measure.result import PerfResult, StepResult  # noqa: E402
from tritonkit.perf.measure.windows import across_runs  # noqa: E402
from tritonkit.server import TritonServer  # noqa: E402

MODEL = "costly"
CONFIG = """name: "costly"
backend: "python"
max_batch_size: 0
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL_PY = """import time

import triton_python_backend_utils as pb_utils

COST_S = {cost_s!r}
SPIN = {spin!r}


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            if SPIN:
                end = time.perf_counter() + COST_S
                while time.perf_counter() < end:
                    pass
            else:
                time.sleep(COST_S)
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return out
"""
#: Each build's throughput relative to the base.
BUILDS = {"base": 1.0, "slow20": 0.80, "slow5": 0.95}


@dataclass
class Run:
    """One fresh-server run of one build."""

    build: str
    index: int
    folder: str
    exit_code: int
    peak_per_s: float | None = None
    peak_interval: list[float] | None = None
    peak_noisy: bool = False
    other_cores: list[float] = field(default_factory=list)
    wall_s: float = 0.0


def write_repo(repo: Path, cost_s: float, spin: bool) -> None:
    folder = repo / MODEL
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(CONFIG)
    (folder / "1" / "model.py").write_text(MODEL_PY.format(cost_s=cost_s, spin=spin))


def gated_step(result: PerfResult) -> StepResult | None:
    """The step ``perf compare`` gates on: the highest throughput among the steps the verdict passes."""
    verdict = stored_verdict(result)
    passing = {s.load for s in verdict.steps if s.status == "pass"} if verdict else None
    steps = [s for s in result.steps if s.measured and s.throughput_per_s is not None
             and (passing is None or s.load_value in passing)]
    return max(steps, key=lambda s: s.throughput_per_s or 0.0) if steps else None


def one_run(build: str, index: int, cost_s: float, args: argparse.Namespace, root: Path) -> tuple[Run, PerfResult]:
    repo = root / f"repo-{build}-{index}"
    write_repo(repo, cost_s, args.cost_kind == "spin")
    out = root / f"run-{build}-{index}"
    started = time.monotonic()
    with TritonServer(repo) as server:
        settings = LoadTestSettings(url=server.grpc_url, metrics_url=server.metrics_url, sla=args.sla,
                                    concurrency=args.concurrency, duration_s=args.duration_s, warmup_s=args.warmup_s,
                                    input_data="zero", out=out, repeat=args.repeat)
        test = load_test(MODEL, settings)
    assert test.run is not None, f"{build} run {index} measured nothing"
    result = test.run.result
    step = gated_step(result)
    run = Run(build, index, str(out), test.exit_code, wall_s=time.monotonic() - started,
              other_cores=[s.machine.other_cores for s in result.steps
                           if s.machine is not None and s.machine.other_cores is not None])
    if step is not None:
        band = step.interval("throughput")
        run.peak_per_s, run.peak_interval, run.peak_noisy = step.throughput_per_s, list(band) if band else None, step.noisy
    return run, result


def rate(outcomes: list[str], wanted: str) -> str:
    hits = sum(o == wanted for o in outcomes)
    return f"{hits}/{len(outcomes)} = {100.0 * hits / max(1, len(outcomes)):.0f}%"


def tally(outcomes: list[str]) -> str:
    return ", ".join(f"{name} {outcomes.count(name)}" for name in ("regression", "inside the noise", "no regression"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="fresh-server runs per build (default 8)")
    parser.add_argument("--cost-ms", type=float, default=4.0, help="the base build's cost per request (ms)")
    parser.add_argument("--cost-kind", choices=("spin", "sleep"), default="spin")
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--duration-s", type=float, default=2.0, help="measuring time per step")
    parser.add_argument("--warmup-s", type=float, default=1.0)
    parser.add_argument("--sla", default="p99<=1000ms")
    parser.add_argument("--run-noise", type=float, default=DEFAULT_RUN_NOISE,
                        help=f"the spread between single runs compare assumes (default {DEFAULT_RUN_NOISE})")
    parser.add_argument("--repeat", type=int, default=1,
                        help="ladders per run (perf run --repeat N): a run's figures are then the median of N "
                             "ladders on its server and its interval is taken over them")
    parser.add_argument("--json", type=Path, default=None, help="write every run and verdict here")
    args = parser.parse_args()
    started = time.monotonic()
    load_before = os.getloadavg()
    print(f"gate_truth: {len(BUILDS)} builds × {args.runs} fresh-server runs; base cost {args.cost_ms:g} ms/request "
          f"({args.cost_kind}); concurrency {args.concurrency}, {args.duration_s:g} s per step; SLA {args.sla}"
          + (f"; {args.repeat} ladders per run (--repeat)" if args.repeat > 1 else ""))
    runs: dict[str, list[tuple[Run, PerfResult]]] = {name: [] for name in BUILDS}
    cost_s = args.cost_ms / 1000.0
    with tempfile.TemporaryDirectory(prefix="gate_truth-") as tmp:
        calibration, _ = one_run("calibrate", 0, cost_s, args, Path(tmp))
        overhead_s = max(0.0, 1.0 / calibration.peak_per_s - cost_s) if calibration.peak_per_s else 0.0
        costs = {build: (overhead_s + cost_s) / speed - overhead_s for build, speed in BUILDS.items()}
        print(f"calibration: base peak {calibration.peak_per_s or 0:.1f} infer/s, so {overhead_s * 1000:.2f} ms per "
              f"request beyond the model's; model cost per build: "
              + ", ".join(f"{b} {c * 1000:.2f} ms" for b, c in costs.items()), flush=True)
        for index in range(1, args.runs + 1):
            for build in BUILDS:  # interleaved: the machine's drift falls on every build
                run, result = one_run(build, index, costs[build], args, Path(tmp))
                runs[build].append((run, result))
                print(f"  {build:7s} run {index:2d}: peak {run.peak_per_s or 0:8.1f} infer/s "
                      f"{'(noisy) ' if run.peak_noisy else ''}exit {run.exit_code} ({run.wall_s:.0f} s)", flush=True)

        def verdicts(base: str, new: str, same: bool, noise: float) -> list[str]:
            pairs = itertools.combinations(runs[base], 2) if same else itertools.product(runs[base], runs[new])
            return [compare_results(b[1], n[1], run_noise=noise).outcome for b, n in pairs]

        false_alarm = verdicts("base", "base", True, args.run_noise)
        detect20 = verdicts("base", "slow20", False, args.run_noise)
        at5 = verdicts("base", "slow5", False, args.run_noise)
        # The reference, from the same runs: the windows alone (as if runs never differed).
        alone = {name: verdicts(b, n, same, 0.0) for name, b, n, same in (
            ("false alarms", "base", "base", True), ("detection at 20%", "base", "slow20", False),
            ("at 5%", "base", "slow5", False))}
    covered = total = widened_covered = 0
    # perf compare adds the run noise only to a run measured once; a run of --repeat N carries its own.
    widen_by = args.run_noise if args.repeat == 1 else 0.0
    print(f"machine: {os.cpu_count()} cores; load average {load_before[0]:.1f} before, {os.getloadavg()[0]:.1f} after")
    others = [c for group in runs.values() for run, _ in group for c in run.other_cores]
    if others:
        print(f"other processes' CPU during the steps: median {statistics.median(others):.2f} cores "
              f"(min {min(others):.2f}, max {max(others):.2f})")
    print(f"{'build':7s} {'runs':>4s} {'median':>9s} {'min':>9s} {'max':>9s} {'CV':>6s} {'noisy':>5s} "
          "coverage (windows / with the run noise)")
    for build, group in runs.items():
        peaks = [r.peak_per_s for r, _ in group if r.peak_per_s is not None]
        if not peaks:
            continue
        median = statistics.median(peaks)
        hits = [r.peak_interval is not None and r.peak_interval[0] <= median <= r.peak_interval[1] for r, _ in group]
        wide = [r.peak_interval is not None and r.peak_per_s is not None
                and (band := across_runs(r.peak_per_s, (r.peak_interval[0], r.peak_interval[1]), widen_by))[0]
                <= median <= band[1] for r, _ in group]
        covered += sum(hits)
        widened_covered += sum(wide)
        total += len(hits)
        cv = statistics.pstdev(peaks) / statistics.mean(peaks) if len(peaks) > 1 else 0.0
        print(f"{build:7s} {len(peaks):4d} {median:9.1f} {min(peaks):9.1f} {max(peaks):9.1f} {cv:6.1%} "
              f"{sum(r.peak_noisy for r, _ in group):5d} {sum(hits)}/{len(hits)} / {sum(wide)}/{len(wide)}")
    print(f"perf compare's rule with --run-noise {args.run_noise:.1%} (a single run's spread between fresh servers):")
    print(f"false alarms (base vs base, {len(false_alarm)} pairs): {rate(false_alarm, 'regression')} "
          f"(goal ≤ 5%); {tally(false_alarm)}")
    print(f"detection at 20% (base vs 20% slower, {len(detect20)} pairs): {rate(detect20, 'regression')} "
          f"(goal ≥ 95%); {tally(detect20)}")
    print(f"at 5% (base vs 5% slower, {len(at5)} pairs): {tally(at5)}")
    print(f"interval coverage (each run's 95% interval of its gated figure, widened by the run noise, holds "
          f"its build's median): {widened_covered}/{total} = {100.0 * widened_covered / max(1, total):.0f}% "
          f"(goal ~95%); its windows alone: {covered}/{total} = {100.0 * covered / max(1, total):.0f}%")
    print("the reference, the same runs judged on their windows alone (--run-noise 0%): "
          + "; ".join(f"{name} {rate(v, 'regression')} ({tally(v)})" for name, v in alone.items()))
    print(f"wall time: {time.monotonic() - started:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({
            "args": {k: str(v) for k, v in vars(args).items()},
            "runs": [asdict(r) for group in runs.values() for r, _ in group],
            "false_alarm": false_alarm, "detect20": detect20, "at5": at5,
            "coverage": [covered, total], "coverage_with_run_noise": [widened_covered, total],
            "windows_alone": alone,
        }, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
