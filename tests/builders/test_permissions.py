"""Repositories the user may not write everywhere: a writable repository under a read-only parent
builds; a read-only repository is one clear error naming the path and a fix.

Tests run as root, and root ignores permission bits, so each build here runs as the unprivileged
user ``nobody`` (``setpriv``); skipped where that is not possible.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tritonkit.builders import make_demo_model

_NOBODY = 65534
_CHILD = """
import sys
from tritonkit.builders import build_onnx
from tritonkit.errors import TritonKitError
try:
    result = build_onnx(sys.argv[1], name="demo", repo=sys.argv[2], runtime="python", kind="cpu")
except TritonKitError as exc:
    print(f"{type(exc).__name__}|{exc.message}|{exc.hint}")
    sys.exit(2)
print(result.outcome)
"""


def _run_as_nobody(model: Path, repo: Path, *, cli: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", _CHILD, str(model), str(repo)]
    if cli:
        command = [sys.executable, "-m", "tritonkit.cli", "build", "onnx", str(model), "--name", "demo",
                   "--repo", str(repo), "--runtime", "python", "--kind", "cpu"]
    if os.geteuid() == 0:
        command = ["setpriv", f"--reuid={_NOBODY}", f"--regid={_NOBODY}", "--clear-groups", *command]
    env = {**os.environ, "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd="/")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder outside root's private pytest folder, so that ``nobody`` can reach it."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permission bits would not apply")
    base = Path(tempfile.mkdtemp(prefix="tritonkit-perm-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base)


def _owned_by_nobody(path: Path) -> Path:
    path.mkdir()
    if os.geteuid() == 0:
        os.chown(path, _NOBODY, _NOBODY)
    return path


def test_a_writable_repository_under_a_read_only_parent_builds(shared_dir: Path) -> None:
    model = make_demo_model(shared_dir / "demo.onnx")
    model.chmod(0o644)
    parent = shared_dir / "readonly"
    parent.mkdir()
    repo = _owned_by_nobody(parent / "repo")
    parent.chmod(0o555)
    result = _run_as_nobody(model, repo)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "new model, version 1" in result.stdout
    assert sorted(p.name for p in (repo / "demo" / "1").iterdir()) == ["model.onnx", "model.py"]
    assert sorted(p.name for p in parent.iterdir()) == ["repo"]  # nothing staged beside it


def test_a_read_only_repository_is_a_clear_error_with_the_path_and_a_fix(shared_dir: Path) -> None:
    model = make_demo_model(shared_dir / "demo.onnx")
    model.chmod(0o644)
    repo = shared_dir / "repo"
    repo.mkdir()
    repo.chmod(0o555)
    result = _run_as_nobody(model, repo)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    kind, message, hint = result.stdout.strip().split("|")
    assert kind == "ConfigError" and str(repo) in message and "Permission denied" in message
    assert "writable" in hint and str(repo) in hint
    assert list(repo.iterdir()) == []


def test_the_command_line_says_the_same_in_one_error_and_one_fix_line(shared_dir: Path) -> None:
    model = make_demo_model(shared_dir / "demo.onnx")
    model.chmod(0o644)
    repo = shared_dir / "repo"
    repo.mkdir()
    repo.chmod(0o555)
    result = _run_as_nobody(model, repo, cli=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(("error:", "  fix:"))]
    assert len(lines) == 2 and str(repo) in lines[0] and "writable" in lines[1], result.stderr
