"""Each package's ``__all__`` lists exactly its public names."""

from __future__ import annotations

import importlib
import inspect
import types
from pathlib import Path

import pytest

from tritonkit._lazy import type_checking_imports

PACKAGES = [
    "tritonkit",
    "tritonkit.errors",
    "tritonkit.server",
    "tritonkit.repository",
    "tritonkit.builders",
    "tritonkit.client",
    "tritonkit.perf",
    "tritonkit.perf.measure",
    "tritonkit.perf.judge",
    "tritonkit.perf.report",
    "tritonkit.perf.llm",
    "tritonkit.perf.sweep",
    "tritonkit.deploy",
    "tritonkit.provision",
    "tritonkit.planner",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_complete_and_every_entry_exists(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", []))
    assert exported, f"{name} has no __all__"
    missing = [entry for entry in exported if not hasattr(module, entry)]
    assert not missing, f"{name}.__all__ names what it does not define: {missing}"
    public = {
        attr
        for attr, value in vars(module).items()
        if not attr.startswith("_")
        and not isinstance(value, types.ModuleType)
        and attr != "annotations"
        and (inspect.isclass(value) or inspect.isfunction(value))
        and getattr(value, "__module__", "").startswith("tritonkit")
    }
    unlisted = sorted(public - exported)
    assert not unlisted, f"{name} defines public names missing from __all__: {unlisted}"


#: The README's flow, and nothing else: the front door is curated, not grown.
FRONT_DOOR = [
    "AsyncClient", "Client", "LadderPlan", "LoadTestSettings", "ModelRepository", "ModelSpec", "PerfSpec",
    "SweepSettings", "TensorSpec", "TritonKitError", "TritonServer", "Workload", "__version__", "build_onnx",
    "lint_repository", "load_measurement", "load_test", "parse_sla", "plan_from_measurement", "run_ladder", "run_perf",
    "run_sweep",
]


def test_the_front_door_exports_exactly_the_readme_flow() -> None:
    import tritonkit

    assert tritonkit.__all__ == FRONT_DOOR
    assert sorted(dir(tritonkit)) == sorted(set(dir(tritonkit)))  # and dir() lists them
    assert set(FRONT_DOOR) <= set(dir(tritonkit))


@pytest.mark.parametrize("name", [n for n in FRONT_DOOR if n not in ("__version__", "TritonKitError")])
def test_each_front_door_name_is_the_subpackages_own_object(name: str) -> None:
    import tritonkit

    value = getattr(tritonkit, name)
    home = importlib.import_module(type_checking_imports(Path(tritonkit.__file__).read_text())[name])
    assert value is getattr(home, name)


def _modules_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after ``statement`` (a fresh one: this one has imported all)."""
    import json
    import subprocess
    import sys

    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    return set(json.loads(out.stdout))


def test_importing_tritonkit_loads_no_subpackage_until_a_name_is_used() -> None:
    loaded = _modules_after("import tritonkit")
    heavy = {"tritonkit.perf", "tritonkit.client", "tritonkit.builders", "tritonkit.server", "grpc", "onnx"}
    assert not heavy & loaded


def test_the_trtllm_builder_does_not_import_perf_or_its_renderers() -> None:
    loaded = _modules_after("import tritonkit.builders.trtllm")
    assert "tritonkit.builders.trtllm" in loaded
    unwanted = {"tritonkit.perf", "tritonkit.perf.report", "jinja2", "matplotlib"}
    assert not unwanted & loaded, sorted(unwanted & loaded)
