"""``perf sweep MODEL --engine-cmd TEMPLATE --knob NAME=V1,V2*``: an LLM engine's knobs swept.

Pure: the template parser, the knobs, the vLLM preset, the tie rule, the refusals. Live: sweeps of
the OpenAI stand-in (tests/support/openai_standin.py) started as the engine, whose batching knob
(``--max-concurrent``, with ``--itl-per-running-ms``) moves its timing predictably, so the winner is
known: with first token 20 ms, each next 10 ms + 2 ms per other stream running and 4 requests in
flight, at most ``r`` streams at once carry ``r / (10 + 2 (r - 1))`` tokens per ms: 1 → 100, 2 → 167,
4 → 250 tokens/s, the ITL 10, 12, 16 ms. The real engine (vLLM) is swept in benchmarks/llm_engine_sweep.py.
"""

from __future__ import annotations

import json
import shlex
import sys
import urllib.error
import urllib.request
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tests.support.sweep_contract import check_contract
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.perf.sweep.engine import ENGINE_TIES, EngineRecord, EngineSweepSettings, ReadyEngine, _Sweep
from tritonkit.perf.sweep.engine_template import (
    EngineTemplate,
    EngineVariant,
    engine_grid,
    parse_knob,
    vllm_template,
)
from tritonkit.perf.sweep.outcome import StepPoint, VariantOutcome
from tritonkit.perf.sweep.search import choose_winner
from tritonkit.server.ports import free_ports

STANDIN = Path(__file__).resolve().parents[2] / "support" / "openai_standin.py"


def _sweep(*args: str) -> Result:
    return CliRunner().invoke(main, ["perf", "sweep", *args], catch_exceptions=False)


# ---- pure: the template, the knobs, the preset ------------------------------------------------------


def test_placeholders_fill_whole_words_and_parts_of_words_and_a_value_is_never_split() -> None:
    template = EngineTemplate.parse("serve 'my dir' --port {port} --seqs={seqs} --name {model} -j{{x}} {tag}",
                                    ["seqs", "tag"])
    argv = template.render({"seqs": "16", "tag": "a b"}, port=8123, model="tiny")
    assert argv == ["serve", "my dir", "--port", "8123", "--seqs=16", "--name", "tiny", "-j{x}", "a b"]


@pytest.mark.parametrize(("text", "knobs", "words"), [
    ("serve --port {port} --seqs {sqes}", ["seqs"], "places {sqes}, which no --knob names"),
    ("serve --port {port}", ["seqs"], "--knob seqs is not used by --engine-cmd"),
    ("serve --seqs {seqs}", ["seqs"], "does not place {port}"),
    ("serve --port {port} --x {seqs", ["seqs"], "unmatched brace"),
    ("serve --port {port} 'open", [], "cannot be split into words"),
    ("   ", [], "--engine-cmd is empty"),
])
def test_a_template_that_cannot_be_filled_is_refused_naming_what(text: str, knobs: list[str], words: str) -> None:
    with pytest.raises(ConfigError, match=words.replace("{", r"\{").replace("}", r"\}")):
        EngineTemplate.parse(text, knobs)


def test_a_knob_marks_exactly_one_default_and_the_grid_starts_with_it() -> None:
    seqs, tokens = parse_knob("max_num_seqs=4,16*,64"), parse_knob("max_num_batched_tokens = 512, 2048*")
    assert seqs.values == ("4", "16", "64") and seqs.default == "16" and tokens.default == "2048"
    grid = engine_grid([seqs, tokens])
    assert len(grid) == 6 and grid[0].is_default and grid[0].values == {"max_num_seqs": "16",
                                                                        "max_num_batched_tokens": "2048"}
    assert [v.id for v in grid[1:3]] == ["max_num_seqs=4+max_num_batched_tokens=512",
                                         "max_num_seqs=4+max_num_batched_tokens=2048"]
    assert grid[0].id == "default" and EngineVariant.from_dict(grid[1].to_dict()) == grid[1]
    for bad, words in [("seqs=4,16,64", "no value is marked"), ("seqs=4*,16*", "several values"),
                       ("seqs=4,,8*", "empty value"), ("seqs=4,4*", "given twice"), ("4,16*", "not NAME="),
                       ("port=1*,2", "filled by tritonkit")]:
        with pytest.raises(ConfigError, match=words):
            parse_knob(bad)
    with pytest.raises(ConfigError, match="--knob seqs is given twice"):
        engine_grid([parse_knob("seqs=1*"), parse_knob("seqs=2*")])


