"""A broken link stops ``scripts/test`` at its first step, loudly: the docs build it runs (read from the
script itself, so the two cannot drift) is run on a copy of the site with one link broken, under the
script's own ``set -euo pipefail``; it must fail, name the page and the missing target as the one
warning strict mode aborted on, and run nothing after it.

Seen on mkdocs 1.6.1: ``--strict --quiet`` builds a broken link with exit 0 (``--quiet`` drops the
warnings before ``--strict`` counts them), so the build line must not be quiet; this test fails if
it becomes so again."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT

#: A strict build of the whole site (the API reference imports the package): about 20 s here.
BUILD_TIMEOUT_S = 300


def _build_line() -> str:
    lines = [line.strip() for line in (ROOT / "scripts" / "test").read_text().splitlines()
             if "mkdocs build" in line and not line.lstrip().startswith(("#", "echo"))]
    assert len(lines) == 1, lines  # the one docs build scripts/test runs
    assert "--strict" in lines[0]
    return lines[0]


def _site_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "checkout"
    copy.mkdir()
    shutil.copytree(ROOT / "docs", copy / "docs")
    shutil.copy(ROOT / "mkdocs.yml", copy / "mkdocs.yml")
    (copy / "tritonkit").symlink_to(ROOT / "tritonkit")  # the API reference reads the package from "."
    return copy


def _run_like_scripts_test(copy: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    script = f'set -euo pipefail\nreports="{tmp_path / "reports"}"\n{_build_line()}\necho AFTER-THE-DOCS-BUILD\n'
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
           "PYTHONPATH": str(ROOT)}
    return subprocess.run(["bash", "-c", script], cwd=copy, env=env, capture_output=True, text=True,
                          timeout=BUILD_TIMEOUT_S, check=False)


@pytest.mark.skipif(shutil.which("bash") is None, reason="scripts/test is a bash script")
def test_a_broken_link_fails_the_docs_build_scripts_test_runs_and_stops_it(tmp_path: Path) -> None:
    copy = _site_copy(tmp_path)
    page = copy / "docs" / "build.md"
    page.write_text(page.read_text() + "\nSee [the page that is not there](no-such-page.md).\n")
    broken = _run_like_scripts_test(copy, tmp_path)
    assert broken.returncode != 0
    assert "AFTER-THE-DOCS-BUILD" not in broken.stdout  # set -e: nothing after the build ran
    warnings = [line for line in broken.stderr.splitlines() if line.startswith("WARNING")]
    # The broken link is the one warning, so it is what stopped the build.
    assert len(warnings) == 1 and "'build.md'" in warnings[0] and "'no-such-page.md'" in warnings[0], broken.stderr
    assert "Aborted with 1 warnings in strict mode" in broken.stdout + broken.stderr
