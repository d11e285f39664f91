"""Spec files (``--config FILE``, ``--print-config``): keys from each command's click parameters, the
command line winning, every bad key, type and value refused naming the file, the line and the key.

Pure: ``perf run --dry-run`` and ``--print-config`` run nothing (the real runs are in
tests/perf/test_ci_runs.py).
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

from tritonkit.cli import main
from tritonkit.cli.ci import SPEC_COMMANDS
from tritonkit.cli.spec import _keys


def _cli(*args: str | Path) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    return result


def _command(path: str) -> click.Command:
    command: click.Command = main
    for word in path.split():
        assert isinstance(command, click.Group)
        command = command.commands[word]
    return command


def _run_line() -> list[str]:
    return ["perf", "run", "add_sub", "--url", "127.0.0.1:8001", "--sla", "p99<=50ms,throughput>=10/s",
            "--concurrency", "1:4", "--duration-s", "1.5", "--rate-tolerance", "7", "--shape", "INPUT0:4",
            "--shape", "INPUT1:4", "--keep-outputs"]


@pytest.mark.parametrize("path", SPEC_COMMANDS)
def test_every_parameter_of_a_spec_command_is_a_key_named_by_its_long_option(path: str) -> None:
    command = _command(path)
    keys = _keys(command)
    own = {"config", "print_config", "junit", "help"}
    assert {p.name for p in keys.values()} == {p.name for p in command.params} - own
    arguments = {key for key, param in keys.items() if isinstance(param, click.Argument)}
    for key, param in keys.items():
        if isinstance(param, click.Option):  # its long name, unless an argument has that name (sweep's --repo)
            long = max(param.opts, key=len).lstrip("-").replace("-", "_")
            assert key == long or (long in arguments and key == param.name), (key, param.opts)
    assert "--config" in command.params[-2].opts and "--print-config" in command.params[-1].opts


def test_print_config_of_a_command_line_reads_back_to_the_same_command(tmp_path: Path) -> None:
    run = _run_line()
    printed = _cli(*run, "--print-config")
    assert printed.exit_code == 0, printed.output
    assert printed.output.splitlines()[:3] == ["[perf.run]", 'model = "add_sub"', 'url = "127.0.0.1:8001"']
    assert "rate_tolerance = 7\n" in printed.output and 'shape = ["INPUT0:4", "INPUT1:4"]' in printed.output
    spec = tmp_path / "spec.toml"
    spec.write_text(printed.output)
    assert _cli("perf", "run", "--config", spec, "--print-config").output == printed.output
    out = ["--out", str(tmp_path / "run")]
    by_flags, by_spec = _cli(*run, *out, "--dry-run"), _cli("perf", "run", "--config", spec, *out, "--dry-run")
    assert by_flags.exit_code == by_spec.exit_code == 0, by_spec.output
    assert by_spec.output == by_flags.output and "--concurrency-range 4:4:1" in by_spec.output


def test_a_flag_on_the_command_line_wins_over_the_file(tmp_path: Path) -> None:
    spec = tmp_path / "ci.toml"
    spec.write_text('[perf.run]\nmodel = "add_sub"\nconcurrency = [1, 2]\nduration_s = 3\n')
    result = _cli("perf", "run", "other", "--config", spec, "--concurrency", "8", "--print-config")
    assert result.output == '[perf.run]\nmodel = "other"\nconcurrency = "8"\nduration_s = 3\n'


def test_a_file_of_one_command_holds_its_keys_at_the_top_and_yaml_reads_the_same(tmp_path: Path) -> None:
    (tmp_path / "top.toml").write_text('gpu = "H100-80GB"\nqps = 20\nsearch = false\n')
    (tmp_path / "plan.yaml").write_text("plan:\n  gpu: H100-80GB\n  qps: 20\n  search: false\n")
    expected = '[plan]\ngpu = "H100-80GB"\nsearch = false\nqps = 20\n'
    assert _cli("plan", "--config", tmp_path / "top.toml", "--print-config").output == expected
    assert _cli("plan", "--config", tmp_path / "plan.yaml", "--print-config").output == expected


def test_a_sweep_spec_names_its_repository_and_models(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    spec = tmp_path / "sweep.toml"
    spec.write_text(f'[perf.sweep]\nmodel = ["a", "b"]\nrepo = "{tmp_path / "repo"}"\nsla = "p99<=50ms"\n'
                    "max_batch_size = [4, 8]\nexhaustive = true\n")
    result = _cli("perf", "sweep", "--config", spec, "--print-config")
    assert result.output == (f'[perf.sweep]\nrepo = "{tmp_path / "repo"}"\nmodel = ["a", "b"]\nsla = "p99<=50ms"\n'
                             'max_batch_size = "4,8"\nexhaustive = true\n')


@pytest.mark.parametrize(("text", "name", "line", "said", "fix"), [
    ('[perf.run]\nmodel = "m"\nconcurency = "1:4"\n', "ci.toml", 3, "[perf.run] key 'concurency': unknown key",
     "did you mean 'concurrency'?"),
    ("perf:\n  run:\n    model: m\n\n    duration: 4\n", "ci.yaml", 5, "[perf.run] key 'duration': unknown key",
     "did you mean 'duration_s'?"),
    ('[perf.runn]\nmodel = "m"\n', "ci.toml", 1, "[perf] key 'runn': unknown table", "did you mean 'run'?"),
    ('[perf.run]\nmodel = "m"\nduration_s = "soon"\n', "ci.toml", 3, "key 'duration_s': --duration-s 'soon'",
     "--duration-s 6"),
    ('[perf.run]\nmodel = "m"\nduration_s = -1\n', "ci.toml", 3, "key 'duration_s'", "> 0"),
    ('[perf.run]\nmodel = "m"\nkeep_outputs = "yes"\n', "ci.toml", 3,
     "key 'keep_outputs': str where it takes true or false", "true or false"),
    ('[perf.run]\nmodel = "m"\nurl = ["a:1", "b:2"]\n', "ci.toml", 3, "key 'url': list where it takes one value",
     "one value"),
    ('[perf.run]\nmodel = "m"\nprotocol = "smtp"\n', "ci.toml", 3, "key 'protocol': ", "--help"),
    ('[perf.run]\nmodel = "m"\nsla = { p99 = 5 }\n', "ci.toml", 3, "key 'sla': dict where it takes", "a text"),
    ('[perf.run\nmodel = "m"\n', "ci.toml", 1, "is not TOML", "fix the TOML syntax"),
    ("perf:\n  run:\n    model: [m\n", "ci.yaml", 4, "is not YAML", "fix the YAML syntax"),
])
def test_a_bad_key_type_or_value_exits_2_naming_the_file_the_line_and_the_key(
        tmp_path: Path, text: str, name: str, line: int, said: str, fix: str) -> None:
    spec = tmp_path / name
    spec.write_text(text)
    result = _cli("perf", "run", "--config", spec, "--dry-run")
    assert result.exit_code == 2, result.output
    error, hint = result.output.splitlines()[:2]
    assert error.startswith(f"error: spec file {spec} line {line}") and said in error, error
    assert hint.startswith("  fix: ") and fix in hint, hint
    assert not (tmp_path / "results").exists()


def test_a_missing_table_names_those_the_file_has(tmp_path: Path) -> None:
    spec = tmp_path / "ci.toml"
    spec.write_text('[perf.sweep]\nsla = "p99<=5ms"\n[plan]\ngpu = "L4"\n')
    result = _cli("perf", "run", "m", "--config", spec)
    assert result.exit_code == 2
    assert f"error: spec file {spec} has no [perf.run] table (it has [perf.sweep], [plan])" in result.output
    spec.write_text('[perf.sweep]\nsla = "p99<=5ms"\n[plan]\ngpu = "L4"\nqsp = 3\n')  # the other tables are checked too
    assert "[plan] key 'qsp': unknown key" in _cli("perf", "run", "m", "--config", spec).output


def test_an_option_added_to_a_command_later_is_a_key_without_an_edit(tmp_path: Path) -> None:
    command = _command("perf run")
    added = click.Option(["--ci-note"], default=None)  # an option no command has (yet)
    command.params.insert(3, added)
    try:
        spec = tmp_path / "ci.toml"
        spec.write_text('[perf.run]\nmodel = "m"\nci_note = "nightly"\n')
        assert _cli("perf", "run", "--config", spec, "--print-config").output == (
            '[perf.run]\nmodel = "m"\nci_note = "nightly"\n')
    finally:
        command.params.remove(added)
