"""CPU and memory for a tritonserver pod, derived from the repository it serves.

Requests equal limits (the pod's QoS class is then *Guaranteed*: it is the last to be evicted
under node pressure, and with the kubelet's static CPU manager it gets whole cores, which keeps
latency steady). The figures are rules of thumb from what each part of the server holds:

* **the server itself**: measured at 47 MiB resident for the bundled 2.51 server on a CPU; with
  a GPU add the CUDA context's host memory and Triton's pinned-memory pool (256 MB by default,
  ``--pinned-memory-pool-byte-size``);
* **weights**: every KIND_CPU instance loads its own copy of the model's files; a GPU instance's
  weights live on the GPU, with one host copy while loading;
* **python-backend stubs**: one process per instance (measured at 41 MiB resident with numpy);
* **/dev/shm**: the python backend passes every tensor through a shared-memory region per
  instance (1 MiB by default, growing as needed: ``shm-default-byte-size``); a memory-backed
  ``emptyDir`` counts against the pod's memory limit, so it is sized here and added to it;
* **CPU**: one core per KIND_CPU instance (each executes on its own thread), a quarter of one
  per GPU instance (launches, batching, copies), half a core for the HTTP/gRPC frontends.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from tritonkit.deploy.source import ModelFacts, RepositoryFacts
from tritonkit.errors import ConfigError

__all__ = [
    "PodResources",
    "PodSize",
    "check_quantity",
    "quantity_bytes",
    "pod_resources",
    "shm_bytes",
]

MIB = 1024 * 1024
#: tritonserver without models on a CPU (47 MiB measured), with room for request buffers.
SERVER_BASE_BYTES = 256 * MIB
#: With a GPU: CUDA context host memory (~512 MiB) and the default pinned-memory pool (256 MB).
GPU_SERVER_EXTRA_BYTES = 768 * MIB
#: One python-backend stub process (41 MiB measured with numpy imported).
PYTHON_STUB_BYTES = 64 * MIB
#: The python backend's initial shared-memory region per instance (``shm-default-byte-size``).
PYTHON_SHM_DEFAULT_BYTES = 1 * MIB
#: When a request's size is not fixed by the config (``-1`` dims, strings): assume this per item.
UNKNOWN_IO_BYTES = 1 * MIB
#: /dev/shm is never smaller than this (Docker's default, which the python backend's docs call
#: the least it works with) and is rounded up to a multiple of it.
SHM_STEP_BYTES = 64 * MIB
#: Headroom over the sum: allocator fragmentation, the frontends' buffers under a burst.
HEADROOM = 1.25
SERVER_CPU_M, CPU_INSTANCE_M, GPU_INSTANCE_M = 500, 1000, 250

_QUANTITY_RE = re.compile(r"[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?")


def check_quantity(value: str, field: str) -> str:
    """``value`` if it is a Kubernetes quantity (``500m``, ``2``, ``4Gi``), else a ConfigError naming ``field``."""
    if not _QUANTITY_RE.fullmatch(value) or float(re.sub(r"[^0-9.]", "", value)) <= 0:
        raise ConfigError(f"{field} {value!r} is not a positive Kubernetes quantity",
                          hint="write e.g. --cpu 2 or --cpu 1500m, --memory 4Gi or --memory 512Mi")
    return value


#: What each Kubernetes quantity suffix multiplies by (``m`` is a thousandth).
_SUFFIX_FACTORS = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
                   "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}


def quantity_bytes(value: str, field: str) -> float:
    """A memory quantity (``4Gi``, ``512M``, ``2000000``) in bytes, checked by :func:`check_quantity`."""
    check_quantity(value, field)
    number = re.match(r"[0-9.]+", value)
    assert number is not None  # check_quantity matched the whole text
    return float(number.group(0)) * _SUFFIX_FACTORS[value[number.end():]]


def _shm_override_bytes(value: str) -> int:
    match = re.fullmatch(r"([0-9]+)(Mi|Gi)", value)
    if not match:
        raise ConfigError(f"--shm-size {value!r} is not a whole number of Mi or Gi",
                          hint="write e.g. --shm-size 256Mi or --shm-size 2Gi")
    return int(match.group(1)) * (MIB if match.group(2) == "Mi" else 1024 * MIB)


def _io(m: ModelFacts) -> int:
    return m.io_bytes if m.io_bytes is not None else UNKNOWN_IO_BYTES


def _round_up(value: float, step: int) -> int:
    return max(step, math.ceil(value / step) * step)


def shm_bytes(facts: RepositoryFacts) -> int:
    """``/dev/shm`` for the repository: per python-backend instance its default region plus the
    inputs and outputs of one full batch, twice over (a request arrives while one executes)."""
    need = sum(m.instances * (PYTHON_SHM_DEFAULT_BYTES + 2 * _io(m) * max(1, m.max_batch_size))
               for m in facts.queued_models() if m.backend == "python")
    return _round_up(need, SHM_STEP_BYTES)


@dataclass(frozen=True)
class PodSize:
    """CPU, memory and ``/dev/shm`` of one pod as Kubernetes quantities (None: not given)."""

    cpu: str | None = None
    memory: str | None = None
    shm_size: str | None = None

    def __post_init__(self) -> None:
        for quantity, field in ((self.cpu, "--cpu"), (self.memory, "--memory")):
            if quantity is not None:
                check_quantity(quantity, field)
        if self.shm_size is not None:
            _shm_override_bytes(self.shm_size)

    def as_k8s(self, gpus: int) -> dict[str, dict[str, str]]:
        """The container's ``resources`` (requests equal limits)."""
        amounts = {key: value for key, value in (("cpu", self.cpu), ("memory", self.memory)) if value is not None}
        if gpus:
            amounts["nvidia.com/gpu"] = str(gpus)
        return {"requests": dict(amounts), "limits": dict(amounts)}


