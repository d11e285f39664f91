"""Names a package exports without importing their modules until first use (PEP 562).

A package declares its lazy names once, as the imports of its ``if TYPE_CHECKING:`` block — what the
type checker reads — and :func:`lazy_exports` reads that block from the package's own source (with
``ast``: nothing is imported) to learn which module defines each name.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["lazy_exports", "type_checking_imports"]


def type_checking_imports(source: str) -> dict[str, str]:
    """Name → defining module, for each ``from M import name`` under a module-level ``if TYPE_CHECKING:``."""
    names: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                if isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
                    names.update({alias.name: statement.module for alias in statement.names if not alias.asname})
    return names


def lazy_exports(namespace: dict[str, Any]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A module ``__getattr__`` and ``__dir__`` for the package whose ``globals()`` is ``namespace``.

    Each name its ``if TYPE_CHECKING:`` block imports is imported from its module on first use and cached
    in ``namespace``, so the import happens once.
    """
    package = namespace["__name__"]
    names = type_checking_imports(Path(namespace["__file__"]).read_text(encoding="utf-8"))

    def __getattr__(attr: str) -> Any:
        module = names.get(attr)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {attr!r}")
        value = getattr(importlib.import_module(module), attr)
        namespace[attr] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
