"""Sweeping the queue policy on the real server, under an SLA that allows a rejected share.

The sleepy model (tests/support/sweep_models.py) batches four at once on one instance; at eight
requests in flight several wait behind a running batch, so a queue of three rejects some.
perf_analyzer stops a step at its first rejected request: that step is judged on its rejected
share (against the SLA's 1 %) and the variant is measured below it — not failed. A bounded queue
is climbed from the bottom (after perf_analyzer stopped at a "queue full" rejection, the model
was seen to answer nothing more on tritonserver 2.51 until loaded again), so the overflow is the
last step of the variant.

With a queue policy, tritonserver 2.51 (seen here, this model at concurrency 2 under perf_analyzer)
holds a few requests about 0.5 s (p95 and p99 511 ms against 22 ms without the policy): the
latency bound is loose enough to let such steps pass, and every window, the warm-up's included,
is longer than the hold, so none of them ends without a request (perf_analyzer's "no valid
requests").
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
    settings = SweepSettings(sla="p99<=2s,rejected<=1%", grid=SweepGrid(queue_sizes=[0, 3]),
                             concurrency="1,2,4,8", step_window_ms=1000, warmup_s=2.4, out=tmp_path / "out",
                             write_back=False)
    result = run_sweep(tmp_path / "repo", "queued", settings)
    assert [v.id for v in result.grid] == ["default", "i1-b4-w0-q3"]  # q0 is the model's own (unbounded) queue
    assert result.exit_code == 0 and not result.failed, result.headline()
    queued = next(o for o in result.search.outcomes if o.variant.id == "i1-b4-w0-q3")
    assert queued.status == "measured"
    top = max(queued.steps, key=lambda s: s.load)
    assert top.load > 1 and not top.counts and top.errors > 0, queued.steps
    # The judge read the rejected share (not a failure to measure): its margin to rejected<=1%, and
    # when over it, the reason says so. Under 1 % the step still cannot count: perf_analyzer stopped
    # at the first rejection, so it has no latency.
    share_margin = top.headroom.get("rejected<=1%")
    assert share_margin is not None, top
    assert share_margin >= 0 or "rejected" in top.note, top.note
    score = queued.score()
    assert score is None or score.load < top.load  # a lower step may be unstable on a busy machine
    assert not any(s.load > top.load for s in queued.steps)  # nothing measured after the overflow
    default = result.search.default.score() if result.search.default else None
    assert default is not None and default.load == 8  # an unbounded queue carries the top load
