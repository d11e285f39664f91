"""Fuzzing every command's options: a bad value is refused as it is parsed, the same way everywhere.

Every typed option and argument of every command (numbers held to their bounds, non-empty words,
paths, choices, host:port, ladders, model names) is given values it must refuse: NaN, infinities,
numbers past int32 or below zero, empty text, text where a number belongs, a NUL in a path, a
concurrency ladder to 10⁹. Each must end the same way: exit 2, one ``error:`` line naming the option,
a ``fix:`` line, no traceback, and nothing run. The bad value is put first on the command line, so
it is the first parameter click processes, before any required one is missed.

Fixed seed (``derandomize``), bounded examples: a few seconds.
"""

from __future__ import annotations

import math

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.cli_tree import leaves as _leaves
from tests.support.cli_tree import written_name as _name
from tritonkit.cli import main
from tritonkit.cli._common import HostPort, Number, UserPath, Words

#: Examples drawn over all (command, parameter) pairs, after the exhaustive pass.
EXAMPLES = 400
#: Levels every ladder option (``--concurrency``, ``--request-rate``…) must refuse.
BAD_LEVELS = ["nan", "inf", "1:1e9", "0", "-1", "1:1e9:1", "a,b", "1,,nan", "8:1:1", "1e400"]
#: Model names Triton's tools cannot carry (for every option that takes one).
BAD_NAMES = ["a\nb", "a/b", "..", ".hidden", "a\tb", "x\x7f"]





def _bad_numbers(number: Number) -> list[str]:
    b = number.bounds
    values = ["nan", "inf", "-inf", "1e999", "", "abc", "1,2"]
    if b.integer:
        values += ["1.5", "1e3", "0x10"]
    if b.low is not None:
        low = math.floor(b.low) if b.integer else b.low
        values.append(str(low if b.low_open else (low - 1 if b.integer else low - 0.5)))
    if b.high is not None:
        high = math.floor(b.high) if b.integer else b.high
        values += [str(high + 1 if b.integer else high * 2), "99999999999999999999"]
    return values


