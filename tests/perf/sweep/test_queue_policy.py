"""Sweeping the queue policy on the real server, under an SLA that allows a rejected share.

The sleepy model (tests/support/sweep_models.py) batches four at once on one instance; at eight
requests in flight several wait behind a running batch, so a queue of three rejects some.
perf_analyzer stops a step at its first rejected request: that step is judged (its rejected
share is over the SLA's 1 %) and the variant is measured below it — not failed. A bounded queue
is climbed from the bottom (after perf_analyzer stopped at a "queue full" rejection, the model
was seen to answer nothing more on tritonserver 2.51 until loaded again), so the overflow is the
last step of the variant.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sweep_models import write_sleepy
from tritonkit.perf.sweep import SweepGrid, SweepSettings, run_sweep

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]


def test_a_queue_that_rejects_at_the_top_load_is_measured_below_it_and_the_rejected_share_judged(
        tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "queued", max_batch=4, window_us=0)
    settings = SweepSettings(sla="p99<=60ms,rejected<=1%", grid=SweepGrid(queue_sizes=[0, 3]),
                             concurrency="1,2,4,8", step_window_ms=300, warmup_s=0.6, out=tmp_path / "out",
                             write_back=False)
    result = run_sweep(tmp_path / "repo", "queued", settings)
    assert [v.id for v in result.grid] == ["default", "i1-b4-w0-q3"]  # q0 is the model's own (unbounded) queue
    assert result.exit_code == 0 and not result.failed, result.headline()
    queued = next(o for o in result.search.outcomes if o.variant.id == "i1-b4-w0-q3")
    assert queued.status == "measured"
    top = max(queued.steps, key=lambda s: s.load)
    assert top.load > 1 and not top.counts and top.errors > 0, queued.steps
    assert "rejected" in top.note, top.note  # the judge named the rejected share, not a failure
    score = queued.score()
    assert score is None or score.load < top.load  # a lower step may be unstable on a busy machine
    assert not any(s.load > top.load for s in queued.steps)  # nothing measured after the overflow
    default = result.search.default.score() if result.search.default else None
    assert default is not None and default.load == 8  # an unbounded queue carries the top load
