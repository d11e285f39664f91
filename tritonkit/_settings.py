"""What settings values share: the command line reads its option defaults from them.

A frozen settings dataclass (``SweepSettings``, ``LoadTestSettings``) is the contract between a
command and the library; :func:`field_default` lets the command's ``--help`` show the dataclass's own
defaults, so the two cannot drift.
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["field_default"]


def field_default(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name`` (a factory's value when it has one)."""
    for item in dataclasses.fields(cls):
        if item.name == name:
            if item.default is not dataclasses.MISSING:
                return item.default
            if item.default_factory is not dataclasses.MISSING:
                return item.default_factory()
    raise KeyError(name)
