"""``tritonkit perf sweep`` against Model Analyzer (brute and quick search, local and remote launch)
and a restart-per-variant sweep.

One model, one grid, one SLA, several ways to find the configuration that carries the most load:

1. **tritonkit**: :func:`tritonkit.perf.sweep.run_sweep` (one server, explicit model control,
   pruned search, leaders re-measured);
2. **restart baseline**: the same ladders, but a fresh tritonserver per variant with the
   variant's config written to disk (what a sweep without explicit model control does);
3. **Model Analyzer 1.58** against the same bundled tritonserver and perf_analyzer, in the
   modes its users run (skipped, with a note, when it is not installed): ``brute-local`` (brute
   search, a server started per variant), ``quick-remote`` (its hill-climbing quick search) and
   ``brute-remote``; in remote launch mode it loads each variant through the load API of one
   server we start with explicit model control, with ``cpu_only: true`` (without it, on a CPU
   machine, every variant asks for KIND_GPU and fails to load).

tritonkit's own wall time is split into where it went (server start, model loads, warm-ups,
perf_analyzer steps — of which the measurement windows —, re-measurements).

The model: python backend, FP32[16] in and out, ``time.sleep(0.002)`` per execution. Its
default config: 1 CPU instance, max batch 8, no dynamic batcher. The grid: instances 1–2 × max
batch 1, 2, 4, 8 (dynamic batcher on, no delay) × concurrency 1, 2, 4, 8. The SLA: p99 ≤ 20 ms.

Each tool measures with its own windows, so their own numbers are not comparable. At the end
every distinct winning configuration (and the default) is measured again, in turn on one
server, by one protocol (concurrency 4 and 8, 1 s windows, the best step within the SLA, two
rounds): those are the figures the winners are compared by.

Model Analyzer lives in its own environment (it pins packages the project does not want)::

    python3 -m venv .bench-venv && .bench-venv/bin/pip install triton-model-analyzer==1.58.0

Run (about 15 minutes on two cores, most of it Model Analyzer)::

    .venv/bin/python benchmarks/sweep_vs_model_analyzer.py [--json] [--skip-model-analyzer] \\
        [--skip-restart] [--ma-modes brute-local,quick-remote,brute-remote]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.perf import LadderPlan, PerfSpec, parse_sla, run_ladder
from tritonkit.perf.judge import ladder_check
from tritonkit.perf.sweep import (
    SweepGrid,
    SweepSettings,
    Variant,
    VariantOutcome,
    apply_variant,
    choose_winner,
    run_sweep,
)
from tritonkit.perf.sweep.driver import step_points
from tritonkit.perf.sweep.live import LiveModel
from tritonkit.perf.sweep.variants import variant_grid
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.provision.server import locate_server, model_python_env
from tritonkit.repository import read_config, write_config
from tritonkit.server import TritonServer, free_ports

MODEL = "sleep2ms"
SLA_TEXT = "p99<=20ms"
INSTANCES = [1, 2]
MAX_BATCH = [1, 2, 4, 8]
LEVELS = "1,2,4,8"
ROOT = Path(__file__).resolve().parent.parent
MA_BIN = ROOT / ".bench-venv" / "bin" / "model-analyzer"

CONFIG = """
name: "sleep2ms"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
MODEL_PY = """
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(0.002)
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x.astype(np.float32))]))
        return out
"""


def make_repo(root: Path, model: str = MODEL, config: str = CONFIG, model_py: str = MODEL_PY) -> Path:
    """``root/repo`` holding one python-backend model (this benchmark's, unless given)."""
    repo = root / "repo"
    (repo / model / "1").mkdir(parents=True)
    (repo / model / "config.pbtxt").write_text(config.strip() + "\n")
    (repo / model / "1" / "model.py").write_text(model_py.lstrip())
    return repo


#: Makes a model repository under a folder (``make_repo`` with this benchmark's model, or another's).
RepoMaker = Callable[[Path], Path]


#: The settings tritonkit sweeps with; the restart baseline climbs the same ladder.
SETTINGS = SweepSettings(sla=SLA_TEXT, grid=SweepGrid(instances=INSTANCES, max_batch_sizes=MAX_BATCH),
                         concurrency=LEVELS, write_back=False)
