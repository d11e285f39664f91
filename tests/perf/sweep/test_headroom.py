"""A required headroom (``perf sweep --headroom``, ``SweepSettings.headroom``): refused when out
of range, reported for the winner, and on the real tritonserver and perf_analyzer a sweep that
requires it settles at a lower load than one that does not.

The model (tests/support/sweep_models.py, one instance, batches of up to four with a 0 ms window)
sleeps 6 ms + 2 ms per request per execution: at concurrency 1 a request takes about 8 ms; at 16
four batches of four queue at about 14 ms each, so p99 is 50 ms or more while it carries about
twice as much. Under p99<=200ms both loads meet the SLA; held to a fifth of it (80 % headroom,
40 ms) only concurrency 1 does, with some 40 % to spare either way on a busy machine.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep import StepPoint, SweepSettings, Variant, VariantOutcome

SWEEP = ["--sla", "p99<=200ms", "--concurrency", "1,16", "--window-ms", "300", "--warmup-s", "0.5",
         "--no-write-back", "--json"]


@pytest.mark.parametrize("text", ["120%", "100", "-5%", "abc", "%", "nan%"])
def test_a_headroom_out_of_range_is_one_error_line_naming_the_option(tmp_path: Path, text: str) -> None:
    write_sleepy(tmp_path / "repo", "m")
    result = CliRunner().invoke(main, ["perf", "sweep", str(tmp_path / "repo"), "m", "--sla", "p99<=50ms",
                                       "--headroom", text, "--results-root", str(tmp_path / "results")])
    assert result.exit_code == 2, result.output
    assert "error: --headroom" in result.output and "fix:" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "results").exists()  # refused before any server starts


@pytest.mark.parametrize("value", [1.0, 1.2, -0.05, float("inf")])
def test_the_settings_refuse_a_headroom_that_is_not_a_fraction_below_one(value: float) -> None:
    with pytest.raises(ConfigError, match="headroom"):
        SweepSettings(sla="p99<=50ms", headroom=value)


def test_the_settings_hand_the_headroom_to_the_judge() -> None:
    assert SweepSettings(sla="p99<=50ms", headroom=0.2).judging().headroom == 0.2
    assert SweepSettings(sla="p99<=50ms").judging().headroom == 0.0


def test_the_winners_headroom_is_the_least_any_of_its_measurements_kept() -> None:
    first = StepPoint(4, 500.0, 31.0, headroom={"p99<=50ms": 0.38})
    again = StepPoint(4, 480.0, 35.0, headroom={"p99<=50ms": 0.30})
    outcome = VariantOutcome(Variant(1, 4, 0), steps=[first], confirmations=[again])
    score = outcome.score()
    assert score is not None and score.headroom == {"p99<=50ms": 0.30}
    assert StepPoint.from_dict(first.to_dict()) == first


@pytest.mark.server
@pytest.mark.perf_analyzer
def test_a_sweep_that_requires_headroom_settles_at_a_lower_load(tmp_path: Path) -> None:
    write_sleepy(tmp_path / "repo", "m", window_us=0)
    runs = {}
    for name, extra in (("plain", []), ("headroom", ["--headroom", "80%"])):
        result = CliRunner().invoke(main, ["perf", "sweep", str(tmp_path / "repo"), "m", *SWEEP, *extra,
                                           "--out", str(tmp_path / name)])
        assert result.exit_code == 0, result.output
        runs[name] = json.loads(result.output[result.output.index("{\n"):])
    plain, held = runs["plain"]["winner"], runs["headroom"]["winner"]
    assert plain["load"] == 16 and held["load"] == 1, (plain, held)
    # The margin each reports is the judge's, against the SLA's own limit: the plain winner's is
    # below the 80 % the other required, the held one's at least that.
    assert runs["plain"]["headroom"]["p99<=200ms"] < 0.8 <= runs["headroom"]["headroom"]["p99<=200ms"]
    assert runs["headroom"]["headroom_required"] == 0.8 and runs["plain"]["headroom_required"] == 0.0
    top = next(s for v in runs["headroom"]["variants"] for s in v["steps"] if s["load"] == 16)
    assert not top["meets_sla"] and "held to 40 ms" in top["note"], top
