"""Several versions of one model share one ``config.pbtxt``: check a new version agrees with the others.

Triton serves the versions its version policy selects (by default only the latest), all through
the one configuration of the model folder. A new version may change batching window or instances
(the configuration is per model, so the new values apply to every version), but not what clients
send and receive (the inputs' and outputs' names, types and shapes, and whether requests batch) nor
the backend that runs the version folders.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository.pbtxt import enum_name

__all__ = ["check_versions_agree", "merged_config"]


def _io(config: mc.ModelConfig) -> dict[tuple[str, str], tuple[str, list[int]]]:
    """``(role, name) → (dtype, full shape)``; the batch axis shows as -1 when the model batches."""
    batch = [-1] if config.max_batch_size > 0 else []
    found = {}
    for role, tensors in (("input", config.input), ("output", config.output)):
        for tensor in tensors:
            dtype = enum_name(mc.DataType, tensor.data_type, field=f"{role} {tensor.name!r} data_type")
            found[(role, tensor.name)] = (dtype, [*batch, *tensor.dims])
    return found


def _runtime(config: mc.ModelConfig) -> str:
    return " / ".join(f"{key} {value}" for key, value in (("backend", config.backend), ("platform", config.platform))
                      if value) or "no backend"


def _text(entry: tuple[str, list[int]] | None) -> str:
    if entry is None:
        return "absent"
    return f"{entry[0]} [{', '.join(str(d) for d in entry[1])}]"


def check_versions_agree(existing: mc.ModelConfig, new: mc.ModelConfig, *, model: str, versions: Sequence[int],
                         config_path: Path) -> None:
    """Raise :class:`ConfigError` naming the model, tensor and both sides when ``new`` changes the I/O."""
    kept = ", ".join(str(v) for v in versions)
    fix = (f"give the new build its own --name, or build it with the same inputs and outputs as version(s) {kept}; "
           "to change them for good, remove the old version folders first")
    old_runs, new_runs = _runtime(existing), _runtime(new)
    if old_runs != new_runs:
        raise ConfigError(
            f"model {model!r}: version(s) {kept} ({config_path}) run on {old_runs} and the new build on {new_runs}; "
            "one config.pbtxt serves every version, so the old ones would stop loading",
            hint="build with the same runtime (--runtime), or give the new build its own --name")
    if (existing.max_batch_size > 0) != (new.max_batch_size > 0):
        raise ConfigError(
            f"model {model!r}: version(s) {kept} ({config_path}) have max_batch_size {existing.max_batch_size} "
            f"and the new build has {new.max_batch_size}: batching would change for every version", hint=fix)
    if existing.max_batch_size > 0 and new.max_batch_size > existing.max_batch_size:
        raise ConfigError(
            f"model {model!r}: the new build's max_batch_size {new.max_batch_size} exceeds the "
            f"{existing.max_batch_size} that version(s) {kept} were built for ({config_path})",
            hint=f"build with --max-batch-size {existing.max_batch_size}, or use another --name")
    old_io, new_io = _io(existing), _io(new)
    for key in sorted(set(old_io) | set(new_io)):
        if old_io.get(key) != new_io.get(key):
            role, name = key
            raise ConfigError(
                f"model {model!r}: {role} {name!r} is {_text(old_io.get(key))} in version(s) {kept} "
                f"({config_path}) but {_text(new_io.get(key))} in the new build", hint=fix)


def merged_config(existing: mc.ModelConfig, new: mc.ModelConfig) -> mc.ModelConfig:
    """The new configuration, keeping the existing version policy (which versions Triton serves)."""
    merged = mc.ModelConfig()
    merged.CopyFrom(new)
    if existing.HasField("version_policy"):
        merged.version_policy.CopyFrom(existing.version_policy)
    return merged