def test_the_vllm_preset_writes_vllm_032s_own_flags() -> None:
    knobs = [parse_knob("max_num_seqs=4,16*"), parse_knob("max_num_batched_tokens=512*"),
             parse_knob("chunked_prefill=on*,off")]
    template = vllm_template("/e/python", "/m", knobs)
    argv = template.render({"max_num_seqs": "4", "max_num_batched_tokens": "512", "chunked_prefill": "off"},
                           port=9000, model="tiny")
    assert argv == ["/e/python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--served-model-name",
                    "tiny", "--host", "127.0.0.1", "--port", "9000", "--max-model-len", "512", "--enforce-eager",
                    "--max-num-seqs", "4", "--max-num-batched-tokens", "512", "--no-enable-chunked-prefill"]
    assert "--enable-chunked-prefill" in template.render({"max_num_seqs": "4", "max_num_batched_tokens": "512",
                                                          "chunked_prefill": "on"}, port=1, model="m")
    with pytest.raises(ConfigError, match="has no knob gpu_memory"):
        vllm_template("p", "/m", [parse_knob("gpu_memory=1*")])
    with pytest.raises(ConfigError, match="is not on or off"):
        vllm_template("p", "/m", [parse_knob("chunked_prefill=yes*")])


def _outcome(values: dict[str, str], tokens_per_s: float, ttft_p99_ms: float, *, default: bool = False) -> VariantOutcome:
    return VariantOutcome(EngineVariant.of(tuple(values.items()), is_default=default),
                          steps=[StepPoint(load=8, throughput_per_s=tokens_per_s, p99_ms=ttft_p99_ms)])


def test_ties_go_to_lower_ttft_then_the_default_then_the_smaller_values_with_the_triton_sweeps_tolerance() -> None:
    default = _outcome({"seqs": "16"}, 1000, 50, default=True)
    small, big = _outcome({"seqs": "4"}, 990, 50), _outcome({"seqs": "64"}, 1020, 50)
    assert choose_winner([big, small, default], 0.05, ENGINE_TIES).winner is default
    assert choose_winner([big, small], 0.05, ENGINE_TIES).winner is small
    faster = _outcome({"seqs": "64"}, 1010, 30)
    assert choose_winner([default, faster], 0.05, ENGINE_TIES).winner is faster
    clear = _outcome({"seqs": "64"}, 1200, 80)
    assert choose_winner([default, clear], 0.05, ENGINE_TIES).winner is clear


def test_a_stored_variant_is_reused_only_under_the_same_command_sla_and_load(tmp_path: Path) -> None:
    knobs = (parse_knob("seqs=1*,2"),)
    settings = EngineSweepSettings(template=EngineTemplate.parse("e --port {port} --s {seqs}", ["seqs"]),
                                   knobs=knobs, sla="ttft_p99<=1s", out=tmp_path)
    variant = settings.grid()[1]
    outcome = VariantOutcome(variant, steps=[StepPoint(load=4, throughput_per_s=500.0, p99_ms=80.0)])
    record = EngineRecord(outcome, ["e", "--port", "1", "--s", "2"], start_s=1.5, figures={"4": {"itl_p99": 9.0}})
    path = tmp_path / "variants" / variant.id / "outcome.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps({"fingerprint": settings.fingerprint(), **record.to_dict()}))
    again = _Sweep("m", settings, lambda _e: None).stored(variant)
    assert again is not None and again.outcome.variant == variant and again.outcome.best() == outcome.best()
    assert again.start_s == 1.5 and again.figures == {"4": {"itl_p99": 9.0}}
    for changed in (replace(settings, sla="ttft_p99<=2s"), replace(settings, env={"K": "V"}),
                    replace(settings, template=EngineTemplate.parse("e --port {port} --t {seqs}", ["seqs"]))):
        assert _Sweep("m", changed, lambda _e: None).stored(variant) is None
    path.write_text(json.dumps({"fingerprint": settings.fingerprint(), "outcome": {"variant": {"knobs": 3}}}))
    said: list[str] = []
    assert _Sweep("m", settings, lambda e: said.append(e.message)).stored(variant) is None
    assert "cannot be read" in said[0] and "measuring it again" in said[0]


