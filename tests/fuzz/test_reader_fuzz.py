"""Every file and answer tritonkit reads, mutated: a documented status or the reader's typed error,
the file (or field, or URL) named, no traceback, nothing written half.

The readers are listed, each with its valid input and its check, in :mod:`tests.fuzz.readers` (what a
user feeds a command: config.pbtxt, model.json / model.yaml, saved results and baselines, an SLA file,
prompt files and replay logs, a sweep folder's records) and :mod:`tests.fuzz.responses` (what other
programs answer: perf_analyzer's and AIPerf's exports, the engine answers inside them, ``/metrics``,
``/v1/models``, tritonserver's admin API). Each gets :data:`EXAMPLES` mutants of its valid input (byte
flips, cuts, 1e308, -0, NaN, digits past a float, wrong types, deep nesting, odd text), seeded and
bounded: about 20 s of CPU in all. ``python -m tests.fuzz.campaign --cases 2000 --seed 11`` runs the
long campaign (docs/contributing.md).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, seed, settings

from tests.fuzz.mutate import mutant, randoms
from tests.fuzz.readers import READERS, Reader
from tests.fuzz.responses import RESPONSES
from tests.support.loopback import answering

EXAMPLES = int(os.environ.get("TRITONKIT_FUZZ_READER_EXAMPLES", "50"))
SEED = int(os.environ.get("TRITONKIT_FUZZ_SEED", "45"))
ALL: dict[str, Reader] = {**READERS, **RESPONSES}


@pytest.fixture(scope="module")
def valid(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """Each reader's valid folder, and the file in it that is mutated."""
    made = {}
    for name, reader in ALL.items():
        folder = tmp_path_factory.mktemp(name.replace(" ", "_").replace("/", "_"))
        made[name] = (folder, reader.make(folder))
    return made


@pytest.mark.parametrize("name", sorted(ALL))
def test_each_reader_takes_its_valid_input(valid: dict[str, tuple[Path, Path]], name: str,
                                           tmp_path: Path) -> None:
    """The fuzz starts from input the reader accepts (a check that refused everything would hold vacuously)."""
    folder, path = valid[name]
    case = tmp_path / "case"
    shutil.copytree(folder, case)
    ALL[name].check(case, case / path.relative_to(folder))


@pytest.mark.parametrize("name", sorted(ALL))
@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(rng=randoms())
def test_a_mutated_input_ends_in_a_documented_status_or_a_typed_error_naming_it(
        valid: dict[str, tuple[Path, Path]], name: str, rng: random.Random, tmp_path_factory: pytest.TempPathFactory) -> None:
    folder, path = valid[name]
    case = tmp_path_factory.mktemp("case")
    shutil.rmtree(case)
    shutil.copytree(folder, case)
    target = case / path.relative_to(folder)
    target.write_bytes(mutant(rng, path.read_bytes(), as_json=ALL[name].as_json))
    try:
        ALL[name].check(case, target)
    finally:
        shutil.rmtree(case, ignore_errors=True)


def test_the_mutants_are_hostile_and_the_valid_inputs_are_not() -> None:
    """The mutator reaches what the readers must refuse: a JSON number past a float, NaN, deep nesting,
    a cut file, bytes that are not UTF-8; and the loopback answers what it is given."""
    valid = b'{"a": [1, 2.5, "x"], "b": {"c": 3}}'
    mutants = [mutant(random.Random(i), valid, as_json=True) for i in range(300)]
    assert any(b"0" * 400 in m for m in mutants) and any(b"NaN" in m for m in mutants)
    assert any(b"[[[[[[[[[[" in m for m in mutants) and any(m != valid and valid.startswith(m) for m in mutants)
    assert sum(1 for m in mutants if not _utf8(m)) > 5
    assert len(set(mutants)) > 250
    import urllib.request
    with answering(b"hello") as url, urllib.request.urlopen(f"http://{url}/v1/models") as answer:
        assert answer.read() == b"hello"


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
