"""The main job, end to end: build the default model, serve it, sweep its configurations, keep the
winner in a copy, print the verdict. Real server, real perf_analyzer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from tritonkit.cli import main


def _config(path: Path) -> model_config_pb2.ModelConfig:
    config = model_config_pb2.ModelConfig()
    text_format.Parse(path.read_text(), config)
    return config


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_demo_sweeps_a_copy_writes_the_winner_there_and_leaves_the_built_repository_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["demo", "--sla", "p99<=2000ms,errors==0", "--concurrency", "1,2", "--window-ms", "300"]
    )
    assert result.exit_code == 0, result.output
    assert "verdict status=pass" in result.output
    assert "sweep_result exit_code=0" in result.output

    built = tmp_path / "model_repository" / "demo_mlp" / "config.pbtxt"
    config = _config(built)
    assert config.name == "demo_mlp" and config.instance_group[0].count == 1
    assert 5000 <= config.dynamic_batching.max_queue_delay_microseconds <= 20000

    sweeps = list((tmp_path / "results").glob("*-demo_mlp-sweep"))
    assert len(sweeps) == 1
    summary = json.loads((sweeps[0] / "sweep.json").read_text())
    winner = summary["winner"]
    assert winner is not None and summary["ratio_to_default"] > 0
    assert summary["default"]["throughput_per_s"] > 0  # the default config was one of the variants
    tuned = sweeps[0] / "model_repository" / "demo_mlp"
    written = _config(tuned / "config.pbtxt")
    if summary["write_back"] is None:
        # The commit rule: the config served (the default) is in the winner's tie (within the
        # tolerance or the noise, short windows on a busy machine), so nothing is written — the copy
        # keeps the built config, and the verdict says so.
        assert "default" in summary["tied"] and winner["id"] in summary["tied"], summary
        assert "the config served is in the winner" in result.output and written == config
    else:
        assert written.instance_group[0].count == winner["instances"]
        assert written.dynamic_batching.max_queue_delay_microseconds == winner["window_us"]
    backups = list(tuned.glob("config.pbtxt.orig-*"))
    # The sweep never touched the built repository: what it replaced in the copy is the builder's file.
    original = backups[0] if backups else tuned / "config.pbtxt"
    assert original.read_bytes() == built.read_bytes()
    assert (sweeps[0] / "report.md").is_file() and (sweeps[0] / "sweep.png").is_file()
    # The demo's ONNX model runs on the python stand-in here: every result says so, and the sweep says
    # once that its winner is the stand-in's and how to measure the real backend.
    assert summary["runtime"]["backend"] == "python" and summary["runtime"]["stand_in"] is True
    assert all(v["runtime"]["stand_in"] for v in summary["variants"])
    warned = [w for w in summary["warnings"] if "python stand-in" in w]
    assert len(warned) == 1 and "--backend-dir" in warned[0]
    assert result.output.count("this winner is the stand-in") == 1
    assert "served by the python stand-in" in (sweeps[0] / "report.md").read_text()


def test_demo_with_an_sla_typo_fails_before_building_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo", "--sla", "p98<=50ms"])
    assert result.exit_code == 2
    assert "p99" in result.output  # the did-you-mean
    assert not (tmp_path / "model_repository").exists()