# ---- the command line: what does not apply is refused -------------------------------------------------


@pytest.mark.parametrize(("args", "words"), [
    (["--instances", "1,2"], "--instances does not apply to an engine sweep"),
    (["--window-ms", "500"], "--window-ms does not apply"),
    (["--warmup-s", "1"], "--warmup-s does not apply"),
    (["--headroom", "10%"], "--headroom does not apply"),
    (["--exhaustive"], "--exhaustive does not apply"),
    (["--url", "127.0.0.1:8001"], "--url does not apply"),
    (["--max-batch-size", "4"], "--max-batch-size does not apply"),
])
def test_triton_sweep_options_are_refused_with_an_engine(args: list[str], words: str) -> None:
    result = _sweep("m", "--engine-cmd", "e --port {port} --s {s}", "--knob", "s=1*,2", "--sla", "ttft_p99<=1s",
                    *args)
    assert result.exit_code == 2 and words in result.output, result.output


def test_engine_options_without_an_engine_a_repo_and_a_missing_sla_are_refused(tmp_path: Path) -> None:
    result = _sweep(str(tmp_path), "m", "--sla", "p99<=1s", "--knob", "s=1*,2")
    assert result.exit_code == 2 and "--knob is for an engine sweep" in result.output
    result = _sweep(str(tmp_path), "m", "--engine-cmd", "e --port {port} --s {s}", "--knob", "s=1*", "--sla", "x<=1s")
    assert result.exit_code == 2 and "one MODEL" in result.output
    result = _sweep("m", "--engine-cmd", "e --port {port} --s {s}", "--knob", "s=1*")
    assert result.exit_code == 2 and "--sla is required" in result.output
    result = _sweep("m", "--engine-cmd", "e --port {port} --s {x}", "--knob", "s=1*", "--sla", "ttft_p99<=1s")
    assert result.exit_code == 2 and "places {x}, which no --knob names" in result.output
    result = _sweep("m", "--engine", "vllm", "--knob", "max_num_seqs=1*", "--sla", "ttft_p99<=1s")
    assert result.exit_code == 2 and "needs --engine-model-dir" in result.output


# ---- live: the stand-in swept as an engine --------------------------------------------------------------


def _standin(*extra: str) -> str:
    return shlex.join([sys.executable, str(STANDIN), "--port", "{port}", "--first-ms", "20", "--next-ms", "10",
                       "--itl-per-running-ms", "2", *extra]) + " --max-concurrent {seqs}"


def _load() -> list[str]:
    """The load every live sweep here gets: 4 in flight, 24 requests of 16 tokens a step, ITL p99 ≤ 60 ms
    (the truth is 16 ms at most: room for a busy machine)."""
    return ["--concurrency", "4", "--requests", "24", "--input-tokens", "8", "--output-tokens", "16",
            "--sla", "itl_p99<=60ms"]


@pytest.mark.perf_analyzer
@pytest.mark.serial
def test_the_knob_that_batches_more_wins_a_failed_start_is_recorded_and_a_rerun_resumes(tmp_path: Path) -> None:
    """Truth: seqs 4 carries ~250 tokens/s, the default (2) ~167 (ratio ~1.5); seqs 0 makes the
    stand-in exit at once with status 2, as an engine refusing its flags does."""
    out = tmp_path / "sweep"
    args = ["standin", "--engine-cmd", _standin(), "--knob", "seqs=0,2*,4", *_load(), "--out", str(out), "--json"]
    result = _sweep(*args)
    assert result.exit_code == 2, result.output  # a variant could not be measured
    answer = json.loads(result.output)
    assert answer["winner"] == "seqs=4" and 1.25 < answer["ratio_to_default"] < 1.8, answer
    saved = json.loads((out / "sweep.json").read_text())
    by_id = {v["outcome"]["variant"]["id"]: v for v in saved["variants"]}
    assert saved["done"] and saved["winner"] == "seqs=4" and list(by_id) == ["default", "seqs=0", "seqs=4"]
    failed = by_id["seqs=0"]["outcome"]
    assert failed["status"] == "failed" and "exited with status 2" in failed["reason"]
    assert "at least one stream must run" in failed["reason"]  # the engine's own log, quoted
    assert by_id["default"]["argv"][-2:] == ["--max-concurrent", "2"]
    winner = by_id["seqs=4"]
    assert winner["figures"]["4"]["itl_p99"] < 60 and winner["outcome"]["confirmations"]
    report = (out / "report.md").read_text()
    assert "**seqs=4** (winner)" in report and f"**{answer['ratio_to_default']:.2f}×**" in report
    check_contract("engine/--json", answer)
    check_contract("engine/sweep.json", saved, "variants.0", "variants.0.outcome")
    check_contract("engine/outcome.json", json.loads((out / "variants" / "seqs=4" / "outcome.json").read_text()))
    again = json.loads(_sweep(*args).output)  # the same sweep into the same folder: measured variants reused
    assert again["winner"] == "seqs=4" and again["reused"] == ["default", "seqs=4"]
    assert again["wall_s"] < answer["wall_s"] / 2


