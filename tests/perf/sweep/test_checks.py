"""The sweep's checks that need no server: stored results validated on read, how a ladder that was
cut short or an open-loop step that fell behind is judged, GPU figures from the server's metrics,
the batcher turned on when max batch is swept, the settings the CLI builds, and the write-back
that happens only on commit. Ladders here are written out by hand (they are what run_ladder
returns); the same paths against the real server are in test_perf_sweep_faults.py."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from tests.support.sweep_models import SLEEPY_CONFIG
from tritonkit.errors import ConfigError
from tritonkit.perf import evaluate_result, parse_sla
from tritonkit.perf.judge import JudgeSettings
from tritonkit.perf.measure.ladder import LadderResult
from tritonkit.perf.measure.metrics import parse_metrics, server_gpus
from tritonkit.perf.measure.result import LatencyStats, PerfResult, RunMetadata, StepMetrics, StepResult
from tritonkit.perf.sweep import (
    SearchSettings,
    StoredResultError,
    SweepGrid,
    SweepSettings,
    SweepStore,
    Variant,
    VariantOutcome,
    first_guess,
    grid_warnings,
    plan_write_back,
    variant_grid,
)
from tritonkit.perf.sweep.driver import failure_reason, step_points
from tritonkit.perf.sweep.outcome import STATUS_FAILED, StepPoint
from tritonkit.repository import parse_config, read_config

NO_BATCHER = parse_config(SLEEPY_CONFIG.format(name="m", max_batch=4, batching="", instances=1, base_ms=6,
                                               per_item_ms=2, max_batch_limit=16))
SLA = parse_sla("p99<=50ms").with_zero_errors()


def _step(mode: str, load: float, throughput: float | None, p99_ms: float = 10.0, *, errors: int = 0,
          note: str | None = None, gpu_bytes: float | None = None) -> StepResult:
    latency = LatencyStats(p50_ms=p99_ms / 2, p90_ms=p99_ms, p95_ms=p99_ms, p99_ms=p99_ms) if throughput else None
    metrics = StepMetrics(gpu_memory_used_bytes_max=gpu_bytes, gpu_utilization_max=0.5) if gpu_bytes else None
    return StepResult(load_mode=mode, load_value=load, throughput_per_s=throughput, latency=latency,
                      error_count=errors, error_note=note, metrics=metrics, duration_s=2.0)


def _ladder(*steps: StepResult, stop: str = "completed", error: Exception | None = None) -> LadderResult:
    result = PerfResult(metadata=RunMetadata(model="m", url="127.0.0.1:1", protocol="grpc", started_utc="x"),
                        steps=list(steps), stop_reason=stop)
    return LadderResult(result, error)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- stored results


def _stored(tmp_path: Path, **changes: object) -> Path:
    good = VariantOutcome(Variant(2, 4, 0), steps=[StepPoint(4, 500.0, 12.0)], exec_cost_us={1: 8000.0})
    data = good.to_dict()
    data.update(changes)
    path = tmp_path / "variants" / "i2-b4-w0" / "outcome.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("throughput", [math.nan, math.inf, 1e12, -5.0, "fast"])
def test_a_stored_impossible_throughput_is_rejected_naming_the_file_and_field(tmp_path: Path,
                                                                              throughput: object) -> None:
    path = _stored(tmp_path, steps=[{"load": 4, "throughput_per_s": throughput, "p99_ms": 12.0}])
    with pytest.raises(StoredResultError) as caught:
        SweepStore(tmp_path).load("i2-b4-w0")
    assert str(path) in caught.value.message and "steps[0]" in caught.value.message
    assert caught.value.field_name == "throughput_per_s"
    assert SweepStore(tmp_path).finished() == {}  # a resume measures it again


@pytest.mark.parametrize(("changes", "field"), [
    ({"steps": "many"}, "steps"),
    ({"variant": [1, 2]}, "variant"),
    ({"variant": {"max_batch_size": 4}}, "variant"),
    ({"status": "great"}, "status"),
    ({"exec_cost_us": {"1": math.nan}}, "1"),
    ({"confirmations": [{"load": 4, "throughput_per_s": 400.0, "p99_ms": -1}]}, "p99_ms"),
])
def test_a_structurally_wrong_outcome_is_a_clear_error_not_a_traceback(tmp_path: Path, changes: dict[str, object],
                                                                       field: str) -> None:
    path = _stored(tmp_path, **changes)
    with pytest.raises(StoredResultError) as caught:
        SweepStore(tmp_path).load("i2-b4-w0")
    assert str(path) in caught.value.message
    assert caught.value.field_name == field


def test_a_rejected_outcome_is_kept_aside_and_a_good_one_round_trips(tmp_path: Path) -> None:
    _stored(tmp_path, steps=[{"load": 4, "throughput_per_s": 1e12, "p99_ms": 12.0}])
    store = SweepStore(tmp_path)
    kept = store.reject("i2-b4-w0")
    assert kept == tmp_path / "rejected" / "i2-b4-w0.outcome.json" and store.load("i2-b4-w0") is None
    good = VariantOutcome(Variant(1, 4, 0), steps=[StepPoint(2, 100.0, math.inf, meets_sla=False)])
    store.save(good)
    back = store.load("i1-b4-w0")
    assert back is not None and back.steps[0].p99_ms == math.inf  # an unmeasured p99 survives as unknown


def test_a_failed_outcome_is_not_reused_by_a_resume(tmp_path: Path) -> None:
    store = SweepStore(tmp_path)
    store.save(VariantOutcome(Variant(1, 4, 0), status=STATUS_FAILED, steps=[StepPoint(1, 100.0, 5.0)],
                              reason="perf_analyzer was killed"))
    assert store.load("i1-b4-w0") is None and store.finished() == {}


# ---------------------------------------------------------------------------- judging steps


def test_a_ladder_cut_short_has_its_reason_and_a_model_error_names_the_models_message() -> None:
    from tritonkit.errors import PerfError

    killed = _ladder(_step("concurrency", 1, 100.0), stop="perf_error",
                     error=PerfError("perf_analyzer was killed by signal 9 (SIGKILL)", returncode=-9))
    assert failure_reason(killed) == "perf_analyzer was killed by signal 9 (SIGKILL)"
    raised = _ladder(_step("concurrency", 1, None, errors=1, note="RuntimeError: boom"), stop="request_errors")
    assert failure_reason(raised) == "RuntimeError: boom"
    assert failure_reason(_ladder(stop="server_lost")) == "the server stopped answering"


def test_an_open_loop_step_that_did_not_carry_the_offered_rate_misses_the_sla() -> None:
    ladder = _ladder(_step("request_rate", 100, 98.0), _step("request_rate", 400, 250.0))
    carried, behind = step_points(ladder, SLA, JudgeSettings(rate_tolerance=0.05))
    assert carried.meets_sla and carried.note == ""
    assert not behind.meets_sla and "carried 250.0 of 400 req/s offered" in behind.note
    loose = step_points(ladder, SLA, JudgeSettings(rate_tolerance=0.5))
    assert loose[1].meets_sla  # within a 50 % tolerance it passes: the tolerance is what decides


def test_a_step_point_is_what_the_judge_says_of_that_step_with_its_reasons() -> None:
    """The sweep reads the verdict: the same call the run's verdict makes, nothing changed after."""
    ladder = _ladder(_step("request_rate", 100, 98.0), _step("request_rate", 200, 120.0, p99_ms=80.0))
    judging = JudgeSettings(rate_tolerance=0.05)
    verdict = evaluate_result(SLA, ladder.result, judging)
    points = step_points(ladder, SLA, judging)
    assert [p.meets_sla for p in points] == [s.status == "pass" for s in verdict.steps] == [True, False]
    assert points[1].note == "; ".join(verdict.steps[1].reasons)
    assert points[1].note.startswith("p99<=50ms (measured 80")  # the bound broken, then the rate
    assert "carried 120.0 of 200 req/s offered (below 95 %)" in points[1].note