@dataclass(frozen=True)
class PodResources:
    """What one pod asks for (requests equal limits: every figure of ``size`` is set), and how it was reached."""

    size: PodSize
    #: One line per part of the sum, for the notes the command prints.
    basis: tuple[str, ...]


def pod_resources(facts: RepositoryFacts, gpus: int, given: PodSize = PodSize()) -> PodResources:
    """Resources for a pod serving ``facts`` with ``gpus`` GPUs; what ``given`` sets overrides the derived figure."""
    cpu, memory, shm_size = given.cpu, given.memory, given.shm_size
    models = facts.queued_models()
    cpu_instances = sum(m.instances for m in models if not m.uses_gpu)
    gpu_instances = sum(m.instances for m in models if m.uses_gpu)
    weights = sum(m.model_bytes * (1 if m.uses_gpu and gpus else max(1, m.instances)) for m in models)
    stubs = sum(m.instances for m in models if m.backend == "python") * PYTHON_STUB_BYTES
    in_flight = sum(m.concurrency_limit * _io(m) for m in models)
    shm = _shm_override_bytes(shm_size) if shm_size else shm_bytes(facts)
    base = SERVER_BASE_BYTES + (GPU_SERVER_EXTRA_BYTES if gpus else 0)
    memory_bytes = _round_up((base + weights + stubs + in_flight + shm) * HEADROOM, SHM_STEP_BYTES)
    cpu_m = SERVER_CPU_M + CPU_INSTANCE_M * cpu_instances + GPU_INSTANCE_M * gpu_instances
    basis = (
        f"memory {memory_bytes // MIB} Mi = {HEADROOM:g} × (server {base // MIB} Mi + weights {weights / MIB:.1f} Mi "
        f"+ {stubs // PYTHON_STUB_BYTES} python stub(s) {stubs // MIB} Mi + in-flight tensors {in_flight / MIB:.1f} Mi "
        f"+ /dev/shm {shm // MIB} Mi)" + (f"; given: {memory}" if memory else ""),
        f"cpu {cpu_m}m = server {SERVER_CPU_M}m + {cpu_instances} CPU instance(s) × {CPU_INSTANCE_M}m "
        f"+ {gpu_instances} GPU instance(s) × {GPU_INSTANCE_M}m" + (f"; given: {cpu}" if cpu else ""),
    )
    size = PodSize(cpu=cpu or f"{cpu_m}m", memory=memory or f"{memory_bytes // MIB}Mi", shm_size=f"{shm // MIB}Mi")
    return PodResources(size, basis)
