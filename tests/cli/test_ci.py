"""``--junit FILE`` and the job summary without a server: ``repo lint`` (one case per finding), a run
that cannot reach its server (one ``error`` case), a dry run (nothing written), and text XML cannot
hold. Each file is read with junitparser as CI systems read it (the runs' files: tests/perf/test_ci_runs.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tests.support.junit import junit_cases
from tritonkit.cli import main
from tritonkit.cli.ci import Case, junit_xml


def _lint_repo(root: Path) -> Path:
    (root / "bad" / "1").mkdir(parents=True)
    (root / "bad" / "config.pbtxt").write_text('name: "bad"\nbackend: "python"\nmax_batch_size: -3\n')
    return root


def test_repo_lint_writes_a_case_per_finding_and_appends_the_summary(tmp_path: Path) -> None:
    repo = _lint_repo(tmp_path / "repo")
    summary = tmp_path / "summary.md"
    result = CliRunner().invoke(main, ["repo", "lint", str(repo), "--junit", str(tmp_path / "lint.xml")],
                                env={"GITHUB_STEP_SUMMARY": str(summary)})
    assert result.exit_code == 1, result.output
    cases = junit_cases(tmp_path / "lint.xml")
    assert ("bad: TK102 bad/config.pbtxt:3", "failure") in [c[:2] for c in cases]
    assert any("max_batch_size -3 is negative" in message for _, _, message in cases)
    text = summary.read_text()
    assert text.startswith(f"### tritonkit repo lint {repo}: 2 of 2 checks failed\n") and "| bad: TK102" in text


def test_a_clean_repository_is_one_passing_case(tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path / "repo"), "--junit", str(tmp_path / "l.xml")])
    assert result.exit_code == 0, result.output
    assert [c[:2] for c in junit_cases(tmp_path / "l.xml")] == [("repository", "pass")]


def test_a_run_that_stops_before_its_result_writes_one_error_case_and_a_dry_run_writes_none(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["perf", "run", "m", "--url", "127.0.0.1:9", "--junit", str(tmp_path / "p.xml"),
                                       "--results-root", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    [(name, kind, message)] = junit_cases(tmp_path / "p.xml")
    assert (name, kind) == ("command", "error") and "cannot reach Triton over gRPC at 127.0.0.1:9" in message
    assert '<property name="url" value="command line" />' in (tmp_path / "p.xml").read_text()
    dry = CliRunner().invoke(main, ["perf", "run", "m", "--dry-run", "--junit", str(tmp_path / "dry.xml"),
                                    "--out", str(tmp_path / "never")])
    assert dry.exit_code == 0, dry.output
    assert not (tmp_path / "dry.xml").exists() and not (tmp_path / "never").exists()


def test_text_xml_cannot_hold_is_replaced_and_the_file_reads_back(tmp_path: Path) -> None:
    text = junit_xml("suite <&>", [Case("a\x07b", "fail", 'measured "5" \x00 < 3 ]]>'), Case("c", "skipped", "x")],
                     {"sla": "p99<=5ms & more"}, 1.0)
    (tmp_path / "j.xml").write_text(text)
    assert junit_cases(tmp_path / "j.xml") == [("a?b", "failure", 'measured "5" ? < 3 ]]>'), ("c", "skipped", "x")]
