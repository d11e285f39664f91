"""How long ``build_onnx`` takes on a ~100 MB model, next to the least any tool could do.

The reference, measured in the same run on the same file: create a plain ONNX Runtime
session and run one inference (what anyone serving the model pays at least once). The build
adds the full checker, shape inference, the copy into the repository, the batch-consistency
check and (with --fp16) the conversion and the comparison against the FP32 original.

    .venv/bin/python benchmarks/build_speed.py            # ~100 MB MLP, FP32 and FP16 builds
    .venv/bin/python benchmarks/build_speed.py --size-mb 400 --repeat 3 --json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tritonkit.builders import build_onnx


def make_big_mlp(path: Path, *, size_mb: float, width: int = 2048, seed: int = 0) -> Path:
    """An MLP of ``width``×``width`` FP32 layers, as many as make about ``size_mb`` MB of weights."""
    layer_bytes = width * width * 4
    layers = max(1, round(size_mb * 1e6 / layer_bytes))
    rng = np.random.default_rng(seed)
    nodes, inits = [], []
    current = "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width), dtype=np.float32) / np.sqrt(width)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"W{i}"))
        nodes.append(helper.make_node("MatMul", [current, f"W{i}"], [f"h{i}"]))
        nodes.append(helper.make_node("Relu", [f"h{i}"], [f"r{i}"]))
        current = f"r{i}"
    nodes.append(helper.make_node("Identity", [current], ["y"]))
    graph = helper.make_graph(nodes, "big_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", width])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))
    return path


def reference_s(path: Path, width: int) -> float:
    """Plain onnxruntime: session creation + one inference of 4 samples."""
    import onnxruntime as ort

    started = time.perf_counter()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    session.run(None, {"x": np.zeros((4, width), np.float32)})
    return time.perf_counter() - started


def build_s(path: Path, repo: Path, name: str, *, fp16: bool) -> tuple[float, dict[str, float]]:
    started = time.perf_counter()
    result = build_onnx(path, name=name, repo=repo, runtime="python", fp16=fp16, force=True)
    elapsed = time.perf_counter() - started
    if not result.verified:
        raise SystemExit(f"build of {name} did not verify: {[c.failures() for c in result.comparisons]}")
    return elapsed, result.timings_s


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=float, default=100.0, help="weights to generate, in MB (default 100)")
    parser.add_argument("--repeat", type=int, default=2, help="runs of each measurement; the median is shown")
    parser.add_argument("--no-fp16", action="store_true", help="skip the FP16 build")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    width = 2048
    with tempfile.TemporaryDirectory(prefix="tritonkit-bench-") as tmp:
        root = Path(tmp)
        model = make_big_mlp(root / "big.onnx", size_mb=args.size_mb, width=width)
        size_mb = model.stat().st_size / 1e6
        rows: dict[str, list[float]] = {"reference: ORT session + 1 inference": [], "build_onnx (FP32, verify)": []}
        if not args.no_fp16:
            rows["build_onnx (--fp16, verify vs FP32)"] = []
        phases: dict[str, float] = {}
        for _ in range(args.repeat):
            rows["reference: ORT session + 1 inference"].append(reference_s(model, width))
            elapsed, timings = build_s(model, root / "repo", "big", fp16=False)
            rows["build_onnx (FP32, verify)"].append(elapsed)
            phases = timings
            if not args.no_fp16:
                rows["build_onnx (--fp16, verify vs FP32)"].append(build_s(model, root / "repo", "big16", fp16=True)[0])
    medians = {label: statistics.median(values) for label, values in rows.items()}
    ref = medians["reference: ORT session + 1 inference"]
    if args.json:
        json.dump({"model_mb": size_mb, "repeat": args.repeat, "median_s": medians,
                   "ratio_to_reference": {k: v / ref for k, v in medians.items()}, "fp32_phases_s": phases},
                  sys.stdout, indent=2)
        print()
        return 0
    print(f"model: {size_mb:.1f} MB FP32 MLP ({width}x{width} layers); median of {args.repeat} run(s)")
    width_label = max(len(k) for k in medians)
    for label, value in medians.items():
        print(f"  {label.ljust(width_label)}  {value:7.2f} s  ({value / ref:4.1f}x reference)")
    print("  FP32 build phases: " + ", ".join(f"{k} {v:.2f} s" for k, v in phases.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
