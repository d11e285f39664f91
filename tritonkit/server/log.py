"""Read tritonserver's own words out of its log: why a model or the server failed."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LoadFailure", "find_load_failures", "log_tail"]

# Triton 2.4x–2.5x write e.g.
#   E1129 10:01:02.345 77 model_lifecycle.cc:654] "failed to load 'm' version 1: Invalid argument: ..."
# and, at start-up, a status table row "| m | 1 | UNAVAILABLE: Invalid argument: ... |".
# Config problems found before a version is chosen read
#   "Poll failed for model directory 'm': ..." or "failed to load model 'm': ...".
_PATTERNS = (
    re.compile(r"failed to load '(?P<model>[^']+)' version \d+: (?P<reason>.+)"),
    re.compile(r"[Pp]oll failed for model directory '(?P<model>[^']+)': (?P<reason>.+)"),
    re.compile(r"failed to load model '(?P<model>[^']+)': (?P<reason>.+)"),
    # Explicit control, a --load-model name with no folder (2.51):
    #   "failed to poll model 'x': model not found in any model repository."
    re.compile(r"failed to poll model '(?P<model>[^']+)': (?P<reason>.+)"),
    re.compile(r"^\|\s*(?P<model>\S+)\s*\|\s*\S+\s*\|\s*UNAVAILABLE: (?P<reason>.+?)\s*\|\s*$"),
)


@dataclass(frozen=True)
class LoadFailure:
    """One model the server could not load, in the server's own words."""

    model: str
    reason: str


def _clean(reason: str) -> str:
    reason = reason.strip()
    if reason.endswith('"'):
        reason = reason[:-1]
    return reason.replace('\\"', '"').replace("\\n", " ").strip()


def find_load_failures(text: str) -> list[LoadFailure]:
    """Every model load failure named in ``text`` (a server log), first reason per model."""
    seen: dict[str, str] = {}
    for line in text.splitlines():
        for pattern in _PATTERNS:
            match = pattern.search(line.strip())
            if match and match.group("model") not in seen:
                seen[match.group("model")] = _clean(match.group("reason"))
                break
    return [LoadFailure(model, reason) for model, reason in seen.items()]


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file ('' when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
