"""tritonkit: Triton model repositories that are right the first time.

The front door holds the README's flow; each name loads its subpackage on first use::

    import tritonkit as tk

    tk.build_onnx("model.onnx", name="mlp", repo="model_repository")      # builders
    tk.lint_repository("model_repository", target="cpu")                  # repository
    with tk.TritonServer("model_repository") as server:                   # server
        with tk.Client(server.grpc_url) as client: ...                    # client
        test = tk.load_test("mlp", tk.LoadTestSettings(url=server.grpc_url,  # perf (`perf run`)
                                                       sla="p99<=50ms", concurrency="1,2,4"))
    tk.plan_from_measurement(tk.load_measurement(test.run.result_path), tk.Workload(target_qps=500))

Everything else lives in the subpackages (``tritonkit.builders``, ``tritonkit.repository``,
``tritonkit.server``, ``tritonkit.client``, ``tritonkit.perf``, ``tritonkit.planner``,
``tritonkit.deploy``); ``tritonkit.errors`` draws the error tree.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tritonkit._lazy import lazy_exports as _lazy_exports
from tritonkit._version import __version__
from tritonkit.errors import TritonKitError

# Lazy: ``import tritonkit`` (or the CLI's start-up) must not pay for grpc, onnx or perf it does not use.
__getattr__, __dir__ = _lazy_exports(globals())

if TYPE_CHECKING:
    from tritonkit.builders import build_onnx
    from tritonkit.client import AsyncClient, Client
    from tritonkit.perf import (
        LadderPlan,
        LoadTestSettings,
        PerfSpec,
        load_test,
        parse_sla,
        run_ladder,
        run_perf,
    )
    from tritonkit.perf.sweep import SweepSettings, run_sweep
    from tritonkit.planner import Workload, load_measurement, plan_from_measurement
    from tritonkit.repository import ModelRepository, ModelSpec, TensorSpec, lint_repository
    from tritonkit.server import TritonServer

__all__ = [
    "AsyncClient",
    "Client",
    "LadderPlan",
    "LoadTestSettings",
    "ModelRepository",
    "ModelSpec",
    "PerfSpec",
    "SweepSettings",
    "TensorSpec",
    "TritonKitError",
    "TritonServer",
    "Workload",
    "__version__",
    "build_onnx",
    "lint_repository",
    "load_measurement",
    "load_test",
    "parse_sla",
    "plan_from_measurement",
    "run_ladder",
    "run_perf",
    "run_sweep",
]
