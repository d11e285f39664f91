"""``perf run --request-rate`` against a model that cannot keep up, on the real tritonserver with
the real perf_analyzer: the step is judged a miss because the server carried far less than it was
offered — whatever its latency says — and the run exits 1, naming both rates in the step line,
``result.json`` and ``report.md``; ``perf report --sla`` re-judges it with the same rule."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.cli_output import kv_lines
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.server import TritonServer

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

#: One instance, no batcher, 18 + 2 ms asleep per request: at most 50 requests/s, whatever the CPU
#: (sleeping needs none). Offered 200/s it carries about a quarter: far below the 90 % the rule
#: asks here, so a busy machine (which only slows it further) cannot make the step pass.
OFFERED_PER_S = 200
CAPACITY_PER_S = 50


def test_an_open_loop_step_the_server_could_not_carry_misses_the_sla_and_exits_1(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_sleepy(repo, "slow", window_us=None, base_ms=18.0, per_item_ms=2.0)
    out = tmp_path / "run"
    with TritonServer(repo) as server:
        # A latency limit the slow model meets easily (perf_analyzer's own threads hold back what it
        # cannot send, so the latency stays near 100 ms): only the rate can fail the step. Six
        # windows of 0.5 s let perf_analyzer settle even on a loaded machine.
        result = CliRunner().invoke(main, [
            "perf", "run", "slow", "--url", server.grpc_url, "--sla", "p99<=10s",
            "--request-rate", str(OFFERED_PER_S), "--rate-tolerance", "10",
            "--duration-s", "1.5", "--max-trials", "6", "--warmup-s", "0", "--out", str(out),
        ], catch_exceptions=False)
    assert result.exit_code == 1, result.output
    step = kv_lines(result.output, "step")[-1]
    assert step["sla"] == "fail", result.output
    carried = re.fullmatch(rf"carried ([\d.,]+) of {OFFERED_PER_S} req/s offered \(below 90 %\)", step["reasons"])
    assert carried is not None, step
    assert float(carried.group(1).replace(",", "")) < 1.2 * CAPACITY_PER_S  # what the model can do, no more
    assert kv_lines(result.output, "verdict")[0]["status"] == "fail"

    stored = json.loads((out / "result.json").read_text())["verdict"]
    assert stored["status"] == "fail" and stored["judging"]["rate_tolerance"] == pytest.approx(0.10)
    assert stored["steps"][-1]["misses"] == [step["reasons"]]
    assert "MISSED at every measured load; closest step at request_rate 200 req/s: carried" in stored["summary"]
    assert f"FAIL ({step['reasons']})" in (out / "report.md").read_text()

    # perf report --sla judges the saved steps again with the same rule and the run's tolerance.
    again = CliRunner().invoke(main, ["perf", "report", str(out / "result.json"), "--sla", "p99<=20s",
                                      "--out", str(tmp_path / "again"), "--json"])
    assert again.exit_code == 1, again.output
    verdict = json.loads(again.output)["verdict"]
    assert verdict["steps"][-1]["misses"] == [step["reasons"]]
