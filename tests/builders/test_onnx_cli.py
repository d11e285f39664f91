"""``tritonkit build onnx`` from the command line: files written, tables printed, options honoured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from click.testing import CliRunner, Result
from tritonclient.grpc import model_config_pb2 as mc

from tests.support import onnx_models as models
from tritonkit.builders import make_demo_model
from tritonkit.cli import main
from tritonkit.repository import read_config


def _invoke(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def test_build_commands_have_help_with_an_example() -> None:
    for args in (["build"], ["build", "onnx"], ["build", "tensorrt"]):
        result = _invoke(*args, "--help")
        assert result.exit_code == 0, result.output
        assert "Example" in result.output and "tritonkit build" in result.output


def test_build_onnx_writes_a_servable_python_runtime_entry(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    result = _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(tmp_path / "repo"),
                     "--runtime", "python", "--batch-window", "10ms", "--instances", "2", "--kind", "cpu",
                     "--max-queue-size", "64")
    assert result.exit_code == 0, result.output
    config = read_config(tmp_path / "repo" / "demo" / "config.pbtxt")
    assert config.name == "demo" and config.backend == "python" and config.max_batch_size == 8
    assert config.dynamic_batching.max_queue_delay_microseconds == 10_000
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 64
    assert config.instance_group[0].count == 2 and config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
    assert config.parameters["onnx_model_file"].string_value == "model.onnx"
    # Two instances share the machine's cores instead of each taking all of them.
    assert int(config.parameters["intra_op_num_threads"].string_value) >= 1
    assert (tmp_path / "repo" / "demo" / "1" / "model.onnx").read_bytes() == model.read_bytes()
    assert (tmp_path / "repo" / "demo" / "1" / "model.py").is_file()
    assert "IR 8, opsets ai.onnx 17" in result.stdout
    assert "batch consistency: 4 samples as one batch vs one by one" in result.stdout
    assert "max abs err" in result.stdout and "wrote " in result.stdout


def test_onnxruntime_runtime_writes_the_ort_platform(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    result = _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(tmp_path / "repo"),
                     "--runtime", "onnxruntime", "--kind", "gpu", "--ort-tensorrt", "--cuda-graphs", "--fp16")
    assert result.exit_code == 0, result.output
    config = read_config(tmp_path / "repo" / "demo" / "config.pbtxt")
    assert config.platform == "onnxruntime_onnx" and config.backend == ""
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU
    accelerators = config.optimization.execution_accelerators.gpu_execution_accelerator
    assert [a.name for a in accelerators] == ["tensorrt", "cuda"]
    assert accelerators[0].parameters["precision_mode"] == "FP16"
    assert accelerators[1].parameters["enable_cuda_graph"] == "1"
    assert sorted(p.name for p in (tmp_path / "repo" / "demo" / "1").iterdir()) == ["model.onnx"]


def test_fp16_build_prints_the_reference_table(tmp_path: Path) -> None:
    model = models.save(models.make_cnn(), tmp_path / "cnn.onnx")
    result = _invoke("build", "onnx", str(model), "--name", "cnn16", "--repo", str(tmp_path / "repo"),
                     "--runtime", "python", "--fp16")
    assert result.exit_code == 0, result.output
    assert "ONNX Runtime vs reference (original FP32 model) (4 samples)" in result.stdout
    assert "fp16: 4 tensor(s) converted" in result.stdout
    row = next(line for line in result.stdout.splitlines() if line.strip().startswith("logits"))
    assert row.split()[-1] == "ok"


def test_json_output_is_machine_readable(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    result = _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(tmp_path / "repo"),
                     "--runtime", "python", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["name"] == "demo" and data["runtime"] == "python" and data["max_batch_size"] == 8
    assert data["verified"] is True
    assert data["verification"][0]["outputs"][0]["output"] == "y"


def test_window_outside_5_to_20_ms_warns_unless_forced(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = str(tmp_path / "repo")
    warned = _invoke("build", "onnx", str(model), "--name", "a", "--repo", repo, "--runtime", "python",
                     "--batch-window", "50ms")
    assert warned.exit_code == 0 and "warning: batch window 50ms is outside 5ms–20ms" in warned.stderr
    forced = _invoke("build", "onnx", str(model), "--name", "b", "--repo", repo, "--runtime", "python",
                     "--batch-window", "50ms", "--force")
    assert forced.exit_code == 0 and "warning" not in forced.stderr
    assert read_config(tmp_path / "repo" / "b" / "config.pbtxt").dynamic_batching.max_queue_delay_microseconds == 50_000


def test_a_new_version_is_added_beside_the_others_and_the_config_follows_it(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    assert _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(repo), "--runtime", "python").exit_code == 0
    result = _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(repo), "--runtime", "python",
                     "--max-batch-size", "2", "--version", "3")
    assert result.exit_code == 0, result.output
    assert "added version 3 beside 1" in result.stdout
    assert read_config(repo / "demo" / "config.pbtxt").max_batch_size == 2
    assert sorted(p.name for p in (repo / "demo").iterdir()) == ["1", "3", "config.pbtxt"]


def test_samples_file_drives_verification_and_warmup(tmp_path: Path) -> None:
    model = models.save(models.make_dynamic_spatial_cnn(), tmp_path / "dyn.onnx")
    samples = tmp_path / "samples.npz"
    np.savez(samples, img=np.random.default_rng(0).standard_normal((2, 3, 10, 12)).astype(np.float32))
    result = _invoke("build", "onnx", str(model), "--name", "dyn", "--repo", str(tmp_path / "repo"),
                     "--runtime", "python", "--samples", str(samples))
    assert result.exit_code == 0, result.output
    assert "batch consistency: 2 samples as one batch vs one by one" in result.stdout
    config = read_config(tmp_path / "repo" / "dyn" / "config.pbtxt")
    assert list(config.model_warmup[0].inputs["img"].dims) == [3, 10, 12]


def test_no_verify_says_what_was_not_checked(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    result = _invoke("build", "onnx", str(model), "--name", "demo", "--repo", str(tmp_path / "repo"),
                     "--runtime", "python", "--no-verify")
    assert result.exit_code == 0, result.output
    assert "verification skipped (--no-verify)" in result.stderr
    assert "max abs err" not in result.stdout
