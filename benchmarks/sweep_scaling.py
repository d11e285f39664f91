"""How the sweep's cost grows with the grid: ~20, ~100 and ~250 variants, three cost shapes.

For each cost shape (python-backend models whose cost is set, served by the bundled server) and
each grid, the default search (:func:`tritonkit.perf.sweep.run_sweep`) is run and compared with

* ``--exhaustive`` over the same grid — measured once and stored under
  ``benchmarks/data/sweep_scaling/`` (with the exact settings, the model's digest, the grid and
  the date), so this benchmark stays short; a stored outcome whose grid, model or settings differ
  is refused, and ``--record-exhaustive`` measures it again (long: see below);
* Model Analyzer 1.58's quick search in remote launch mode (the helpers of
  ``benchmarks/sweep_vs_model_analyzer.py``), over the same instance counts, max batch sizes and
  concurrency (it has no window, preferred-size or queue axis, so its space is the same for
  every grid: it runs once per shape).

Then every distinct winner (and the default config) is measured again on one server by one
protocol, in turn, and each is reported against the best re-measured one, with the wall-time
ratios. The goals: the default search within 5 % of the best at ≤ 10 % of the exhaustive
time on the ~250-variant grid, and faster than Model Analyzer's quick search at equal or better
winners.

The shapes (execution time of a batch of ``k`` requests; default config: 1 instance, max batch
8, no dynamic batcher):

* ``fixed``: sleeps 8 ms per execution, whatever ``k``;
* ``row``: sleeps 1 ms + 1.5 ms per request;
* ``cpu``: spins 0.3 ms + 1 ms per request on the CPU (instances contend for the cores).

The grids (as the command line writes them):

* ``small``: ``--instances 1:4 --max-batch-size 1,4,16 --batch-window 0,2ms`` (21 variants);
* ``medium``: ``--instances 1:4 --max-batch-size 1:64:x2 --batch-window 0:15ms:5ms`` (101);
* ``large``: ``--instances 1:4 --max-batch-size 1:64:x2 --batch-window 0:20ms:5ms
  --preferred-batch none,max`` (245).

SLA ``p99<=40ms``, concurrency 1:32 (``--quick``: 1:16 with 300 ms windows, stored apart).

Model Analyzer lives in its own environment (see ``benchmarks/sweep_vs_model_analyzer.py``)::

    python3 -m venv .bench-venv && .bench-venv/bin/pip install triton-model-analyzer==1.58.0

Run::

    .venv/bin/python benchmarks/sweep_scaling.py [--grids small,medium,large] [--shapes fixed,row,cpu]
        [--quick] [--skip-model-analyzer] [--json]
    .venv/bin/python benchmarks/sweep_scaling.py --record-exhaustive [--grids …] [--shapes …] [--quick]

``--record-exhaustive`` is long: every variant of every selected grid climbs its whole ladder.
It prints its estimate before it starts (about 4 hours for the three full grids and shapes on
two cores, most of it the ~250-variant grid; run it on a quiet machine).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sweep_vs_model_analyzer import MA_BIN, make_repo, remeasure, run_model_analyzer  # noqa: E402

from tritonkit.perf.sweep import (  # noqa: E402
    SweepGrid,
    SweepSettings,
    Variant,
    parse_instances,
    parse_max_batch_sizes,
    parse_preferred,
    parse_windows,
    run_sweep,
)
from tritonkit.repository import parse_config  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "sweep_scaling"
SLA_TEXT = "p99<=40ms"
SCHEMA = 1

MODEL_PY = """
import json
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        params = {k: v["string_value"] for k, v in json.loads(args["model_config"]).get("parameters", {}).items()}
        self.fixed_s = float(params["fixed_ms"]) / 1000.0
        self.row_s = float(params["per_row_ms"]) / 1000.0
        self.spin = params["spin"] == "1"

    def execute(self, requests):
        took = self.fixed_s + self.row_s * len(requests)
        if self.spin:
            end = time.perf_counter() + took
            while time.perf_counter() < end:
                pass
        else:
            time.sleep(took)
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x.astype(np.float32))]))
        return out
