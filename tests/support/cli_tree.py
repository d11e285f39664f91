"""The command tree as the fuzz tests walk it: every command of ``tritonkit.cli:main`` and how its
parameters are written on a command line."""

from __future__ import annotations

from collections.abc import Iterator

import click

__all__ = ["leaves", "written_name"]


def leaves(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group`` that is not itself a group, with its path (``("perf", "run")``)."""
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from leaves(command, (*prefix, name))
        else:
            yield (*prefix, name), command


def written_name(param: click.Parameter) -> str:
    """How a user writes ``param``: its longest option (``--duration-s``) or its argument's name."""
    return max(param.opts, key=len) if isinstance(param, click.Option) else param.human_readable_name
