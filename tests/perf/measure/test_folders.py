"""Names from the command line become paths in one place each: the run folder's name
(``folders.run_folder``) and a model folder inside its repository (``model_folder``); a step that
recorded no request is named as such, and the test helper that looks for left-over perf_analyzer
processes recognises the program, not a mention of its name.

Pure tests: no server. The console text is perf_analyzer 2.60's, seen here against
tritonserver 2.51 with a model slower than a 100 ms measurement window (exit status 3).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.perf_models import is_perf_analyzer
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.failures import Failure, classify
from tritonkit.perf.measure.folders import run_folder
from tritonkit.perf.sweep import SweepSettings, run_sweep
from tritonkit.perf.sweep.writeback import plan_write_back
from tritonkit.repository import read_config

CONFIG = 'name: "m"\nbackend: "python"\nmax_batch_size: 0\n'


def test_the_sweep_folder_is_named_as_every_run_folder_is(tmp_path: Path) -> None:
    folder = SweepSettings(sla="p99<10ms", results_root=tmp_path).out_dir("org/model")
    # One folder directly under the root (a '/' in a model name must not nest folders).
    assert folder.parent == tmp_path
    assert re.fullmatch(r"\d{8}T\d{6}Z-org_model-sweep", folder.name)
    assert folder.name[16:] == run_folder("org/model", tmp_path, kind="sweep").name[16:]  # the stamp aside


def _two_repositories(tmp_path: Path) -> tuple[Path, Path]:
    repo, other = tmp_path / "repo", tmp_path / "other"
    for root in (repo, other):
        (root / "m").mkdir(parents=True)
        (root / "m" / "config.pbtxt").write_text(CONFIG)
    return repo, other


def test_a_sweep_of_a_name_that_leaves_the_repository_is_refused(tmp_path: Path) -> None:
    repo, _ = _two_repositories(tmp_path)
    with pytest.raises(ConfigError, match="not a plain folder name"):
        run_sweep(repo, "../other/m", SweepSettings(sla="p99<10ms", out=tmp_path / "out"))
    assert not (tmp_path / "out").exists()


def test_the_write_back_refuses_a_name_that_leaves_the_repository(tmp_path: Path) -> None:
    repo, other = _two_repositories(tmp_path)
    config = read_config(other / "m" / "config.pbtxt")
    with pytest.raises(ConfigError, match="not a plain folder name"):
        plan_write_back(repo, "../other/m", config)
    assert sorted(p.name for p in (other / "m").iterdir()) == ["config.pbtxt"]


NO_REQUESTS = ("WARNING: Pass contained only one request, so sample latency standard deviation will be "
               "infinity (UINT64_MAX).\nNo valid requests recorded within time interval. Please use a larger "
               "time window.\n")


def test_a_window_that_recorded_no_request_is_not_called_refused_options() -> None:
    found = classify("*** Measurement Settings ***\n" + NO_REQUESTS, returncode=3, server_reachable=True,
                     model_ready=True, model="slowish")
    assert found.failure is Failure.NO_REQUESTS
    assert "model 'slowish'" in found.message and "longer measurement window" in found.message


@pytest.mark.parametrize(("argv", "expected"), [
    (["/x/.venv/bin/python", "-m", "pytest", "-k", "perf_analyzer", "tests/perf/test_pipeline.py"], False),
    (["python", "-m", "pytest", "tests/perf/test_pipeline.py::test_no_perf_analyzer_is_left_running"], False),
    (["/opt/pa/bin/perf_analyzer", "-m", "m"], True),
    (["/opt/rt/ld-linux-x86-64.so.2", "--library-path", "/opt/rt", "/opt/pa/bin/perf_analyzer", "-m", "m"], True),
])
def test_the_left_over_check_recognises_perf_analyzer_not_its_mention(argv: list[str], expected: bool) -> None:
    assert is_perf_analyzer(argv) is expected