"""

CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
parameters [
  {{ key: "fixed_ms" value: {{ string_value: "{fixed_ms}" }} }},
  {{ key: "per_row_ms" value: {{ string_value: "{per_row_ms}" }} }},
  {{ key: "spin" value: {{ string_value: "{spin}" }} }}
]
"""


@dataclass(frozen=True)
class Shape:
    """One cost shape: the model's name and what an execution of ``k`` requests costs."""

    name: str
    fixed_ms: float
    per_row_ms: float
    spin: bool

    @property
    def model(self) -> str:
        return f"cost_{self.name}"

    def config(self) -> str:
        return CONFIG.format(name=self.model, fixed_ms=self.fixed_ms, per_row_ms=self.per_row_ms,
                             spin="1" if self.spin else "0")

    def make_repo(self, root: Path) -> Path:
        return make_repo(root, self.model, self.config(), MODEL_PY)

    def digest(self) -> str:
        return hashlib.sha256((self.config() + MODEL_PY).encode()).hexdigest()[:16]


SHAPES = {s.name: s for s in (Shape("fixed", 8.0, 0.0, False), Shape("row", 1.0, 1.5, False),
                              Shape("cpu", 0.3, 1.0, True))}

#: The grids, as the command line writes them (``--instances``, ``--max-batch-size``, …).
GRIDS: dict[str, dict[str, str]] = {
    "small": {"instances": "1:4", "max_batch": "1,4,16", "window": "0,2ms"},
    "medium": {"instances": "1:4", "max_batch": "1:64:x2", "window": "0:15ms:5ms"},
    "large": {"instances": "1:4", "max_batch": "1:64:x2", "window": "0:20ms:5ms", "preferred": "none,max"},
}


def sweep_grid(name: str) -> SweepGrid:
    text = GRIDS[name]
    return SweepGrid(instances=parse_instances(text["instances"]), max_batch_sizes=parse_max_batch_sizes(text["max_batch"]),
                     windows_us=parse_windows(text["window"]),
                     preferred=parse_preferred(text["preferred"]) if "preferred" in text else None)


def grid_ids(shape: Shape, name: str) -> list[str]:
    return [v.id for v in sweep_grid(name).variants(parse_config(shape.config()), shape.model)]


@dataclass(frozen=True)
class Protocol:
    """The ladder every sweep here climbs (``--quick``: shorter, stored apart)."""

    concurrency: str
    step_window_ms: int
    warmup_s: float
    remeasure_levels: tuple[float, ...]
    remeasure_window_ms: int
    tag: str

    @property
    def top(self) -> int:
        return int(self.concurrency.split(":")[-1])

    def settings(self, grid: SweepGrid, out: Path, *, exhaustive: bool = False) -> SweepSettings:
        return SweepSettings(sla=SLA_TEXT, grid=grid, concurrency=self.concurrency, step_window_ms=self.step_window_ms,
                             warmup_s=self.warmup_s, out=out, write_back=False, exhaustive=exhaustive)

    def key(self, shape: Shape, grid: str) -> dict[str, Any]:
        """What a stored exhaustive outcome must have been measured with to be used."""
        return {"shape": shape.name, "model_digest": shape.digest(), "grid": GRIDS[grid], "variants": grid_ids(shape, grid),
                "sla": SLA_TEXT, "concurrency": self.concurrency, "step_window_ms": self.step_window_ms,
                "warmup_s": self.warmup_s}

    def estimate_s(self, variants: int) -> float:
        """The most an exhaustive sweep of ``variants`` takes: every ladder climbed to the top
        (three windows a step, about 0.6 s of perf_analyzer start a step, ~1.5 s to load, warm
        up and unload)."""
        levels = len(range(self.top.bit_length()))
        return variants * (levels * (3 * self.step_window_ms / 1000.0 + 0.6) + 1.5 + self.warmup_s)


FULL = Protocol("1:32", 500, 0.5, (8.0, 16.0, 32.0), 1000, "")
QUICK = Protocol("1:16", 300, 0.5, (8.0, 16.0), 500, "-quick")


def stored_path(shape: Shape, grid: str, protocol: Protocol) -> Path:
    return DATA / f"{shape.name}-{grid}{protocol.tag}.json"