MA_MODES = ("brute-local", "quick-remote", "brute-remote")


def grid_variants(base: mc.ModelConfig) -> list[Variant]:
    # The sweep turns the batcher on (0 ms window) when max batch is swept; this is that grid.
    return variant_grid(base, instances=INSTANCES, max_batch_sizes=MAX_BATCH)


def plan() -> LadderPlan:
    """The ladder both tritonkit and the restart baseline climb (the sweep's own)."""
    return SETTINGS.ladder_plan()


# ----------------------------------------------------------------------------------- tritonkit


def run_tritonkit(work: Path) -> dict[str, Any]:
    repo = make_repo(work / "tritonkit")
    started = time.monotonic()
    result = run_sweep(repo, MODEL, replace(SETTINGS, out=work / "tritonkit" / "sweep"))
    wall_s = time.monotonic() - started
    winner = result.search.winner
    score = winner.score() if winner else None
    default = result.search.default.score() if result.search.default else None
    return {
        "wall_s": wall_s,
        "winner": winner.variant if winner else None,
        "winner_per_s": score.throughput_per_s if score else None,
        "winner_load": score.load if score else None,
        "default_per_s": default.throughput_per_s if default else None,
        "variants_measured": result.counts()["measured"],
        "pruned": len(result.search.pruned),
        "server_starts": 1,
        "perf_runs": sum(len(o.steps) + len(o.confirmations) + 1 for o in result.search.outcomes if o.steps),
        "time_breakdown_s": result.time_breakdown(),
        "time_breakdown": result.breakdown_text(),
    }


# ---------------------------------------------------------------------------- restart baseline


def run_restart_baseline(work: Path) -> dict[str, Any]:
    """Every variant (default first) on a fresh server with its config on disk, same ladder."""
    repo = make_repo(work / "restart")
    base = read_config(repo / MODEL / "config.pbtxt")
    sla = parse_sla(SLA_TEXT).with_zero_errors()
    ladder_plan = plan()
    outcomes: list[VariantOutcome] = []
    runs = 0
    started = time.monotonic()
    for variant in grid_variants(base):
        write_config(apply_variant(base, variant), repo / MODEL / "config.pbtxt")
        with TritonServer(repo) as server:
            spec = PerfSpec(model=MODEL, url=server.grpc_url)
            ladder = run_ladder(spec, ladder_plan, results_dir=work / "restart" / "runs" / variant.knobs_id,
                                sla_check=ladder_check(sla))
        runs += len(ladder.result.steps) + 1
        outcomes.append(VariantOutcome(variant, steps=step_points(ladder, sla)))
    wall_s = time.monotonic() - started
    winner = choose_winner(outcomes).winner
    score = winner.score() if winner else None
    default = outcomes[0].score()
    return {
        "wall_s": wall_s,
        "winner": winner.variant if winner else None,
        "winner_per_s": score.throughput_per_s if score else None,
        "winner_load": score.load if score else None,
        "default_per_s": default.throughput_per_s if default else None,
        "variants_measured": len(outcomes),
        "server_starts": len(outcomes),
        "perf_runs": runs,
    }


# ------------------------------------------------------------------------------ Model Analyzer


