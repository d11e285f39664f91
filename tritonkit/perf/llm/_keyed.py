"""Start perf_analyzer with an ``Authorization: Bearer`` header whose key is read from the environment.

``python -m tritonkit.perf.llm._keyed VAR -- PERF_ANALYZER_ARGV...`` replaces itself (``execv``,
same process, same group) with perf_analyzer and ``-H "Authorization: Bearer $VAR"`` appended. The
command line tritonkit saves (``<step>.argv.json``, the report's "Reproduce") names the variable
only; the key lives in this process's environment and in perf_analyzer's own argv while it runs
(perf_analyzer 2.60 takes headers only on its command line).

On a cluster (``perf run --cluster``) each client node runs the same wrapper with its own Python and
its own perf_analyzer (:func:`split_keyed` takes the driver's command apart); the key travels in the
client job's environment (:func:`key_environment`), never on a command line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["MODULE", "key_environment", "keyed_command", "split_keyed"]

#: This module, as ``python -m`` names it.
MODULE = "tritonkit.perf.llm._keyed"


def keyed_command(variable: str, command: Sequence[str], *, python: str = sys.executable) -> list[str]:
    """``command`` started through this wrapper, with the key from ``variable``."""
    return [python, "-m", MODULE, variable, "--", *command]


def split_keyed(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the variable, the command it wraps) for a command line :func:`keyed_command` made; ``(None, argv)``
    for any other."""
    if len(argv) >= 5 and list(argv[1:3]) == ["-m", MODULE] and argv[4] == "--":
        return argv[3], list(argv[5:])
    return None, list(argv)


def key_environment(variable: str) -> dict[str, str]:
    """``{variable: its value}`` from this process's environment, for a job to carry to where the
    wrapper runs; ``ValueError`` naming the variable (never a value) when it is unset or empty."""
    key = os.environ.get(variable, "")
    if not key:
        raise ValueError(f"the environment variable {variable} is unset or empty")
    return {variable: key}


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tritonkit.perf.llm._keyed VAR -- COMMAND...", file=sys.stderr)
        return 2
    key = os.environ.get(argv[0], "")
    if not key:
        print(f"error: the environment variable {argv[0]} is unset or empty", file=sys.stderr)
        return 2
    command = argv[2:]
    os.execv(command[0], [*command, "-H", f"Authorization: Bearer {key}"])
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