def _commit() -> str:
    try:
        return subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _summary(result: Any, wall_s: float) -> dict[str, Any]:
    winner = result.search.winner
    score = winner.score() if winner else None
    return {"wall_s": round(wall_s, 1), "measured": result.counts()["measured"],
            "winner": winner.variant.to_dict() if winner else None,
            "winner_own_per_s": round(score.throughput_per_s, 1) if score else None,
            "time_breakdown_s": result.time_breakdown()}


def record_exhaustive(shape: Shape, grid: str, protocol: Protocol, work: Path) -> dict[str, Any]:
    """Measure ``grid`` of ``shape`` exhaustively and store the outcome (settings, date, winner)."""
    repo = shape.make_repo(work / f"exhaustive-{shape.name}-{grid}")
    started = time.monotonic()
    result = run_sweep(repo, shape.model, protocol.settings(sweep_grid(grid), repo.parent / "sweep", exhaustive=True))
    record = {"schema": SCHEMA, "recorded_utc": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "tritonkit_commit": _commit(), "cpus": os.cpu_count(), "key": protocol.key(shape, grid),
              "exit_code": result.exit_code, **_summary(result, time.monotonic() - started)}
    DATA.mkdir(parents=True, exist_ok=True)
    path = stored_path(shape, grid, protocol)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2) + "\n")
    temporary.replace(path)
    return record


def load_exhaustive(shape: Shape, grid: str, protocol: Protocol) -> dict[str, Any]:
    """The stored exhaustive outcome; ``SystemExit`` (exit 2) when missing or measured otherwise."""
    path = stored_path(shape, grid, protocol)
    command = (f".venv/bin/python benchmarks/sweep_scaling.py --record-exhaustive --shapes {shape.name} --grids {grid}"
               + (" --quick" if protocol.tag else ""))
    if not path.is_file():
        raise SystemExit(f"error: no stored exhaustive outcome for {shape.name}/{grid} ({path})\nfix: {command}")
    record = json.loads(path.read_text())
    if record.get("schema") != SCHEMA or record.get("key") != protocol.key(shape, grid):
        stored = record.get("key") or {}
        changed = sorted(k for k in set(stored) | set(protocol.key(shape, grid))
                         if stored.get(k) != protocol.key(shape, grid).get(k))
        raise SystemExit(f"error: the stored exhaustive outcome {path} (recorded {record.get('recorded_utc')}) is stale: "
                         f"its {', '.join(changed) or 'schema'} differ from this benchmark's\nfix: {command}")
    return record


def run_default(shape: Shape, grid: str, protocol: Protocol, work: Path) -> dict[str, Any]:
    repo = shape.make_repo(work / f"search-{shape.name}-{grid}")
    started = time.monotonic()
    result = run_sweep(repo, shape.model, protocol.settings(sweep_grid(grid), repo.parent / "sweep"))
    return {"exit_code": result.exit_code, **_summary(result, time.monotonic() - started)}


def _variant(data: dict[str, Any] | None) -> Variant | None:
    return Variant.from_dict(data) if data else None


def _name(variant: Variant | None) -> str:
    return "none" if variant is None else variant.id


