"""Print the slowest tests of one or more pytest JUnit XML files (scripts/test's closing table).

Usage: python scripts/_slowest.py N FILE.xml [FILE.xml ...]
Each test's time is its setup, call and teardown together, as pytest writes it into the file.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def main(argv: list[str]) -> int:
    count, files = int(argv[0]), [Path(a) for a in argv[1:]]
    rows: list[tuple[float, str]] = []
    total_s = 0.0
    for path in files:
        if not path.is_file():
            continue
        for case in ET.parse(path).getroot().iter("testcase"):
            seconds = float(case.get("time") or 0.0)
            total_s += seconds
            module = (case.get("classname") or "").replace(".", "/")
            rows.append((seconds, f"{module}.py::{case.get('name')}"))
    rows.sort(reverse=True)
    print(f"[test] slowest {min(count, len(rows))} of {len(rows)} tests ({total_s:,.0f} s of test time in all):")
    for seconds, name in rows[:count]:
        print(f"{seconds:8.1f} s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
