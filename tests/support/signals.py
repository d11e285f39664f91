"""Children that a test signals with SIGINT must take it as Ctrl-C, however the suite was started.

A command started as a non-interactive shell's background job (``scripts/test &``, ``nohup``)
inherits SIGINT as *ignored*, and Python then installs no KeyboardInterrupt handler: a test that
sends SIGINT to such a child would wait for nothing. ``preexec_fn=default_sigint`` restores the
default disposition in the child before it runs, so Python installs its own handler again.
"""

from __future__ import annotations

import signal

__all__ = ["default_sigint"]


def default_sigint() -> None:
    """In the child, before exec: SIGINT back to its default (Python then maps it to KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
