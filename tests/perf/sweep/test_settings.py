"""``SweepSettings``: what a library sweep derives from the settings alone, before any server starts."""

from __future__ import annotations

import json
from pathlib import Path

from tritonkit.builders import build_onnx, make_demo_model
from tritonkit.perf import PerfSpec
from tritonkit.perf.sweep import SweepGrid, SweepSettings


def test_a_sweep_of_a_model_with_its_file_gets_valid_data_as_perf_run_derives_it(tmp_path: Path) -> None:
    build_onnx(make_demo_model(tmp_path / "demo.onnx"), name="demo", repo=tmp_path / "repo", runtime="python",
               kind="cpu")
    settings = SweepSettings(sla="p99<=1s", grid=SweepGrid(max_batch_sizes=(1, 4)))
    derived = settings.with_input_data(tmp_path / "repo", "demo", tmp_path / "sweep")
    assert derived.spec is not None and derived.spec.input_data == str(tmp_path / "sweep" / "input_data.json")
    assert json.loads((tmp_path / "sweep" / "input_data.json").read_text())["data"][0]["x"]["shape"] == [16]
    assert derived.spec.shared_memory is None  # placed as each ladder starts, from the server's answer
    assert derived.grid == settings.grid and derived.sla == settings.sla


def test_data_of_the_users_own_or_a_target_without_a_file_is_left_as_it_is(tmp_path: Path) -> None:
    build_onnx(make_demo_model(tmp_path / "demo.onnx"), name="demo", repo=tmp_path / "repo", runtime="python",
               kind="cpu")
    own = SweepSettings(sla="p99<=1s", spec=PerfSpec(model="demo", url="127.0.0.1:8001", input_data="zero"))
    assert own.with_input_data(tmp_path / "repo", "demo", tmp_path / "a") is own
    ensemble = SweepSettings(sla="p99<=1s", target="ensemble")  # the target's folder holds no model file
    assert ensemble.with_input_data(tmp_path / "repo", "demo", tmp_path / "b") is ensemble
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
