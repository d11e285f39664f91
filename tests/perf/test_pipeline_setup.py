"""The keywords ``run_perf`` and ``run_llm_perf`` share (``RunSetup``): declared once, checked at run time.

Pure: every case here is refused or resolved before a server or perf_analyzer would be needed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.perf import LadderPlan, LLMSettings, PerfSpec
from tritonkit.perf.pipeline import run_llm_perf, run_perf
from tritonkit.perf.run_record import RunSetup, _folder_and_tool
from tritonkit.provision.perf_analyzer import PerfAnalyzerInstall

_TOOL = PerfAnalyzerInstall(argv=("/opt/pa",), source="--perf-analyzer", mode="external", binary=Path("/opt/pa"))


def test_run_perf_refuses_a_misspelt_setup_keyword_before_writing_anything(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'result_dir'"):
        run_perf(PerfSpec("m", "127.0.0.1:1"), LadderPlan(levels=(1,)), result_dir=tmp_path / "out")  # type: ignore[call-arg]
    assert list(tmp_path.iterdir()) == []


def test_run_llm_perf_refuses_a_misspelt_setup_keyword(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="'metric_url'.*results_dir, results_root"):
        run_llm_perf("m", "127.0.0.1:1", LLMSettings(), metric_url="http://127.0.0.1:1/metrics")  # type: ignore[call-arg]


def test_a_setup_names_the_folder_or_its_root_and_the_tool(tmp_path: Path) -> None:
    setup: RunSetup = {"results_dir": tmp_path / "here", "perf_analyzer": _TOOL}
    assert _folder_and_tool("m", setup) == (tmp_path / "here", _TOOL)
    folder, tool = _folder_and_tool("mlp", {"results_root": tmp_path, "perf_analyzer": _TOOL})
    assert folder.parent == tmp_path and folder.name.endswith("-mlp") and tool is _TOOL
