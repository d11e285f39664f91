"""What the private installs of outside tools (Prometheus, checkov) share: where they go, how a step runs."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tritonkit.errors import MissingComponentError

__all__ = ["Progress", "run_step", "share_dir"]

Progress = Callable[[str], None]


def share_dir(tool: str, prefix: str | os.PathLike[str] | None = None, *, resolve: bool = False) -> Path:
    """``<prefix>/share/tritonkit/<tool>`` (prefix: this environment's ``sys.prefix``; ``resolve``:
    through symlinks, for installs that record absolute paths, such as a venv's scripts)."""
    base = Path(prefix or sys.prefix)
    return (base.resolve() if resolve else base) / "share" / "tritonkit" / tool


def run_step(argv: list[str], what: str, hint: str, *, cwd: Path | None = None, timeout_s: float = 600) -> None:
    """Run one install step; a failure is a MissingComponentError with the last lines it printed."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, cwd=cwd, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MissingComponentError(f"{what} failed: {exc}", hint=hint) from exc
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-4:])
        raise MissingComponentError(f"{what} failed: {tail}", hint=hint)
