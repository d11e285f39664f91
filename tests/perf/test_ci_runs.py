"""What a build server runs, on the real server with the real perf_analyzer: a spec file kept in the
repository, the JUnit file and job summary a CI system shows (each file read as CI systems read it:
tests/support/junit.py), and a baseline kept as an artifact.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.junit import junit_cases
from tests.support.pymodels import write_add_sub
from tests.support.served import serve_models
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

FAST = ["--duration-s", "1.5", "--warmup-s", "0", "--max-trials", "5"]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with serve_models(tmp_path_factory.mktemp("repo"), write_add_sub) as running:
        yield running


def _cli(*args: str | Path, env: dict[str, str] | None = None) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args], env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_a_run_that_misses_its_sla_writes_a_failing_case_naming_the_criterion_and_exits_1(
        server: TritonServer, tmp_path: Path) -> None:
    spec = tmp_path / "perf.toml"
    spec.write_text(f'[perf.run]\nmodel = "add_sub"\nurl = "{server.grpc_url}"\nsla = "p99<=1ms"\n'
                    f'concurrency = [1, 2]\nresults_root = "{tmp_path / "results"}"\n')
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    result = _cli("perf", "run", "--config", spec, *FAST, "--junit", tmp_path / "out" / "perf.xml",
                  env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1, result.output
    cases = junit_cases(tmp_path / "out" / "perf.xml")
    p99 = [c for c in cases if c[0].endswith(": p99<=1ms")]
    assert [c[0] for c in p99] == ["concurrency 1: p99<=1ms", "concurrency 2: p99<=1ms"]
    assert all(kind == "failure" for _, kind, _ in p99)
    message = p99[0][2]
    assert message.startswith("p99 measured ") and "limit <= 1 ms" in message and "95% interval" in message, message
    assert ("concurrency 1: errors==0", "pass") in [c[:2] for c in cases]
    written = summary.read_text()
    assert written.startswith("earlier step\n### tritonkit perf run add_sub: 2 of 4 checks failed\n")
    assert "**FAIL** (exit code 1)" in written and "| concurrency 1: p99<=1ms | fail | p99 measured" in written
    # The run's folder keeps the spec it ran, each setting with where it came from.
    folder = next((tmp_path / "results").iterdir())
    kept = (folder / "spec.toml").read_text()
    assert f'sla = "p99<=1ms"  # {spec} line 4' in kept and 'duration_s = 1.5  # command line' in kept
    properties = (tmp_path / "out" / "perf.xml").read_text()
    assert f'<property name="sla" value="{spec} line 4" />' in properties


def test_a_baseline_kept_as_an_artifact_gates_the_next_run(server: TritonServer, tmp_path: Path) -> None:
    base = _cli("perf", "run", "add_sub", "--url", server.grpc_url, "--sla", "p99<=500ms", "--concurrency", "1",
                *FAST, "--results-root", tmp_path / "main", "--save-baseline", "--baseline-dir", tmp_path / "artifact")
    assert base.exit_code == 0, base.output
    new = next((tmp_path / "main").iterdir())
    gate = _cli("perf", "compare", tmp_path / "artifact" / "add_sub", new / "result.json",
                "--run-noise", "0%", "--junit", tmp_path / "compare.xml")
    # A run against its own baseline: no change, inside the noise where the machine was too busy to tell.
    assert gate.exit_code in (0, 3), gate.output
    cases = junit_cases(tmp_path / "compare.xml")
    assert [(name, kind) for name, kind, _ in cases] == [("peak", "pass" if gate.exit_code == 0 else "failure")]
    assert "throughput change +0.0% (95% interval " in cases[0][2] and "limit -5%" in cases[0][2], cases
    assert gate.exit_code == 0 or "holds no change" in cases[0][2]


def test_a_toml_spec_equal_to_a_command_line_sweeps_to_the_same_winner(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_sleepy(repo, "ci_sleepy")
    flags = ["--sla", "p99<=60ms", "--instances", "1,2", "--max-batch-size", "4", "--batch-window", "0",
             "--concurrency", "1,2,4,8", "--window-ms", "300", "--warmup-s", "0.5", "--no-write-back"]
    by_flags = _cli("perf", "sweep", repo, "ci_sleepy", *flags, "--out", tmp_path / "flags", "--json")
    assert by_flags.exit_code == 0, by_flags.output
    printed = _cli("perf", "sweep", repo, "ci_sleepy", *flags, "--print-config")
    spec = tmp_path / "sweep.toml"
    spec.write_text(printed.output)
    assert 'instances = "1,2"' in printed.output and f'repo = "{repo}"' in printed.output
    by_spec = _cli("perf", "sweep", "--config", spec, "--out", tmp_path / "spec", "--json",
                   "--junit", tmp_path / "sweep.xml")
    assert by_spec.exit_code == 0, by_spec.output
    winner = json.loads(by_flags.output)["winner"]["id"]
    assert json.loads(by_spec.output)["winner"]["id"] == winner
    cases = junit_cases(tmp_path / "sweep.xml")
    assert ("winner", "pass") in [(name, kind) for name, kind, _ in cases]
    assert any(name.startswith(f"{winner} at ") and kind == "pass" for name, kind, _ in cases)
