"""One way a record (a dataclass) becomes a JSON-ready dict: its fields, in the order declared.

A hand-written ``to_dict`` repeats the field list, so every new field has to be written twice
and a missed one silently drops out of the JSON. :func:`record_dict` walks
``dataclasses.fields`` instead; values a record derives (a property, a summary) are named where
they go, after the field they belong with, so a JSON layout keeps its order.

Standard library only: the planner's formulas, perf and the client all use it, and importing it
loads none of them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["jsonable", "record_dict"]


def jsonable(value: Any) -> Any:
    """``value`` as JSON holds it: a record by its own ``to_dict`` (or :func:`record_dict`), a
    tuple or list as a list, a dict with its values converted; anything else as it is."""
    to_dict = getattr(value, "to_dict", None)
    if callable(to_dict) and not isinstance(value, type):
        return to_dict()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return record_dict(value)
    if isinstance(value, list | tuple):
        return [jsonable(item) for item in value]
    if isinstance(value, dict):
        return {key: jsonable(item) for key, item in value.items()}
    return value


def record_dict(
    record: Any,
    *,
    after: Mapping[str, Mapping[str, Any]] | None = None,
    skip: Collection[str] = (),
) -> dict[str, Any]:
    """``record``'s fields as a JSON-ready dict, in declaration order (values through :func:`jsonable`).

    ``after`` maps a field's name to derived entries written right after it (e.g. a change
    computed from the two fields before); ``skip`` names fields left out.
    """
    extra = after or {}
    out: dict[str, Any] = {}
    for f in dataclasses.fields(record):
        if f.name not in skip:
            out[f.name] = jsonable(getattr(record, f.name))
        out.update(extra.get(f.name, {}))
    return out
