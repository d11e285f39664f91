"""What the fault-injection tests share: the CLI run as a user runs it, and a small disk to fill."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["fill_disk", "run_cli", "small_tmpfs"]


def run_cli(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    """``tritonkit ARGS`` in a fresh interpreter importing this worktree's tritonkit."""
    return subprocess.run([sys.executable, "-m", "tritonkit.cli", *args], capture_output=True, text=True,
                          timeout=timeout_s, env={**os.environ, "PYTHONPATH": str(Path.cwd())})


@contextlib.contextmanager
def small_tmpfs(mount: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` (``"3m"``) at ``mount``, unmounted afterwards; skips where mounting is not
    allowed (it needs root, as on the build machines), saying so."""
    mount.mkdir(parents=True, exist_ok=True)
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mount)], capture_output=True,
                          text=True, check=False)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root): {made.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill_disk(folder: Path) -> None:
    """Fill the file system of ``folder`` to the last byte."""
    with (folder / "filler").open("wb") as handle:
        try:
            while True:
                handle.write(b"\0" * (1 << 20))
                handle.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc
