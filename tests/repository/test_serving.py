"""One answer to "what does this config serve": Triton's placement rule, asked by every module.

The pure tests check the rule itself (a KIND_GPU group runs ``count`` on each listed GPU, on every
visible GPU without a list); the server test counts the python-backend stubs the real server
starts for CPU groups (GPU placement cannot run here: no GPU on these machines).
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.pymodels import ADD_SUB_PY, write_python_model
from tritonkit.deploy.source import model_facts
from tritonkit.perf.measure.result import ServedInstanceGroup, ServedModelConfig
from tritonkit.perf.sweep.variants import variant_of
from tritonkit.planner.measured import served_config_from_proto, served_config_from_run
from tritonkit.repository import parse_config, serving_of
from tritonkit.repository.summary import summarize_repository

GPU, CPU, AUTO = mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_CPU, mc.ModelInstanceGroup.KIND_AUTO


def _mixed() -> mc.ModelConfig:
    """2 GPU instances on GPUs [0, 1] plus 1 CPU instance: 2 × 2 + 1 = 5 instances."""
    return mc.ModelConfig(name="mixed", backend="onnxruntime", max_batch_size=8, instance_group=[
        mc.ModelInstanceGroup(kind=GPU, count=2, gpus=[0, 1]), mc.ModelInstanceGroup(kind=CPU, count=1)])


def test_a_gpu_group_runs_its_count_on_each_listed_gpu() -> None:
    serving = serving_of(_mixed())
    assert (serving.instances, serving.gpu_instances, serving.cpu_instances) == (5, 4, 1)
    assert serving.describe() == "5 instances (4 on GPUs 0,1, 1 on CPU)"


def test_a_gpu_group_without_a_list_runs_on_every_visible_gpu() -> None:
    config = mc.ModelConfig(instance_group=[mc.ModelInstanceGroup(kind=GPU, count=3)])
    assert [serving_of(config, gpu_count=n).instances for n in (1, 2, 4)] == [3, 6, 12]


def test_no_group_means_one_per_visible_gpu_or_one_on_the_cpu() -> None:
    config = mc.ModelConfig(backend="onnxruntime")
    assert serving_of(config, gpu_count=4).gpu_instances == 4
    cpu = serving_of(config, gpu_count=0)
    assert (cpu.instances, cpu.uses_gpu, cpu.default_groups) == (1, False, True)
    # The python backend keeps KIND_AUTO on the CPU even where GPUs are visible.
    python = serving_of(mc.ModelConfig(backend="python", instance_group=[mc.ModelInstanceGroup(kind=AUTO, count=2)]),
                        gpu_count=2)
    assert (python.instances, python.uses_gpu) == (2, False)


def test_batching_window_preferred_sizes_and_queue_are_read_once() -> None:
    config = parse_config('name: "m" max_batch_size: 16 dynamic_batching { max_queue_delay_microseconds: 500 '
                          'preferred_batch_size: [4, 8] default_queue_policy { max_queue_size: 32 } }')
    serving = serving_of(config)
    assert (serving.window_us, serving.preferred_batch_sizes, serving.max_queue_size) == (500, (4, 8), 32)
    assert serving_of(mc.ModelConfig(max_batch_size=4)).window_us is None


def test_every_module_that_counts_instances_gives_the_same_answer(tmp_path: Path) -> None:
    config = _mixed()
    served = ServedModelConfig(max_batch_size=8, instance_groups=[
        ServedInstanceGroup(count=2, kind="KIND_GPU", gpus=[0, 1]), ServedInstanceGroup(count=1, kind="KIND_CPU")])
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "config.pbtxt").write_text(str(config))
    [summary] = summarize_repository(tmp_path, gpu_count=2)
    answers = {
        "perf result": served.instance_count,
        "planner (config file)": served_config_from_proto(config, "file").instance_count,
        "planner (recorded run)": served_config_from_run(served).instance_count,
        "deploy": model_facts(config).instances,
        "repo show": summary.instances,
    }
    assert answers == dict.fromkeys(answers, 5)
    # The sweep turns one knob, every group's count; the default variant reads it from the same value.
    assert variant_of(config).instances == serving_of(config).group_count == 2


def _instance_names(server_pid: int, model: str) -> set[str]:
    """The instance names (``<model>_<group>_<n>``) of the stubs the server runs for ``model``."""
    out = subprocess.run(["ps", "-ww", "-o", "args=", "--ppid", str(server_pid)], capture_output=True, text=True,
                         check=False).stdout
    names = set()
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0].endswith("triton_python_backend_stub") and f"/{model}/" in parts[1]:
            names.add(parts[-2])
    return names


CPU_CASES = {
    "two_groups": "instance_group [ { count: 2 kind: KIND_CPU }, { count: 3 kind: KIND_CPU } ]",
    "no_count": "instance_group [ { kind: KIND_CPU } ]",
    "no_group": "",
    "auto_on_cpu": "instance_group [ { count: 2 kind: KIND_AUTO } ]",
}


@pytest.mark.server
def test_the_real_server_runs_as_many_cpu_instances_as_counted(tmp_path: Path, start_server) -> None:  # type: ignore[no-untyped-def]
    config = """name: "{name}" backend: "python" max_batch_size: 8
    input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] }} ]
    {groups}"""
    for name, groups in CPU_CASES.items():
        write_python_model(tmp_path, name, config_pbtxt=config.format(name=name, groups=groups), model_py=ADD_SUB_PY)
    server = start_server(tmp_path)
    for name in CPU_CASES:
        expected = serving_of(parse_config((tmp_path / name / "config.pbtxt").read_text()), gpu_count=0).instances
        deadline = time.monotonic() + 30
        while len(_instance_names(server.pid, name)) < expected and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(_instance_names(server.pid, name)) == expected, name
        # And the config as the server loaded it gives the same count.
        assert serving_of(server.admin.model_config(name), gpu_count=0).instances == expected, name
