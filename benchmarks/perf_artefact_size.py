"""How big perf_analyzer's artefacts and memory get on a 50k-vocabulary LM, bounded vs unbounded.

A GPT-2-shaped model (random weights, the real 50,257-token vocabulary, one tiny layer) is
built and served; perf_analyzer then runs the same fixed amount of work twice against it, with
the same derived input data (token ids within the vocabulary):

- **unbounded**: outputs come back over gRPC, as perf_analyzer does by default; it keeps every
  response's logits in its request records and writes them into the profile export;
- **bounded**: what ``tritonkit perf run`` does on a local server: outputs go to system shared
  memory, so neither perf_analyzer's records nor the export hold them.

Printed per variant: profile export size, results folder size, perf_analyzer's peak resident
memory (``VmHWM``), throughput; then bounded/unbounded ratios measured in the same run.

    .venv/bin/python benchmarks/perf_artefact_size.py                  # seq 4, 3 windows of 300 ms
    .venv/bin/python benchmarks/perf_artefact_size.py --seq-len 16 --window-ms 500 --json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.corpus_models import GPT2_VOCAB, export_gpt2  # noqa: E402
from tritonkit.builders import build_onnx  # noqa: E402
from tritonkit.perf.measure.input_data import SeqLen, derive_samples, output_region_bytes  # noqa: E402
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, to_argv, write_input_data  # noqa: E402
from tritonkit.provision.perf_analyzer import locate_perf_analyzer  # noqa: E402
from tritonkit.server import TritonServer  # noqa: E402


@dataclass
class Variant:
    """One perf_analyzer run and what it left behind."""

    name: str
    export_bytes: int
    folder_bytes: int
    peak_rss_mb: float
    requests: int
    throughput_per_s: float | None
    wall_s: float


def _peak_rss_kb(pid: int) -> int:
    """``VmHWM`` of a live (or exited, not yet reaped) process, in kB; 0 when gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0
    return next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:")), 0)


def _limit_memory(limit_bytes: int) -> None:
    # The machine is shared: an unbounded run that grows past this fails instead of taking it down.
    resource.setrlimit(resource.RLIMIT_AS, (limit_bytes, limit_bytes))


def _run(argv: list[str], folder: Path, name: str, *, memory_limit_bytes: int) -> Variant:
    folder.mkdir(parents=True)
    export = folder / "export.json"
    csv = folder / "steps.csv"
    full = [*argv, "-f", str(csv), "--profile-export-file", str(export)]
    started = time.monotonic()
    peak_kb = 0
    with open(folder / "stdout", "wb") as out, open(folder / "stderr", "wb") as err:
        proc = subprocess.Popen(full, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                preexec_fn=lambda: _limit_memory(memory_limit_bytes))
        # Not rusage: ru_maxrss survives execve, so a child forked from a big parent reports the parent's.
        while os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            peak_kb = max(peak_kb, _peak_rss_kb(proc.pid))
            time.sleep(0.05)
        peak_kb = max(peak_kb, _peak_rss_kb(proc.pid))
        code = proc.wait()
    wall = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{name}: perf_analyzer exited {code} (peak RSS {peak_kb / 1024:.0f} MB, limit "
                         f"{memory_limit_bytes / 2**30:.0f} GiB): {(folder / 'stderr').read_text()[-800:]}")
    # Counted without parsing: the unbounded export is gigabytes of JSON.
    requests = 0
    with export.open("rb") as fh:
        while chunk := fh.read(1 << 24):
            requests += chunk.count(b'"response_timestamps"')
    throughput = None
    lines = csv.read_text().splitlines()
    if len(lines) > 1:
        header = lines[0].split(",")
        throughput = float(lines[1].split(",")[header.index("Inferences/Second")])
    return Variant(name=name, export_bytes=export.stat().st_size,
                   folder_bytes=sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()),
                   peak_rss_mb=peak_kb / 1024.0, requests=requests, throughput_per_s=throughput, wall_s=wall)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seq-len", type=int, default=4)
    parser.add_argument("--window-ms", type=int, default=300, help="Measurement window (3 windows, all kept).")
    parser.add_argument("--memory-limit-gib", type=float, default=8.0,
                        help="Address-space limit for each perf_analyzer run (the machine is shared).")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tool = locate_perf_analyzer()
    with tempfile.TemporaryDirectory(prefix="tk-artefacts-") as tmp:
        root = Path(tmp)
        source = export_gpt2(root / "export")
        build_onnx(source, name="gpt2", repo=root / "repo", runtime="python", kind="cpu")
        samples, _notes = derive_samples(source, batched=True, seq_len=SeqLen(args.seq_len, args.seq_len))
        data = write_input_data(root / "input_data.json", samples)
        region = output_region_bytes(source, samples[0], batched=True)
        with TritonServer(root / "repo", startup_timeout_s=240.0) as server:
            base = PerfSpec(model="gpt2", url=server.grpc_url, load=ConcurrencyRange(1), input_data=str(data),
                            measurement_interval_ms=args.window_ms, stability_percentage=10_000.0, max_trials=3)
            limit = int(args.memory_limit_gib * 2**30)
            unbounded = _run([*tool.argv, *to_argv(base)], root / "unbounded", "unbounded", memory_limit_bytes=limit)
            bounded_spec = replace(base, shared_memory="system", output_shared_memory_size_bytes=region)
            bounded = _run([*tool.argv, *to_argv(bounded_spec)], root / "bounded", "bounded", memory_limit_bytes=limit)
    logits_bytes = args.seq_len * GPT2_VOCAB * 4
    report = {
        "model": f"GPT-2-shaped, vocab {GPT2_VOCAB}, seq {args.seq_len}: logits {logits_bytes / 1e6:.2f} MB per request",
        "unbounded": asdict(unbounded),
        "bounded": asdict(bounded),
        "ratios_bounded_over_unbounded": {
            "export_bytes": bounded.export_bytes / unbounded.export_bytes,
            "folder_bytes": bounded.folder_bytes / unbounded.folder_bytes,
            "peak_rss": bounded.peak_rss_mb / unbounded.peak_rss_mb,
            "export_bytes_per_request": (bounded.export_bytes / max(bounded.requests, 1))
            / (unbounded.export_bytes / max(unbounded.requests, 1)),
        },
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(report["model"])
    for variant in (unbounded, bounded):
        print(f"{variant.name:>9}: export {variant.export_bytes / 1e6:9.2f} MB for {variant.requests} requests "
              f"({variant.export_bytes / max(variant.requests, 1) / 1e3:8.1f} kB/request), folder "
              f"{variant.folder_bytes / 1e6:9.2f} MB, perf_analyzer peak RSS {variant.peak_rss_mb:8.1f} MB, "
              f"{variant.throughput_per_s or 0:.1f} infer/s, {variant.wall_s:.1f} s")
    for key, value in report["ratios_bounded_over_unbounded"].items():  # type: ignore[attr-defined]
        print(f"bounded/unbounded {key}: {value:.3g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