def test_peak_gpu_memory_is_recorded_and_a_memory_limit_fails_the_step() -> None:
    ladder = _ladder(_step("concurrency", 1, 100.0, gpu_bytes=512 * 2**20),
                     _step("concurrency", 2, 190.0, gpu_bytes=3 * 2**30))
    points = step_points(ladder, SLA, JudgeSettings(max_gpu_memory_mb=2048))
    assert [p.gpu_memory_mb for p in points] == [512.0, 3072.0]
    assert points[0].meets_sla and not points[1].meets_sla and "GPU memory 3,072 MiB" in points[1].note
    outcome = VariantOutcome(Variant(1, 4, 0), steps=points)
    assert outcome.gpu_peak() == (3072.0, 0.5)
    assert outcome.best() is points[0]


METRICS = """
# HELP nv_gpu_utilization GPU utilization rate [0.0 - 1.0)
nv_gpu_utilization{gpu_uuid="GPU-aaaa"} 0.41
nv_gpu_utilization{gpu_uuid="GPU-bbbb"} 0.12
nv_gpu_memory_used_bytes{gpu_uuid="GPU-aaaa"} 1.2e9
nv_gpu_memory_used_bytes{gpu_uuid="GPU-bbbb"} 3.0e8
"""


def test_the_first_guess_counts_the_servers_gpus_not_cpu_cores() -> None:
    """No GPU here: the server's metrics text is written out as Triton exports it."""
    gpus = len(server_gpus(parse_metrics(METRICS)))
    assert gpus == 2
    grid = [Variant(1, 8, 0), Variant(4, 8, 0)]
    costs = {1: 1000.0, 8: 2000.0}
    on_cpu = SearchSettings(max_concurrency=32, cpu_cores=1, gpus=0)
    on_gpus = SearchSettings(max_concurrency=32, cpu_cores=1, gpus=gpus)
    # One core: four workers cannot beat one, so the fewer instances win the guess; with GPUs they can.
    assert first_guess(grid, costs, on_cpu) == Variant(1, 8, 0)
    assert first_guess(grid, costs, on_gpus) == Variant(4, 8, 0)


