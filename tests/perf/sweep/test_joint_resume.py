"""A joint sweep (``perf sweep REPO A B``) resumes from its folder like the single-model sweep, on
the real tritonserver and perf_analyzer: finished joint configurations and alone results are
reused, a corrupt stored one is named, set aside and measured again, and a folder of other
settings is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.perf.sweep import SweepEvent, SweepGrid, SweepSettings, run_joint_sweep

pytestmark = [pytest.mark.server, pytest.mark.perf_analyzer]

ARGS = ["--sla", "p99<=80ms", "--instances", "1,2", "--max-batch-size", "4", "--batch-window", "0",
        "--window-ms", "300", "--warmup-s", "0.3", "--no-write-back", "--json"]


def _joint(repo: Path, out: Path, concurrency: str = "2,4,8") -> tuple[int, str]:
    result = CliRunner().invoke(main, ["perf", "sweep", str(repo), "a", "b", *ARGS, "--concurrency", concurrency,
                                       "--out", str(out)])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def _document(output: str) -> dict[str, object]:
    """The --json document (the notes of a run come before it on the same output)."""
    start = output.index("{\n")
    data: dict[str, object] = json.loads(output[start:])
    return data


def test_a_joint_sweep_rerun_reuses_what_it_finished_and_remeasures_a_corrupt_result(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)
    out = tmp_path / "out"
    code, output = _joint(repo, out)
    assert code == 0, output
    first = _document(output)
    assert first["resumed"] == []
    stored = {p: p.read_bytes() for p in (out / "joint").glob("*/outcome.json")}
    tried = first["tried"]
    assert isinstance(tried, list) and len(stored) == len(tried) >= 2

    code, output = _joint(repo, out)
    assert code == 0, output
    again = _document(output)
    resumed = again["resumed"]
    assert isinstance(resumed, list)
    assert {o["name"] for o in tried} <= set(resumed)  # every joint configuration reused …
    assert any(str(r).startswith("a alone: ") for r in resumed) and any(str(r).startswith("b alone: ") for r in resumed)
    assert {p: p.read_bytes() for p in stored} == stored  # … and none measured again
    assert again["winner"] == first["winner"]

    # An impossible throughput in the defaults' stored result: named, set aside, measured again.
    defaults = next(p for p in stored if json.loads(p.read_text())["name"] == "every model's default")
    data = json.loads(defaults.read_text())
    data["steps"][0]["points"]["a"]["throughput_per_s"] = 1e12
    defaults.write_text(json.dumps(data))
    # The library call with the command line's settings, to hear the notes it gives.
    events: list[SweepEvent] = []
    settings = SweepSettings(sla="p99<=80ms", grid=SweepGrid(instances=[1, 2], max_batch_sizes=[4], windows_us=[0]),
                             concurrency="2,4,8", step_window_ms=300, warmup_s=0.3, write_back=False, out=out)
    third = run_joint_sweep(repo, ["a", "b"], settings, on_event=events.append)
    assert third.exit_code == 0
    # Both models are complete python-backend configs: their loads skip the auto-complete stub.
    assert any("auto-complete off" in e.message for e in events), events
    assert any(str(defaults) in e.message and "throughput_per_s" in e.message for e in events), events
    assert (out / "rejected" / f"joint-{defaults.parent.name}.outcome.json").is_file()
    assert "every model's default" not in third.resumed and "the alone winners together" in third.resumed
    assert json.loads(defaults.read_text())["steps"][0]["points"]["a"]["throughput_per_s"] < 1e4


def test_a_joint_folder_of_other_settings_is_refused(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    for name in ("a", "b"):
        write_sleepy(repo, name, window_us=None)
    out = tmp_path / "out"
    (out).mkdir()
    (out / "sweep.json").write_text(json.dumps({"settings": {"models": ["a", "b"], "levels": [1.0]}}))
    code, output = _joint(repo, out)
    assert code == 2, output
    assert "holds a sweep made with different" in output and "levels" in output
    assert not (out / "joint").exists()
