"""What a deployment needs to know about a model repository, read from its configs.

The repository is the single source: the sweep writes its winner (instance counts, max batch,
batching window) into each ``config.pbtxt``, so reading the configs back gives the numbers the
manifests, alert rules and dashboards are sized from.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.planner import PlanAssumptions
from tritonkit.repository import ModelRepository, serving_of
from tritonkit.repository.units import dtype_to_numpy

__all__ = [
    "SCALE_OUT_UTILISATION",
    "ModelFacts",
    "RepositoryFacts",
    "model_facts",
    "read_repository",
]

#: Rule of thumb: start scaling out at 60–70 % utilisation, not at 100 %: a new replica takes
#: minutes to schedule, pull and load, and the load keeps rising meanwhile. Taken from the
#: planner's default so the fleet plan and the autoscaler agree.
SCALE_OUT_UTILISATION: float = PlanAssumptions().scale_out_utilisation


@dataclass(frozen=True)
class ModelFacts:
    """One model as a deployment sees it."""

    name: str
    backend: str
    max_batch_size: int
    #: Execution instances in all (a GPU group counts on each GPU it spans; see ``serving_of``).
    instances: int
    uses_gpu: bool
    decoupled: bool
    ensemble: bool
    #: ``dynamic_batching.default_queue_policy.max_queue_size`` (0: unbounded).
    max_queue_size: int
    #: Bytes of the files in the model's folder (weights, engines, code): what each instance loads.
    model_bytes: int = 0
    #: Bytes of one request's inputs and outputs (one batch item), from the config's fixed dims
    #: and data types; None when a dim is variable (-1) or a type has no fixed size (TYPE_STRING).
    io_bytes: int | None = None

    @property
    def concurrency_limit(self) -> int:
        """Requests the model takes at once before its queue must hold them.

        The server-enforced queue bound when the config sets one; otherwise what the model
        executes at once, instances × max batch (a request beyond that only waits).
        """
        if self.max_queue_size > 0:
            return self.max_queue_size
        return max(1, self.instances) * max(1, self.max_batch_size)

    @property
    def is_llm(self) -> bool:
        """A TensorRT-LLM engine (its backend exposes ``nv_trt_llm_*`` metrics)."""
        return self.backend == "tensorrtllm"


@dataclass(frozen=True)
class RepositoryFacts:
    """Every model of a repository, plus where it was read from."""

    root: Path | None
    models: tuple[ModelFacts, ...]

    @property
    def uses_gpu(self) -> bool:
        """True when any model asks for a GPU instance (KIND_GPU, or KIND_AUTO on a GPU machine)."""
        return any(m.uses_gpu for m in self.models)

    @property
    def has_llm(self) -> bool:
        """True when any model runs the TensorRT-LLM backend."""
        return any(m.is_llm for m in self.models)

    @property
    def model_bytes(self) -> int:
        """Bytes of every model's folder together."""
        return sum(m.model_bytes for m in self.models)

    def queued_models(self) -> tuple[ModelFacts, ...]:
        """Models with a queue of their own (ensembles only forward to their steps)."""
        return tuple(m for m in self.models if not m.ensemble)


def _tensor_bytes(dims: Sequence[int], data_type: int) -> int | None:
    """Bytes of one tensor of these dims (one batch item), or None when that is not fixed."""
    if any(d < 0 for d in dims) or data_type in (mc.TYPE_STRING, mc.TYPE_INVALID):
        return None
    size = 2 if data_type == mc.TYPE_BF16 else dtype_to_numpy(data_type).itemsize
    return size * math.prod(dims)


def _io_bytes(config: mc.ModelConfig) -> int | None:
    sizes = [_tensor_bytes(list(t.dims), t.data_type) for t in (*config.input, *config.output)]
    return None if not sizes or None in sizes else sum(s for s in sizes if s is not None)


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def model_facts(config: mc.ModelConfig, *, model_bytes: int = 0) -> ModelFacts:
    """The deployment's view of one parsed config (``model_bytes``: its folder's size on disk)."""
    serving = serving_of(config)
    return ModelFacts(
        name=config.name, backend=config.backend or config.platform, max_batch_size=serving.max_batch_size,
        instances=serving.instances, uses_gpu=serving.uses_gpu, decoupled=serving.decoupled,
        ensemble=serving.ensemble, max_queue_size=serving.max_queue_size,
        model_bytes=model_bytes,
        io_bytes=_io_bytes(config),
    )


def read_repository(root: str | Path, *, models: Sequence[str] = ()) -> RepositoryFacts:
    """Read every model's ``config.pbtxt`` under ``root`` (or only ``models``)."""
    path = Path(root)
    if not path.is_dir():
        raise ConfigError(
            f"model repository {path} is not a folder",
            hint="pass the folder that holds one sub-folder per model (e.g. model_repository)",
        )
    repo = ModelRepository(path)
    names = repo.model_names()
    if models:
        missing = [m for m in models if m not in names]
        if missing:
            raise ConfigError(
                f"{path}: no model named {', '.join(missing)}",
                hint=f"models here: {', '.join(names) or '(none)'}",
            )
        names = [n for n in names if n in models]
    facts = []
    for name in names:
        entry = repo.model(name)
        if not entry.config_path.is_file():
            continue  # a folder without a config is not a model Triton serves from this repository
        config = entry.read_config()
        if not config.name:
            config.name = name
        facts.append(model_facts(config, model_bytes=_folder_bytes(entry.root)))
    if not facts:
        raise ConfigError(
            f"{path}: no model with a config.pbtxt",
            hint="build one first, e.g. tritonkit build onnx model.onnx --name mlp --repo " + str(path),
        )
    return RepositoryFacts(root=path.resolve(), models=tuple(facts))
