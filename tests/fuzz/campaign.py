"""The long mutation campaign over every reader, outside the suite: counts, not a first failure.

    python -m tests.fuzz.campaign --cases 2000 --seed 7 [READER ...]

For each reader (tests/fuzz/readers.py and responses.py; all by default) it writes the valid input
once, then for each case copies it, mutates the file (case ``i`` of seed ``s`` is the same mutant
everywhere) and runs the check. It prints per reader the cases run, those that passed, and each
distinct failure with its count and the first case that met it; the exit status is 1 when any failed.
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.fuzz.mutate import mutant
from tests.fuzz.readers import READERS, crash
from tests.fuzz.responses import RESPONSES


def run(name: str, cases: int, seed: int, keep: Path | None) -> int:
    reader = {**READERS, **RESPONSES}[name]
    failures: Counter[str] = Counter()
    first: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="fuzz-") as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        target = reader.make(base).relative_to(base)
        valid = (base / target).read_bytes()
        started = time.monotonic()
        for case in range(cases):
            folder = Path(tmp) / f"case{case}"
            shutil.copytree(base, folder)
            data = mutant(random.Random(f"{seed}:{name}:{case}"), valid, as_json=reader.as_json)
            (folder / target).write_bytes(data)
            try:
                reader.check(folder, folder / target)
            except AssertionError as exc:
                key = str(exc).splitlines()[0][:200] if str(exc) else "assertion"
                failures[key] += 1
                first.setdefault(key, case)
                if keep is not None and failures[key] == 1:
                    (keep / f"{name.replace(' ', '_')}-{case}").write_bytes(data)
            except Exception as exc:  # noqa: BLE001 - counted: the check itself met the crash
                key = crash(exc)
                failures[key] += 1
                first.setdefault(key, case)
            shutil.rmtree(folder, ignore_errors=True)
    failed = sum(failures.values())
    tracebacks = sum(n for key, n in failures.items() if key.startswith("traceback"))
    print(f"{name}: {cases} cases, {cases - failed} passed, {failed} failed ({tracebacks} tracebacks), "
          f"{time.monotonic() - started:.0f} s", flush=True)
    for key, count in failures.most_common():
        print(f"  {count:5d} x (first case {first[key]}) {key}", flush=True)
    return failed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("readers", nargs="*", help="reader names (default: all)")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--keep", type=Path, default=None, help="a folder for the first mutant of each failure")
    args = parser.parse_args()
    names = args.readers or [*READERS, *RESPONSES]
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
    failed = sum(run(name, args.cases, args.seed, args.keep) for name in names)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
