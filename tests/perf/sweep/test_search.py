"""The sweep's pure parts: the grid, the bound that prunes, the first guess, ties, the Pareto front,
the write-back and the resumable store. Outcomes here are written out by hand (the search is a
pure function of them); the live sweep against a real server is tested in test_perf_sweep.py."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.sweep_models import plain_config
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep import (
    SearchSettings,
    StepPoint,
    SweepStore,
    Variant,
    VariantOutcome,
    apply_variant,
    choose_winner,
    first_guess,
    pareto_front,
    parse_preferred,
    parse_windows,
    search,
    throughput_bound_per_s,
    useful_loads,
    variant_grid,
    write_winner,
)
from tritonkit.repository import lint_repository, read_config

BASE = plain_config()


def outcome(v: Variant, *points: tuple[float, float, float], cost_us: float | None = None,
            sla_p99_ms: float = 50.0) -> VariantOutcome:
    steps = [StepPoint(load, tput, p99, meets_sla=p99 <= sla_p99_ms) for load, tput, p99 in points]
    return VariantOutcome(v, steps=steps, exec_cost_us={1: cost_us} if cost_us else {})


# ------------------------------------------------------------------------------------- grid


def test_grid_puts_the_default_config_first_and_does_not_repeat_it() -> None:
    grid = variant_grid(BASE, instances=[1, 2], max_batch_sizes=[4, 8], windows_us=[5000])
    assert grid[0].is_default and grid[0].id == "default"
    assert [v.id for v in grid[1:]] == ["i1-b4-w5ms", "i2-b4-w5ms", "i2-b8-w5ms"]  # i1-b8-w5ms is the default


def test_grid_collapses_windows_for_max_batch_one_and_drops_preferred_sizes_above_the_max() -> None:
    grid = variant_grid(BASE, instances=[1], max_batch_sizes=[1, 4], windows_us=[0, 10_000],
                        preferred=[(), (8,)])
    ids = [v.id for v in grid[1:]]
    assert ids == ["i1-b1-w0", "i1-b4-w0", "i1-b4-w10ms"]


def test_grid_refuses_max_batch_sizes_for_a_model_that_does_not_batch() -> None:
    flat = mc.ModelConfig()
    flat.CopyFrom(BASE)
    flat.max_batch_size = 0
    flat.ClearField("dynamic_batching")
    with pytest.raises(ConfigError, match="does not batch"):
        variant_grid(flat, max_batch_sizes=[4])


def test_apply_variant_changes_only_the_swept_fields() -> None:
    variant = Variant(instances=2, max_batch_size=4, window_us=0, preferred_batch_sizes=(4,))
    config = apply_variant(BASE, variant)
    assert (config.max_batch_size, config.instance_group[0].count) == (4, 2)
    assert config.dynamic_batching.max_queue_delay_microseconds == 0
    assert list(config.dynamic_batching.preferred_batch_size) == [4]
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 32
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_CPU
    assert config.parameters["k"].string_value == "v"
    assert apply_variant(BASE, variant_grid(BASE)[0]) == BASE


def test_window_and_preferred_text_read_units_off_and_max() -> None:
    assert parse_windows("0,5ms,off,1s") == [0, 5000, None, 1_000_000]
    assert parse_preferred("none,4,2+8,max") == [(), (4,), (2, 8), (-1,)]
    with pytest.raises(ConfigError, match="no unit"):
        parse_windows("5")
    grid = variant_grid(BASE, max_batch_sizes=[4], preferred=parse_preferred("max"))
    assert grid[1].preferred_batch_sizes == (4,)


# ----------------------------------------------------------------------------- bound, guess


def test_bound_is_instances_times_batch_per_cheapest_execution_capped_by_concurrency() -> None:
    v = Variant(2, 4, 0)
    assert throughput_bound_per_s(v, 10_000.0, allowance=0.0) == pytest.approx(800.0)
    assert throughput_bound_per_s(v, 10_000.0, max_concurrency=4, allowance=0.0) == pytest.approx(400.0)
    assert throughput_bound_per_s(v, 10_000.0, allowance=0.1) == pytest.approx(880.0)


def test_first_guess_fills_the_cores_and_the_largest_batch_that_fits_the_p99_limit() -> None:
    grid = variant_grid(BASE, instances=[1, 2, 4], max_batch_sizes=[1, 4, 16], windows_us=[0])[1:]
    costs = {1: 2_000.0, 4: 4_000.0}  # µs: 2 ms + ~0.67 ms per extra request
    settings = SearchSettings(p99_limit_ms=20.0, cpu_cores=2, max_concurrency=64)
    guess = first_guess(grid, costs, settings)
    # 16 requests take ~12 ms, two of them 24 ms > 20 ms; 4 instances cannot beat 2 on 2 cores.
    assert guess is not None and (guess.instances, guess.max_batch_size) == (2, 4)


def test_loads_that_cannot_reach_the_best_are_skipped_but_the_top_load_is_kept() -> None:
    settings = SearchSettings(levels=(1, 2, 4, 8), max_concurrency=8, noise_allowance=0.1)
    # 2 ms per execution: c requests in flight complete at most c × 500/s (+10 %).
    assert useful_loads(Variant(2, 8, 0), settings, 2000.0, 1400.0) == (4, 8)
    assert useful_loads(Variant(1, 2, 0), settings, 2000.0, 1400.0) == (8,)  # two slots: nothing reaches it
    assert useful_loads(Variant(2, 8, 0), settings, None, 1400.0) == (1, 2, 4, 8)  # no cost known yet
    rate = SearchSettings(levels=(100, 200, 400), load_mode="request_rate", noise_allowance=0.0)
    assert useful_loads(Variant(2, 8, 0), rate, 2000.0, 250.0) == (400,)


# ------------------------------------------------------------------------------- ties, front


def test_a_tie_goes_to_the_lower_p99_then_to_fewer_instances() -> None:
    one = outcome(Variant(1, 8, 0), (8, 1000.0, 12.0))
    two = outcome(Variant(2, 2, 0), (8, 1020.0, 9.0))
    slow = outcome(Variant(2, 8, 0), (8, 800.0, 8.0))
    choice = choose_winner([one, two, slow], tie_tolerance=0.05)
    winner, tied = choice.winner, choice.tied
    assert not choice.noise_note  # no intervals: the tolerance alone decides
    assert winner is two and {o.variant.id for o in tied} == {one.variant.id, two.variant.id}
    same_p99 = outcome(Variant(1, 8, 0), (8, 1000.0, 9.1))
    assert choose_winner([same_p99, two], tie_tolerance=0.05).winner is same_p99  # throughput and p99 tie: one instance beats two


def _banded(v: Variant, throughput: float, band: tuple[float, float], p99: float) -> VariantOutcome:
    return VariantOutcome(v, steps=[StepPoint(8, throughput, p99, throughput_interval_per_s=band)])


def test_a_top_whose_interval_clears_the_runner_up_wins_outright() -> None:
    top = _banded(Variant(2, 8, 0), 1000.0, (980.0, 1020.0), 20.0)
    runner_up = _banded(Variant(1, 8, 0), 900.0, (850.0, 950.0), 10.0)
    choice = choose_winner([runner_up, top], tie_tolerance=0.05)
    assert choice.winner is top and choice.tied == [top] and choice.noise_note == ""


def test_a_top_inside_the_runner_ups_noise_is_a_tie_picked_by_the_tie_rule_and_said_plainly() -> None:
    # 10 % apart, beyond the 5 % tolerance, but the runner-up's interval reaches the top's lower bound.
    top = _banded(Variant(2, 8, 0), 1000.0, (900.0, 1100.0), 20.0)
    runner_up = _banded(Variant(1, 8, 0), 900.0, (850.0, 950.0), 10.0)
    far = _banded(Variant(1, 2, 0), 500.0, (480.0, 520.0), 5.0)
    choice = choose_winner([top, runner_up, far], tie_tolerance=0.05)
    assert choice.winner is runner_up  # lower p99 breaks the tie; the far one is not in it
    assert choice.tied == [runner_up, top]
    note = choice.noise_note
    assert note.startswith("the top is a tie within the noise: i2-b8-w0 1,000.0/s (95 % interval 900.0 – 1,100.0)")
    assert "i1-b8-w0 900.0/s (95 % interval 850.0 – 950.0)" in note and "i1-b2-w0" not in note
    assert "picked by the tie rule" in note and "the config served is not in the tie, so the pick stands" in note
    assert "--window-ms" in note and "measurement-interval" not in note
    # The tolerance it names makes the same outcomes a tie by the rule: decided, no note.
    assert choose_winner([top, runner_up, far], tie_tolerance=0.11).noise_note == ""


def test_a_search_whose_top_is_a_tie_within_the_noise_is_not_decided() -> None:
    measured = {"default": _banded(Variant(1, 8, 0, is_default=True), 900.0, (850.0, 950.0), 10.0),
                "i2-b8-w0": _banded(Variant(2, 8, 0), 1000.0, (900.0, 1100.0), 20.0)}
    grid = [o.variant for o in measured.values()]
    result = search(grid, lambda v, _loads: measured[v.id], None, SearchSettings(exhaustive=True))
    assert result.winner is measured["default"] and result.noise_note and not result.decided


def test_re_measurements_that_disagree_widen_the_scores_interval() -> None:
    o = VariantOutcome(Variant(2, 8, 0), steps=[StepPoint(8, 1000.0, 20.0, throughput_interval_per_s=(990.0, 1010.0))])
    o.confirmations.append(StepPoint(8, 800.0, 22.0, noisy=True, stable=False,
                                     throughput_interval_per_s=(700.0, 900.0)))
    score = o.score()
    assert score is not None and score.throughput_per_s == 900.0 and score.noisy
    assert score.throughput_interval_per_s == (800.0, 1000.0)  # covers both values, wider than their mean band


def test_a_noisy_step_counts_and_one_without_figures_does_not() -> None:
    assert StepPoint(8, 1000.0, 20.0, stable=False, noisy=True).counts
    assert not StepPoint(8, 1000.0, 20.0, stable=False).counts
    noisy = StepPoint(8, 1000.0, 20.0, stable=False, noisy=True, throughput_interval_per_s=(700.0, 1300.0),
                      headroom={"p99<=50ms": 0.6})
    assert StepPoint.from_dict(noisy.to_dict()) == noisy


def test_a_confirmation_that_breaks_the_sla_falls_back_to_the_step_below() -> None:
    o = outcome(Variant(2, 4, 0), (4, 400.0, 10.0), (8, 600.0, 40.0))
    o.confirmations.append(StepPoint(8, 610.0, 70.0, meets_sla=False))
    score = o.score()
    assert score is not None and score.load == 4 and score.throughput_per_s == 400.0
    o.confirmations[0] = StepPoint(8, 620.0, 44.0)
    assert o.score() == StepPoint(8, 610.0, 42.0)
    o.confirmations.append(StepPoint(8, 100.0, 90.0, stable=False, meets_sla=False))  # says nothing
    assert o.score() == StepPoint(8, 610.0, 42.0)


def test_pareto_front_keeps_points_no_other_beats_on_both_axes() -> None:
    points = [(5.0, 100.0), (6.0, 90.0), (8.0, 300.0), (9.0, 250.0), (20.0, 500.0)]
    assert pareto_front(points) == [(5.0, 100.0), (8.0, 300.0), (20.0, 500.0)]


# ----------------------------------------------------------------------------------- search


def _system(v: Variant, loads: tuple[float, ...] = ()) -> VariantOutcome:
    """A hand-written server: 10 ms per execution, at most 8 in flight, throughput = slots / 10 ms."""
    slots = min(v.instances * v.max_batch_size, 8)
    return outcome(v, (8, slots * 100.0, 12.0), cost_us=10_000.0)


def test_search_prunes_what_cannot_win_and_agrees_with_the_exhaustive_grid() -> None:
    grid = variant_grid(BASE, instances=[1, 2], max_batch_sizes=[1, 2, 4, 8], windows_us=[0])
    calls: list[str] = []

    def measure(v: Variant, loads: tuple[float, ...]) -> VariantOutcome:
        calls.append(v.id)
        return _system(v, loads)

    settings = SearchSettings(max_concurrency=8, cpu_cores=2)
    pruned = search(grid, measure, None, settings)
    searched = list(calls)
    calls.clear()
    full = search(grid, measure, None, SearchSettings(max_concurrency=8, cpu_cores=2, exhaustive=True))
    assert len(calls) == len(grid) and len(searched) < len(grid)
    assert pruned.winner is not None and full.winner is not None
    # 800/s ties: fewest instances, then the default config (nothing to change) wins.
    assert pruned.winner.variant.id == full.winner.variant.id == "default"
    assert set(pruned.pruned) | set(searched) == {v.id for v in grid}
    assert searched[0] == "default"


def test_search_confirms_the_leaders_and_not_the_clear_losers() -> None:
    grid = variant_grid(BASE, instances=[1, 2], max_batch_sizes=[4], windows_us=[0])
    confirmed: list[str] = []

    def confirm(o: VariantOutcome) -> StepPoint | None:
        confirmed.append(o.variant.id)
        best = o.best()
        return best

    result = search(grid, _system, confirm, SearchSettings(max_concurrency=8, exhaustive=True))
    assert result.winner is not None and result.winner.variant.id == "default"  # 800/s at 1 instance
    assert "i1-b4-w0" not in confirmed and confirmed[0] == "default"


# ------------------------------------------------------------------------- write-back, store


def test_write_back_keeps_the_original_byte_for_byte_and_the_result_lints_clean(tmp_path: Path) -> None:
    folder = tmp_path / "repo" / "m"
    (folder / "1").mkdir(parents=True)
    (folder / "1" / "model.py").write_text("# model\n")
    original = b'# hand-written, with a comment\nname: "m"\nbackend: "python"\nmax_batch_size: 8\n' \
        b'input [ { name: "X" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 ' \
        b'dims: [ 4 ] } ]\ndynamic_batching { max_queue_delay_microseconds: 5000 }\n'
    (folder / "config.pbtxt").write_bytes(original)
    base = read_config(folder / "config.pbtxt")
    wb = write_winner(tmp_path / "repo", "m", apply_variant(base, Variant(2, 4, 10_000)),
                      now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc))
    assert wb.backup_path == folder / "config.pbtxt.orig-20260102T030405Z"
    assert wb.backup_path.read_bytes() == original
    assert read_config(folder / "config.pbtxt").instance_group[0].count == 2
    report = lint_repository(tmp_path / "repo", target="cpu")
    assert not [f for f in report.findings if f.severity.name == "ERROR"], report.findings
    assert wb.restore_command == f"cp {wb.backup_path} {folder / 'config.pbtxt'}"
    again = write_winner(tmp_path / "repo", "m", read_config(folder / "config.pbtxt"))
    assert again.backup_path is None  # the winner is already there: nothing written, no second backup


def test_store_reuses_finished_variants_and_refuses_other_settings(tmp_path: Path) -> None:
    store = SweepStore(tmp_path / "sweep")
    assert store.begin({"sla": "p99<=50ms", "levels": [1, 2]}) == 0
    done = outcome(Variant(2, 4, 0), (8, 500.0, 12.0), cost_us=9000.0)
    store.save(done)
    (store.variant_dir("i1-b4-w0") / "ladder").mkdir(parents=True)  # an interrupted one
    assert SweepStore(tmp_path / "sweep").begin({"sla": "p99<=50ms", "levels": [1, 2]}) == 1
    assert store.load("i2-b4-w0") == done
    store.discard_partial("i1-b4-w0")
    assert not store.variant_dir("i1-b4-w0").exists()
    with pytest.raises(ConfigError, match="different sla"):
        store.begin({"sla": "p99<=20ms", "levels": [1, 2]})
