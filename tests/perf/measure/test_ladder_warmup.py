"""A ladder's warm-up that no request completed is tried once more with a longer one, on the real
tritonserver and perf_analyzer — for every caller of the ladder (``perf run``, a sweep's variant,
a cluster's clients), in one place.

perf_analyzer counts a request in a measurement window only when it starts and ends inside it:
a model that answers in about 450 ms never completes one inside the 100 ms windows of a 0.3 s
warm-up ("no valid requests", as a python model slow to start does on a busy machine). The
retry's windows are a step window long (1 s), which such requests fit.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.sweep_models import write_sleepy
from tritonkit.perf import LadderPlan, PerfSpec, parse_sla, run_ladder
from tritonkit.perf.measure.ladder import retry_warmup_s
from tritonkit.perf.sweep import SweepSettings
from tritonkit.perf.sweep.driver import climb
from tritonkit.server import TritonServer


def test_the_retried_warm_up_is_longer_and_each_window_at_least_a_step_window() -> None:
    assert retry_warmup_s(LadderPlan(levels=(1.0,), step_window_ms=1000, warmup_s=0.3)) == 3.0
    assert retry_warmup_s(LadderPlan(levels=(1.0,), step_window_ms=100, warmup_s=2.0)) == 8.0


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_warm_up_no_request_completed_is_retried_longer_and_the_ladder_measures(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "slow", window_us=None, base_ms=450.0, per_item_ms=0.0)
    plan = SweepSettings(sla="p99<=5s", concurrency="1", step_window_ms=1000, warmup_s=0.3).ladder_plan()
    heard: list[str] = []
    with TritonServer(tmp_path / "repo") as server:
        # perf run's ladder: the retry is said in its progress and kept in the result.
        ladder = run_ladder(PerfSpec(model="slow", url=server.grpc_url), plan, results_dir=tmp_path / "run",
                            progress=heard.append)
        # A sweep's variant: the same retry, said in the sweep's words.
        swept: list[str] = []
        variant = climb(PerfSpec(model="slow", url=server.grpc_url), plan, tmp_path / "ladder",
                        parse_sla("p99<=5s").with_zero_errors(), swept.append)
    retried = [text for text in heard if "warm-up of slow failed" in text]
    assert len(retried) == 1 and "no request" in retried[0] and "3 s warm-up" in retried[0], heard
    assert ladder.error is None and ladder.result.warmup is not None, ladder.error
    assert ladder.result.warmup.duration_s >= 3.0 and ladder.result.warmup.retried is not None
    assert [s.load_value for s in ladder.result.steps if s.throughput_per_s] == [1.0]
    assert (tmp_path / "run" / "warmup-retry1.argv.json").is_file()  # the retry's own files, beside the first
    assert len([text for text in swept if "warm-up of slow failed" in text]) == 1, swept
    assert variant.error is None and [s.load_value for s in variant.result.steps if s.throughput_per_s] == [1.0]
