"""Reading what ``tritonkit perf`` prints when piped: one ``kind key=value …`` line per event."""

from __future__ import annotations

import shlex

__all__ = ["kv_lines"]


def kv_lines(output: str, kind: str) -> list[dict[str, str]]:
    """The ``kind key=value ...`` lines of piped output, as dicts (values unquoted)."""
    rows = []
    for line in output.splitlines():
        words = shlex.split(line)
        if words and words[0] == kind:
            rows.append(dict(word.split("=", 1) for word in words[1:]))
    return rows
