"""The one commit rule ("write the winner back?") for every host and load source: a winner, nothing
failed, and the config already served (the default) not in its tie. Pure: the outcomes are written
out here and the decision read where each host makes it (the local sweep's result, a joint
sweep's, and a cluster's plan of its write-backs); no server."""

from __future__ import annotations

from pathlib import Path

from tests.support.sweep_models import write_sleepy
from tritonkit.perf.cluster.dispatch import JobOutcome
from tritonkit.perf.cluster.sweep import ClusterSweepResult, ModelSweep, _plan_write_backs
from tritonkit.perf.sweep import (
    SearchSettings,
    StepPoint,
    SweepResult,
    SweepSettings,
    Variant,
    VariantOutcome,
    search,
)
from tritonkit.perf.sweep.joint import JointOutcome, JointStep
from tritonkit.perf.sweep.joint_run import JointResult, plan_joint_write_backs, read_bases

DEFAULT = Variant(1, 4, 5000, is_default=True)


def _banded(v: Variant, throughput: float, band: tuple[float, float], p99: float = 10.0) -> VariantOutcome:
    return VariantOutcome(v, steps=[StepPoint(8, throughput, p99, throughput_interval_per_s=band)])


def _searched(*outcomes: VariantOutcome, tolerance: float = 0.05) -> SweepResult:
    by_id = {o.variant.id: o for o in outcomes}
    found = search([o.variant for o in outcomes], lambda v, _loads: by_id[v.id], None,
                   SearchSettings(exhaustive=True, tie_tolerance=tolerance))
    return SweepResult(model="m", repo=None, out_dir=Path("out"), sla_text="p99<=50ms", load_text="concurrency 8",
                       p99_limit_ms=50.0, exhaustive=True, grid=[o.variant for o in outcomes], search=found,
                       write_back=None, wall_s=1.0, resumed=[], server_version="2.51.0")


def test_a_tie_that_holds_the_served_config_is_not_written_even_when_the_tie_rule_picks_another() -> None:
    # Two instances serve now; one instance carries as much within the tolerance and wins the tie rule.
    served = _banded(Variant(2, 4, 5000, is_default=True), 1000.0, (990.0, 1010.0))
    fewer = _banded(Variant(1, 4, 5000), 990.0, (980.0, 1000.0))
    result = _searched(served, fewer)
    assert result.search.winner is fewer and served in result.search.tied
    assert not result.search.decided and not result.commits
    assert "config served is in the winner's tie" in result.holds()


def test_a_noise_tie_of_two_variants_that_both_beat_the_served_config_writes_the_tie_rules_pick() -> None:
    # The demo's figures: default 7,966/s, i2-b8-w5ms 10,734/s and i2-b8-w0 9,211/s, the two tuned
    # ones inside each other's noise and both far above the default's.
    default = _banded(DEFAULT, 7966.0, (7900.0, 8030.0))
    wide = _banded(Variant(2, 8, 5000), 10734.0, (9100.0, 12300.0), p99=12.0)
    zero = _banded(Variant(2, 8, 0), 9211.0, (9000.0, 9420.0), p99=12.0)
    result = _searched(default, wide, zero)
    assert result.search.noise_note and result.search.winner is zero  # the tie rule: the smaller window
    assert default not in result.search.tied
    assert result.search.decided and result.commits
    assert "config served is not in the tie, so the pick stands" in result.search.noise_note


def test_a_noise_tie_that_holds_the_served_config_changes_nothing_and_says_so() -> None:
    default = _banded(DEFAULT, 900.0, (850.0, 950.0))
    tuned = _banded(Variant(2, 8, 0), 1000.0, (900.0, 1100.0), p99=20.0)
    result = _searched(default, tuned)
    assert not result.commits and "config served is in the tie, so it stays" in result.search.noise_note


def test_a_winner_clear_of_the_served_config_is_written_and_a_failure_writes_nothing() -> None:
    default = _banded(DEFAULT, 500.0, (490.0, 510.0))
    tuned = _banded(Variant(2, 8, 0), 1000.0, (990.0, 1010.0))
    assert _searched(default, tuned).commits
    failed = VariantOutcome(Variant(4, 8, 0), status="failed", reason="perf_analyzer timed out")
    result = _searched(default, tuned, failed)
    assert not result.commits and "could not be measured" in result.holds()


def test_on_a_cluster_a_tie_that_holds_the_served_config_is_written_nowhere(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "m")
    bases = read_bases(tmp_path / "repo", ["m"])
    served = _banded(Variant(2, 4, 5000, is_default=True), 1000.0, (990.0, 1010.0))
    tied = _searched(served, _banded(Variant(1, 4, 5000), 990.0, (980.0, 1000.0)))
    clear = _searched(_banded(DEFAULT, 500.0, (490.0, 510.0)), _banded(Variant(2, 8, 0), 1000.0, (990.0, 1010.0)))
    settings = SweepSettings(sla="p99<=50ms")
    for one, written in ((tied, False), (clear, True)):
        cluster = ClusterSweepResult(address="auto", models=["m"], out_dir=tmp_path / "out", separately=True,
                                     sweeps={"m": ModelSweep("m", JobOutcome("m"), one)})
        assert bool(_plan_write_backs(tmp_path / "repo", bases, cluster, settings)) is written


def _joint(defaults_per_s: float, winner_per_s: float, winner: dict[str, Variant]) -> JointResult:
    def outcome(name: str, variants: dict[str, Variant], per_s: float) -> JointOutcome:
        return JointOutcome(name, variants, steps=[JointStep(8.0, {"m": StepPoint(8.0, per_s, 10.0)})])

    defaults = outcome("defaults", {"m": DEFAULT}, defaults_per_s)
    best = outcome("best", winner, winner_per_s)
    return JointResult(models=["m"], shares={"m": 1.0}, out_dir=Path("out"), defaults=defaults, alone={},
                       alone_together=None, winner=best, tried=[defaults, best], wall_s=1.0)


def test_a_joint_winner_tied_with_the_served_configs_is_written_nowhere(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "m")
    bases = read_bases(tmp_path / "repo", ["m"])
    tied = _joint(1000.0, 1020.0, {"m": Variant(1, 8, 0)})  # fewer instances in all keeps a tie
    assert plan_joint_write_backs(tmp_path / "repo", bases, tied) == {} and not tied.commits
    clear = _joint(500.0, 1000.0, {"m": Variant(2, 8, 0)})
    assert clear.commits and set(plan_joint_write_backs(tmp_path / "repo", bases, clear)) == {"m"}


def test_every_sweep_returns_one_outcome_protocol_and_one_exit_enum() -> None:
    from tritonkit.perf.judge import Exit
    from tritonkit.perf.sweep import SweepOutcome
    from tritonkit.perf.sweep.engine import EngineSweepResult

    local = _searched(_banded(DEFAULT, 500.0, (490.0, 510.0)))
    joint = _joint(500.0, 1000.0, {"m": Variant(2, 8, 0)})
    cluster = ClusterSweepResult(address="auto", models=["m"], out_dir=Path("out"), separately=True,
                                 sweeps={"m": ModelSweep("m", JobOutcome("m"), local)})
    for result in (local, joint, cluster):
        assert isinstance(result, SweepOutcome) and result.exit_code == Exit.OK
        assert result.to_dict()["exit_code"] == 0 and result.headline()
    assert all(hasattr(EngineSweepResult, name) for name in ("exit_code", "headline", "to_dict"))
    assert [int(e) for e in Exit] == [0, 1, 2, 3]
