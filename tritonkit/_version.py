"""tritonkit's version, in a module of its own: every layer may read it without importing the front door."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"
