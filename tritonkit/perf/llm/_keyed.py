"""Start perf_analyzer with an ``Authorization: Bearer`` header whose key is read from the environment.

``python -m tritonkit.perf.llm._keyed VAR -- PERF_ANALYZER_ARGV...`` replaces itself (``execv``,
same process, same group) with perf_analyzer and ``-H "Authorization: Bearer $VAR"`` appended. The
command line tritonkit saves (``<step>.argv.json``, the report's "Reproduce") names the variable
only; the key lives in this process's environment and in perf_analyzer's own argv while it runs
(perf_analyzer 2.60 takes headers only on its command line).
"""

from __future__ import annotations

import os
import sys


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