def _wrappers(folder: Path) -> tuple[Path, Path]:
    """Scripts Model Analyzer can exec: the bundled server with its backends and environment
    (bound to loopback), and perf_analyzer through its private loader."""
    server = locate_server()
    env = model_python_env()
    lib_path = os.pathsep.join([*(str(d) for d in server.lib_dirs), env["LD_LIBRARY_PATH"]])
    server_script = folder / "tritonserver"
    server_script.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo start >> {shlex.quote(str(folder / "server_starts.log"))}
        export PATH={shlex.quote(env["PATH"])}:"$PATH"
        export LD_LIBRARY_PATH={shlex.quote(lib_path)}:"$LD_LIBRARY_PATH"
        exec {shlex.quote(str(server.binary))} --backend-directory={shlex.quote(str(server.backend_dir))} \\
            --http-address=127.0.0.1 --grpc-address=127.0.0.1 --metrics-address=127.0.0.1 "$@"
        """))
    perf_script = folder / "perf_analyzer"
    perf_script.write_text("#!/bin/sh\nexec " + " ".join(shlex.quote(a) for a in locate_perf_analyzer().argv)
                           + ' "$@"\n')
    for script in (server_script, perf_script):
        script.chmod(0o755)
    return server_script, perf_script


def run_model_analyzer(work: Path, mode: str, *, make: RepoMaker = make_repo, model_name: str = MODEL,
                       instances: Sequence[int] = INSTANCES, max_batch: Sequence[int] = MAX_BATCH,
                       max_concurrency: int = 8, p99_limit_ms: float = 20.0,
                       timeout_s: float = 1200.0, server: TritonServer | None = None) -> dict[str, Any]:
    """One Model Analyzer profile in ``mode`` (``<search>-<launch>``, e.g. ``quick-remote``) of the
    model ``make`` writes (this benchmark's by default), over ``instances`` × ``max_batch`` and
    concurrency 1 to ``max_concurrency``, with a p99 constraint; killed (``TimeoutExpired``) past
    ``timeout_s``. ``server``: in remote launch, a running explicit-control server serving the
    model to profile instead of one started here (left running)."""
    search_mode, launch = mode.split("-")
    folder = work / f"model_analyzer-{mode}"
    repo = make(folder)
    server_script, perf_script = _wrappers(folder)
    model: dict[str, Any] = {"constraints": {"perf_latency_p99": {"max": p99_limit_ms}}}
    if launch == "remote":
        model["cpu_only"] = True  # else every variant asks for KIND_GPU, which a CPU machine refuses
    config: dict[str, Any] = {
        "model_repository": str(repo),
        "profile_models": {model_name: model},
        "run_config_search_mode": search_mode,
        "run_config_search_max_instance_count": max(instances),
        "run_config_search_min_model_batch_size": min(max_batch),
        "run_config_search_max_model_batch_size": max(max_batch),
        "run_config_search_min_concurrency": 1,
        "run_config_search_max_concurrency": max_concurrency,
        "triton_launch_mode": launch,
        "perf_analyzer_path": str(perf_script),
        "output_model_repository_path": str(folder / "output_repo"),
        "override_output_model_repository": True,
        "export_path": str(folder / "export"),
        "checkpoint_directory": str(folder / "checkpoints"),
    }
    (folder / "export").mkdir()
    remote: TritonServer | None = None
    if launch == "remote":
        # One server, explicit model control: Model Analyzer loads each variant through the load API.
        endpoint = server or TritonServer(repo, model_control="explicit", log_path=folder / "tritonserver.log").start()
        remote = endpoint if server is None else None
        config.update({"triton_http_endpoint": endpoint.http_url, "triton_grpc_endpoint": endpoint.grpc_url,
                       "triton_metrics_url": endpoint.metrics_url})
    else:
        http, grpc, metrics = free_ports(3, "127.0.0.1")
        config.update({"triton_server_path": str(server_script), "triton_http_endpoint": f"127.0.0.1:{http}",
                       "triton_grpc_endpoint": f"127.0.0.1:{grpc}",
                       "triton_metrics_url": f"http://127.0.0.1:{metrics}/metrics"})
    # The wrapper counts its own starts: in local mode Model Analyzer restarts the server between variants.
    config_path = folder / "config.yaml"
    config_path.write_text(json.dumps(config, indent=2))  # JSON is YAML
    log = folder / "model_analyzer.log"
    started = time.monotonic()
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(MA_BIN), "profile", "-f", str(config_path)], stdout=out,
                                    stderr=subprocess.STDOUT, cwd=folder, start_new_session=True)
            try:
                code = proc.wait(timeout=timeout_s)
            except BaseException:
                os.killpg(proc.pid, 9)
                raise
    finally:
        if remote is not None:
            remote.stop()
    wall_s = time.monotonic() - started
    text = log.read_text(errors="replace")
    if code != 0:
        raise RuntimeError(f"model-analyzer ({mode}) exited {code}; see {log}:\n"
                           + "\n".join(text.splitlines()[-15:]))
    rows = _ma_rows(folder / "export")
    starts_log = folder / "server_starts.log"
    starts = len(starts_log.read_text().splitlines()) if starts_log.exists() else 0
    return _ma_summary(rows, wall_s, starts if launch == "local" else (0 if server is not None else 1))


def _ma_rows(export: Path) -> list[dict[str, str]]:
    found = sorted(export.rglob("metrics-model-inference.csv"))
    if not found:
        raise RuntimeError(f"no metrics-model-inference.csv under {export}")
    with open(found[0], newline="") as handle:
        return [{k.strip(): (v or "").strip() for k, v in row.items() if k} for row in csv.DictReader(handle)]


def _col(row: dict[str, str], prefix: str) -> str:
    return next((v for k, v in row.items() if k.lower().startswith(prefix.lower())), "")


def _ma_summary(rows: list[dict[str, str]], wall_s: float, server_starts: int) -> dict[str, Any]:
    good = [r for r in rows if _col(r, "Satisfies").lower() in ("yes", "true", "1")]
    best = max(good, key=lambda r: float(_col(r, "Throughput"))) if good else None
    default_rows = [r for r in rows if _col(r, "Model Config Path").endswith("config_default")]
    default = max((float(_col(r, "Throughput")) for r in default_rows), default=None)
    winner: Variant | None = None
    if best is not None:
        instances = int("".join(ch for ch in _col(best, "Instance Group").split(":")[0] if ch.isdigit()) or 1)
        winner = Variant(instances, int(_col(best, "Max Batch Size") or 0), 0,
                         is_default=_col(best, "Model Config Path").endswith("config_default"))
    return {
        "wall_s": wall_s,
        "winner": winner,
        "winner_per_s": float(_col(best, "Throughput")) if best else None,
        "winner_load": float(_col(best, "Concurrency")) if best else None,
        "default_per_s": default,
        "variants_measured": len({_col(r, "Model Config Path") for r in rows}),
        "server_starts": server_starts,
        "perf_runs": len(rows),
        "rows": rows,
    }


# ---------------------------------------------------------------------------------- re-measure


def remeasure(work: Path, variants: dict[str, Variant], rounds: int = 2, *, make: RepoMaker = make_repo,
              model: str = MODEL, sla_text: str = SLA_TEXT, levels: tuple[float, ...] = (4.0, 8.0),
              window_ms: int = 1000) -> dict[str, float | None]:
    """Each distinct configuration among ``variants`` measured again on one server, by one protocol:
    concurrency ``levels`` with ``window_ms`` windows, the best step within the SLA, ``rounds``
    times in turn (so drift on a shared machine hits every configuration alike); the mean per
    configuration. The model is the one ``make`` writes (this benchmark's by default)."""
    repo = make(work / "verify")
    base = read_config(repo / model / "config.pbtxt")
    sla = parse_sla(sla_text).with_zero_errors()
    ladder_plan = replace(plan(), levels=levels, step_window_ms=window_ms, warmup_s=1.0)
    distinct = {v.knobs_id: v for v in variants.values()}
    seen: dict[str, list[float]] = {key: [] for key in distinct}
    with TritonServer(repo, model_control="explicit") as server:
        live = LiveModel(server, model)
        for round_index in range(rounds):
            for key, variant in distinct.items():
                live.load(apply_variant(base, variant))
                ladder = run_ladder(PerfSpec(model=model, url=server.grpc_url), ladder_plan,
                                    results_dir=work / "verify" / f"{key}-{round_index}", sla_check=ladder_check(sla))
                live.unload(wait=True)
                good = [p.throughput_per_s for p in step_points(ladder, sla) if p.counts]
                if good:
                    seen[key].append(max(good))
    means = {key: (sum(values) / len(values) if values else None) for key, values in seen.items()}
    return {name: means[variant.knobs_id] for name, variant in variants.items()}


# -------------------------------------------------------------------------------------- report


def _name(variant: Variant | None) -> str:
    if variant is None:
        return "none"
    return f"{variant.instances} instance(s), max batch {variant.max_batch_size}" + (
        " (default config)" if variant.is_default else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-model-analyzer", action="store_true", help="Only tritonkit and the restart baseline.")
    parser.add_argument("--skip-restart", action="store_true", help="Leave out the restart-per-variant baseline.")
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the work folder (printed).")
    parser.add_argument("--ma-modes", default=",".join(MA_MODES),
                        help=f"Model Analyzer modes to run, comma-separated (default: {','.join(MA_MODES)}).")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="tritonkit-sweep-bench-"))
    results: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    try:
        results["tritonkit"] = run_tritonkit(work)
        if not args.skip_restart:
            results["restart"] = run_restart_baseline(work)
        if args.skip_model_analyzer:
            notes.append("Model Analyzer skipped (--skip-model-analyzer)")
        elif not MA_BIN.exists():
            notes.append(f"Model Analyzer not installed at {MA_BIN}: see this script's docstring")
        else:
            for mode in [m.strip() for m in args.ma_modes.split(",") if m.strip()]:
                if mode not in MA_MODES:
                    parser.error(f"--ma-modes: {mode!r} is not one of {', '.join(MA_MODES)}")
                results[f"MA {mode}"] = run_model_analyzer(work, mode)
        base = read_config(work / "tritonkit" / "repo" / MODEL / "config.pbtxt")
        wanted = {"default": grid_variants(base)[0]}
        for tool, data in results.items():
            if data["winner"] is not None:
                wanted[tool] = data["winner"]
        verified = remeasure(work, wanted)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    best_verified = max((v for k, v in verified.items() if k != "default" and v is not None), default=None)
    ours = results["tritonkit"]
    summary: dict[str, Any] = {"sla": SLA_TEXT, "grid": {"instances": INSTANCES, "max_batch": MAX_BATCH,
                               "concurrency": LEVELS}, "notes": notes, "tools": {}}
    for tool, data in results.items():
        summary["tools"][tool] = {
            "wall_s": round(data["wall_s"], 1),
            "wall_ratio_to_tritonkit": round(data["wall_s"] / ours["wall_s"], 2),
            "winner": _name(data["winner"]),
            "winner_own_per_s": data["winner_per_s"],
            "winner_own_load": data["winner_load"],
            "default_own_per_s": data["default_per_s"],
            "winner_vs_default_own": (round(data["winner_per_s"] / data["default_per_s"], 2)
                                      if data["winner_per_s"] and data["default_per_s"] else None),
            "winner_remeasured_per_s": verified.get(tool),
            "variants_measured": data["variants_measured"],
            "server_starts": data["server_starts"],
            "perf_runs": data["perf_runs"],
            **({"time_breakdown_s": data["time_breakdown_s"]} if "time_breakdown_s" in data else {}),
        }
    summary["default_remeasured_per_s"] = verified.get("default")
    ours_v = verified.get("tritonkit")
    summary["tritonkit_winner_within_5pct_of_best"] = (
        bool(ours_v and best_verified and ours_v >= 0.95 * best_verified))
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
        return 0
    print(f"grid: instances {INSTANCES} × max batch {MAX_BATCH} × concurrency {LEVELS}; SLA {SLA_TEXT}")
    print(f"tritonkit's {ours['time_breakdown']}")
    for note in notes:
        print(f"note: {note}")
    print(f"{'tool':<18}{'wall s':>8}{'× ours':>8}{'servers':>9}{'perf runs':>11}  winner (own infer/s at load; "
          "re-measured infer/s; own winner/default)")
    for tool, row in summary["tools"].items():
        print(f"{tool:<18}{row['wall_s']:>8.1f}{row['wall_ratio_to_tritonkit']:>8.2f}{row['server_starts']:>9}"
              f"{row['perf_runs']:>11}  {row['winner']} ({row['winner_own_per_s'] or 0:,.0f} at "
              f"{row['winner_own_load'] or 0:g}; {row['winner_remeasured_per_s'] or 0:,.0f}; "
              f"{row['winner_vs_default_own'] or 0:.2f}×)")
    default_v = summary["default_remeasured_per_s"]
    print(f"default config re-measured: {default_v or 0:,.0f} infer/s; tritonkit's winner re-measured: "
          f"{ours_v or 0:,.0f} infer/s ({(ours_v or 0) / default_v if default_v else 0:.2f}× the default)")
    print(f"tritonkit's winner within 5 % of the best re-measured winner: "
          f"{summary['tritonkit_winner_within_5pct_of_best']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
