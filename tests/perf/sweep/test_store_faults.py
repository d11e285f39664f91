"""A resumed sweep meets damaged files in its folder: a variant's outcome.json truncated or empty
is measured again (moved aside when reached), never a stop of the whole sweep; a sweep.json that
is a folder is a clear error naming it. Pure: the store only, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.outcome import StoredResultError
from tritonkit.perf.sweep.store import SweepStore


@pytest.mark.parametrize("text", ['{"status": "meas', ""], ids=["truncated", "zero-byte"])
def test_a_damaged_outcome_does_not_stop_the_resume_and_is_measured_again(tmp_path: Path, text: str) -> None:
    store = SweepStore(tmp_path / "out")
    store.begin({"sla": "p99<10ms"})
    damaged = store.variant_dir("i1") / "outcome.json"
    damaged.parent.mkdir(parents=True)
    damaged.write_text(text)
    assert store.begin({"sla": "p99<10ms"}) == 0  # nothing to reuse; the resume goes on
    with pytest.raises(StoredResultError, match=str(damaged)):
        store.load("i1")  # what the driver moves aside before measuring it again
    assert store.reject("i1").is_file() and not damaged.exists()


def test_a_sweep_record_that_is_a_folder_is_refused_naming_it(tmp_path: Path) -> None:
    store = SweepStore(tmp_path / "out")
    (tmp_path / "out" / "sweep.json").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"sweep record .*sweep\.json is not a file"):
        store.begin({"sla": "p99<10ms"})
