"""Every command explains itself: help text with an example, and no traceback for a bad call."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tritonkit.cli import main


def _commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found += _commands(command, path)
    return found


ALL_COMMANDS = _commands(main)


def test_the_cli_has_the_foundation_commands() -> None:
    assert ("serve",) in ALL_COMMANDS and ("doctor",) in ALL_COMMANDS


@pytest.mark.parametrize("path", ALL_COMMANDS, ids=lambda p: " ".join(p))
def test_every_command_has_help_with_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Example" in result.output, f"tritonkit {' '.join(path)} --help shows no example"


def test_unknown_command_is_a_usage_error_without_traceback() -> None:
    result = CliRunner().invoke(main, ["no-such-command"])
    assert result.exit_code == 2
    assert "Traceback" not in result.output


def test_serve_on_a_missing_folder_says_so() -> None:
    result = CliRunner().invoke(main, ["serve", "/nonexistent/repo"])
    assert result.exit_code == 2
    assert "does not exist" in result.output
