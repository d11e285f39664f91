"""The search's model and its proposals, on synthetic cost shapes whose optimum is known.

The server here is a simulation (tests/support/sweep_sim.py): a discrete-event model of the
dynamic batcher under a closed loop, on three cost shapes — a fixed cost per execution, a cost
per row, and a CPU-bound model whose instances share 1.6 cores — with 2 % noise on every figure
it reports. It is not the search's own model (requests arrive one by one, batches form from the
queue, executions jitter), so the search is checked against something it did not write.

The grid is the one a user asks for with ``--instances 1:4 --max-batch-size 1:64:x2
--batch-window 0:20ms:5ms --preferred-batch none,max``: 245 variants. The optimum is the best
any variant carries within the SLA, every variant simulated without noise.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

import pytest

from tests.support.sweep_models import plain_config
from tests.support.sweep_sim import SHAPES, SimulatedServer
from tritonkit.perf.sweep import (
    SearchSettings,
    StepPoint,
    Variant,
    VariantOutcome,
    fit_model,
    parse_instances,
    parse_max_batch_sizes,
    parse_preferred,
    parse_windows,
    search,
    variant_grid,
)
from tritonkit.perf.sweep.model import ModelSettings

BASE = plain_config("")
GRID = variant_grid(BASE, instances=parse_instances("1:4"), max_batch_sizes=parse_max_batch_sizes("1:64:x2"),
                    windows_us=parse_windows("0:20ms:5ms"), preferred=parse_preferred("none,max"))
LEVELS = (1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
P99_LIMIT_MS = 30.0
SETTINGS = SearchSettings(levels=LEVELS, max_concurrency=64, p99_limit_ms=P99_LIMIT_MS, cpu_cores=2)
#: "A small fraction" of the grid, as the search must keep to it: a tenth.
MOST_MEASURED = len(GRID) // 10


@pytest.fixture(scope="module")
def truth() -> dict[str, tuple[SimulatedServer, dict[str, float]]]:
    """Per shape: the simulation (its exact figures cached) and every variant's best within the SLA."""
    found = {}
    for name, shape in SHAPES.items():
        server = SimulatedServer(shape, LEVELS, P99_LIMIT_MS)
        found[name] = (server, {v.id: server.best_exact(v) for v in GRID})
    return found


def _server(truth: dict[str, tuple[SimulatedServer, dict[str, float]]], shape: str) -> SimulatedServer:
    """A fresh measuring server sharing the exact figures (and the noise per measurement) of the truth's."""
    cached, _ = truth[shape]
    server = SimulatedServer(cached.shape, LEVELS, P99_LIMIT_MS)
    server._exact = cached._exact
    return server


def test_the_grid_is_the_250_variant_one_users_ask_for() -> None:
    assert 240 <= len(GRID) <= 260
    assert GRID[0].is_default


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_search_finds_the_optimum_within_5_percent_measuring_a_tenth_of_the_grid(
        truth: dict[str, tuple[SimulatedServer, dict[str, float]]], shape: str) -> None:
    """Ties here are 2 %: the tie rule may trade up to the tie tolerance of throughput for a
    lower p99, and this test asks whether the search *finds* the best variant."""
    server = _server(truth, shape)
    _, best = truth[shape]
    result = search(GRID, server.measure, server.confirm, replace(SETTINGS, tie_tolerance=0.02))
    assert result.winner is not None
    optimum = max(best.values())
    found = best[result.winner.variant.id]
    assert found >= 0.95 * optimum, (shape, result.winner.variant.id, found, optimum)
    assert len(server.measured) <= MOST_MEASURED, (shape, server.measured)


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_the_default_search_picks_as_well_as_the_exhaustive_one_at_a_tenth_of_the_measurements(
        truth: dict[str, tuple[SimulatedServer, dict[str, float]]], shape: str) -> None:
    """Both see the same figures for a variant (the n-th measurement of a variant at a load has
    the same noise whichever search asks for it); their winners' true throughputs are compared."""
    _, best = truth[shape]
    pruned_server, full_server = _server(truth, shape), _server(truth, shape)
    pruned = search(GRID, pruned_server.measure, pruned_server.confirm, SETTINGS)
    full = search(GRID, full_server.measure, full_server.confirm, replace(SETTINGS, exhaustive=True))
    assert pruned.winner is not None and full.winner is not None
    assert best[pruned.winner.variant.id] >= 0.95 * best[full.winner.variant.id], (
        shape, pruned.winner.variant.id, full.winner.variant.id)
    assert len(full_server.measured) == len(GRID)
    assert len(pruned_server.measured) <= MOST_MEASURED


