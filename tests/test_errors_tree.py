"""Every exception class of the package lives in ``tritonkit.errors`` and is drawn in its docstring's tree."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import tritonkit
from tritonkit import errors

PACKAGE = Path(tritonkit.__file__).parent

# Python models that tritonserver's python backend runs, shipped as files: they import
# triton_python_backend_utils, which exists only inside the server, so they are read, not imported.
SERVER_SIDE_PREFIXES = ("tritonkit.builders.ort_python_model", "tritonkit.builders.trtllm.pymodels.")

_BRANCH = re.compile(r"^(?P<indent>(?:[│ ] {3})*)(?:├── |└── )(?P<name>\w+)")
_ROOT = re.compile(r"^(?P<name>[A-Z]\w+)(?:\s|$)")


def drawn_tree(docstring: str) -> dict[str, str | None]:
    """Each class drawn in ``docstring``'s trees → the class it is drawn under (``None`` for a root)."""
    parents: dict[str, str | None] = {}
    for block in re.split(r"::\n", docstring)[1:]:
        path: list[str] = []
        for raw in block.splitlines():
            if raw.strip() and not raw.startswith("    "):
                break  # the drawing ended: back to prose
            line = raw[4:]
            if (root := _ROOT.match(line)) is not None:
                path = [root.group("name")]
                parents[path[0]] = None
            elif (branch := _BRANCH.match(line)) is not None:
                depth = len(branch.group("indent")) // 4 + 1
                del path[depth:]
                parents[branch.group("name")] = path[-1]
                path.append(branch.group("name"))
    return parents


def _importable_modules() -> list[str]:
    return [m.name for m in pkgutil.walk_packages(tritonkit.__path__, "tritonkit.")
            if not m.name.endswith("__main__") and not m.name.startswith(SERVER_SIDE_PREFIXES)]


def _server_side_files() -> list[Path]:
    return [*PACKAGE.glob("builders/ort_python_model.py"), *PACKAGE.glob("builders/trtllm/pymodels/*.py")]


def exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined in an importable module of the package, by qualified name."""
    found: dict[str, type[BaseException]] = {}
    for name in _importable_modules():
        module = importlib.import_module(name)
        for value in vars(module).values():
            if inspect.isclass(value) and issubclass(value, BaseException) and value.__module__ == name:
                found[f"{name}.{value.__qualname__}"] = value
            if inspect.isclass(value) and value.__module__ == name:
                # Nested classes too (an exception defined inside a class).
                for inner in vars(value).values():
                    if inspect.isclass(inner) and issubclass(inner, BaseException) and inner.__module__ == name:
                        found[f"{name}.{inner.__qualname__}"] = inner
    return found


def test_the_walk_finds_the_exception_classes_of_the_package() -> None:
    found = exception_classes()
    assert len(_importable_modules()) > 150
    assert "tritonkit.errors.TritonKitError" in found and "tritonkit.errors.StepTimeoutError" in found


def test_every_exception_class_of_the_package_is_defined_in_errors() -> None:
    outside = sorted(name for name, cls in exception_classes().items() if cls.__module__ != "tritonkit.errors")
    assert outside == [], "define these in tritonkit/errors.py (re-export where public)"


def test_no_server_side_model_file_defines_an_exception() -> None:
    files = _server_side_files()
    assert files
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b) for b in node.bases]
                assert not any(re.search(r"(Error|Exception|Exit|Interrupt)$", b) for b in bases), \
                    f"{path.name}: {node.name}({', '.join(bases)})"


def test_the_docstring_draws_every_class_of_errors_under_a_base_it_really_has() -> None:
    drawn = drawn_tree(errors.__doc__ or "")
    defined = {name: cls for name, cls in vars(errors).items()
               if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == "tritonkit.errors"}
    assert sorted(set(defined) - set(drawn)) == [], "draw these in the tree of errors.py's docstring"
    for name, cls in defined.items():
        parent = drawn[name]
        bases = {base.__name__ for base in cls.__bases__}
        if parent is None:
            assert name == "TritonKitError"
        else:
            assert parent in bases, f"{name} is drawn under {parent}, but its bases are {sorted(bases)}"
    assert set(drawn) - set(defined) == {"Exception"}  # the signals' root; every other name is a class here


def test_every_exception_is_exported_from_errors() -> None:
    classes = {name for name, cls in vars(errors).items()
               if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == "tritonkit.errors"}
    assert classes == set(errors.__all__)


def test_a_class_drawn_under_the_wrong_parent_or_left_out_is_seen() -> None:
    doc = """Errors::

    TritonKitError                  root
    ├── ConfigError                 bad input
    │   └── LintError               findings
    └── PerfError                   perf failed
        └── StepError               a step

Signals::

    Exception
    └── CommandExit                 exit
"""
    assert drawn_tree(doc) == {"TritonKitError": None, "ConfigError": "TritonKitError", "LintError": "ConfigError",
                               "PerfError": "TritonKitError", "StepError": "PerfError",
                               "Exception": None, "CommandExit": "Exception"}


@pytest.mark.parametrize(("old_home", "name"), [
    ("tritonkit._lock", "LockedError"),
    ("tritonkit.perf.measure.failures", "StepError"),
    ("tritonkit.perf.measure.failures", "StepTimeoutError"),
    ("tritonkit.perf.sweep.outcome", "StoredResultError"),
    ("tritonkit.perf.sweep", "StoredResultError"),
])
def test_a_public_exception_that_moved_is_still_importable_from_where_it_was(old_home: str, name: str) -> None:
    assert getattr(importlib.import_module(old_home), name) is getattr(errors, name)
