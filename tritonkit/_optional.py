"""Optional dependencies, imported on use: a missing one is a :class:`MissingComponentError` with its install hint."""

from __future__ import annotations

import importlib
from typing import Any

from tritonkit.errors import MissingComponentError

__all__ = ["require_module"]


def require_module(name: str, message: str, hint: str) -> Any:
    """``import name``; where it is not installed, :class:`MissingComponentError` with ``message`` and ``hint``."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise MissingComponentError(message, hint=hint) from exc