def test_a_server_without_health_is_ready_once_it_lists_its_models(tmp_path: Path) -> None:
    port = free_ports(1)[0]
    argv = [sys.executable, str(STANDIN), "--port", str(port), "--no-health"]
    with ReadyEngine(argv, port=port, log=tmp_path / "engine.log", ready_timeout_s=30) as engine:
        assert engine.start_s is not None and engine.exit_status() is None
        with pytest.raises(urllib.error.HTTPError, match="404"):
            urllib.request.urlopen(f"http://{engine.url}/health", timeout=5)  # noqa: S310 - loopback
    assert engine.exit_status() is not None  # stopped with the block


@pytest.mark.perf_analyzer
def test_an_engine_not_ready_in_time_fails_its_variant_and_says_so(tmp_path: Path) -> None:
    out = tmp_path / "slow"
    result = _sweep("standin", "--engine-cmd", _standin("--start-delay-s", "30"), "--knob", "seqs=2*", "--default",
                    "--engine-ready-timeout-s", "1", *_load(), "--out", str(out))
    assert result.exit_code == 2, result.output
    saved = json.loads((out / "sweep.json").read_text())
    outcome = saved["variants"][0]["outcome"]
    assert outcome["status"] == "failed" and "did not answer /health within 1 s" in outcome["reason"]
    assert "no variant of the engine meets the SLA" in result.output


@pytest.mark.engine
def test_the_vllm_preset_starts_vllms_server_with_the_knobs_flags_and_the_engines_environment(tmp_path: Path) -> None:
    """``--engine vllm`` with a stand-in for vLLM's Python that prints what it was given and exits:
    the command and the environment it gets are vLLM 0.32's, and its exit fails the variant."""
    fake = tmp_path / "python"
    fake.write_text('#!/bin/sh\necho "argv: $*"; echo "kv: $VLLM_CPU_KVCACHE_SPACE"; exit 3\n')
    fake.chmod(0o755)
    out = tmp_path / "sweep"
    result = _sweep("tiny", "--engine", "vllm", "--engine-model-dir", str(tmp_path), "--engine-python", str(fake),
                    "--knob", "max_num_seqs=4,16,128*", "--knob", "max_num_batched_tokens=512,2048*",
                    "--knob", "chunked_prefill=on*,off", "--default", "--engine-env", "VLLM_CPU_KVCACHE_SPACE=4",
                    "--engine-ready-timeout-s", "60", "--concurrency", "1,4,8", "--requests", "32",
                    "--input-tokens", "128", "--output-tokens", "64", "--sla", "ttft_p99<=500ms,itl_p99<=50ms",
                    "--out", str(out))
    assert result.exit_code == 2, result.output
    variant = json.loads((out / "sweep.json").read_text())["variants"][0]
    assert variant["outcome"]["status"] == "failed" and "exited with status 3" in variant["outcome"]["reason"]
    argv = variant["argv"]
    assert argv[:3] == [str(fake), "-m", "vllm.entrypoints.openai.api_server"]
    assert argv[argv.index("--served-model-name") + 1] == "tiny" and argv[argv.index("--host") + 1] == "127.0.0.1"
    assert argv[-5:] == ["--max-num-seqs", "128", "--max-num-batched-tokens", "2048", "--enable-chunked-prefill"]
    assert "kv: 4" in variant["outcome"]["reason"]
