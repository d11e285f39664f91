"""The main job, end to end: build the default model, serve it, load-test it, judge it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2

from tritonkit.cli import main


def test_demo_builds_serves_measures_and_passes_a_generous_sla(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(
        main, ["demo", "--sla", "p99<=2000ms,errors==0", "--concurrency", "1,2", "--duration-s", "1.5"]
    )
    assert result.exit_code == 0, result.output
    assert "verdict status=pass" in result.output

    config = model_config_pb2.ModelConfig()
    text_format.Parse((tmp_path / "model_repository/demo_mlp/config.pbtxt").read_text(), config)
    assert config.name == "demo_mlp"
    assert 5000 <= config.dynamic_batching.max_queue_delay_microseconds <= 20000

    runs = list((tmp_path / "results").glob("*-demo_mlp"))
    assert len(runs) == 1
    saved = json.loads((runs[0] / "result.json").read_text())
    assert [step["load_value"] for step in saved["steps"] if step["stable"]][:2] == [1.0, 2.0]
    assert all(step["throughput_per_s"] > 0 for step in saved["steps"] if step["stable"])
    assert (runs[0] / "report.html").stat().st_size > 1000


def test_demo_with_an_sla_typo_fails_before_building_anything(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["demo", "--sla", "p98<=50ms"])
    assert result.exit_code == 2
    assert "p99" in result.output  # the did-you-mean
    assert not (tmp_path / "model_repository").exists()
