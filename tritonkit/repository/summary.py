"""One line per model: what ``tritonkit repo show`` prints for a repository."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError
from tritonkit.repository.layout import ModelRepository

__all__ = ["ModelSummary", "summarize_repository"]


@dataclass(frozen=True)
class ModelSummary:
    """The essentials of one model's config, or why the config could not be read.

    ``instances`` is the total instance count, or ``"default"`` when the config names no
    instance group (Triton then picks one per GPU, or one or two on CPU by backend).
    """

    name: str
    versions: list[int]
    error: str | None = None
    backend: str = ""
    max_batch_size: int = 0
    inputs: int = 0
    outputs: int = 0
    scheduling: str = "none"
    instances: int | str = "default"
    window_us: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict: name and versions, then either ``error`` or the config fields."""
        data: dict[str, Any] = {"name": self.name, "versions": self.versions}
        if self.error is not None:
            data["error"] = self.error
            return data
        data.update({"backend": self.backend, "max_batch_size": self.max_batch_size, "inputs": self.inputs,
                     "outputs": self.outputs, "scheduling": self.scheduling, "instances": self.instances})
        if self.window_us is not None:
            data["window_us"] = self.window_us
        return data

    def to_line(self) -> str:
        """``name  backend  max_batch N  versions [..] scheduling [window Nus] instances N``."""
        if self.error is not None:
            return f"{self.name:<24} ERROR {self.error}"
        window = f" window {self.window_us}us" if self.window_us is not None else ""
        return (f"{self.name:<24} {self.backend:<14} max_batch {self.max_batch_size:<4} "
                f"versions {self.versions} {self.scheduling}{window} instances {self.instances}")


def _summarize(repository: ModelRepository, name: str) -> ModelSummary:
    entry = repository.model(name)
    versions = entry.versions()
    try:
        cfg = entry.read_config()
    except ConfigError as exc:
        return ModelSummary(name=name, versions=versions, error=exc.message)
    return ModelSummary(
        name=name,
        versions=versions,
        backend=cfg.backend or cfg.platform,
        max_batch_size=cfg.max_batch_size,
        inputs=len(cfg.input),
        outputs=len(cfg.output),
        scheduling=cfg.WhichOneof("scheduling_choice") or "none",
        # A group without a count gets one instance from Triton.
        instances=sum(max(g.count, 1) for g in cfg.instance_group) if cfg.instance_group else "default",
        window_us=cfg.dynamic_batching.max_queue_delay_microseconds if cfg.HasField("dynamic_batching") else None,
    )


def summarize_repository(path: Path | str) -> list[ModelSummary]:
    """A summary of every model in the repository at ``path``, by name."""
    repository = ModelRepository(Path(path))
    return [_summarize(repository, name) for name in repository.model_names()]
