"""``SweepSettings``: what a library sweep derives from the settings alone, before any server starts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.builders import build_onnx, make_demo_model
from tritonkit.errors import ConfigError
from tritonkit.perf import PerfSpec
from tritonkit.perf.sweep import SweepGrid, SweepSettings, SweepStore
from tritonkit.perf.sweep.joint_run import joint_record


def test_a_sweep_of_a_model_with_its_file_gets_valid_data_as_perf_run_derives_it(tmp_path: Path) -> None:
    build_onnx(make_demo_model(tmp_path / "demo.onnx"), name="demo", repo=tmp_path / "repo", runtime="python",
               kind="cpu")
    settings = SweepSettings(sla="p99<=1s", grid=SweepGrid(max_batch_sizes=(1, 4)))
    derived = settings.with_input_data(tmp_path / "repo", "demo", tmp_path / "sweep")
    assert derived.spec is not None and derived.spec.input_data == str(tmp_path / "sweep" / "input_data.json")
    assert json.loads((tmp_path / "sweep" / "input_data.json").read_text())["data"][0]["x"]["shape"] == [16]
    assert derived.spec.shared_memory == "system"  # the sweep's server is local: outputs stay out of perf_analyzer
    assert derived.grid == settings.grid and derived.sla == settings.sla


def test_data_of_the_users_own_or_a_target_without_a_file_is_left_as_it_is(tmp_path: Path) -> None:
    build_onnx(make_demo_model(tmp_path / "demo.onnx"), name="demo", repo=tmp_path / "repo", runtime="python",
               kind="cpu")
    own = SweepSettings(sla="p99<=1s", spec=PerfSpec(model="demo", url="127.0.0.1:8001", input_data="zero"))
    assert own.with_input_data(tmp_path / "repo", "demo", tmp_path / "a") is own
    ensemble = SweepSettings(sla="p99<=1s", target="ensemble")  # the target's folder holds no model file
    assert ensemble.with_input_data(tmp_path / "repo", "demo", tmp_path / "b") is ensemble
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_fingerprint_at_the_defaults_is_the_record_a_folder_holds_from_before() -> None:
    # Old sweep folders resume: at the defaults the record has exactly the keys it always had.
    assert set(SweepSettings(sla="p99<=1s").record()) == {"mode", "levels", "step_window_ms", "warmup_s", "max_trials"}


@pytest.mark.parametrize(("changed", "key"), [
    ({"rate_tolerance": 0.3, "request_rate": "10,20"}, "rate_tolerance"),
    ({"max_gpu_memory_mb": 2000.0}, "max_gpu_memory_mb"),
    ({"headroom": 0.2}, "headroom"),
])
def test_every_setting_that_changes_a_judgement_changes_the_fingerprint(changed: dict[str, Any], key: str) -> None:
    base = SweepSettings(sla="p99<=1s", request_rate=changed.get("request_rate"))
    other = SweepSettings(sla="p99<=1s", **changed)
    assert other.record()[key] == changed[key] and key not in base.record()
    assert other.record() != base.record()


def test_a_closed_loop_is_offered_no_rate_so_its_tolerance_does_not_invalidate_a_resume() -> None:
    assert SweepSettings(sla="p99<=1s", rate_tolerance=0.3).record() == SweepSettings(sla="p99<=1s").record()


def test_the_joint_record_holds_the_headroom_too() -> None:
    bases = {"a": mc.ModelConfig(name="a", backend="python")}
    records = [joint_record(bases, {"a": 1.0}, {"a": "p99<=1s"}, SweepSettings(sla="p99<=1s", headroom=h))
               for h in (0.0, 0.2)]
    assert "headroom" not in records[0] and records[1]["headroom"] == 0.2


def test_a_folder_recorded_under_another_rate_tolerance_is_refused_naming_it(tmp_path: Path) -> None:
    store = SweepStore(tmp_path)
    store.begin({"model": "m", **SweepSettings(sla="p99<=1s", request_rate="10,20").record()})
    with pytest.raises(ConfigError, match="rate_tolerance"):
        store.begin({"model": "m", **SweepSettings(sla="p99<=1s", request_rate="10,20", rate_tolerance=0.5).record()})


def test_every_ladder_stops_by_the_plans_plateau_rule_two_flat_steps_under_five_percent_for_a_sweep() -> None:
    plan = SweepSettings(sla="p99<=1s").ladder_plan()
    assert (plan.plateau_gain, plan.plateau_patience) == (0.05, 2)  # what the joint ladder held by hand before
    rule = plan.plateau()
    assert [rule.stops(t) for t in (100.0, 104.0, 150.0, 151.0, 152.0)] == [False, False, False, False, True]
    never = replace(plan, plateau_gain=None).plateau()
    assert not any(never.stops(t) for t in (100.0, 100.0, 100.0))
