"""Small steps shared by the installers: progress messages and bounded, quiet subprocess runs."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from tritonkit.errors import MissingComponentError, PerfError

#: What to tell a user who has no perf_analyzer.
INSTALL_HINT = "run 'tritonkit perf install', or pass --perf-analyzer PATH / set TRITONKIT_PERF_ANALYZER"

#: A callback that receives one progress line at a time.
Progress = Callable[[str], None]


def say(progress: Progress | None, message: str) -> None:
    """Pass ``message`` to ``progress`` when there is one."""
    if progress is not None:
        progress(message)


def run_step(argv: Sequence[str], *, timeout_s: float, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run one install step to completion with no stdin, capturing its output; bounded by ``timeout_s``."""
    try:
        return subprocess.run(
            list(argv), capture_output=True, text=True, timeout=timeout_s, cwd=cwd, check=False,
            stdin=subprocess.DEVNULL,
        )
    except FileNotFoundError as exc:
        raise MissingComponentError(f"cannot run {argv[0]}: not found", hint=INSTALL_HINT) from exc
    except subprocess.TimeoutExpired as exc:
        raise PerfError(f"{' '.join(argv[:3])} ... did not finish within {timeout_s:.0f} s") from exc


def tail(text: str, lines: int = 5) -> str:
    """The last ``lines`` lines of a tool's output on one line, for an error message."""
    return " | ".join(line.strip() for line in text.strip().splitlines()[-lines:])


def replace_dir(staging: Path, directory: Path) -> None:
    """Swap ``staging`` in as ``directory``: the old install stays usable until the last moment."""
    old = None
    if directory.exists():
        old = directory.with_name(f".{directory.name}-old-{os.getpid()}")
        os.replace(directory, old)
    os.replace(staging, directory)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)
