"""Field-by-field differences between two configs, or two repositories.

Configs are flattened to ``field path → value``: map entries are keyed by their
key (``parameters["k"].string_value``) and named tensors by name
(``input["INPUT0"].dims``), so reordering the inputs is not reported as a change.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from google.protobuf.message import Message
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository.layout import ModelRepository
from tritonkit.repository.pbtxt import is_repeated

__all__ = ["FieldChange", "ModelDiff", "diff_configs", "diff_repositories", "flatten_config"]

# Repeated messages that carry a name: compared by name, not by position.
_KEYED_BY_NAME = {"input", "output", "model_warmup"}


@dataclass(frozen=True)
class FieldChange:
    """One difference: ``kind`` is ``added`` (only in new), ``removed`` (only in old) or ``changed``."""

    path: str
    kind: Literal["added", "removed", "changed"]
    old: Any = None
    new: Any = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"path": self.path, "kind": self.kind, "old": self.old, "new": self.new}

    def __str__(self) -> str:
        if self.kind == "added":
            return f"+ {self.path}: {self.new!r}"
        if self.kind == "removed":
            return f"- {self.path}: {self.old!r}"
        return f"~ {self.path}: {self.old!r} -> {self.new!r}"


@dataclass(frozen=True)
class ModelDiff:
    """Differences for one model between two repositories; ``status`` says whether it is on both sides."""

    model: str
    status: Literal["added", "removed", "changed", "same"]
    changes: tuple[FieldChange, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {"model": self.model, "status": self.status, "changes": [c.to_dict() for c in self.changes]}


def _scalar(fd: Any, value: Any) -> Any:
    if fd.enum_type is not None:
        return fd.enum_type.values_by_number[value].name if value in fd.enum_type.values_by_number else value
    return value


def _walk(msg: Message, prefix: str, out: dict[str, Any]) -> None:
    for fd, value in msg.ListFields():
        base = f"{prefix}.{fd.name}" if prefix else fd.name
        if fd.message_type is not None and fd.message_type.GetOptions().map_entry:
            value_fd = fd.message_type.fields_by_name["value"]
            for key in sorted(value):
                item = f'{base}["{key}"]' if isinstance(key, str) else f"{base}[{key}]"
                if value_fd.message_type is not None:
                    before = len(out)
                    _walk(value[key], item, out)
                    if len(out) == before:
                        out[item] = {}
                else:
                    out[item] = _scalar(value_fd, value[key])
        elif is_repeated(fd):
            if fd.message_type is None:
                out[base] = [_scalar(fd, v) for v in value]
                continue
            for index, element in enumerate(value):
                name = getattr(element, "name", "") if fd.name in _KEYED_BY_NAME else ""
                item = f'{base}["{name}"]' if name else f"{base}[{index}]"
                before = len(out)
                _walk(element, item, out)
                if len(out) == before:
                    out[item] = {}
        elif fd.message_type is not None:
            before = len(out)
            _walk(value, base, out)
            if len(out) == before:  # an empty message that is present still means something
                out[base] = {}
        else:
            out[base] = _scalar(fd, value)


def flatten_config(config: mc.ModelConfig) -> dict[str, Any]:
    """``field path → value`` for every field set in ``config``."""
    out: dict[str, Any] = {}
    _walk(config, "", out)
    return out


def diff_configs(old: mc.ModelConfig, new: mc.ModelConfig) -> list[FieldChange]:
    """Every field that differs between ``old`` and ``new``, in path order."""
    a, b = flatten_config(old), flatten_config(new)
    changes: list[FieldChange] = []
    for path in sorted(a.keys() | b.keys()):
        if path not in b:
            changes.append(FieldChange(path, "removed", old=a[path]))
        elif path not in a:
            changes.append(FieldChange(path, "added", new=b[path]))
        elif a[path] != b[path]:
            changes.append(FieldChange(path, "changed", old=a[path], new=b[path]))
    return changes


def diff_repositories(old: Path | str, new: Path | str) -> list[ModelDiff]:
    """Compare every model's config between two repositories (by folder name)."""
    left, right = ModelRepository(old), ModelRepository(new)
    for repo in (left, right):
        if not repo.root.is_dir():
            raise ConfigError(f"{repo.root}: not a folder", hint="give two repository folders or two config files")
    names_a, names_b = set(left.model_names()), set(right.model_names())
    result: list[ModelDiff] = []
    for name in sorted(names_a | names_b):
        if name not in names_b:
            result.append(ModelDiff(name, "removed"))
        elif name not in names_a:
            result.append(ModelDiff(name, "added"))
        else:
            changes = diff_configs(left.model(name).read_config(), right.model(name).read_config())
            result.append(ModelDiff(name, "changed" if changes else "same", tuple(changes)))
    return result
