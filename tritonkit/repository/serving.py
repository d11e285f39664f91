"""What one model config serves: its instances (per GPU, by kind), batch ceiling, batching window, queue.

The one answer to "how many instances does this config run?", asked by the perf result, the
planner, the deployment and the sweep. Triton's rule (model_configuration.md, "Instance Groups"):

* a ``KIND_GPU`` group runs ``count`` instances on **each** GPU in its ``gpus`` list, and on
  every visible GPU when the list is empty;
* a ``KIND_CPU`` or ``KIND_MODEL`` group runs ``count`` instances in all;
* ``KIND_AUTO`` is ``KIND_GPU`` where a GPU is visible, else ``KIND_CPU`` (the python backend
  keeps it on the CPU);
* a group without ``count`` runs one; a config without groups runs one instance per visible
  GPU, or one on the CPU (seen on tritonserver 2.51 for the python backend).

A config the server loaded already lists its GPUs; a file may not, so the number of visible
GPUs is a parameter (``gpu_count``; 1 when unknown, which counts a GPU group once).
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.repository.pbtxt import enum_name

__all__ = ["PlacedGroup", "Serving", "serving_of"]

_KIND = mc.ModelInstanceGroup


@dataclass(frozen=True)
class PlacedGroup:
    """One instance group as it is placed: its resolved ``kind``, ``count`` per device, the GPUs it uses."""

    kind: str
    count: int
    gpus: tuple[int, ...] = ()
    #: How many GPUs the group spans (``len(gpus)``, or the visible count when the config lists none).
    gpu_span: int = 0

    @property
    def on_gpu(self) -> bool:
        """True for a GPU group."""
        return self.kind == "KIND_GPU"

    @property
    def instances(self) -> int:
        """Instances this group runs in all: ``count`` on each GPU it spans, or ``count`` on the CPU."""
        return self.count * self.gpu_span if self.on_gpu else self.count


@dataclass(frozen=True)
class Serving:
    """What a model config serves, counted by Triton's placement rule (see the module docstring).

    ``window_us`` is ``None`` without a dynamic batcher; ``max_queue_size`` 0 means unbounded.
    ``default_groups`` is True when the config named no instance group (Triton's default applies).
    """

    max_batch_size: int
    groups: tuple[PlacedGroup, ...]
    window_us: int | None = None
    preferred_batch_sizes: tuple[int, ...] = ()
    max_queue_size: int = 0
    default_groups: bool = False
    decoupled: bool = False
    ensemble: bool = False

    @property
    def instances(self) -> int:
        """Model instances in all (0 for an ensemble, which only forwards to its steps)."""
        return 0 if self.ensemble else sum(g.instances for g in self.groups)

    @property
    def gpu_instances(self) -> int:
        """Instances on GPUs."""
        return 0 if self.ensemble else sum(g.instances for g in self.groups if g.on_gpu)

    @property
    def cpu_instances(self) -> int:
        """Instances on the CPU (``KIND_CPU`` and ``KIND_MODEL`` groups)."""
        return self.instances - self.gpu_instances

    @property
    def uses_gpu(self) -> bool:
        """True when any instance runs on a GPU."""
        return self.gpu_instances > 0

    @property
    def dynamic_batching(self) -> bool:
        """True when the config has a dynamic batcher."""
        return self.window_us is not None

    @property
    def group_count(self) -> int:
        """The ``count`` of the first group: the knob a sweep turns (it sets every group's count)."""
        return self.groups[0].count if self.groups else 1

    def describe(self) -> str:
        """``5 instances (4 on GPUs 0,1, 1 on CPU)``."""
        total = self.instances
        text = f"{total} instance{'s' if total != 1 else ''}"
        gpus = sorted({gpu for g in self.groups if g.on_gpu for gpu in g.gpus})
        if self.gpu_instances and self.cpu_instances:
            where = f" on GPUs {','.join(map(str, gpus))}" if gpus else " on GPUs"
            text += f" ({self.gpu_instances}{where}, {self.cpu_instances} on CPU)"
        elif self.gpu_instances:
            text += f" on GPU{'s' if len(gpus) != 1 else ''} {','.join(map(str, gpus))}" if gpus else " on GPU"
        return text


def serving_of(config: mc.ModelConfig, *, gpu_count: int = 1) -> Serving:
    """What ``config`` serves on a machine with ``gpu_count`` visible GPUs (0: a CPU-only machine)."""
    visible = max(0, gpu_count)
    cpu_only_auto = config.backend == "python"  # the python backend runs KIND_AUTO on the CPU
    groups = list(config.instance_group) or [_KIND(kind=_KIND.KIND_AUTO, count=1)]
    placed = []
    for group in groups:
        kind = group.kind
        if kind == _KIND.KIND_AUTO:
            kind = _KIND.KIND_GPU if (visible or group.gpus) and not cpu_only_auto else _KIND.KIND_CPU
        gpus = tuple(int(g) for g in group.gpus) if kind == _KIND.KIND_GPU else ()
        span = (len(gpus) or visible) if kind == _KIND.KIND_GPU else 0
        placed.append(PlacedGroup(kind=enum_name(_KIND.Kind, kind, field="instance_group.kind"), count=max(1, int(group.count)), gpus=gpus, gpu_span=span))
    batching = config.HasField("dynamic_batching")
    queue = 0
    if batching and config.dynamic_batching.HasField("default_queue_policy"):
        queue = int(config.dynamic_batching.default_queue_policy.max_queue_size)
    return Serving(
        max_batch_size=int(config.max_batch_size),
        groups=tuple(placed),
        window_us=int(config.dynamic_batching.max_queue_delay_microseconds) if batching else None,
        preferred_batch_sizes=tuple(int(b) for b in config.dynamic_batching.preferred_batch_size) if batching else (),
        max_queue_size=queue,
        default_groups=not config.instance_group,
        decoupled=bool(config.model_transaction_policy.decoupled),
        ensemble=config.platform == "ensemble",
    )
