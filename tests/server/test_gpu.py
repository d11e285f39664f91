"""The GPU half, on a real NVIDIA GPU: instance groups the server accepts and refuses, the linter's
machine-dependent rules against that server, doctor's GPU line and the catalogue entry of the
card it runs on.

These tests need an NVIDIA GPU and its driver, so they are skipped on machines without one (the
project's CI has none); they were run on a GPU machine with the bundled tritonserver, and
nothing in them is faked.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tests.support.pymodels import ADD_SUB_CONFIG, ADD_SUB_PY, write_python_model
from tritonkit.errors import ModelLoadError
from tritonkit.repository.lint import Severity, lint_repository
from tritonkit.repository.spec import Hardware


def _gpu_count() -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        listing = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in listing.stdout.splitlines() if line.startswith("GPU "))


GPUS = _gpu_count()

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.server,
    pytest.mark.skipif(GPUS == 0, reason="needs an NVIDIA GPU (nvidia-smi lists none on this machine)"),
]


def _gpu_config(name: str, gpus: str) -> str:
    """The add/sub model's config with one KIND_GPU instance (``gpus`` names the devices)."""
    cpu_group = "instance_group [ { count: 1 kind: KIND_CPU } ]"
    config = ADD_SUB_CONFIG.format(name=name)
    assert cpu_group in config
    return config.replace(cpu_group, f"instance_group [ {{ count: 1 kind: KIND_GPU {gpus} }} ]")


def test_this_machine_is_detected_with_its_gpus() -> None:
    assert Hardware.detect().gpus == tuple(range(GPUS))


def test_gpu_instances_on_the_last_gpu_load_serve_and_lint_clean(tmp_path: Path, start_server) -> None:  # type: ignore[no-untyped-def]
    from tritonkit.client import Client

    last = GPUS - 1
    write_python_model(tmp_path, "on_gpu", config_pbtxt=_gpu_config("on_gpu", f"gpus: [ {last} ]"), model_py=ADD_SUB_PY)
    report = lint_repository(tmp_path, target=f"gpu:{GPUS}")
    assert [f for f in report.findings if f.severity is Severity.ERROR] == []
    server = start_server(tmp_path, model_control="explicit")
    server.load_model("on_gpu")
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    with Client(server.grpc_url) as client:
        out = client.infer("on_gpu", {"INPUT0": a, "INPUT1": np.ones_like(a)})
    np.testing.assert_array_equal(out["OUTPUT0"], a + 1)


def test_a_gpu_id_past_the_last_gpu_is_refused_by_the_server_and_flagged_by_lint(
    tmp_path: Path, start_server
) -> None:  # type: ignore[no-untyped-def]
    write_python_model(tmp_path, "past_gpu", config_pbtxt=_gpu_config("past_gpu", f"gpus: [ {GPUS} ]"),
                       model_py=ADD_SUB_PY)
    report = lint_repository(tmp_path, target=f"gpu:{GPUS}")
    assert "TK603" in {f.rule_id for f in report.findings if f.severity is Severity.ERROR}
    server = start_server(tmp_path, model_control="explicit")
    with pytest.raises(ModelLoadError, match="gpu"):
        server.load_model("past_gpu")


def test_doctor_names_the_gpu() -> None:
    from tritonkit.provision.doctor import run_checks

    gpu = next(c for c in run_checks() if c.name == "GPU")
    assert gpu.ok, gpu
    listing = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20, check=True).stdout
    assert listing.splitlines()[0].strip() in gpu.detail


def test_the_catalogue_knows_the_card_by_the_name_nvidia_smi_prints() -> None:
    from tritonkit.planner.catalogue import find_gpu

    row = subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=20, check=True).stdout.splitlines()[0]
    name, memory_mib = (part.strip() for part in row.split(","))
    spec = find_gpu(name)
    # The driver reports a little less than the label (reserved memory): within 5 % of the catalogue's GiB.
    assert spec.memory.value is not None
    assert abs(float(memory_mib) / 1024 - spec.memory.value) / spec.memory.value < 0.05


@pytest.mark.perf_analyzer
def test_a_ladder_on_gpu_instances_records_the_card_and_the_planner_plans_per_gpu(
    tmp_path: Path, start_server
) -> None:  # type: ignore[no-untyped-def]
    from tritonkit.perf import LadderPlan, PerfSpec, run_ladder
    from tritonkit.planner.measured_llm import load_measurement

    repo = tmp_path / "repo"
    write_python_model(repo, "on_gpu", config_pbtxt=_gpu_config("on_gpu", "gpus: [ 0 ]"), model_py=ADD_SUB_PY)
    server = start_server(repo)
    ladder = run_ladder(
        PerfSpec(model="on_gpu", url=server.grpc_url),
        LadderPlan(levels=(1, 2), step_window_ms=500, plateau_gain=None),
        results_dir=tmp_path / "run",
        metrics_url=server.metrics_url,
    )
    assert ladder.error is None, ladder.error
    hardware = ladder.result.metadata.server_hardware
    assert hardware is not None and hardware.gpu_count == GPUS
    names = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                           text=True, timeout=20, check=True).stdout.split("\n")[0].strip()
    assert names in [gpu.name for gpu in hardware.gpus]
    config = ladder.result.metadata.model_config
    assert config is not None and [g.kind for g in config.instance_groups] == ["KIND_GPU"]

    measurement = load_measurement(tmp_path / "run" / "result.json")
    assert measurement.hardware.kind == "gpu"
    assert measurement.hardware.unit == ("GPU" if GPUS == 1 else f"{GPUS}-GPU server")
    assert names in (measurement.hardware.model or "")
