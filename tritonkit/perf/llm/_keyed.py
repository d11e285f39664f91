"""Start perf_analyzer with headers whose values are read from the environment: an ``Authorization:
Bearer`` key, and the headers of a dial (:class:`tritonkit._dial.Dial`).

``python -m tritonkit.perf.llm._keyed VAR[,VAR...] -- PERF_ANALYZER_ARGV...`` replaces itself
(``execv``, same process, same group) with perf_analyzer and, for each variable, ``-H`` appended:
``Authorization: Bearer $VAR``, or for :data:`HEADERS_VAR` one ``-H`` per line of it (``name: value``).
The command line tritonkit saves (``<step>.argv.json``, the report's "Reproduce") names the
variables only; the values live in this process's environment and in perf_analyzer's own argv while
it runs (perf_analyzer 2.60 takes headers only on its command line).

On a cluster (``perf run --cluster``) each client node runs the same wrapper with its own Python and
its own perf_analyzer (:func:`split_keyed` takes the driver's command apart); the values travel in the
client job's environment (:func:`key_environment`), never on a command line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

__all__ = ["HEADERS_VAR", "MODULE", "headers_command", "key_environment", "keyed_command", "split_keyed"]

#: This module, as ``python -m`` names it.
MODULE = "tritonkit.perf.llm._keyed"
#: The variable that carries a dial's headers to the wrapper, one ``name: value`` a line.
HEADERS_VAR = "TRITONKIT_PERF_ANALYZER_HEADERS"


def keyed_command(variable: str, command: Sequence[str], *, python: str = sys.executable) -> list[str]:
    """``command`` started through this wrapper, with the headers of ``variable`` (names joined by ``,``)."""
    return [python, "-m", MODULE, variable, "--", *command]


def headers_command(headers: Sequence[tuple[str, str]], command: Sequence[str]) -> list[str]:
    """``command`` with ``headers`` through this wrapper (``command`` itself without headers; an
    already keyed command gets them added): the values go into :data:`HEADERS_VAR` of this
    process's environment, which perf_analyzer's wrapper inherits, never into the command line."""
    if not headers:
        return list(command)
    os.environ[HEADERS_VAR] = "\n".join(f"{name}: {value}" for name, value in headers)
    variable, inner = split_keyed(command)
    return keyed_command(HEADERS_VAR if variable is None else f"{variable},{HEADERS_VAR}", inner)


def split_keyed(argv: Sequence[str]) -> tuple[str | None, list[str]]:
    """(the variables, the command they wrap) for a command line :func:`keyed_command` made;
    ``(None, argv)`` for any other."""
    if len(argv) >= 5 and list(argv[1:3]) == ["-m", MODULE] and argv[4] == "--":
        return argv[3], list(argv[5:])
    return None, list(argv)


def key_environment(variable: str) -> dict[str, str]:
    """``{name: its value}`` for each variable named (``,``-joined) from this process's environment, for
    a job to carry to where the wrapper runs; ``ValueError`` naming the variable (never a value) when
    one is unset or empty."""
    env = {name: os.environ.get(name, "") for name in variable.split(",")}
    for name, value in env.items():
        if not value:
            raise ValueError(f"the environment variable {name} is unset or empty")
    return env


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m tritonkit.perf.llm._keyed VAR[,VAR...] -- COMMAND...", file=sys.stderr)
        return 2
    try:
        env = key_environment(argv[0])
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    headers = [line for name, value in env.items()
               for line in (value.splitlines() if name == HEADERS_VAR else [f"Authorization: Bearer {value}"])]
    os.execv(argv[2], [*argv[2:], *(part for line in headers if line.strip() for part in ("-H", line))])
    return 0  # not reached


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
