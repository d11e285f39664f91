"""``tritonkit._records``: a record's JSON form is derived from its fields, in the order declared."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tritonkit._records import jsonable, record_dict


@dataclass(frozen=True)
class _Inner:
    a: int
    b: tuple[str, ...] = ()


@dataclass(frozen=True)
class _WithOwnDict:
    x: int

    def to_dict(self) -> dict[str, Any]:
        return {"x": self.x, "twice": 2 * self.x}


@dataclass(frozen=True)
class _Outer:
    name: str
    inner: _Inner
    own: _WithOwnDict
    items: tuple[_Inner, ...] = ()
    table: dict[str, tuple[int, ...]] = field(default_factory=dict)
    hidden: str = "kept out"


def _outer() -> _Outer:
    return _Outer("n", _Inner(1, ("p", "q")), _WithOwnDict(3), (_Inner(2),), {"k": (1, 2)})


def test_fields_come_in_declared_order_as_json_values() -> None:
    data = record_dict(_outer())
    assert list(data) == ["name", "inner", "own", "items", "table", "hidden"]
    assert data["inner"] == {"a": 1, "b": ["p", "q"]}
    assert data["items"] == [{"a": 2, "b": []}]
    assert data["table"] == {"k": [1, 2]}
    assert json.loads(json.dumps(data)) == data


def test_a_nested_record_with_its_own_to_dict_is_written_by_it() -> None:
    assert record_dict(_outer())["own"] == {"x": 3, "twice": 6}
    assert jsonable([_WithOwnDict(1)]) == [{"x": 1, "twice": 2}]


def test_derived_entries_follow_the_field_they_are_named_after_and_skipped_fields_are_left_out() -> None:
    data = record_dict(_outer(), after={"name": {"label": "N"}, "hidden": {"last": True}}, skip=("hidden",))
    assert list(data) == ["name", "label", "inner", "own", "items", "table", "last"]
