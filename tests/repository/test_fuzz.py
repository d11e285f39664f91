"""Fuzzing ``repo lint`` and ``repo show`` with mutants of real configs: never a traceback, never a hang.

Every config of the lint corpus (each one held to tritonserver 2.51) is mutated the ways a hostile
but ordinary user breaks a file: bytes flipped, the file cut short, a line written twice, a number
made huge or NaN, a name given a NUL, a newline or a quote, an enum written as a number its enum
does not define, a string blown up, braces nested thousands deep. Whatever comes out, ``repo lint``
reports findings (exit 0 or 1; its JSON parses, and no rule fails: exit 3 would be a linter bug),
and ``repo show`` (of the model, and of the repository) prints the config or its summary, or refuses
it with one ``error:`` and one ``fix:`` line (exit 2).
A FIFO, a device and a folder where the config should be are refused at once.

Fixed seed (``derandomize``), bounded examples: a few seconds on two busy cores.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.faults import run_cli
from tritonkit.cli import main

CORPUS = Path(__file__).resolve().parents[1] / "lint_corpus"
CONFIGS = sorted(p.read_bytes() for p in CORPUS.rglob("config.pbtxt"))
#: Examples: each is one lint and one show of a fresh repository (about 5 ms).
EXAMPLES = 500

_NUMBER = re.compile(rb"(?<![\w.])-?\d+(?:\.\d+)?(?![\w.])")
_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_ENUM = re.compile(rb"\b(?:TYPE|KIND|FORMAT|CONTROL|DELAY|REJECT)_[A-Z0-9_]+\b")
NUMBERS = [b"99999999999999999999", b"2147483648", b"-2147483649", b"9223372036854775808", b"nan", b"inf",
           b"-inf", b"1e400", b"-0", b"0.000001", b"-1"]
NAMES = st.text(alphabet=st.sampled_from(['\0', '\n', '"', '\\', "'", "/", ".", "é", "\u2028", "\x7f", "a", " "]),
                max_size=12)


def _replace_nth(data: bytes, pattern: re.Pattern[bytes], index: int, new: bytes) -> bytes:
    found = list(pattern.finditer(data))
    if not found:
        return data
    match = found[index % len(found)]
    return data[: match.start()] + new + data[match.end():]


@st.composite
def mutants(draw: st.DrawFn) -> bytes:
    """A corpus config with one to three mutations applied."""
    data = draw(st.sampled_from(CONFIGS))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "duplicate", "number", "name", "enum", "long", "nest"]))
        at = draw(st.integers(0, 10_000))
        if kind == "flip" and data:
            i = at % len(data)
            data = data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:]
        elif kind == "truncate":
            data = data[: at % (len(data) + 1)]
        elif kind == "duplicate":
            lines = data.splitlines(keepends=True) or [b""]
            i = at % len(lines)
            data = b"".join(lines[: i + 1] + lines[i:])
        elif kind == "number":
            data = _replace_nth(data, _NUMBER, at, draw(st.sampled_from(NUMBERS)))
        elif kind == "name":
            name = draw(NAMES).encode("utf-8").replace(b"\\", b"\\\\").replace(b'"', b'\\"')
            data = _replace_nth(data, _STRING, at, b'"' + name + b'"')
        elif kind == "enum":
            data = _replace_nth(data, _ENUM, at, draw(st.sampled_from([b"-3", b"12", b"99", b"2147483647"])))
        elif kind == "long":
            data = _replace_nth(data, _STRING, at, b'"' + b"x" * draw(st.sampled_from([300, 5000, 200_000])) + b'"')
        else:
            depth = draw(st.sampled_from([3, 60, 20_000]))
            data = b"optimization " + b"{ " * depth + data + b" }" * depth
    return data


def _repository(root: Path, config: bytes) -> Path:
    model = root / "m"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("# a python model\n")
    (model / "config.pbtxt").write_bytes(config)
    return model


def _no_traceback(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def _refused_cleanly(result: Result) -> None:
    lines = result.stderr.splitlines()
    assert any(line.startswith("error: ") for line in lines), result.stderr
    assert any(line.startswith("  fix: ") for line in lines), result.stderr


@settings(derandomize=True, max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(config=mutants(), as_json=st.booleans())
def test_lint_and_show_of_a_mutated_config_report_or_refuse_without_a_traceback(config: bytes, as_json: bool) -> None:
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as folder:
        model = _repository(Path(folder), config)
        linted = runner.invoke(main, ["repo", "lint", folder, "--format", "json" if as_json else "text"])
        _no_traceback(linted)
        assert linted.exit_code in (0, 1), (linted.exit_code, linted.output)  # 3: a rule failed
        if as_json:
            report = json.loads(linted.stdout)
            assert report["internal_errors"] == 0 and report["models_checked"] == 1
        # The model's config, and the repository's one-line summary of it.
        for target in (model, Path(folder)):
            shown = runner.invoke(main, ["repo", "show", str(target), "--format", "json" if as_json else "text"])
            _no_traceback(shown)
            assert shown.exit_code in (0, 2), (shown.exit_code, shown.output)
            if shown.exit_code == 2:
                _refused_cleanly(shown)
            elif as_json:
                json.loads(shown.stdout)


@pytest.mark.parametrize("field", ["label_filename", "input_data_file", "tokenizer_dir"])
def test_an_over_long_file_name_in_a_config_is_a_finding_not_a_crash(tmp_path: Path, field: str) -> None:
    long_name = "x" * 5000
    configs = {
        "label_filename": f'name: "m"\nbackend: "python"\noutput [ {{ name: "y" data_type: TYPE_FP32 dims: [ 1 ] '
                          f'label_filename: "{long_name}" }} ]\ninput [ {{ name: "x" data_type: TYPE_FP32 dims: [ 1 ] }} ]',
        "input_data_file": 'name: "m"\nbackend: "python"\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
                           'output [ { name: "y" data_type: TYPE_FP32 dims: [ 1 ] } ]\nmodel_warmup [ { name: "w" '
                           f'batch_size: 1 inputs {{ key: "x" value: {{ data_type: TYPE_FP32 dims: [ 1 ] '
                           f'input_data_file: "{long_name}" }} }} }} ]',
        "tokenizer_dir": 'name: "m"\nbackend: "python"\ninput [ { name: "x" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                         'output [ { name: "y" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
                         f'parameters {{ key: "tokenizer_dir" value: {{ string_value: "/{long_name}" }} }}',
    }
    _repository(tmp_path, configs[field].encode())
    linted = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--format", "json"])
    _no_traceback(linted)
    assert linted.exit_code in (0, 1) and json.loads(linted.stdout)["internal_errors"] == 0, linted.output


def test_a_config_that_is_no_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """Run as a user runs it (its own process, a time limit) where a hang is possible: a FIFO must not
    block the read, and /dev/zero must not be read until memory runs out."""
    configs = {}
    for kind in ("fifo", "device", "folder"):
        model = tmp_path / kind
        (model / "1").mkdir(parents=True)
        configs[kind] = model / "config.pbtxt"
    os.mkfifo(configs["fifo"])
    configs["device"].symlink_to("/dev/zero")
    configs["folder"].mkdir()
    what = {"fifo": "a FIFO (named pipe)", "device": "a character device", "folder": "a folder"}
    for kind in ("fifo", "device"):
        shown = run_cli("repo", "show", str(configs[kind].parent), timeout_s=60)
        assert shown.returncode == 2 and f"is {what[kind]}, not a regular file" in shown.stderr, shown.stderr
        assert "  fix: " in shown.stderr and "Traceback" not in shown.stderr
    shown_folder = CliRunner().invoke(main, ["repo", "show", str(configs["folder"].parent)])
    assert shown_folder.exit_code == 2 and "is a folder, not a regular file" in shown_folder.stderr
    _refused_cleanly(shown_folder)
    linted = run_cli("repo", "lint", str(tmp_path), timeout_s=60)
    assert linted.returncode == 1, linted.stdout + linted.stderr
    for kind in what:
        assert f"{kind}/config.pbtxt is {what[kind]}, not a regular file" in linted.stdout, linted.stdout
