"""Dataclasses read back from JSON dicts: checked against their annotations, then built.

:func:`read_record` is the one way a stored record (``result.json``, ``llm_result.json``, a
baseline) is read: JSON parsed, every field's type checked, every number checked to be finite
and in range (:func:`check_numbers`), then built; any failure is a ``ConfigError`` naming the
file and the field.

:func:`check_types` finds the first value whose type does not fit (a stored ``result.json`` is
read by arithmetic, so a latency written as text must be refused with its field's path, not met
later as a ``TypeError``). :class:`JsonDataclass` gives every record of the schema one
``from_dict``: unknown keys ignored (forward compatible), missing ones take their defaults,
nested records (and lists and dicts of them) built in turn from the annotations.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import types
import typing
from collections.abc import Iterable
from dataclasses import fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:  # typing.Self is new in 3.11; annotations are not evaluated at run time
    from typing_extensions import Self

from tritonkit._fs import read_json
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError

__all__ = ["MAX_RATE_PER_S", "JsonDataclass", "check_numbers", "check_types", "read_record"]

#: Above this a stored rate (``*_per_s``) is no measurement: no single load generator gets there.
MAX_RATE_PER_S = 1e9

# Fields named with these endings hold a duration, a count or a rate: never below zero. (Not every
# ``*_s``: a time-line position ``t_s`` may fall before the first request.)
_NON_NEGATIVE = ("_ms", "_us", "_per_s", "duration_s", "wall_s", "recovery_s", "count", "_bytes", "_tokens")
# Free-form parts of a stored record that no reader does arithmetic on.
_FREE_FORM = frozenset({"extra", "raw"})


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
    if origin is tuple:
        return tuple(_convert(item, entry) for item, entry in zip(_tuple_items(hint, len(value)), value, strict=True))
    if origin is dict:
        _key, item = typing.get_args(hint)
        return {str(key): _convert(item, entry) for key, entry in value.items()}
    if hint is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _tuple_items(hint: Any, length: int) -> tuple[Any, ...]:
    """The annotation of each of ``length`` entries of a ``tuple[...]`` hint (``tuple[X, ...]`` or fixed)."""
    args = typing.get_args(hint)
    if len(args) == 2 and args[1] is Ellipsis:
        return (args[0],) * length
    return args if len(args) == length else (Any,) * length


_TYPE_WORDS: dict[Any, str] = {int: "a whole number", float: "a number", str: "text", bool: "true or false"}


def _describe_type(hint: Any) -> str:
    if hint in _TYPE_WORDS:
        return _TYPE_WORDS[hint]
    return "a list" if typing.get_origin(hint) in (list, tuple) else "an object"


def _first_error(entries: Iterable[tuple[Any, Any, str]]) -> str | None:
    """The first misfit among ``(hint, value, where)`` entries, checked in order; ``None`` when all fit."""
    return next((wrong for hint, value, where in entries if (wrong := _type_error(hint, value, where)) is not None),
                None)


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
            ok = ok and (isinstance(value, int) or value.is_integer())
    elif hint in (str, bool):
        ok = isinstance(value, hint)
    elif origin is list:
        if not isinstance(value, list):
            ok = False
        else:
            (item,) = typing.get_args(hint)
            return _first_error((item, entry, f"{where}[{index}]") for index, entry in enumerate(value))
    elif origin is tuple:
        args = typing.get_args(hint)
        fixed = not (len(args) == 2 and args[1] is Ellipsis)
        if not isinstance(value, list | tuple) or (fixed and len(value) != len(args)):
            ok = False
        else:
            items = zip(_tuple_items(hint, len(value)), value, strict=True)
            return _first_error((item, entry, f"{where}[{index}]") for index, (item, entry) in enumerate(items))
    elif origin is dict:
        if not isinstance(value, dict):
            ok = False
        else:
            _key, item = typing.get_args(hint)
            return _first_error((item, entry, f"{where}.{key}") for key, entry in value.items())
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


def check_numbers(data: Any, where: str = "") -> str | None:
    """The first number in ``data`` that no measurement can be, described (``None``: all fine).

    NaN and infinities are refused anywhere (outside the free-form ``extra``); a field whose name
    says it holds a duration, count or rate must not be negative, and a rate (``*_per_s``) must
    stay below :data:`MAX_RATE_PER_S`.
    """
    if isinstance(data, dict):
        for key, value in data.items():
            if key in _FREE_FORM:
                continue
            path = f"{where}.{key}" if where else str(key)
            wrong = _number_error(str(key), value, path)
            if wrong is None:
                wrong = check_numbers(value, path)
            if wrong is not None:
                return wrong
    elif isinstance(data, list):
        for index, entry in enumerate(data):
            wrong = check_numbers(entry, f"{where}[{index}]")
            if wrong is not None:
                return wrong
    elif isinstance(data, int | float) and not isinstance(data, bool) and not _finite(data):
        return f"field '{where}' is {excerpt(data)}, not a finite number"
    return None


def _finite(value: float) -> bool:
    """Whether ``value`` is a finite float, or a whole number a float holds (JSON's digits may exceed one)."""
    return abs(value) <= sys.float_info.max if isinstance(value, int) else math.isfinite(value)


def _number_error(key: str, value: Any, where: str) -> str | None:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return None
    if not _finite(value):
        return f"field '{where}' is {excerpt(value)}, not a finite number"
    if key.endswith(_NON_NEGATIVE) and value < 0:
        return f"field '{where}' is {value:g}, below zero"
    if key.endswith("_per_s") and value > MAX_RATE_PER_S:
        return f"field '{where}' is {value:g}, above {MAX_RATE_PER_S:g}/s: not a measurement"
    return None


R = TypeVar("R")


def read_record(cls: type[R], path: str | os.PathLike[str], *, what: str, hint: str) -> R:
    """Read the stored record of dataclass ``cls`` at ``path`` (its ``from_dict`` builds it).

    Raises ``ConfigError`` naming the file and the field when the JSON is missing or malformed,
    a field has the wrong type, a number is NaN, infinite or out of range, or the schema does not fit.
    """
    source = Path(path)
    data = read_json(source, what=what, hint=hint)
    wrong = (check_types(cls, data) or check_numbers(data)) if isinstance(data, dict) else None
    if wrong is not None:
        raise ConfigError(f"{what} {source}: {wrong}", hint=f"fix or remove that field, or {hint}")
    try:
        return cls.from_dict(data)  # type: ignore[attr-defined]
    except ConfigError as exc:
        # A schema's own refusal (not a result at all, a newer schema) names no file: add it.
        if str(source) in exc.message:
            raise
        raise ConfigError(f"{what} {source}: {exc.message}", hint=exc.hint) from exc
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"{what} {source} does not match its schema: {exc!r}", hint=hint) from exc
