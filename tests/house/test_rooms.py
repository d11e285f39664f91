"""Rooms that stay small while the house grows: no module of the package over 600 lines and no
function over 100, read from the source with ``ast`` (nothing is imported).

A module past the limit is two things; a function past it is a sequence of steps that want names.
Split along a seam a reader can name rather than raising the limits.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tritonkit

PACKAGE = Path(tritonkit.__file__).parent
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 100


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_package_has_modules_to_measure() -> None:
    assert len(_modules()) > 100


def test_no_module_is_over_600_lines() -> None:
    sizes = {path.relative_to(PACKAGE.parent): len(path.read_text().splitlines()) for path in _modules()}
    over = {str(path): lines for path, lines in sizes.items() if lines > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines (split each along a seam): {over}"


def test_no_function_is_over_100_lines() -> None:
    over: dict[str, int] = {}
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    over[f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name}"] = lines
    assert not over, f"functions over {MAX_FUNCTION_LINES} lines (name their steps): {over}"
