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


@pytest.mark.parametrize("url", ["127.0.0.1:99999", "127.0.0.1:0", "127.0.0.1", ":8001", "http://127.0.0.1:8001",
                                 "::1:8001", "127.0.0.1:80a"])
@pytest.mark.parametrize("command", [["infer", "m", "--url"], ["perf", "run", "m", "--url"], ["repo", "lint", ".", "--server"]])
def test_a_url_that_is_not_host_port_is_refused_when_parsed(command: list[str], url: str) -> None:
    result = CliRunner().invoke(main, [*command, url])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert f"{url!r} is not host:port" in result.output


@pytest.mark.parametrize("url", ["127.0.0.1:8001", "localhost:1", "[::1]:65535", "triton.internal:8001"])
def test_a_good_host_port_passes_the_shared_check(url: str) -> None:
    from tritonkit.cli._common import host_port_problem

    assert host_port_problem(url) is None
