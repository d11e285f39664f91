"""Four models swept on a two-node local Ray cluster against the same four swept one after another
on one machine, as a ratio in one run.

* **sequence**: :func:`tritonkit.perf.sweep.run_sweep` for each model in turn, in this process, one
  server at a time (what ``perf sweep`` does for each model today);
* **cluster**: :func:`tritonkit.perf.cluster.run_cluster_sweep` with ``separately=True`` on a Ray
  cluster of two one-CPU nodes on loopback (started here, stopped by process group, not timed),
  two sweeps at once, each with its own server and perf_analyzer.

The models are the tests' sleepy model (``tests/support/sweep_models.py``: every execution sleeps
6 ms + 2 ms per request, so the best configuration is known), four copies with different costs so
the sweeps are not identical. Nothing is written back (``write_back=False``); each mode gets a
fresh copy of the repository. The winners of both modes are printed side by side.

What bounds the ratio: two nodes, so at most 2× — reached only when the four sweeps split into two
equal halves. Less because: (1) on a two-core machine both nodes share the cores, and each sweep's
server, python stubs and perf_analyzer compete with the other's (the sleepy model sleeps rather than
computes, which keeps that small; a model that computes would gain far less on one machine); (2) the
cluster's own costs: a worker process per node, model folders through the object store, results
packed and landed, reports rewritten (printed as ``overhead``); (3) the slowest pair of sweeps sets
the wall time (the per-model times are printed). On real machines (one per node) only (2) and (3)
remain.

Run it on a quiet machine (its timings are the point)::

    .venv/bin/python benchmarks/sweep_cluster.py [--tiny] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # the cluster launcher and the model are the tests' own, reused

from tests.support.ray_cluster import LocalRayCluster, load_processes  # noqa: E402
from tests.support.sweep_models import write_sleepy  # noqa: E402
from tritonkit.perf.cluster import ClusterSettings, run_cluster_sweep  # noqa: E402
from tritonkit.perf.sweep import SweepGrid, SweepSettings, run_sweep  # noqa: E402

#: Four models: (name, base ms per execution, ms per request); the same shape, different costs.
MODELS = (("m1", 6.0, 2.0), ("m2", 8.0, 2.0), ("m3", 6.0, 3.0), ("m4", 10.0, 1.0))


def _repo(root: Path) -> Path:
    repo = root / "repo"
    for name, base_ms, per_item_ms in MODELS:
        write_sleepy(repo, name, window_us=None, base_ms=base_ms, per_item_ms=per_item_ms)
    return repo


def _settings(tiny: bool, out: Path) -> SweepSettings:
    if tiny:
        return SweepSettings(sla="p99<=80ms", grid=SweepGrid(instances=[1, 2]), concurrency="2,4",
                             step_window_ms=300, warmup_s=0.3, out=out, write_back=False)
    return SweepSettings(sla="p99<=60ms", grid=SweepGrid(instances=[1, 2], max_batch_sizes=[1, 4], windows_us=[0]),
                         concurrency="1,2,4,8", step_window_ms=500, warmup_s=0.5, out=out, write_back=False)


def _winner(result: Any) -> str:
    winner = result.search.winner
    score = winner.score() if winner else None
    return "none" if winner is None or score is None else f"{winner.variant.id} ({score.throughput_per_s:,.0f}/s)"


def run_sequence(root: Path, tiny: bool) -> dict[str, Any]:
    repo = _repo(root / "sequence")
    started = time.monotonic()
    models: dict[str, Any] = {}
    for name, _, _ in MODELS:
        t0 = time.monotonic()
        result = run_sweep(repo, name, _settings(tiny, root / "sequence" / "out" / name))
        models[name] = {"wall_s": round(time.monotonic() - t0, 2), "winner": _winner(result)}
    return {"wall_s": round(time.monotonic() - started, 2), "models": models}


def run_cluster(root: Path, tiny: bool) -> dict[str, Any]:
    repo = _repo(root / "cluster")
    cluster = LocalRayCluster(Path(tempfile.mkdtemp(prefix="tkb", dir="/tmp")), workers=1)
    t0 = time.monotonic()
    cluster.start()
    start_s = time.monotonic() - t0
    try:
        started = time.monotonic()
        result = run_cluster_sweep(repo, [m for m, _, _ in MODELS], _settings(tiny, root / "cluster" / "out"),
                                   ClusterSettings(address=cluster.address, separately=True))
        wall_s = time.monotonic() - started
        models = {}
        for name, sweep in result.sweeps.items():
            one = sweep.result
            models[name] = {"wall_s": round(one.wall_s, 2) if one else None, "winner": _winner(one) if one else "failed",
                            "node": sweep.node.address if sweep.node else None}
        busiest = {}
        for info in models.values():
            busiest[info["node"]] = busiest.get(info["node"], 0.0) + (info["wall_s"] or 0.0)
        return {"wall_s": round(wall_s, 2), "cluster_start_s": round(start_s, 1), "models": models,
                "per_node_sweep_s": {k: round(v, 2) for k, v in busiest.items()},
                "overhead_s": round(wall_s - max(busiest.values(), default=0.0), 2), "exit_code": result.exit_code}
    finally:
        cluster.stop()
        left = cluster.leftovers() + load_processes(str(cluster.root))
        if not left:
            shutil.rmtree(cluster.root, ignore_errors=True)
        else:
            print(f"warning: processes outlived the cluster: {left}", file=sys.stderr)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tiny", action="store_true", help="A two-variant grid (checks the script in a minute).")
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    root = Path(tempfile.mkdtemp(prefix="tk-sweep-cluster-"))
    try:
        sequence = run_sequence(root, args.tiny)
        cluster = run_cluster(root, args.tiny)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ratio = sequence["wall_s"] / cluster["wall_s"] if cluster["wall_s"] else None
    report = {"grid": "tiny" if args.tiny else "full", "cores": os.cpu_count(), "sequence": sequence, "cluster": cluster,
              "speedup": round(ratio, 2) if ratio else None, "bound": 2.0}
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"4 models, {report['grid']} grid, {report['cores']} cores")
    print(f"{'model':6} {'sequence s':>11} {'cluster s':>10} {'node':>10}  winners (sequence | cluster)")
    for name, _, _ in MODELS:
        s, c = sequence["models"][name], cluster["models"][name]
        print(f"{name:6} {s['wall_s']:>11.1f} {c['wall_s'] or 0:>10.1f} {c['node'] or '-':>10}  {s['winner']} | {c['winner']}")
    print(f"sequence on one node: {sequence['wall_s']:.1f} s; two-node cluster: {cluster['wall_s']:.1f} s "
          f"(cluster start {cluster['cluster_start_s']:.1f} s, not counted)")
    print(f"speedup {report['speedup']}× (bound 2× with two nodes); per node, sweeps took "
          + ", ".join(f"{k} {v:.1f} s" for k, v in cluster["per_node_sweep_s"].items())
          + f"; the rest of the cluster's wall time (workers, transfers, landing, reports) {cluster['overhead_s']:.1f} s")
    print("limits: both nodes share this machine's cores (each sweep's server, stubs and perf_analyzer compete "
          "with the other's), the slowest node's pair of sweeps sets the wall time, and the cluster's own costs above")
    return 0


if __name__ == "__main__":
    sys.exit(main())