def measure_shape(shape: Shape, grids: list[str], protocol: Protocol, work: Path, with_ma: bool,
                  ma_timeout_s: float) -> dict[str, Any]:
    """One shape: the default search per grid against the stored exhaustive outcomes and Model
    Analyzer's quick search, every winner measured again."""
    rows: dict[str, dict[str, Any]] = {}
    for grid in grids:
        stored = load_exhaustive(shape, grid, protocol)
        print(f"[{shape.name}/{grid}] default search over {len(stored['key']['variants'])} variants …", flush=True)
        rows[grid] = {"variants": len(stored["key"]["variants"]), "tritonkit": run_default(shape, grid, protocol, work),
                      "exhaustive": stored}
    ma: dict[str, Any] | None = None
    notes: list[str] = []
    if with_ma and MA_BIN.exists():
        print(f"[{shape.name}] Model Analyzer quick search (remote) …", flush=True)
        batches = sorted({b for grid in grids for b in (sweep_grid(grid).max_batch_sizes or [])})
        instances = sorted({i for grid in grids for i in (sweep_grid(grid).instances or [])})
        started = time.monotonic()
        try:
            ma = run_model_analyzer(work / f"ma-{shape.name}", "quick-remote", make=shape.make_repo,
                                    model_name=shape.model, instances=instances, max_batch=batches,
                                    max_concurrency=protocol.top,
                                    p99_limit_ms=float(SLA_TEXT.split("<=")[1].removesuffix("ms")),
                                    timeout_s=ma_timeout_s)
        except subprocess.TimeoutExpired:
            notes.append(f"Model Analyzer's quick search did not finish within {ma_timeout_s:.0f} s (killed): "
                         "slower than every tritonkit search here")
        except RuntimeError as exc:
            notes.append(f"Model Analyzer's quick search failed after {time.monotonic() - started:.0f} s: "
                         f"{str(exc).splitlines()[0]}")
    elif with_ma:
        notes.append(f"Model Analyzer not installed at {MA_BIN}: see this script's docstring")
    wanted: dict[str, Variant] = {"default": Variant.from_dict({"instances": 1, "max_batch_size": 8, "window_us": None,
                                                                "is_default": True})}
    for grid, row in rows.items():
        for who in ("tritonkit", "exhaustive"):
            variant = _variant(row[who]["winner"])
            if variant is not None:
                wanted[f"{who}:{grid}"] = variant
    if ma is not None and ma["winner"] is not None:
        wanted["model_analyzer"] = ma["winner"]
    print(f"[{shape.name}] re-measuring {len({v.knobs_id for v in wanted.values()})} distinct winners …", flush=True)
    again = remeasure(work / f"verify-{shape.name}", wanted, make=shape.make_repo, model=shape.model, sla_text=SLA_TEXT,
                      levels=protocol.remeasure_levels, window_ms=protocol.remeasure_window_ms)
    best = max((v for k, v in again.items() if k != "default" and v is not None), default=None)
    return {"shape": shape.name, "rows": rows, "model_analyzer": None if ma is None else
            {k: (v.id if isinstance(v, Variant) else v) for k, v in ma.items() if k != "rows"},
            "remeasured_per_s": again, "best_remeasured_per_s": best, "notes": notes}


def _ratio(value: float | None, best: float | None) -> str:
    return f"{value / best:.3f}" if value and best else "–"


def report(shape_result: dict[str, Any]) -> list[str]:
    again, best = shape_result["remeasured_per_s"], shape_result["best_remeasured_per_s"]
    lines = [f"shape {shape_result['shape']}: SLA {SLA_TEXT}; best re-measured {best or 0:,.0f} infer/s; "
             f"default config re-measured {again.get('default') or 0:,.0f}"]
    ma = shape_result["model_analyzer"]
    lines.append(f"{'grid':<8}{'variants':>9}{'ours s':>8}{'meas.':>6}{'exh. s':>8}{'ours/exh':>9}"
                 f"{'ours/MA':>8}  ours winner (÷best)        exhaustive winner (÷best), recorded")
    for grid, row in shape_result["rows"].items():
        ours, exh = row["tritonkit"], row["exhaustive"]
        ours_winner, exh_winner = _variant(ours["winner"]), _variant(exh["winner"])
        versus_ma = f"{ours['wall_s'] / ma['wall_s']:>8.2f}" if ma else f"{'–':>8}"
        ours_cell = f"{_name(ours_winner)} ({_ratio(again.get(f'tritonkit:{grid}'), best)})"
        lines.append(
            f"{grid:<8}{row['variants']:>9}{ours['wall_s']:>8.1f}{ours['measured']:>6}{exh['wall_s']:>8.1f}"
            f"{ours['wall_s'] / exh['wall_s']:>9.3f}{versus_ma}  {ours_cell:<27}"
            f"{_name(exh_winner)} ({_ratio(again.get(f'exhaustive:{grid}'), best)}), {exh['recorded_utc']}")
    if ma:
        lines.append(f"Model Analyzer quick (remote): {ma['wall_s']:.1f} s, {ma['perf_runs']} perf runs, winner "
                     f"{ma['winner']} ({_ratio(again.get('model_analyzer'), best)})")
    lines += [f"note: {n}" for n in shape_result["notes"]]
    return lines


