"""The commands the documentation shows, read from its pages, and the click tree they must exist in.

A command is a ``$ tritonkit …`` line (with its ``\\`` continuation lines) in a ```` ```console ```` block of a
page under docs/. Each such block is preceded by one HTML comment that says who runs it::

    <!-- run-by: tests/docs/test_examples.py::test_the_lint_page_commands_run -->
    <!-- needs: gpu -->          (or: cluster, a running server)
"""

from __future__ import annotations

import ast
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click

from tests.support.paths import ROOT
from tritonkit.cli import main

DOCS = ROOT / "docs"
NEEDS = ("gpu", "cluster", "a running server")
_BLOCK = re.compile(r"(?:<!--\s*(?P<marker>[^>]*?)\s*-->\s*\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    page: str  # relative to docs/
    line: int
    lang: str
    marker: str | None  # "run-by: …", "needs: …" or None
    commands: tuple[tuple[str, ...], ...]  # each `$ ` line's argv, continuation lines joined

    @property
    def where(self) -> str:
        return f"docs/{self.page}:{self.line}"


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def _commands(body: str) -> tuple[tuple[str, ...], ...]:
    commands, current = [], ""
    for line in body.splitlines():
        if current:
            current += " " + line.strip()
        elif line.startswith("$ "):
            current = line[2:].strip()
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
        else:
            commands.append(tuple(shlex.split(current, comments=True)))
            current = ""
    return tuple(commands)


def blocks() -> list[Block]:
    """Every fenced block of every page, with the marker comment just above it."""
    found = []
    for path in pages():
        text = path.read_text()
        for match in _BLOCK.finditer(text):
            line = text.count("\n", 0, match.start("lang")) + 1
            found.append(Block(str(path.relative_to(DOCS)), line, match["lang"], match["marker"],
                               _commands(match["body"])))
    return found


def tritonkit_commands(block: Block) -> list[tuple[str, ...]]:
    return [argv[1:] for argv in block.commands if argv and argv[0] == "tritonkit"]


def commands_run_by(test: str) -> list[tuple[str, ...]]:
    """The tritonkit argv of every block whose marker names ``tests/docs/test_examples.py::<test>``."""
    marker = f"run-by: tests/docs/test_examples.py::{test}"
    found = [argv for block in blocks() if block.marker == marker for argv in tritonkit_commands(block)]
    assert found, f"no docs block is marked '{marker}'"
    return found


@dataclass(frozen=True)
class Resolved:
    path: tuple[str, ...]  # the subcommand path, e.g. ("perf", "sweep")
    command: click.Command
    options: tuple[str, ...]  # every option flag the argv gives, as written (without =VALUE)


def resolve(argv: tuple[str, ...]) -> Resolved:
    """Walk ``argv`` down the click tree; refuse an unknown subcommand or an option the command lacks."""
    command: click.Command = main
    path: list[str] = []
    rest = list(argv)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        name = rest.pop(0)
        assert name in command.commands, f"`tritonkit {' '.join(path)}` has no subcommand {name!r}"
        command, path = command.commands[name], [*path, name]
    known = {flag for param in command.params for flag in (*param.opts, *param.secondary_opts)} | {"--help"}
    options = tuple(token.split("=", 1)[0] for token in rest if token.startswith("-") and token != "-")
    unknown = [flag for flag in options if flag not in known]
    assert not unknown, f"`tritonkit {' '.join(path)}` has no option {unknown}"
    return Resolved(tuple(path), command, options)


def source_of_test(node_id: str) -> str:
    """The source of test ``path::name`` (a class's method as ``path::Class::name``), with the source of
    every module-level function of that file it calls (its helpers), so a test that runs its command
    through a helper such as ``_invoke("compare", …)`` still shows the command."""
    file, *names = node_id.split("::")
    path = ROOT / file
    assert path.is_file(), f"{file} does not exist"
    tree = ast.parse(path.read_text())
    scope: list[ast.stmt] = tree.body
    node: ast.AST | None = None
    for name in names:
        node = next((n for n in scope if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name), None)
        assert node is not None, f"{file} has no {'::'.join(names)}"
        scope = node.body  # type: ignore[attr-defined]
    source = path.read_text()
    parts = [ast.get_source_segment(source, node) or ""]
    helpers = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef) and not n.name.startswith("test")}
    called = {c.func.id for c in ast.walk(node) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)}
    parts += [ast.get_source_segment(source, helpers[name]) or "" for name in sorted(called & helpers.keys())]
    return "\n".join(parts)


def string_tokens(source: str) -> set[str]:
    """Every whitespace-separated word of every string literal in ``source`` (a flag also without its
    ``=VALUE``): what a test passes to the CLI, however it spells the argv."""
    tokens: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            for word in node.value.split():
                tokens |= {word, word.split("=", 1)[0]}
    return tokens
