"""Where the test suite's own files are, whichever folder a test module sits in."""

from __future__ import annotations

from pathlib import Path

#: ``tests/``.
TESTS = Path(__file__).resolve().parents[1]
#: The checkout (``pyproject.toml``, ``README.md``, ``model_repository/``).
ROOT = TESTS.parent
#: Recorded files: ``tests/data/perf`` (perf_analyzer's exports), ``tests/data/planner``.
DATA = TESTS / "data"
#: The linter's corpus held to the real server (``tests/lint_corpus``).
LINT_CORPUS = TESTS / "lint_corpus"
