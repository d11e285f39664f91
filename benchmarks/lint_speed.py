"""Lint a generated repository of 500 models and report models/second against the 2 s target.

Usage::

    .venv/bin/python benchmarks/lint_speed.py [--models 500] [--runs 3] [--keep DIR]

The repository mixes what real ones hold: batching python models with warmup and instance
groups, non-batching models, and two-step ensembles over them (so cross-model rules run),
each with its version folder and model file. Prints one line per run and a verdict.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from tritonkit.repository import (
    DynamicBatching,
    EnsembleStep,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    QueuePolicy,
    TensorSpec,
    Warmup,
    WarmupInput,
)
from tritonkit.repository.lint import Target, lint_repository

TARGET_S = 2.0
MODEL_PY = "import triton_python_backend_utils as pb_utils\n"


def generate(root: Path, count: int) -> ModelRepository:
    """Write ``count`` models: per group of 5, three batching, one non-batching, one ensemble over two."""
    repo = ModelRepository.init(root)
    io = {"inputs": [TensorSpec(name="INPUT0", dtype=np.float32, dims=[3, 224, 224])],
          "outputs": [TensorSpec(name="OUTPUT0", dtype=np.float32, dims=[1000])]}
    for i in range(count):
        kind = i % 5
        name = f"model_{i:04d}"
        if kind < 3:
            spec = ModelSpec(
                name=name, backend="python", max_batch_size=16, **io,  # type: ignore[arg-type]
                dynamic_batching=DynamicBatching(window="5ms", default_queue_policy=QueuePolicy(max_queue_size=64)),
                instance_groups=[InstanceGroup(kind="cpu", count=2)],
                warmup=[Warmup(name="w", batch_size=1, inputs={"INPUT0": WarmupInput(dtype="FP32", dims=[3, 224, 224])})],
                parameters={"note": f"generated {i}"},
            )
            repo.add_model(spec, files={"model.py": MODEL_PY})
        elif kind == 3:
            repo.add_model(ModelSpec(name=name, backend="python", **io), files={"model.py": MODEL_PY})  # type: ignore[arg-type]
        else:
            first, second = f"model_{i - 4:04d}", f"model_{i - 3:04d}"
            # Two composing models side by side (both read INPUT0): every ensemble rule has work to do.
            spec = ModelSpec(
                name=name, max_batch_size=16,
                inputs=io["inputs"],
                outputs=[TensorSpec(name="A", dtype="FP32", dims=[1000]), TensorSpec(name="B", dtype="FP32", dims=[1000])],
                ensemble_steps=[
                    EnsembleStep(model_name=first, input_map={"INPUT0": "INPUT0"}, output_map={"OUTPUT0": "A"}),
                    EnsembleStep(model_name=second, input_map={"INPUT0": "INPUT0"}, output_map={"OUTPUT0": "B"}),
                ],
            )
            repo.add_model(spec)
    return repo


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--keep", type=Path, default=None, help="write the repository here and keep it")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="tritonkit-lint-bench-") as tmp:
        root = args.keep or Path(tmp) / "repo"
        started = time.perf_counter()
        generate(root, args.models)
        print(f"generated {args.models} models in {time.perf_counter() - started:.2f} s at {root}")
        target = Target.cpu().with_backends({"python"}, complete=True, source="benchmark")
        times = []
        for run in range(1, args.runs + 1):
            t0 = time.perf_counter()
            report = lint_repository(root, target=target)
            elapsed = time.perf_counter() - t0
            times.append(elapsed)
            print(f"run {run}: {report.models_checked} models, {report.rules_run} rules, {len(report.errors)} errors, "
                  f"{len(report.findings)} findings in {elapsed:.3f} s ({report.models_checked / elapsed:.0f} models/s)")
            if report.errors:
                print("unexpected errors in the generated repository:", *map(str, report.errors[:5]), sep="\n")
                return 1
        median = statistics.median(times)
        # Reference, same run and files: only reading and parsing every config.pbtxt with
        # protobuf text_format (what any tool must do before it can check anything).
        parse_times = []
        for _ in range(args.runs):
            t0 = time.perf_counter()
            for config in sorted(root.glob("*/config.pbtxt")):
                text_format.Parse(config.read_text(), model_config_pb2.ModelConfig())
            parse_times.append(time.perf_counter() - t0)
        parse_median = statistics.median(parse_times)
        verdict = "PASS" if median < TARGET_S else "FAIL"
        print(f"reference: read + text_format.Parse of every config.pbtxt: median {parse_median:.3f} s")
        print(f"median {median:.3f} s for {args.models} models = {args.models / median:.0f} models/s; "
              f"{median / parse_median:.1f}x the bare parse; target < {TARGET_S:.1f} s: {verdict}")
        return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
