"""A build stopped by SIGTERM or Ctrl-C (SIGINT) removes its staging and leaves the repository as it was.

The build runs in a child process that pauses while its candidate sits in staging; the test then
signals it, as a CI runner stopping a job or a user pressing Ctrl-C would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.signals import default_sigint
from tritonkit.builders import build_onnx, make_demo_model
from tritonkit.builders.staging import STAGING_PREFIX

_CHILD = """
import sys, time
from tritonkit.builders import build_onnx

def log(line):
    print(line, flush=True)
    if "loading the candidate" in line:
        time.sleep(60)  # the candidate is in staging now: wait to be signalled

build_onnx(sys.argv[1], name="demo", repo=sys.argv[2], runtime="python", kind="cpu", version=int(sys.argv[3]),
           log=log)
"""


def _build_and_signal(model: Path, repo: Path, temp: Path, version: int, signum: int) -> int:
    env = {**os.environ, "TMPDIR": str(temp)}
    child = subprocess.Popen([sys.executable, "-c", _CHILD, str(model), str(repo), str(version)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                             preexec_fn=default_sigint)  # SIGINT must not stay ignored in a background suite
    try:
        assert child.stdout is not None
        for line in child.stdout:
            if "loading the candidate" in line:
                break
        else:
            pytest.fail(f"the build ended before staging: {child.wait()} {child.stderr.read() if child.stderr else ''}")
        child.send_signal(signum)
        return child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_new_model_build_leaves_no_staging_and_no_model(tmp_path: Path, signum: int) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    model = make_demo_model(tmp_path / "demo.onnx")
    rc = _build_and_signal(model, tmp_path / "repo", temp, 1, signum)
    assert rc != 0
    assert list(temp.iterdir()) == [], "staging left in the temporary folder"
    assert not (tmp_path / "repo" / "demo").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signalled_new_version_leaves_the_existing_model_untouched(tmp_path: Path, signum: int) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    model = make_demo_model(tmp_path / "demo.onnx")
    repo = tmp_path / "repo"
    build_onnx(model, name="demo", repo=repo, runtime="python", kind="cpu")
    before = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    rc = _build_and_signal(model, repo, temp, 2, signum)
    assert rc != 0
    after = {p.relative_to(repo): p.read_bytes() for p in repo.rglob("*") if p.is_file()}
    assert after == before
    assert not list(repo.rglob(STAGING_PREFIX + "*")) and list(temp.iterdir()) == []
