"""The same model swept locally and by URL: do they agree on the winner, and what does by-URL cost?

1. **local**: :func:`tritonkit.perf.sweep.run_sweep` over the repository (it starts its own
   tritonserver with explicit model control);
2. **by URL**: :func:`tritonkit.perf.sweep.remote.run_remote_sweep` against a tritonserver this
   script starts separately with ``--model-control-mode=explicit --load-model=sleepy`` (the
   "remote"), the model's served config as the default, put back at the end.

The model is the sleepy python-backend model of the tests (every execution sleeps
6 ms + 2 ms per request; no CPU): instances 1–2 × max batch 1, 4 at concurrency 2–8, where
2 instances × batch 4 carries about twice what the others do. Both sweeps use the same grid,
SLA (p99 ≤ 80 ms) and windows (300 ms), one after the other, ``--rounds`` times. Reported per
round: each winner, its throughput and p99, the sweep's wall time, and whether the winners are the
same or tied within the sweep's noise (the local winner's throughput within the by-URL winner's
tie tolerance, 5 %), plus whether the remote serves its original config afterwards.

With ``--model-analyzer``, instead: tritonkit's sweep by URL and Model Analyzer 1.58's quick search
in remote launch mode (installed as ``sweep_vs_model_analyzer.py`` says), one after the other
against the same running server, the model, grid and SLA of that benchmark; wall times, and both
winners and the default re-measured by one protocol (its ``remeasure``).

Run (about 2 minutes a round on two cores)::

    .venv/bin/python benchmarks/sweep_remote.py [--rounds 2] [--json] [--model-analyzer]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.sweep_models import write_sleepy  # noqa: E402
from tritonkit.perf.sweep import SweepGrid, SweepResult, SweepSettings, run_sweep  # noqa: E402
from tritonkit.perf.sweep.remote import RemoteOptions, run_remote_sweep  # noqa: E402
from tritonkit.server import TritonServer  # noqa: E402
from tritonkit.server.remote import RemoteServer  # noqa: E402

GRID = SweepGrid(instances=[1, 2], max_batch_sizes=[1, 4], windows_us=[0])
TIE = 0.05


def _settings(out: Path) -> SweepSettings:
    return SweepSettings(sla="p99<=80ms", grid=GRID, concurrency="2,4,8", step_window_ms=300, warmup_s=0.3, out=out,
                         write_back=False, tie_tolerance=TIE)


def _summary(result: SweepResult, wall_s: float) -> dict[str, Any]:
    winner = result.search.winner
    score = winner.score() if winner is not None else None
    knobs = None if winner is None else ("default" if winner.variant.is_default else
                                         f"{winner.variant.instances} instances, max batch {winner.variant.max_batch_size}")
    return {"winner": winner.variant.id if winner else None, "knobs": knobs,
            "throughput_per_s": round(score.throughput_per_s, 1) if score else None,
            "p99_ms": round(score.p99_ms, 2) if score else None, "wall_s": round(wall_s, 1),
            "measured": result.counts()["measured"], "exit_code": result.exit_code}


def one_round(root: Path) -> dict[str, Any]:
    repo = root / "repo"
    write_sleepy(repo, window_us=None)
    started = time.monotonic()
    local = _summary(run_sweep(repo, "sleepy", _settings(root / "local")), time.monotonic() - started)
    with TritonServer(repo, model_control="explicit", models=["sleepy"]) as served, \
            RemoteServer(served.grpc_url, metrics_url=served.metrics_url) as remote:
        before = served.admin.model_config("sleepy")
        started = time.monotonic()
        by_url = _summary(run_remote_sweep(remote, "sleepy", _settings(root / "remote"), RemoteOptions()),
                          time.monotonic() - started)
        put_back = served.admin.model_config("sleepy") == before
    # The served config carries what the server filled in (a preferred batch size): compare the knobs swept.
    same = local["knobs"] == by_url["knobs"]
    near = (local["throughput_per_s"] is not None and by_url["throughput_per_s"] is not None
            and abs(local["throughput_per_s"] - by_url["throughput_per_s"]) <= TIE * by_url["throughput_per_s"])
    return {"local": local, "by_url": by_url, "same_winner": same, "within_tie_tolerance": same or near,
            "served_config_put_back": put_back}


def beside_model_analyzer(root: Path) -> dict[str, Any]:
    """tritonkit's sweep by URL and Model Analyzer 1.58's quick search in remote launch mode, one after
    the other against the same running server (the model, grid and SLA of
    ``sweep_vs_model_analyzer.py``), then both winners and the default re-measured by one protocol."""
    from dataclasses import replace

    from benchmarks.sweep_vs_model_analyzer import (
        MA_BIN,
        MODEL,
        SETTINGS,
        grid_variants,
        make_repo,
        remeasure,
        run_model_analyzer,
    )
    from tritonkit.repository import read_config

    if not MA_BIN.exists():
        return {"note": f"Model Analyzer not installed at {MA_BIN} (see sweep_vs_model_analyzer.py)"}
    repo = make_repo(root / "served")
    with TritonServer(repo, model_control="explicit", models=[MODEL]) as served, \
            RemoteServer(served.grpc_url, metrics_url=served.metrics_url) as remote:
        before = served.admin.model_config(MODEL)
        started = time.monotonic()
        ours = run_remote_sweep(remote, MODEL, replace(SETTINGS, out=root / "tritonkit-remote"), RemoteOptions())
        ours_s = time.monotonic() - started
        put_back = served.admin.model_config(MODEL) == before
        ma = run_model_analyzer(root, "quick-remote", server=served)
    base = read_config(repo / MODEL / "config.pbtxt")
    wanted = {"default": grid_variants(base)[0]}
    if ours.search.winner is not None:
        wanted["tritonkit by URL"] = ours.search.winner.variant
    if ma["winner"] is not None:
        wanted["MA quick-remote"] = ma["winner"]
    verified = remeasure(root, wanted)
    return {"tritonkit_by_url": {**_summary(ours, ours_s), "served_config_put_back": put_back},
            "model_analyzer_quick_remote": {"wall_s": round(ma["wall_s"], 1), "winner": str(ma["winner"]),
                                            "winner_own_per_s": ma["winner_per_s"],
                                            "variants_measured": ma["variants_measured"], "perf_runs": ma["perf_runs"]},
            "remeasured_per_s": {k: (round(v, 1) if v is not None else None) for k, v in verified.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--model-analyzer", action="store_true",
                        help="Also run Model Analyzer's quick search in remote mode against the same running server.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.model_analyzer:
        with tempfile.TemporaryDirectory(prefix="sweep-remote-ma-") as tmp:
            print(json.dumps(beside_model_analyzer(Path(tmp)), indent=2, default=str))
        return
    rounds = []
    for index in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="sweep-remote-") as tmp:
            rounds.append(one_round(Path(tmp)))
        if not args.json:
            r = rounds[-1]
            print(f"round {index + 1}: local {r['local']['winner']} {r['local']['throughput_per_s']}/s "
                  f"({r['local']['wall_s']} s); by URL {r['by_url']['winner']} {r['by_url']['throughput_per_s']}/s "
                  f"({r['by_url']['wall_s']} s); same knobs {r['same_winner']}, within tie "
                  f"{r['within_tie_tolerance']}; put back {r['served_config_put_back']}")
    if args.json:
        print(json.dumps({"rounds": rounds}, indent=2))


if __name__ == "__main__":
    main()
