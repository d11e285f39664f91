"""Traffic shapes as send schedules, prompts and the perf_analyzer input files an LLM run writes."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from tritonkit.errors import ConfigError
from tritonkit.perf.llm.prompts import (
    detect_layout,
    load_prompts,
    synthetic_prompts,
    write_llm_input_data,
)
from tritonkit.perf.llm.shapes import (
    MAX_SCHEDULED_REQUESTS,
    Ramp,
    Soak,
    Spike,
    load_replay_log,
    parse_shape,
    write_intervals,
)
from tritonkit.perf.measure.spec import ConcurrencyRange, PerfSpec, RequestIntervals, to_argv


def test_a_ramp_rises_in_equal_steps_of_rate() -> None:
    schedule = Ramp(2, 8, steps=3, step_s=2).schedule()
    assert [p.rate_per_s for p in schedule.phases] == [2, 5, 8]
    assert [p.count for p in schedule.phases] == [4, 10, 16]
    assert schedule.intervals_us[:4] == (500_000,) * 4
    assert schedule.intervals_us[-1] == 125_000
    assert schedule.duration_s == pytest.approx(6.0)


def test_a_spike_goes_base_burst_base_and_marks_its_phases() -> None:
    schedule = Spike(base_per_s=2, burst_per_s=20, before_s=1, burst_s=0.5, after_s=2).schedule()
    names = [(p.name, p.count) for p in schedule.phases]
    assert names == [("base", 2), ("burst", 10), ("after", 4)]
    burst = schedule.phase("burst")
    assert burst is not None and burst.start_s == pytest.approx(1.0) and burst.end_s == pytest.approx(1.5)
    assert schedule.request_count == 16


def test_a_soak_is_a_long_constant_rate() -> None:
    schedule = Soak(4, 60).schedule()
    assert schedule.request_count == 240 and set(schedule.intervals_us) == {250_000}


def test_shapes_refuse_unbounded_or_empty_load() -> None:
    with pytest.raises(ConfigError, match="more than"):
        Soak(1000, MAX_SCHEDULED_REQUESTS).schedule()
    with pytest.raises(ConfigError, match="no request"):
        Soak(0.1, 1).schedule()
    with pytest.raises(ConfigError, match="> 0"):
        Spike(-1, 5).schedule()


def test_a_replay_keeps_the_recorded_gaps_and_lengths(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text(
        '{"timestamp_ms": 1000, "input_tokens": 5, "output_tokens": 2}\n'
        "\n"
        '{"timestamp_ms": 1250, "input_tokens": 7, "output_tokens": 3}\n'
        '{"timestamp_ms": 1300, "input_tokens": 9, "output_tokens": 4}\n'
    )
    schedule = load_replay_log(log, speed=2).schedule()
    assert schedule.intervals_us == (1, 125_000, 25_000)
    assert schedule.input_tokens == (5, 7, 9) and schedule.output_tokens == (2, 3, 4)


def test_a_bad_replay_line_names_the_file_and_line(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"timestamp_ms": 0, "input_tokens": 5, "output_tokens": 2}\n{"timestamp_ms": 5, "input_tokens": 0}\n')
    with pytest.raises(ConfigError, match=r"log.jsonl line 2"):
        load_replay_log(log)


def test_shape_expressions_parse_into_shapes() -> None:
    assert parse_shape("ramp:1-8/s,4,10") == Ramp(1, 8, 4, 10)
    assert parse_shape("spike:2/s,20/s,5,3,10") == Spike(2, 20, 5, 3, 10)
    assert parse_shape("soak:4/s,600") == Soak(4, 600)
    with pytest.raises(ConfigError, match="shape"):
        parse_shape("wave:1")


def test_the_intervals_file_holds_one_gap_in_microseconds_per_line(tmp_path: Path) -> None:
    path = write_intervals(tmp_path / "iv.txt", Spike(1, 4, 1, 1, 1).schedule())
    assert path.read_text().splitlines() == ["1000000"] + ["250000"] * 4 + ["1000000"]


def test_synthetic_prompts_are_seeded_and_have_the_asked_lengths() -> None:
    first = synthetic_prompts(20, input_tokens_mean=30, input_tokens_stddev=5, output_tokens_mean=8, seed=3)
    again = synthetic_prompts(20, input_tokens_mean=30, input_tokens_stddev=5, output_tokens_mean=8, seed=3)
    other = synthetic_prompts(20, input_tokens_mean=30, input_tokens_stddev=5, output_tokens_mean=8, seed=4)
    assert first == again and first != other
    assert all(len(p.text.split()) == p.input_tokens >= 1 for p in first)
    assert {p.output_tokens for p in first} == {8}
    assert 25 < sum(p.input_tokens for p in first) / 20 < 35


def test_a_prompt_file_is_read_and_checked(tmp_path: Path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text('{"text": "hello there world", "output_tokens": 4}\n{"text_input": "hi", "max_tokens": 2}\n')
    prompts = load_prompts(good)
    assert [(p.input_tokens, p.output_tokens) for p in prompts] == [(3, 4), (1, 2)]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"output_tokens": 4}\n')
    with pytest.raises(ConfigError, match="bad.jsonl line 1"):
        load_prompts(bad)


def test_the_request_layout_follows_the_model_inputs() -> None:
    assert detect_layout(["text_input", "max_tokens", "stream"], max_batch_size=8, model="m").stream_input == "stream"
    ids = detect_layout(["input_ids", "input_lengths", "request_output_len"], max_batch_size=0, model="m")
    assert ids.name == "ids" and ids.stream_input is None
    with pytest.raises(ConfigError, match="'m'.*INPUT0"):
        detect_layout(["INPUT0"], max_batch_size=0, model="m")


def test_input_data_carries_one_entry_per_prompt(tmp_path: Path) -> None:
    prompts = synthetic_prompts(3, input_tokens_mean=4, output_tokens_mean=6)
    layout = detect_layout(["text_input", "max_tokens", "stream"], max_batch_size=8, model="m")
    data = json.loads(write_llm_input_data(tmp_path / "in.json", prompts, layout, streaming=True).read_text())["data"]
    assert [d["max_tokens"] for d in data] == [[6]] * 3
    assert data[0]["text_input"] == [prompts[0].text] and data[0]["stream"] == [True]
    ids_layout = detect_layout(["input_ids", "input_lengths", "request_output_len"], max_batch_size=8, model="m")
    entry = json.loads(write_llm_input_data(tmp_path / "ids.json", prompts, ids_layout, streaming=True).read_text())["data"][0]
    assert entry["input_lengths"] == [4] and entry["input_ids"]["shape"] == [4]


def test_an_llm_step_is_a_perf_spec_sending_an_exact_request_count_with_streaming() -> None:
    spec = PerfSpec("m", "127.0.0.1:8001", load=ConcurrencyRange(2), streaming=True, async_mode=True,
                    input_data=Path("in.json"), request_count=16, warmup_request_count=2,
                    profile_export_file=Path("c2.json"))
    assert to_argv(spec) == ["-m", "m", "-u", "127.0.0.1:8001", "-i", "grpc", "--concurrency-range", "2:2:1",
                             "-b", "1", "--async", "--streaming", "--request-count", "16",
                             "--warmup-request-count", "2", "--input-data", "in.json",
                             "--profile-export-file", "c2.json"]
    shaped = to_argv(replace(spec, load=RequestIntervals(Path("iv.txt")), streaming=False, request_count=5))
    assert shaped[shaped.index("--request-intervals") + 1] == "iv.txt"
    assert "--concurrency-range" not in shaped and "--streaming" not in shaped
    with pytest.raises(ConfigError, match="request_count"):
        to_argv(replace(spec, request_count=0))

