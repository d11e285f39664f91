"""What a joint sweep's result says of its winner (no server: the result is built here)."""

from __future__ import annotations

from pathlib import Path

from tritonkit.perf.sweep import Variant
from tritonkit.perf.sweep.joint import JointOutcome, JointStep
from tritonkit.perf.sweep.joint_run import JointResult
from tritonkit.perf.sweep.outcome import StepPoint


def test_the_joint_winner_says_each_models_margin_and_the_margin_required() -> None:
    variants = {"a": Variant(2, 4, 0), "b": Variant(1, 4, 0)}
    points = {"a": StepPoint(8.0, 400.0, 30.0, headroom={"p99<=50ms": 0.4}),
              "b": StepPoint(8.0, 200.0, 45.0, headroom={"p99<=50ms": 0.1})}
    winner = JointOutcome("j1", variants, steps=[JointStep(16.0, points)])
    result = JointResult(models=["a", "b"], shares={"a": 0.5, "b": 0.5}, out_dir=Path("out"), defaults=winner,
                         alone={}, alone_together=None, winner=winner, tried=[winner], wall_s=1.0,
                         headroom_required=0.1)
    assert result.headroom == {"a": {"p99<=50ms": 0.4}, "b": {"p99<=50ms": 0.1}}
    assert result.headline().endswith("headroom a p99<=50ms 40 %; b p99<=50ms 10 % (at least 10 % required).")
    assert result.to_dict()["headroom_required"] == 0.1
    none = JointResult(models=["a"], shares={"a": 1.0}, out_dir=Path("out"), defaults=winner, alone={},
                       alone_together=None, winner=None, tried=[], wall_s=1.0)
    assert none.headroom == {} and none.headroom_text() == ""


def test_a_joint_step_is_measured_again_only_when_the_load_generator_failed_not_the_model() -> None:
    from types import SimpleNamespace

    from tritonkit.errors import StepError
    from tritonkit.perf.measure.failures import Failure
    from tritonkit.perf.sweep.joint import _transient

    def ladder(failure: Failure | None) -> SimpleNamespace:
        return SimpleNamespace(error=None if failure is None else StepError("step failed", failure=failure))

    busy = {"a": ladder(Failure.TIMEOUT), "b": ladder(None)}
    assert _transient(busy, {"a": "timeout: step failed"})
    assert _transient({"a": ladder(Failure.NO_REQUESTS), "b": ladder(Failure.KILLED)}, {"a": "x", "b": "y"})
    # The model's own failure is a verdict: measuring it again would only fail again.
    assert not _transient({"a": ladder(Failure.TIMEOUT), "b": ladder(Failure.MODEL_ERROR)}, {"a": "x", "b": "y"})
    # A step that measured but judged nothing (no perf_analyzer error), or a model whose thread raised: no retry.
    assert not _transient({"a": ladder(None)}, {"a": "no step was measured"})
    assert not _transient({}, {"a": "RuntimeError: boom"})
    assert not _transient(busy, {})
