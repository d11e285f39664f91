"""Whether a process a test started is still alive, and which processes a command line marks."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path


def pid_alive(pid: int) -> bool:
    """True when a process with ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def cmdlines(marker: str) -> Iterator[tuple[int, str]]:
    """``(pid, command line)`` of each process whose command line holds ``marker``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            yield int(entry.name), cmdline
