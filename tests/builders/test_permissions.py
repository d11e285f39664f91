"""Repositories the user may not write everywhere: a writable repository under a read-only parent
builds; a read-only repository is one clear error naming the path and a fix.

Tests run as root here and on CI, and root ignores permission bits: each build here then runs as
root without the capabilities that override them (``setpriv --bounding-set=-dac_override,…``), so
the bits of its own files apply to it as to any owner. Not another user: a checkout only its owner
can read (what ``mktemp -d`` and most home folders give) would hide the package from one. Skipped,
saying so, where root cannot drop them.
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

#: The capabilities that let root read, write and search whatever the permission bits say.
_OVERRIDES = "-dac_override,-dac_read_search,-fowner"
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


def _run_restricted(model: Path, repo: Path, *, cli: bool = False) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", _CHILD, str(model), str(repo)]
    if cli:
        command = [sys.executable, "-m", "tritonkit.cli", "build", "onnx", str(model), "--name", "demo",
                   "--repo", str(repo), "--runtime", "python", "--kind", "cpu"]
    if os.geteuid() == 0:
        command = ["setpriv", f"--bounding-set={_OVERRIDES}", "--inh-caps=-all", *command]
    env = {**os.environ, "HOME": "/nonexistent", "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=env, cwd="/")


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder of this test's own, where it sets the permission bits the build meets."""
    if os.geteuid() == 0 and not _can_drop_overrides():
        pytest.skip("running as root, and setpriv cannot drop the capabilities that override permission bits")
    base = Path(tempfile.mkdtemp(prefix="tritonkit-perm-"))
    try:
        yield base
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir():
                path.chmod(0o755)
        shutil.rmtree(base)


def _can_drop_overrides() -> bool:
    """Whether ``setpriv`` can run a child without root's permission-overriding capabilities (it
    needs CAP_SETPCAP, which a locked-down container may lack)."""
    if shutil.which("setpriv") is None:
        return False
    probe = subprocess.run(["setpriv", f"--bounding-set={_OVERRIDES}", "--inh-caps=-all", "true"],
                           capture_output=True, timeout=30)
    return probe.returncode == 0


def test_a_writable_repository_under_a_read_only_parent_builds(shared_dir: Path) -> None:
    model = make_demo_model(shared_dir / "demo.onnx")
    model.chmod(0o644)
    parent = shared_dir / "readonly"
    parent.mkdir()
    repo = parent / "repo"
    repo.mkdir()
    parent.chmod(0o555)
    result = _run_restricted(model, repo)
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
    result = _run_restricted(model, repo)
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
    result = _run_restricted(model, repo, cli=True)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith(("error:", "  fix:"))]
    assert len(lines) == 2 and str(repo) in lines[0] and "writable" in lines[1], result.stderr
