"""Each package's ``__all__`` lists exactly its public names."""

from __future__ import annotations

import importlib
import inspect
import types

import pytest

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
