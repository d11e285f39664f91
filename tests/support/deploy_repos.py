"""The repositories the deploy tests size manifests from (fixtures; import them into a test module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.pymodels import write_python_model
from tests.support.sweep_models import SLEEPY_PY, write_sleepy
from tritonkit.deploy import RepositoryFacts, read_repository

__all__ = ["GPU_CONFIG", "cpu_facts", "gpu_facts"]

#: A model asking for GPUs (2 KIND_GPU instances × max batch 8: concurrency limit 16). Its
#: backend is not bundled here: only its config is read, nothing is served.
GPU_CONFIG = """
name: "detector"
backend: "onnxruntime"
max_batch_size: 8
input [ { name: "x" data_type: TYPE_FP32 dims: [ 3 ] } ]
output [ { name: "y" data_type: TYPE_FP32 dims: [ 3 ] } ]
dynamic_batching { max_queue_delay_microseconds: 5000 }
instance_group [ { count: 2 kind: KIND_GPU } ]
"""


@pytest.fixture
def cpu_facts(tmp_path: Path) -> RepositoryFacts:
    """The sweep's winner as written back to the config: 2 instances × max batch 4 → limit 8."""
    repo = tmp_path / "cpu_repo"
    write_sleepy(repo, "slow", instances=2, max_batch=4)
    return read_repository(repo)


@pytest.fixture
def gpu_facts(tmp_path: Path) -> RepositoryFacts:
    """One KIND_GPU model (see GPU_CONFIG)."""
    repo = tmp_path / "gpu_repo"
    write_python_model(repo, "detector", config_pbtxt=GPU_CONFIG, model_py=SLEEPY_PY)
    return read_repository(repo)
