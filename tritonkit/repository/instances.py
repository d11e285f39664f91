"""Where a model's instances run: instance groups, rate-limiter resources, and sizing them to the hardware."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._values import COUNT
from tritonkit.errors import ConfigError
from tritonkit.repository.names import check_name

__all__ = ["Hardware", "InstanceGroup", "InstanceKind", "RateLimiterResource", "instance_groups_for"]

InstanceKind = Literal["KIND_AUTO", "KIND_GPU", "KIND_CPU", "KIND_MODEL", "auto", "gpu", "cpu", "model"]


def _kind(kind: str) -> int:
    name = kind.strip().upper()
    if not name.startswith("KIND_"):
        name = "KIND_" + name
    if name not in list(mc.ModelInstanceGroup.Kind.keys()):
        raise ConfigError(f"instance_group.kind: unknown kind {kind!r}",
                          hint="use KIND_CPU, KIND_GPU, KIND_AUTO or KIND_MODEL (or cpu/gpu/auto/model)")
    return int(mc.ModelInstanceGroup.Kind.Value(name))


@dataclass(frozen=True, kw_only=True)
class RateLimiterResource:
    """A rate-limiter resource an instance needs to run (``is_global`` = shared across devices)."""

    name: str
    count: int
    is_global: bool = False


@dataclass(frozen=True, kw_only=True)
class InstanceGroup:
    """``count`` instances of ``kind``; ``gpus`` only with KIND_GPU (or AUTO)."""

    count: int = 1
    kind: InstanceKind = "KIND_CPU"
    gpus: Sequence[int] = ()
    name: str = ""
    resources: Sequence[RateLimiterResource] = ()
    priority: int = 0
    profiles: Sequence[str] = ()
    passive: bool = False
    host_policy: str = ""

    def to_proto(self) -> mc.ModelInstanceGroup:
        """The ``ModelInstanceGroup`` message."""
        COUNT.check(self.count, "instance_group: count")
        if self.name:
            check_name(self.name, "instance group", "instance_group")
        kind = _kind(self.kind)
        if self.gpus and kind not in (mc.ModelInstanceGroup.KIND_GPU, mc.ModelInstanceGroup.KIND_AUTO):
            raise ConfigError(f"instance_group: gpus {list(self.gpus)} given with {mc.ModelInstanceGroup.Kind.Name(kind)}",
                              hint="gpus only applies to KIND_GPU (or KIND_AUTO); drop gpus or change kind")
        msg = mc.ModelInstanceGroup(name=self.name, kind=kind, count=self.count, passive=self.passive,
                                    host_policy=self.host_policy)
        msg.gpus.extend(int(g) for g in self.gpus)
        msg.profile.extend(self.profiles)
        if self.resources or self.priority:
            msg.rate_limiter.priority = self.priority
            for res in self.resources:
                msg.rate_limiter.resources.add(name=res.name, count=res.count, **{"global": res.is_global})
        return msg


@dataclass(frozen=True, kw_only=True)
class Hardware:
    """What a model will run on: CPU cores and GPU ids. ``Hardware.detect()`` reads this machine."""

    cpu_cores: int
    gpus: Sequence[int] = ()

    @classmethod
    def cpu(cls, cores: int | None = None) -> Hardware:
        """A CPU-only target (``cores`` defaults to this machine's usable cores)."""
        return cls(cpu_cores=cores or _usable_cores())

    @classmethod
    def detect(cls) -> Hardware:
        """This machine: usable CPU cores, and GPUs listed by ``nvidia-smi -L`` (none if it is absent)."""
        return cls(cpu_cores=_usable_cores(), gpus=tuple(range(_count_gpus())))


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _count_gpus() -> int:
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return 0
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(1 for line in out.stdout.splitlines() if line.startswith("GPU "))


def instance_groups_for(
    hardware: Hardware,
    *,
    instances_per_gpu: int = 1,
    threads_per_instance: int = 1,
    max_cpu_instances: int | None = None,
) -> list[InstanceGroup]:
    """Instance groups sized to ``hardware``.

    With GPUs: one KIND_GPU group of ``instances_per_gpu`` on every listed GPU (rule of thumb:
    a model gets whole GPUs; a second instance per GPU overlaps copies with compute).
    Without: KIND_CPU with ``cpu_cores // threads_per_instance`` instances, because
    workers beyond the physical cores only slow each other down.
    """
    if hardware.gpus:
        return [InstanceGroup(kind="KIND_GPU", count=max(1, instances_per_gpu), gpus=tuple(hardware.gpus))]
    count = max(1, hardware.cpu_cores // max(1, threads_per_instance))
    if max_cpu_instances is not None:
        count = max(1, min(count, max_cpu_instances))
    return [InstanceGroup(kind="KIND_CPU", count=count)]
