"""Dataclasses read back from JSON dicts: checked against their annotations, then built.

:func:`check_types` finds the first value whose type does not fit (a stored ``result.json`` is
read by arithmetic, so a latency written as text must be refused with its field's path, not met
later as a ``TypeError``). :class:`JsonDataclass` gives every record of the schema one
``from_dict``: unknown keys ignored (forward compatible), missing ones take their defaults,
nested records (and lists and dicts of them) built in turn from the annotations.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import fields
from typing import Any, Self

__all__ = ["JsonDataclass", "check_types"]


class JsonDataclass:
    """Mixin for a dataclass that is read back from the JSON its ``asdict`` wrote."""

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Build from ``data``: known keys only, nested records converted by their annotations."""
        hints = _hints(cls)
        return cls(**{f.name: _convert(hints[f.name], data[f.name])
                      for f in fields(cls) if f.name in data})  # type: ignore[arg-type]


_HINTS: dict[type, dict[str, Any]] = {}


def _hints(cls: type) -> dict[str, Any]:
    """``cls``'s resolved annotations, worked out once per class (each step of a run is one record)."""
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _convert(hint: Any, value: Any) -> Any:
    """``value`` as annotation ``hint`` wants it: records built, containers copied, numbers as floats."""
    if value is None:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        real = [o for o in typing.get_args(hint) if o is not type(None)]
        return _convert(real[0], value) if len(real) == 1 else value
    if isinstance(hint, type) and issubclass(hint, JsonDataclass):
        return hint.from_dict(value)
    if origin is list:
        (item,) = typing.get_args(hint)
        return [_convert(item, entry) for entry in value]
    if origin is dict:
        _key, item = typing.get_args(hint)
        return {str(key): _convert(item, entry) for key, entry in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _describe_type(hint: Any) -> str:
    if hint is int:
        return "a whole number"
    if hint is float:
        return "a number"
    if hint is str:
        return "text"
    if hint is bool:
        return "true or false"
    origin = typing.get_origin(hint)
    if origin is list:
        return "a list"
    return "an object"


def _type_error(hint: Any, value: Any, where: str) -> str | None:
    """Why ``value`` at ``where`` does not fit the annotation ``hint`` (``None``: it fits)."""
    if hint is Any:
        return None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        errors = [_type_error(o, value, where) for o in real]
        return None if any(e is None for e in errors) else errors[0]
    if hint in (int, float):
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
        if hint is int:
            ok = ok and float(value).is_integer()
    elif hint in (str, bool):
        ok = isinstance(value, hint)
    elif origin is list:
        if not isinstance(value, list):
            ok = False
        else:
            (item,) = typing.get_args(hint)
            for index, entry in enumerate(value):
                wrong = _type_error(item, entry, f"{where}[{index}]")
                if wrong is not None:
                    return wrong
            return None
    elif origin is dict:
        if not isinstance(value, dict):
            ok = False
        else:
            _key, item = typing.get_args(hint)
            for key, entry in value.items():
                wrong = _type_error(item, entry, f"{where}.{key}")
                if wrong is not None:
                    return wrong
            return None
    elif dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return check_types(hint, value, where) if isinstance(value, dict) else (
            f"field '{where}' is {json.dumps(value)}, not an object"
        )
    else:
        return None
    return None if ok else f"field '{where}' is {json.dumps(value)}, not {_describe_type(hint)}"


def check_types(cls: type[Any], data: dict[str, Any], where: str = "") -> str | None:
    """The first field of ``data`` whose value does not fit dataclass ``cls``'s annotation, described.

    Unknown keys are ignored (as ``from_dict`` ignores them); ``None`` means every known field fits.
    """
    if not isinstance(data, dict):
        return f"'{where or cls.__name__}' is {json.dumps(data)}, not an object"
    hints = typing.get_type_hints(cls)
    for f in fields(cls):
        if f.name in data:
            wrong = _type_error(hints[f.name], data[f.name], f"{where}.{f.name}" if where else f.name)
            if wrong is not None:
                return wrong
    return None
