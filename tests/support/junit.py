"""Reading a ``--junit`` file as CI systems read it: junitparser's Jenkins xunit flavour."""

from __future__ import annotations

from pathlib import Path

from junitparser.xunit2 import JUnitXml

__all__ = ["junit_cases"]


def junit_cases(path: Path) -> list[tuple[str, str, str]]:
    """``(name, result, message)`` of every case of a JUnit file, read as CI systems read it; the
    file's totals checked against its cases."""
    xml = JUnitXml.fromfile(str(path))
    cases = []
    for suite in xml:
        found = list(suite)
        assert suite.name and suite.tests == len(found) and suite.hostname and suite.timestamp
        kinds = [type(r).__name__.lower() for case in found for r in case.result]
        assert (suite.failures, suite.errors, suite.skipped) == tuple(kinds.count(k) for k in ("failure", "error", "skipped"))
        for case in found:
            assert case.name and case.classname == suite.name
            result = case.result[0] if case.result else None
            assert result is None or result.message, case.name  # a failure says why
            cases.append((case.name, type(result).__name__.lower() if result else "pass",
                          result.message if result else case.system_out or ""))
    assert len(list(path.parent.glob(f".{path.name}*"))) == 0  # written whole: no temp left beside it
    return cases
