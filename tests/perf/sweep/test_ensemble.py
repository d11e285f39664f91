"""Sweeping a composing model with an ensemble as the target of the load, on the real server.

The ensemble (made here, python backend) runs ``pre`` — the sleepy model, whose best config is
known by construction (two instances, batches of four) — then ``post``, an identity. The sweep
changes ``pre``'s instances and batching while perf_analyzer loads the ensemble, as one would
tune the TensorRT-LLM repository's preprocessing and postprocessing behind its ensemble.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.pymodels import write_python_model
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.repository import read_config

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

POST_CONFIG = """
name: "post"
backend: "python"
max_batch_size: 16
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { max_queue_delay_microseconds: 0 }
instance_group [ { count: 1 kind: KIND_CPU } ]
"""
POST_PY = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(
            r, "INPUT0").as_numpy())]) for r in requests]
"""
ENSEMBLE_CONFIG = """
name: "ens"
platform: "ensemble"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
ensemble_scheduling { step [
  { model_name: "pre" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" }
    output_map { key: "OUTPUT0" value: "mid" } },
  { model_name: "post" model_version: -1 input_map { key: "INPUT0" value: "mid" }
    output_map { key: "OUTPUT0" value: "OUTPUT0" } }
] }
"""


def _repo(root: Path) -> Path:
    repo = root / "repo"
    write_sleepy(repo, "pre", window_us=None)  # 1 instance, max batch 4, no batcher
    write_python_model(repo, "post", config_pbtxt=POST_CONFIG, model_py=POST_PY)
    (repo / "ens" / "1").mkdir(parents=True)
    (repo / "ens" / "config.pbtxt").write_text(ENSEMBLE_CONFIG.strip() + "\n")
    return repo


def test_a_composing_model_is_swept_under_the_ensembles_load_and_its_winner_written_back(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    ensemble_before = (repo / "ens" / "config.pbtxt").read_bytes()
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(repo), "pre", "--target", "ens", "--sla", "p99<=60ms", "--instances", "1,2",
        "--max-batch-size", "1,4", "--out", str(tmp_path / "out"), "--json",
        "--concurrency", "1,2,4,8", "--window-ms", "300", "--warmup-s", "0.6",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["target"] == "ens" and data["model"] == "pre"
    assert data["winner"]["id"] == "i2-b4-w0", data["winner"]
    assert data["ratio_to_default"] > 1.5  # the default: one instance, no batcher
    # perf_analyzer loaded the ensemble, not the composing model
    argv = json.loads(next((tmp_path / "out" / "variants").glob("*/ladder/step01-*.argv.json")).read_text())
    assert "ens" in argv and argv[argv.index("-m") + 1] == "ens"
    written = read_config(repo / "pre" / "config.pbtxt")
    assert written.instance_group[0].count == 2 and written.max_batch_size == 4
    assert written.HasField("dynamic_batching")
    assert (repo / "ens" / "config.pbtxt").read_bytes() == ensemble_before


def test_a_target_that_does_not_call_the_model_is_refused_before_measuring(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    write_sleepy(repo, "other")
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "other", "--target", "ens", "--sla",
                                       "p99<=60ms", "--instances", "1,2", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "ensemble 'ens'" in result.output and "has no step that calls 'other'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out" / "variants").exists()


def test_a_pinned_composing_model_is_loaded_with_its_pin_and_left_as_written_on_disk(tmp_path: Path) -> None:
    """``post`` is swept behind the ensemble while ``pre`` is held at two instances batching four
    (a pin, not swept): the server loads ``pre`` so, the repository's ``pre`` stays as written."""
    repo = _repo(tmp_path)
    pre_before = (repo / "pre" / "config.pbtxt").read_bytes()
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(repo), "post", "--target", "ens", "--sla", "p99<=200ms", "--instances", "1,2",
        "--pin", "pre.instances=2", "--pin", "pre.max_batch_size=4", "--pin", "pre.batch_window=0",
        "--out", str(tmp_path / "out"), "--json", "--no-write-back",
        "--concurrency", "1,2,4,8", "--window-ms", "300", "--warmup-s", "0.6",
    ])
    assert result.exit_code == 0, result.output
    log = (tmp_path / "out" / "tritonserver.log").read_text(errors="replace")
    assert "pre_0_1" in log  # pre's second instance: loaded with the pin
    assert (repo / "pre" / "config.pbtxt").read_bytes() == pre_before
    settings = json.loads((tmp_path / "out" / "sweep.json").read_text())["settings"]
    assert sorted(settings["composing_pins"]) == ["pre.batch_window=0", "pre.instances=2", "pre.max_batch_size=4"]
    # pre as written (one instance, no batching) carries at most one request per 8 ms, 125 infer/s;
    # with the pin (two instances, batches of four) the ensemble carries well past that even on a
    # busy machine (about 400-570 infer/s at concurrency 8 on a quiet one): the pin took effect.
    assert json.loads(result.output)["default"]["throughput_per_s"] > 1.5 * 125


def test_a_pin_for_a_model_the_ensemble_does_not_call_is_refused_before_measuring(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    write_sleepy(repo, "other")
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "pre", "--target", "ens", "--sla",
                                       "p99<=60ms", "--instances", "1,2", "--pin", "other.instances=2",
                                       "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "--pin other.instances=2: 'other' is not a composing model of 'ens'" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()
