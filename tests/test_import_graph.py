"""No import circle in the package: each module's imports, read from its source, form no cycle.

Three kinds of import are told apart (an ``ast`` walk, nothing is imported):

* module level: run when the module is imported;
* ``if TYPE_CHECKING:``: read by the type checker only, but still a dependency of the design — a
  circle hidden there is a circle (the shared thing belongs in a module both can import);
* inside a function: run on first call. These defer a cost (matplotlib, an optional dependency,
  a subcommand's modules) and are allowed for that, but must not close a circle either: moving an
  import into a function to break a cycle hides it, it does not remove it.

Module-level and type-checking imports together must form no cycle; adding the function-level
ones must not make one. Imports of names by string (``tritonkit._lazy``'s ``import_module``) are not
edges: they are how the front door defers loading its subpackages.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import tritonkit

PACKAGE = Path(tritonkit.__file__).parent


@dataclass
class Imports:
    """The package modules one module imports, by kind."""

    module_level: set[str] = field(default_factory=set)
    type_checking: set[str] = field(default_factory=set)
    in_function: set[str] = field(default_factory=set)


def _module_names(root: Path, package: str) -> dict[str, Path]:
    names = {}
    for path in root.rglob("*.py"):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: Mapping[str, Path]) -> set[str]:
    """The known modules an import statement loads: ``from a.b import c`` is ``a.b.c`` when that
    is a module, else ``a.b`` (a name defined in it)."""
    if isinstance(node, ast.Import):
        wanted = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
            base = ".".join([*parts, *([node.module] if node.module else [])])
        wanted = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    found = set()
    for name in wanted:
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name != module:
            found.add(name)
    return found


def import_graph(root: Path, package: str) -> dict[str, Imports]:
    """Every module of the package at ``root`` → the package modules it imports, by kind."""
    known = _module_names(root, package)
    graph: dict[str, Imports] = {}
    for module, path in known.items():
        imports = graph.setdefault(module, Imports())
        is_package = path.name == "__init__.py"

        def walk(node: ast.AST, in_function: bool, type_checking: bool, module: str = module,
                 imports: Imports = imports, is_package: bool = is_package) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                    walk(child, True, type_checking)
                elif isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                    walk(child, in_function, True)
                elif isinstance(child, (ast.Import, ast.ImportFrom)):
                    kind = (imports.in_function if in_function
                            else imports.type_checking if type_checking else imports.module_level)
                    kind |= _targets(child, module, is_package, known)
                else:
                    walk(child, in_function, type_checking)

        walk(ast.parse(path.read_text(encoding="utf-8")), False, False)
    return graph


def cycles(edges: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The import circles: strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


@pytest.fixture(scope="module")
def graph() -> dict[str, Imports]:
    return import_graph(PACKAGE, "tritonkit")


def test_module_level_and_type_checking_imports_form_no_circle(graph: dict[str, Imports]) -> None:
    edges = {m: i.module_level | i.type_checking for m, i in graph.items()}
    assert sum(len(e) for e in edges.values()) > 500  # the walk saw the package's imports
    assert cycles(edges) == []


def test_imports_inside_functions_close_no_circle_either(graph: dict[str, Imports]) -> None:
    edges = {m: i.module_level | i.type_checking | i.in_function for m, i in graph.items()}
    assert any(i.in_function for i in graph.values())  # there are some, and they were read
    assert cycles(edges) == []


def test_the_check_finds_a_circle_hidden_under_type_checking_or_in_a_function(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.sub import b\n")
    (pkg / "sub" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import X\n"
        "def f():\n    from ..c import y\n")
    (pkg / "c.py").write_text("import pkg.sub.b\n")
    found = import_graph(pkg, "pkg")
    assert found["pkg.sub.b"].type_checking == {"pkg.a"}
    assert found["pkg.sub.b"].in_function == {"pkg.c"}
    assert found["pkg.c"].module_level == {"pkg.sub.b"}
    assert cycles({m: i.module_level | i.type_checking for m, i in found.items()}) == [["pkg.a", "pkg.sub.b"]]
    assert cycles({m: i.in_function | i.module_level for m, i in found.items()}) == [["pkg.c", "pkg.sub.b"]]
