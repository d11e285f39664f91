"""``--rate-tolerance``: one declaration (``cli/_common.py``) that ``perf run`` and ``perf sweep``
share: percent on the command line, the judge's fraction in the command, the judge's default,
and a value out of range refused when parsed (exit 2, naming the option, nothing run)."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.cli.perf import run_command
from tritonkit.cli.sweep import sweep_command
from tritonkit.perf.judge import DEFAULT_RATE_TOLERANCE


def _option(command: click.Command) -> click.Option:
    found = [p for p in command.params if isinstance(p, click.Option) and "--rate-tolerance" in p.opts]
    assert len(found) == 1, command.name
    return found[0]


@pytest.mark.parametrize("command", [run_command, sweep_command], ids=["perf run", "perf sweep"])
def test_both_commands_read_the_tolerance_in_percent_and_hand_on_the_judges_fraction(command: click.Command) -> None:
    option = _option(command)
    assert option.default == 100 * DEFAULT_RATE_TOLERANCE
    with click.Context(command) as ctx:
        assert option.process_value(ctx, "12.5") == pytest.approx(0.125)
        assert option.process_value(ctx, option.get_default(ctx)) == pytest.approx(DEFAULT_RATE_TOLERANCE)


@pytest.mark.parametrize("args", [
    ["perf", "run", "m", "--request-rate", "100", "--rate-tolerance", "100"],
    ["perf", "sweep", "repo", "m", "--sla", "p99<=1s", "--request-rate", "100", "--rate-tolerance", "-1"],
], ids=["perf run", "perf sweep"])
def test_a_tolerance_out_of_range_is_refused_naming_the_option(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2 and "--rate-tolerance" in result.output and "Traceback" not in result.output
