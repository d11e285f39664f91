"""One line per model: what ``tritonkit repo show`` prints for a repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError
from tritonkit.repository.instances import Hardware
from tritonkit.repository.layout import ModelRepository
from tritonkit.repository.serving import serving_of

__all__ = ["ModelSummary", "summarize_repository"]


@dataclass(frozen=True)
class ModelSummary:
    """The essentials of one model's config, or why the config could not be read.

    ``instances`` is the total instance count on this machine's GPUs (see
    :func:`~tritonkit.repository.serving.serving_of`); ``default_instances`` says the config names
    no instance group, so the count is Triton's default placement.
    """

    name: str
    versions: list[int]
    error: str | None = None
    backend: str = ""
    max_batch_size: int = 0
    inputs: int = 0
    outputs: int = 0
    scheduling: str = "none"
    instances: int = 1
    default_instances: bool = False
    window_us: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: name and versions, then either ``error`` or the config fields."""
        data: dict[str, Any] = {"name": self.name, "versions": self.versions}
        if self.error is not None:
            data["error"] = self.error
            return data
        data.update({"backend": self.backend, "max_batch_size": self.max_batch_size, "inputs": self.inputs,
                     "outputs": self.outputs, "scheduling": self.scheduling, "instances": self.instances})
        if self.default_instances:
            data["default_instances"] = True
        if self.window_us is not None:
            data["window_us"] = self.window_us
        return data

    def to_line(self) -> str:
        """``name  backend  max_batch N  versions [..] scheduling [window Nus] instances N``."""
        if self.error is not None:
            return f"{self.name:<24} ERROR {self.error}"
        window = f" window {self.window_us}us" if self.window_us is not None else ""
        default = " (default)" if self.default_instances else ""
        return (f"{self.name:<24} {self.backend:<14} max_batch {self.max_batch_size:<4} "
                f"versions {self.versions} {self.scheduling}{window} instances {self.instances}{default}")


def _summarize(repository: ModelRepository, name: str, gpu_count: int) -> ModelSummary:
    entry = repository.model(name)
    versions = entry.versions()
    try:
        cfg = entry.read_config()
    except ConfigError as exc:
        return ModelSummary(name=name, versions=versions, error=exc.message)
    serving = serving_of(cfg, gpu_count=gpu_count)
    return ModelSummary(
        name=name,
        versions=versions,
        backend=cfg.backend or cfg.platform,
        max_batch_size=cfg.max_batch_size,
        inputs=len(cfg.input),
        outputs=len(cfg.output),
        scheduling=cfg.WhichOneof("scheduling_choice") or "none",
        instances=serving.instances,
        default_instances=serving.default_groups,
        window_us=serving.window_us,
    )


def summarize_repository(path: Path | str, *, gpu_count: int | None = None) -> list[ModelSummary]:
    """A summary of every model in the repository at ``path``, by name.

    Instances are counted for ``gpu_count`` visible GPUs (default: this machine's).
    """
    repository = ModelRepository(Path(path))
    gpus = gpu_count if gpu_count is not None else len(Hardware.detect().gpus)
    return [_summarize(repository, name, gpus) for name in repository.model_names()]