def test_every_variant_says_why_it_was_measured_pruned_or_skipped(
        truth: dict[str, tuple[SimulatedServer, dict[str, float]]]) -> None:
    server = _server(truth, "row")
    result = search(GRID, server.measure, server.confirm, SETTINGS)
    assert set(result.decisions) == {v.id for v in GRID}
    measured = {o.variant.id for o in result.outcomes}
    for variant_id, decision in result.decisions.items():
        assert (decision.action == "measured") == (variant_id in measured), decision
    pruned = [d for d in result.decisions.values() if d.action == "pruned"]
    skipped = [d for d in result.decisions.values() if d.action == "skipped"]
    proposed = [d for d in result.decisions.values() if d.action == "measured" and d.prediction is not None]
    assert pruned and skipped and proposed
    assert all(d.reason.startswith("skipped: bound ") and " below best " in d.reason for d in pruned)
    assert all(d.reason.startswith(("skipped: model predicts at most ", "skipped: bound ")) for d in skipped)
    assert all("model predicts" in d.reason and "±" in d.reason or "–" in d.reason for d in proposed)
    # A skipped variant could not reach 5 % above the best measured when the search stopped: its
    # reason says that best, and its figures (the model's range, or the bound) are below it.
    for decision in skipped:
        said_best = float(re.search(r"best ([\d,]+)/s", decision.reason).group(1).replace(",", ""))  # type: ignore[union-attr]
        reach = min(decision.prediction.high_per_s if decision.prediction else math.inf, decision.bound_per_s or math.inf)
        assert reach <= said_best * 1.05 + 1, decision
    assert "cost per execution" in result.model_text


# ------------------------------------------------------------------------------ the model itself


def _outcome(v: Variant, costs: dict[int, float], *steps: tuple[float, float, float]) -> VariantOutcome:
    return VariantOutcome(v, steps=[StepPoint(load, tput, p99) for load, tput, p99 in steps], exec_cost_us=costs)


MODEL_SETTINGS = ModelSettings(levels=(1.0, 2.0, 4.0, 8.0, 16.0), p99_limit_ms=50.0, cpu_cores=2)


def test_the_cost_line_lies_under_sizes_measured_while_other_instances_ran() -> None:
    """1 ms + 1 ms per request, except batch 8, seen only while three instances shared two cores."""
    costs = {1: 2_000.0, 2: 3_000.0, 4: 5_000.0, 8: 21_000.0}
    model = fit_model([_outcome(Variant(1, 8, 0, is_default=True), costs, (1, 490.0, 2.2))], MODEL_SETTINGS)
    assert model is not None
    assert model.mid.cost(8) == pytest.approx(9_000.0, rel=0.01)
    assert model.mid.cost(16) == pytest.approx(17_000.0, rel=0.01)


def test_one_batch_size_measured_leaves_the_batching_gain_open_until_a_larger_batch_is_measured() -> None:
    """Measured at batch 1 only, a variant batching 8 may cost anywhere from one execution
    ("all fixed") to eight ("all per row"): its range spans both; once batch 8 is measured, it narrows."""
    default = Variant(1, 1, None, is_default=True)
    steps = [(1, 195.0, 5.4), (2, 200.0, 10.6), (4, 200.0, 21.0)]
    alone = fit_model([_outcome(default, {1: 5_000.0}, *steps)], MODEL_SETTINGS)
    batching = Variant(1, 8, 0)
    assert alone is not None
    wide = alone.predict(batching)
    assert wide.high_per_s >= 3 * wide.low_per_s  # fixed cost: up to 8× more per execution
    measured = _outcome(batching, {1: 5_000.0, 8: 6_000.0}, (8, 1_280.0, 6.5))
    fitted = fit_model([_outcome(default, {1: 5_000.0}, *steps), measured], MODEL_SETTINGS)
    assert fitted is not None
    narrow = fitted.predict(Variant(1, 16, 0))
    assert narrow.high_per_s - narrow.low_per_s < wide.high_per_s - wide.low_per_s
    assert narrow.throughput_per_s > 1_280.0  # batching pays: 16 requests cost little more than 8


def test_instances_scale_past_the_cores_only_once_measured_so() -> None:
    """Before any second instance is measured, the CPU cores bound the estimate and the range stays
    open above it; a model that sleeps, measured at 4 instances, scales past the 2 cores."""
    one = _outcome(Variant(1, 1, None, is_default=True), {1: 10_000.0}, (1, 99.0, 10.4), (2, 100.0, 20.5))
    before = fit_model([one], MODEL_SETTINGS)
    assert before is not None
    four = Variant(4, 1, None)
    guess = before.predict(four)
    assert guess.throughput_per_s == pytest.approx(200.0, rel=0.1)  # two cores
    assert guess.high_per_s >= 380.0  # four instances could all run
    measured = _outcome(four, {1: 10_000.0}, (4, 396.0, 10.6), (8, 398.0, 20.8))
    after = fit_model([one, measured], MODEL_SETTINGS)
    assert after is not None
    assert after.predict(Variant(3, 1, None)).throughput_per_s == pytest.approx(300.0, rel=0.1)


def test_a_queue_policy_that_would_reject_at_a_load_does_not_carry_it() -> None:
    """Closed loop, 10 ms per execution, one instance without batching: at 8 in flight 7 wait, so
    a queue of 4 rejects there (and above); the best it can carry is at 4 in flight."""
    default = _outcome(Variant(1, 1, 0, is_default=True), {1: 10_000.0}, (1, 98.0, 10.3), (2, 99.0, 20.4))
    model = fit_model([default], MODEL_SETTINGS)
    assert model is not None
    unbounded = model.predict(Variant(1, 1, 0, max_queue_size=0))
    bounded = model.predict(Variant(1, 1, 0, max_queue_size=4))
    assert unbounded.load == 4.0 or unbounded.load == 8.0 or unbounded.load == 16.0
    assert bounded.load is not None and bounded.load <= 4.0