def _bad_values(param: click.Parameter) -> list[str]:
    kind = param.type
    default = param.default if isinstance(param.default, str) else None
    if isinstance(kind, Number):
        values = _bad_numbers(kind)
    elif isinstance(kind, UserPath):
        values = ["", "   ", "a\0b"]
    elif isinstance(kind, Words):
        values = ["", "  ", "\t"]
        check = getattr(kind.check, "__qualname__", "")
        if check.startswith("levels_type"):
            values += BAD_LEVELS
        elif check == "check_model_name":
            values += BAD_NAMES
        elif check == "_check_target":
            values += ["tpu", "gpu:-1", "gpu:x"]
    elif isinstance(kind, HostPort):
        values = ["", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:99999", "http://h:1", "::1:8001"]
    elif isinstance(kind, click.Choice):
        values = ["", "no-such-choice", "CPU\n"]
        values = [v for v in values if v not in kind.choices]
    elif isinstance(kind, click.types.IntRange):
        values = ["0", "-1", "70000", "nan", ""]
    else:
        return []
    return [v for v in values if v != default]


#: Every (command, parameter, bad value) there is: the exhaustive pass, and the pool the fuzz draws from.
CASES = [(path, param, value) for path, command in _leaves(main) for param in command.params
         if not (isinstance(param, click.Option) and param.is_flag) for value in _bad_values(param)]
PAIRS = sorted({(path, _name(param)): param for path, param, _ in CASES}.items())


COMMANDS = dict(_leaves(main))


def _invoke(path: tuple[str, ...], param: click.Parameter, value: str) -> tuple[int, str, BaseException | None]:
    if isinstance(param, click.Argument):
        # The arguments before this one get a placeholder that passes (an existing folder).
        before = [p for p in COMMANDS[path].params if isinstance(p, click.Argument)]
        args = ["."] * before.index(param) + [value]
    else:
        args = [_name(param), value]
    result = CliRunner().invoke(main, [*path, *args])
    return result.exit_code, result.output, result.exception


def _assert_refused(path: tuple[str, ...], param: click.Parameter, value: str) -> None:
    code, output, exception = _invoke(path, param, value)
    where = f"tritonkit {' '.join(path)} {_name(param)} {value!r}"
    assert exception is None or isinstance(exception, SystemExit), f"{where}: {exception!r}"
    assert "Traceback" not in output, where
    assert code == 2, f"{where}: exit {code}\n{output}"
    lines = output.splitlines()
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, f"{where}: {output}"
    named = _name(param)
    assert named in errors[0] or named.upper() in errors[0] or (param.name or "") in errors[0], f"{where}: {output}"
    assert any(line.startswith("  fix: ") for line in lines), f"{where}: {output}"


def test_every_typed_option_of_every_command_is_in_the_pool() -> None:
    commands = {path for path, _ in _leaves(main)}
    covered = {path for path, _, _ in CASES}
    # Every command but the few without a typed option (install commands take flags only).
    assert len(covered) >= len(commands) - 3, sorted(commands - covered)
    for opt in ("--duration-s", "--concurrency", "--max-batch-size", "--gpus", "--kv-cache-fraction", "--timeout-s"):
        assert any(_name(p) == opt for _, p, _ in CASES), opt


def test_every_bad_value_of_every_typed_option_is_refused_with_error_and_fix() -> None:
    """The exhaustive pass: each (command, option, bad value) once."""
    for path, param, value in CASES:
        _assert_refused(path, param, value)


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_drawn_bad_values_are_refused_with_error_and_fix(data: st.DataObject) -> None:
    """Drawn values beyond the fixed list: numbers just outside each bound, and text with junk around
    a valid-looking number."""
    (path, _), param = data.draw(st.sampled_from(PAIRS))
    kind = param.type
    if isinstance(kind, Number):
        b = kind.bounds
        outside = []
        if b.low is not None:
            outside.append(st.floats(max_value=b.low, exclude_max=not b.low_open, allow_nan=False)
                           if not b.integer else st.integers(max_value=math.ceil(b.low) - (0 if b.low_open else 1)))
        if b.high is not None:
            outside.append(st.floats(min_value=b.high, exclude_min=True, allow_infinity=True)
                           if not b.integer else st.integers(min_value=math.floor(b.high) + 1))
        junk = st.text(alphabet="0123456789.eE+-_ xn", min_size=1, max_size=8).filter(lambda t: not _parses(t, b))
        value = str(data.draw(st.one_of(*outside, junk))) if outside else data.draw(junk)
    else:
        value = data.draw(st.sampled_from(_bad_values(param)))
    _assert_refused(path, param, value)


def _parses(text: str, bounds: object) -> bool:
    from tritonkit._values import Bounds
    from tritonkit.errors import ConfigError

    assert isinstance(bounds, Bounds)
    try:
        bounds.parse(text, "--x")
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("args", [
    ["perf", "run", "m", "--sla", "ttft_p99<=5ms", "--dry-run"],
    ["perf", "run", "m", "--sla", "/etc/passwd", "--dry-run"],
    ["perf", "run", "m", "--llm", "--traffic", "soak:-4/s,600", "--dry-run"],
    ["perf", "run", "m", "--llm", "--traffic", "ramp:8-1/s,4,10", "--dry-run"],
    ["perf", "run", "m", "--llm", "--input-tokens", "99999999999", "--dry-run"],
    ["repo", "add", "repo_that_must_not_exist", "--name", "a\nb", "--backend", "python"],
    ["repo", "add", "repo_that_must_not_exist", "--name", "x", "--backend", "python", "--input", "x:FP32:1e3"],
])
def test_values_only_the_library_can_judge_are_refused_with_error_and_fix(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    # /etc/passwd is never echoed: at most the start of its first line
    assert "Traceback" not in result.output and "/bin/bash" not in result.output and "daemon" not in result.output
    lines = result.output.splitlines()
    assert sum(line.startswith("error: ") for line in lines) == 1 and any(line.startswith("  fix: ") for line in lines)