# ---------------------------------------------------------------------------- grid and settings


def test_sweeping_max_batch_turns_the_batcher_on_for_a_model_without_one() -> None:
    grid = variant_grid(NO_BATCHER, max_batch_sizes=[1, 4, 8])
    assert grid[0].is_default and grid[0].window_us is None
    assert [v.id for v in grid[1:]] == ["i1-b1-w0", "i1-b4-w0", "i1-b8-w0"]
    assert grid_warnings(grid) == []


def test_a_grid_whose_knobs_cannot_change_throughput_says_so() -> None:
    off = variant_grid(NO_BATCHER, max_batch_sizes=[1, 4, 8], windows_us=[None])  # --batch-window off
    notes = grid_warnings(off)
    assert len(notes) == 1 and "max batch 1, 4, 8 and no dynamic batcher" in notes[0] and "only tie" in notes[0]
    assert "nothing to compare" in grid_warnings(variant_grid(NO_BATCHER))[0]
    explicit = variant_grid(NO_BATCHER, max_batch_sizes=[1, 4], batcher_on_batch_sweep=False)
    assert all(v.window_us is None for v in explicit) and grid_warnings(explicit)


def test_settings_hold_the_ladder_and_reject_bad_fractions(tmp_path: Path) -> None:
    settings = SweepSettings(sla="p99<=20ms", grid=SweepGrid(instances=[1, 2]), concurrency="1,2,4",
                             step_window_ms=300, out=tmp_path / "out")
    plan = settings.ladder_plan()
    assert plan.levels == (1.0, 2.0, 4.0) and plan.step_window_ms == 300 and plan.stop_after_sla_breaks == 1
    assert settings.out_dir("m") == tmp_path / "out"
    assert str(settings.parsed_sla()) == "p99<=20ms,errors==0"
    assert SweepSettings.default("step_window_ms") == 500
    with pytest.raises(ConfigError, match=r"SweepSettings\.tie_tolerance 5\.0: too large"):
        SweepSettings(sla="p99<=1s", tie_tolerance=5.0)


def test_the_cli_option_defaults_are_the_settings_defaults() -> None:
    from tritonkit.cli.sweep import sweep_command

    defaults = {p.name: p.default for p in sweep_command.params}
    assert defaults["window_ms"] == SweepSettings.default("step_window_ms")
    assert defaults["warmup_s"] == SweepSettings.default("warmup_s")
    assert defaults["tie_tolerance"] == 100 * SweepSettings.default("tie_tolerance")
    assert defaults["rate_tolerance"] == 100 * SweepSettings.default("rate_tolerance")
    assert defaults["results_root"] == SweepSettings.default("results_root")


def test_a_planned_write_back_touches_nothing_until_committed(tmp_path: Path) -> None:
    folder = tmp_path / "repo" / "m"
    folder.mkdir(parents=True)
    (folder / "config.pbtxt").write_text(SLEEPY_CONFIG.format(name="m", max_batch=4, batching="", instances=1,
                                                              base_ms=6, per_item_ms=2, max_batch_limit=16))
    before = (folder / "config.pbtxt").read_bytes()
    from tritonkit.perf.sweep import apply_variant

    pending = plan_write_back(tmp_path / "repo", "m", apply_variant(NO_BATCHER, Variant(2, 4, 0)))
    assert pending.planned.backup_path is not None and not pending.planned.backup_path.exists()
    assert (folder / "config.pbtxt").read_bytes() == before and sorted(p.name for p in folder.iterdir()) == [
        "config.pbtxt"]
    written = pending.commit()
    assert written.backup_path is not None and written.backup_path.read_bytes() == before
    assert read_config(folder / "config.pbtxt").instance_group[0].count == 2
