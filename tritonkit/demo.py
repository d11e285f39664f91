"""The main job on the built-in default model: build → serve → load-test → SLA verdict.

Everything here is the public library, composed: ``builders.make_demo_model`` and
``builders.build_onnx`` write ``model_repository/demo_mlp``, ``server.TritonServer``
serves it on the bundled tritonserver, ``perf.run_perf`` climbs a short ladder with
the real perf_analyzer and judges it against the SLA.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tritonkit.builders import OnnxBuildResult, build_onnx, make_demo_model
from tritonkit.perf import LadderPlan, PerfRun, PerfSpec, StepEvent, parse_sla, run_perf
from tritonkit.provision.perf_analyzer import locate_perf_analyzer
from tritonkit.repository import DEFAULT_WINDOW
from tritonkit.server import TritonServer

__all__ = ["DEFAULT_DEMO_LEVELS", "DEFAULT_DEMO_MODEL", "DEFAULT_DEMO_SLA", "DemoRun", "run_demo"]

DEFAULT_DEMO_MODEL = "demo_mlp"
#: Interactive-service SLA for a small CPU model: tail latency bounded, no failed request.
DEFAULT_DEMO_SLA = "p99<=50ms,errors==0"
DEFAULT_DEMO_LEVELS = (1, 2, 4, 8, 16)


@dataclass
class DemoRun:
    """What the demo built and measured."""

    build: OnnxBuildResult
    perf: PerfRun
    server_version: str


def run_demo(
    *,
    repo: Path = Path("model_repository"),
    results_root: Path = Path("results"),
    sla: str = DEFAULT_DEMO_SLA,
    levels: tuple[int, ...] = DEFAULT_DEMO_LEVELS,
    duration_s: float = 6.0,
    warmup_s: float = 2.0,
    batch_window: str = DEFAULT_WINDOW,
    progress: Callable[[str], None] | None = None,
    on_step: Callable[[StepEvent], None] | None = None,
) -> DemoRun:
    """Build the default model into ``repo``, serve it, load-test it and judge it against ``sla``.

    Checks everything cheap first (SLA syntax, perf_analyzer present) so a bad option costs
    nothing. The server is stopped however this ends.
    """
    say = progress or (lambda _message: None)
    parsed_sla = parse_sla(sla)
    tool = locate_perf_analyzer()
    repo.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tritonkit-demo-") as tmp:
        source = make_demo_model(Path(tmp) / f"{DEFAULT_DEMO_MODEL}.onnx")
        say(f"building {source.name} into {repo}/{DEFAULT_DEMO_MODEL} (verify, batch window {batch_window})")
        build = build_onnx(
            source, name=DEFAULT_DEMO_MODEL, repo=repo, batch_window=batch_window, force=True, log=say
        )
    for line in build.summary().splitlines():
        say(line)
    say(f"serving {repo} on the bundled tritonserver")
    with TritonServer(repo, model_control="explicit", models=[DEFAULT_DEMO_MODEL]) as server:
        version = server.version()
        say(f"tritonserver {version} ready: gRPC {server.grpc_url}, metrics {server.metrics_url}")
        spec = PerfSpec(model=DEFAULT_DEMO_MODEL, url=server.grpc_url, protocol="grpc")
        plan = LadderPlan.from_duration(
            duration_s, concurrency=[float(level) for level in levels], warmup_s=warmup_s, total_timeout_s=600.0
        )
        run = run_perf(
            spec,
            plan,
            sla=parsed_sla,
            results_root=results_root,
            perf_analyzer=tool,
            metrics_url=server.metrics_url,
            progress=say,
            on_step=on_step,
        )
    return DemoRun(build=build, perf=run, server_version=version)
