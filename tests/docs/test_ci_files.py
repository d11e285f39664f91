"""The CI files docs/ci.md shows (a GitHub Actions workflow, a GitLab CI job, the spec file they read):
each parses, every ``tritonkit`` command it runs exists with the options it passes, every JUnit file
it writes is uploaded or reported, and the spec file is one the commands accept."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.docs.doc_commands import resolve
from tritonkit.cli import main
from tritonkit.cli.spec import tomllib  # the stdlib's, or tomli before 3.11

DOCS = Path(__file__).resolve().parents[2] / "docs"
SPEC = DOCS / "ci" / "perf.toml"
_OPERATORS = {"&&", "||", ";", "|", "&", ">", "2>&1", "then", "else", "fi"}


def _shell(yaml_name: str) -> list[str]:
    """Every shell script the file runs: GitHub's steps' ``run``, GitLab's jobs' ``before_script`` and ``script``."""
    data = yaml.safe_load((DOCS / "ci" / yaml_name).read_text())
    if "jobs" in data:
        return [step["run"] for job in data["jobs"].values() for step in job["steps"] if "run" in step]
    return [line for job in data.values() if isinstance(job, dict)
            for key in ("before_script", "script") for line in job.get(key, [])]


def _commands(scripts: list[str]) -> list[tuple[str, ...]]:
    """The argv (without ``tritonkit``) of every tritonkit command in ``scripts``."""
    found = []
    for script in scripts:
        for line in script.replace("\\\n", " ").splitlines():
            segment: list[str] = []
            for token in [*shlex.split(line, comments=True), ";"]:
                if token in _OPERATORS:
                    if segment[:1] == ["tritonkit"]:
                        found.append(tuple(segment[1:]))
                    segment = []
                else:
                    segment.append(token)
    return found


@pytest.mark.parametrize("name", ["github-actions.yml", "gitlab-ci.yml"])
def test_every_tritonkit_command_the_ci_file_runs_exists_with_its_options(name: str) -> None:
    commands = _commands(_shell(name))
    resolved = [resolve(argv) for argv in commands]  # an unknown subcommand or option fails here
    paths = {" ".join(r.path) for r in resolved}
    assert paths >= {"perf install", "build onnx", "repo lint", "perf sweep", "serve", "perf run", "perf compare"}
    for r in resolved:
        if " ".join(r.path) in ("repo lint", "perf sweep", "perf run", "perf compare"):
            assert "--junit" in r.options, r.path
        if " ".join(r.path) in ("perf sweep", "perf run", "perf compare"):
            assert "--config" in r.options, r.path
    junits = {argv[argv.index("--junit") + 1] for argv in commands if "--junit" in argv}
    text = (DOCS / "ci" / name).read_text()
    assert all(path.startswith("reports/") for path in junits) and "reports/" in text  # uploaded / reported
    if name == "gitlab-ci.yml":
        assert yaml.safe_load(text)[".perf"]["artifacts"]["reports"]["junit"] == "reports/*.xml"


def test_the_ci_page_shows_the_files_themselves() -> None:
    page = (DOCS / "ci.md").read_text()
    for name in ("perf.toml", "github-actions.yml", "gitlab-ci.yml"):
        assert f'--8<-- "docs/ci/{name}"' in page


@pytest.mark.parametrize("command", ["perf sweep", "perf run", "perf compare"])
def test_the_spec_file_the_ci_files_read_is_one_each_command_accepts(
        command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder in ("model_repository", "baselines/resnet", "results/run"):
        (tmp_path / folder).mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, [*command.split(), "--config", str(SPEC), "--print-config"])
    assert result.exit_code == 0, result.output
    printed, kept = tomllib.loads(result.output), tomllib.loads(SPEC.read_text())
    words = command.split()
    assert set(printed[words[0]][words[1]]) == set(kept[words[0]][words[1]])  # every key read, none lost
