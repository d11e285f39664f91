"""The sweep against the real tritonserver and perf_analyzer, on a python-backend model whose best
configuration is known by construction (tests/support/sweep_models.py): every execution sleeps
6 ms + 2 ms per request, so two instances and batches of four carry the most at concurrency 8.

One search sweep is shared by the tests that only read its result (it takes about half a minute
on two cores); the exhaustive sweep and the re-run are their own measurements.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.support.sweep_models import write_sleepy
from tritonkit.perf.measure.result import PerfResult
from tritonkit.perf.sweep import SweepEvent, SweepGrid, SweepResult, SweepSettings, SweepStore, run_sweep
from tritonkit.repository import lint_repository, read_config

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

MODEL = "sleepy"
SLA = "p99<=60ms"
# i?-b32 does not load: the model refuses a max batch above 16 (it "does not fit").
GRID = SweepGrid(instances=[1, 2], max_batch_sizes=[1, 4, 32], windows_us=[0])
BEST = "i2-b4-w0"
Searched = tuple[SweepResult, Path, bytes, list[SweepEvent]]


def _sweep(repo: Path, out: Path, **options: Any) -> SweepResult:
    """A short sweep: concurrency up to 8, 300 ms windows, a brief warm-up per variant."""
    on_event = options.pop("on_event", None)
    settings = SweepSettings(sla=SLA, grid=GRID, out=out, concurrency="1,2,4,8", step_window_ms=300, warmup_s=0.6,
                             **options)
    return run_sweep(repo, MODEL, settings, on_event=on_event)


@pytest.fixture(scope="module")
def searched(tmp_path_factory: pytest.TempPathFactory) -> Searched:
    root = tmp_path_factory.mktemp("sweep")
    write_sleepy(root / "repo", MODEL)
    original = (root / "repo" / MODEL / "config.pbtxt").read_bytes()
    events: list[SweepEvent] = []
    result = _sweep(root / "repo", root / "out", on_event=events.append)
    return result, root, original, events


def test_the_search_finds_two_instances_with_batches_of_four(searched: Searched) -> None:
    result, _, _, _ = searched
    assert result.exit_code == 0
    assert result.search.winner is not None and result.search.winner.variant.id == BEST
    assert result.search.guess is not None and result.search.guess.id == BEST  # from cost × hardware
    ratio = result.ratio_to_default
    assert ratio is not None and ratio > 1.2, result.headline()
    assert "i1-b1-w0" in result.search.pruned  # one instance, no batching: at most ~1/8.6 ms
    assert result.search.winner.confirmations, "the winner was not re-measured"


def test_the_sweep_and_every_variant_name_the_runtime_that_served_them(searched: Searched) -> None:
    result, root, _, events = searched
    assert result.runtime is not None and (result.runtime.backend, result.runtime.stand_in) == ("python", False)
    summary = result.to_dict()
    assert summary["runtime"]["backend"] == "python"
    assert all(v["runtime"] == summary["runtime"] for v in summary["variants"])
    ladders = list((root / "out").rglob("result.json"))
    assert ladders and all(PerfResult.load(path).metadata.runtime == result.runtime for path in ladders)
    assert "python backend (tritonserver" in next(e.message for e in events if e.kind == "server")
    assert not any("stand-in" in w for w in result.warnings)  # a python model is not the ONNX stand-in


def test_the_first_guess_is_re_measured_in_the_closing_round_and_loads_skip_auto_complete(searched: Searched) -> None:
    """The default alone sets no bar for re-measuring a variant while it is loaded: the guess
    measured right after it is re-measured, if it is still a contender, once every variant is in."""
    result, _, _, events = searched
    guess = result.search.guess
    assert guess is not None
    kinds = [(e.kind, e.variant) for e in events]
    assert ("confirm", guess.id) in kinds, kinds
    assert kinds.index(("confirm", guess.id)) > max(i for i, (kind, _) in enumerate(kinds) if kind == "measured")
    assert not any(e.kind == "note" and e.message.strip().startswith(f"{guess.id} is within reach") for e in events)
    server = next(e for e in events if e.kind == "server")
    assert "auto-complete off" in server.message  # the model's config is complete as written


def test_the_server_is_stopped_only_once_the_last_variant_is_unloaded(searched: Searched) -> None:
    """Told to stop with a model still unloading, the server looks again only a second later."""
    result, _, _, _ = searched
    log = (result.out_dir / "tritonserver.log").read_text(errors="replace")
    looks = [line for line in log.splitlines() if "live models" in line]
    assert looks and "Found 0 live models" in looks[0], looks


def test_a_variant_the_server_refuses_is_reported_with_its_reason_and_skipped(
    searched: Searched,
) -> None:
    result, _, _, events = searched
    refused = {o.variant.id: o for o in result.search.outcomes if o.status == "load_failed"}
    assert set(refused) == {"i1-b32-w0", "i2-b32-w0"}
    assert all("does not fit" in o.reason for o in refused.values())
    assert any(e.kind == "load_failed" and "does not fit" in e.message for e in events)
    report = result.report_path.read_text() if result.report_path else ""
    assert "| i2-b32-w0 | 2 instances, max batch 32, window 0 | load failed |" in report


def test_the_winner_is_written_back_lint_clean_and_the_backup_restores_the_original(
    searched: Searched, tmp_path: Path,
) -> None:
    result, root, original, _ = searched
    wb = result.write_back
    assert wb is not None and wb.backup_path is not None
    written = read_config(wb.config_path)
    assert (written.max_batch_size, written.instance_group[0].count) == (4, 2)
    assert written.parameters["base_ms"].string_value == "6.0"  # the rest of the config is kept
    copy = tmp_path / "repo"
    shutil.copytree(root / "repo", copy)
    findings = lint_repository(copy, target="cpu").findings
    assert not [f for f in findings if f.severity.name == "ERROR"], findings
    assert wb.backup_path.read_bytes() == original
    shutil.copyfile(copy / MODEL / wb.backup_path.name, copy / MODEL / "config.pbtxt")  # what the restore runs
    assert (copy / MODEL / "config.pbtxt").read_bytes() == original
    assert wb.restore_command == f"cp {wb.backup_path} {wb.config_path}"


def test_the_report_lists_every_variant_and_draws_the_plot(searched: Searched) -> None:
    result, _, _, _ = searched
    assert result.report_path is not None and result.plot_path is not None
    report = result.report_path.read_text()
    for variant in result.grid:
        assert f"| {variant.id}" in report
    assert "× the default" in report and "![throughput vs p99](sweep.png)" in report
    assert result.plot_path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_rerun_into_the_same_folder_measures_nothing_again(searched: Searched) -> None:
    first, root, _, _ = searched
    files = {p: p.stat().st_mtime_ns for p in (root / "out" / "variants").glob("*/outcome.json")}
    events: list[SweepEvent] = []
    again = _sweep(root / "repo", root / "out", on_event=events.append)
    assert not [e for e in events if e.kind in ("start", "confirm")], [e.message for e in events]
    assert set(again.resumed) == {o.variant.id for o in again.search.outcomes}
    assert {p: p.stat().st_mtime_ns for p in files} == files
    # The written-back winner is now the model's own config, the config served: the commit rule
    # writes nothing, and says the repository holds it as it was.
    assert again.search.winner is not None and again.search.winner.variant.knobs_id == BEST
    assert again.write_back is None and not again.commits and "config served is in the winner's tie" in again.holds()
    assert first.search.winner is not None


def test_an_exhaustive_sweep_measures_every_variant_and_agrees_with_the_search(
    searched: Searched, tmp_path: Path,
) -> None:
    write_sleepy(tmp_path / "repo", MODEL)
    before = (tmp_path / "repo" / MODEL / "config.pbtxt").read_bytes()
    result = _sweep(tmp_path / "repo", tmp_path / "out", exhaustive=True, write_back=False)
    assert not result.search.pruned
    assert {o.variant.id for o in result.search.outcomes} == {v.id for v in result.grid}
    assert result.search.winner is not None and searched[0].search.winner is not None
    assert result.search.winner.variant.id == searched[0].search.winner.variant.id == BEST
    assert (tmp_path / "repo" / MODEL / "config.pbtxt").read_bytes() == before  # write_back=False
    assert len(SweepStore(tmp_path / "out").finished()) == len(result.grid)
