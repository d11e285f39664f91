"""perf_analyzer's peak memory for outputs of 4 KiB, 64 KiB and 1 MiB a request: with its outputs in
system shared memory (what ``perf run`` does on a server on this machine) and with them kept within
the memory budget (``--keep-outputs``: windows bounded from the output size and the rate).

One python-backend model per size (FP32 [rows, 1024]) on the bundled server; each configuration is
one ladder step (concurrency 4, windows of 2 s, at most 5) run through tritonkit's own supervisor,
in a child process of its own so that its peak (``ru_maxrss`` of its children: perf_analyzer) is its
step's alone. The reference, measured in the same run: the peak with the outputs in shared memory.
Everything runs under an address-space cap (default 6 GB; perf_analyzer inherits it, and the budget
is at most half of it), so a perf_analyzer that kept too much dies of std::bad_alloc at the cap.

    .venv/bin/python benchmarks/perf_analyzer_memory.py            # the table
    .venv/bin/python benchmarks/perf_analyzer_memory.py --json
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

SIZES = {"4 KiB": 1, "64 KiB": 16, "1 MiB": 256}  # rows of 1024 FP32

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {rows}, 1024 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
"""
_PY = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = np.ones(({rows}, 1024), np.float32)
        return [pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUTPUT0", out)]) for _ in requests]
"""


def one(url: str, model: str, mode: str, folder: Path) -> dict[str, object]:
    """One step of ``model`` (``mode``: ``shm`` or ``kept``), in this process; its peak and figures."""
    from tritonkit.errors import StepError
    from tritonkit.perf.measure.analyzer import PerfAnalyzer
    from tritonkit.perf.measure.outputs import memory_budget
    from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec

    spec = PerfSpec(model=model, url=url, load=ConcurrencyRange(4), measurement_interval_ms=2000, max_trials=5,
                    shared_memory="none" if mode == "kept" else None)
    lines: list[str] = []
    figures: dict[str, object] = {"budget_mib": memory_budget() >> 20}
    try:
        outcome = PerfAnalyzer(folder, progress=lines.append).run(spec, "step", timeout_s=120)
        figures["infer_per_s"] = outcome.steps[0].throughput_per_s if outcome.steps else None
    except StepError as exc:
        figures["error"] = exc.message
    figures["peak_mib"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss >> 10
    figures["notes"] = lines
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cap-gb", type=float, default=6.0, help="address-space cap on everything run here")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--one", nargs=4, metavar=("URL", "MODEL", "MODE", "FOLDER"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one[0], args.one[1], args.one[2], Path(args.one[3]))))
        return 0
    from tritonkit.server import TritonServer

    with tempfile.TemporaryDirectory(prefix="pa-memory-") as tmp:
        repo = Path(tmp) / "repo"
        for label, rows in SIZES.items():
            name = f"out_{label.replace(' ', '').lower()}"
            (repo / name / "1").mkdir(parents=True)
            (repo / name / "config.pbtxt").write_text(textwrap.dedent(_CONFIG.format(name=name, rows=rows)))
            (repo / name / "1" / "model.py").write_text(_PY.format(rows=rows))
        cap = int(args.cap_gb * (1 << 30))
        rows_out = []
        with TritonServer(repo) as server:  # outside the cap
            for label in SIZES:
                name = f"out_{label.replace(' ', '').lower()}"
                for mode in ("shm", "kept"):
                    done = subprocess.run(
                        [sys.executable, __file__, "--one", server.grpc_url, name, mode, f"{tmp}/{name}-{mode}"],
                        capture_output=True, text=True, check=False, timeout=300,
                        preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (cap, cap)))
                    lines = done.stdout.strip().splitlines()
                    figures = json.loads(lines[-1]) if done.returncode == 0 and lines else {"error": done.stderr[-500:]}
                    rows_out.append({"output": label, "mode": mode, **figures})
    if args.json:
        print(json.dumps(rows_out, indent=1))
        return 0
    reference = {r["output"]: r.get("peak_mib") for r in rows_out if r["mode"] == "shm"}
    print(f"address-space cap {args.cap_gb:g} GB; concurrency 4, windows of 2 s (at most 5)")
    print(f"{'output':>8} {'outputs':>14} {'peak MiB':>9} {'x shm':>6} {'budget MiB':>11} {'infer/s':>9}  note")
    for r in rows_out:
        peak, ref = r.get("peak_mib"), reference.get(str(r["output"]))
        ratio = f"{peak / ref:.1f}" if isinstance(peak, int) and isinstance(ref, int) and ref else "-"
        rate = r.get("infer_per_s")
        note = r.get("error") or "; ".join(n for n in r.get("notes", []) if "windows bounded" in n or "outputs" in n)
        where = "shared memory" if r["mode"] == "shm" else "kept, budget"
        print(f"{r['output']:>8} {where:>14} {peak if peak is not None else '-':>9} {ratio:>6} "
              f"{r.get('budget_mib', '-'):>11} {f'{rate:,.0f}' if isinstance(rate, float) else '-':>9}  {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