def goals(results: list[dict[str, Any]]) -> list[str]:
    lines = []
    for shape in results:
        again, best = shape["remeasured_per_s"], shape["best_remeasured_per_s"]
        large = max(shape["rows"], key=lambda g: shape["rows"][g]["variants"])
        row = shape["rows"][large]
        ours = again.get(f"tritonkit:{large}")
        within = bool(ours and best and ours >= 0.95 * best)
        cheap = row["tritonkit"]["wall_s"] <= 0.10 * row["exhaustive"]["wall_s"]
        lines.append(f"{shape['shape']}: on the {row['variants']}-variant grid within 5 % of the best: {within}; "
                     f"≤ 10 % of exhaustive time: {cheap} ({row['tritonkit']['wall_s'] / row['exhaustive']['wall_s']:.3f})")
        ma = shape["model_analyzer"]
        if ma:
            ma_v = again.get("model_analyzer") or 0.0
            faster = all(r["tritonkit"]["wall_s"] < ma["wall_s"] for r in shape["rows"].values())
            as_good = all((again.get(f"tritonkit:{g}") or 0.0) >= 0.95 * ma_v for g in shape["rows"])
            lines.append(f"{shape['shape']}: faster than Model Analyzer's quick search on every grid: {faster}; "
                         f"winners as good (within 5 %) or better: {as_good}")
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grids", default=",".join(GRIDS), help=f"Comma-separated, of {', '.join(GRIDS)}.")
    parser.add_argument("--shapes", default=",".join(SHAPES), help=f"Comma-separated, of {', '.join(SHAPES)}.")
    parser.add_argument("--quick", action="store_true",
                        help="Concurrency 1:16 and 300 ms windows (a check that it works; stored apart).")
    parser.add_argument("--record-exhaustive", action="store_true",
                        help="Measure the selected grids exhaustively and store them (long: the estimate is printed).")
    parser.add_argument("--skip-model-analyzer", action="store_true")
    parser.add_argument("--ma-timeout-s", type=float, default=3600.0,
                        help="Stop Model Analyzer's quick search after this long (default 3600).")
    parser.add_argument("--json", action="store_true", help="Print one JSON document.")
    parser.add_argument("--keep", action="store_true", help="Keep the work folder (printed).")
    args = parser.parse_args()
    grids = [g.strip() for g in args.grids.split(",") if g.strip()]
    shapes = [s.strip() for s in args.shapes.split(",") if s.strip()]
    for value, known, option in ((grids, GRIDS, "--grids"), (shapes, SHAPES, "--shapes")):
        unknown = [v for v in value if v not in known]
        if unknown:
            parser.error(f"{option}: {', '.join(unknown)} not one of {', '.join(known)}")
    protocol = QUICK if args.quick else FULL
    work = Path(tempfile.mkdtemp(prefix="tritonkit-sweep-scaling-"))
    try:
        if args.record_exhaustive:
            sizes = {g: len(grid_ids(SHAPES[shapes[0]], g)) for g in grids}
            estimate = sum(protocol.estimate_s(sizes[g]) for g in grids) * len(shapes)
            print(f"recording {len(shapes)} shape(s) × grids {', '.join(f'{g} ({sizes[g]})' for g in grids)}: "
                  f"at most ~{estimate / 3600:.1f} h ({estimate / 60:.0f} min)", flush=True)
            for shape in shapes:
                for grid in grids:
                    record = record_exhaustive(SHAPES[shape], grid, protocol, work)
                    print(f"  {shape}/{grid}: {record['wall_s']:.0f} s, winner {_name(_variant(record['winner']))} "
                          f"→ {stored_path(SHAPES[shape], grid, protocol)}", flush=True)
            return 0
        for shape in shapes:  # refuse missing or stale outcomes before measuring anything
            for grid in grids:
                load_exhaustive(SHAPES[shape], grid, protocol)
        results = []
        for name in shapes:
            results.append(measure_shape(SHAPES[name], grids, protocol, work, not args.skip_model_analyzer,
                                         args.ma_timeout_s))
            if not args.json:  # each shape as soon as it is measured
                print("\n".join(report(results[-1])) + "\n", flush=True)
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps({"protocol": protocol.__dict__, "shapes": results, "goals": goals(results)}, indent=2,
                         default=str))
        return 0
    print("\n".join(goals(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())

