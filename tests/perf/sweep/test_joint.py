"""Two models on one server tuned together under their joint load (``perf sweep REPO A B``), against
the real tritonserver and perf_analyzer: every default, each model alone, then the joint search;
each winner written back; perf_analyzer runs for both models at the same time."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sweep_contract import check_contract
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.repository import read_config

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]


def _interval(result_json: Path) -> tuple[float, float]:
    step = json.loads(result_json.read_text())["steps"][0]
    start = datetime.fromisoformat(step["started_utc"].replace("Z", "+00:00")).timestamp()
    return start, start + float(step["duration_s"])


def test_two_models_are_swept_under_their_joint_load_and_both_winners_written_back(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)  # 1 instance, max batch 4, no batcher: one request at a time
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [
        "perf", "sweep", str(repo), "a", "b", "--sla", "p99<=80ms", "--instances", "1,2", "--max-batch-size", "4",
        "--batch-window", "0", "--concurrency", "2,4,8", "--window-ms", "300", "--warmup-s", "0.6",
        "--out", str(out), "--json",
    ])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["models"] == ["a", "b"] and data["shares"] == {"a": 0.5, "b": 0.5}
    assert set(data["alone"]) == {"a", "b"}
    assert data["defaults"]["best"] is not None and data["alone_together"] is not None
    assert data["ratio_to_defaults"] > 1.5, data["ratio_to_defaults"]  # batches of four beat one at a time
    winner = data["winner"]["variants"]
    for name in ("a", "b"):
        written = read_config(repo / name / "config.pbtxt")
        assert written.instance_group[0].count == winner[name]["instances"]
        assert data["write_back"][name]["config_path"] == str(repo / name / "config.pbtxt")
    # Each model's margin to its SLA at the winner's load, as the judge computed it for that step.
    points = data["winner"]["best"]["points"]
    assert data["headroom"] == {name: points[name]["headroom"] for name in ("a", "b")}
    assert all(0 <= m <= 1 for terms in data["headroom"].values() for m in terms.values())
    check_contract("joint/--json", data, "winner", "defaults", "alone.a")
    check_contract("joint/joint.json", json.loads((out / "joint.json").read_text()))
    check_contract("joint/sweep.json", json.loads((out / "sweep.json").read_text()), "settings")
    check_contract("joint/alone/sweep.json", json.loads((out / "alone-a" / "sweep.json").read_text()), "settings")
    for path in (out / "joint").glob("*/outcome.json"):
        check_contract("joint/outcome.json", json.loads(path.read_text()), "steps.0")
    report = (out / "joint.md").read_text()
    assert "headroom a p99<=80ms" in report and "; b p99<=80ms" in report
    assert "| every model's default |" in report and "| the alone winners together" in report and "★" in report
    # The joint load: at the top step both models' perf_analyzer runs overlapped in time.
    top = max(float(p.name[1:]) for p in (out / "joint").glob("*/L*"))
    folder = next(p for p in (out / "joint").glob(f"*/L{top:g}"))
    (a0, a1), (b0, b1) = _interval(folder / "a" / "result.json"), _interval(folder / "b" / "result.json")
    assert a0 < b1 and b0 < a1, (a0, a1, b0, b1)


def test_a_share_for_a_model_not_swept_is_refused_before_anything_starts(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write_sleepy(tmp_path / "repo", name)
    result = CliRunner().invoke(main, ["perf", "sweep", str(tmp_path / "repo"), "a", "b", "--sla", "p99<=80ms",
                                       "--share", "c=2", "--out", str(tmp_path / "out")])
    assert result.exit_code == 2, result.output
    assert "--share names model(s) not swept: c" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "out").exists()

