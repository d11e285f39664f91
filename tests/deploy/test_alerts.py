"""Prometheus rules from an SLA: checked by promtool, and each alert unit-tested with promtool.

``promtool test rules`` evaluates the generated rules over synthetic series (the only way to
show a GPU alert on a machine without a GPU); series names and labels are those the bundled
Triton 2.51 server exposes (see tests/deploy/test_live.py for the real scrape).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.support.pymodels import write_python_model
from tests.support.sweep_models import SLEEPY_PY, write_sleepy
from tritonkit.cli import main
from tritonkit.deploy import (
    AlertOptions,
    RepositoryFacts,
    build_rules,
    check_rules,
    read_repository,
    write_rules,
)
from tritonkit.deploy.prometheus import run_rule_tests
from tritonkit.errors import ConfigError
from tritonkit.perf import parse_sla
from tritonkit.perf.judge.sla import SLA, Constraint

FULL_SLA = "p95<=80ms,p99<=100ms,mean<=20ms,queue<=5ms,throughput>=200/s,errors==0,error_rate<=1%"

BOUNDED_CONFIG = """
name: "bounded"
backend: "python"
max_batch_size: 4
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 16 ] } ]
dynamic_batching { max_queue_delay_microseconds: 2000 default_queue_policy { max_queue_size: 10 } }
instance_group [ { count: 1 kind: KIND_CPU } ]
parameters [
  { key: "base_ms" value: { string_value: "1" } },
  { key: "per_item_ms" value: { string_value: "1" } },
  { key: "max_batch_limit" value: { string_value: "16" } }
]
"""


@pytest.fixture
def repo_facts(tmp_path: Path) -> RepositoryFacts:
    """Two models: ``slow`` (2 instances × max batch 4: limit 8) and ``bounded`` (max_queue_size 10)."""
    repo = tmp_path / "repo"
    write_sleepy(repo, "slow", instances=2, max_batch=4)
    write_python_model(repo, "bounded", config_pbtxt=BOUNDED_CONFIG, model_py=SLEEPY_PY)
    return read_repository(repo)


@pytest.fixture
def rule_file(tmp_path: Path, repo_facts: RepositoryFacts) -> Path:
    return write_rules(build_rules(parse_sla(FULL_SLA), repo_facts, AlertOptions(job="triton")),
                       tmp_path / "rules" / "triton.yml")


def test_generated_rules_pass_promtool_check(rule_file: Path) -> None:
    result = check_rules(rule_file)
    assert result.ok, result.output
    assert "SUCCESS" in result.output


def test_concurrency_limits_come_from_the_repository_configs(repo_facts: RepositoryFacts) -> None:
    limits = {m.name: m.concurrency_limit for m in repo_facts.models}
    assert limits == {"slow": 8, "bounded": 10}
    rules = build_rules(parse_sla("p99<=100ms"), repo_facts)
    assert rules.rule("TritonQueueDeep")["expr"] == ('nv_inference_pending_request_count{model="bounded"} > 5 or '
                                                     'nv_inference_pending_request_count{model="slow"} > 4')


# ---- one promtool unit test per alert ------------------------------------------------------------

_BASE = {"job": "triton", "instance": "10.0.0.1:8002"}
_MODEL = {**_BASE, "model": "slow", "version": "1"}


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    inner = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{inner}}}", "values": values}


def _alert(name: str, at: str, labels: dict[str, str] | None) -> dict[str, Any]:
    """A check that alert ``name`` is firing at ``at`` with exactly ``labels`` (None: not firing)."""
    samples = []
    if labels is not None:
        full = {"alertname": name, "alertstate": "firing", **labels}
        samples.append({"labels": "ALERTS{" + ",".join(f'{k}="{v}"' for k, v in full.items()) + "}", "value": 1})
    return {"expr": f'ALERTS{{alertname="{name}",alertstate="firing"}}', "eval_time": at, "exp_samples": samples}


def _tk(severity: str, signal: str | None = None) -> dict[str, str]:
    labels = {"severity": severity, "source": "tritonkit"}
    if signal:
        labels["signal"] = signal
    return labels


_GPU = {**_BASE, "gpu_uuid": "GPU-0"}
_Q99 = {**_MODEL, "quantile": "0.99"}
_Q95 = {**_MODEL, "quantile": "0.95"}

# name → (input series, checks)
CASES: dict[str, tuple[list[dict[str, str]], list[dict[str, Any]]]] = {
    "gpu utilisation above 85 % for 5 minutes": (
        [_series("nv_gpu_utilization", _GPU, "0.9x10")],
        [_alert("TritonGpuUtilisationHigh", "4m", None),
         _alert("TritonGpuUtilisationHigh", "6m", {**_GPU, **_tk("warning", "gpu")})],
    ),
    "gpu utilisation at exactly 85 % does not alert": (
        [_series("nv_gpu_utilization", _GPU, "0.85x10")],
        [_alert("TritonGpuUtilisationHigh", "10m", None)],
    ),
    "p99 above the SLA for 3 minutes": (
        [_series("nv_inference_request_summary_us", _Q99, "150000x10")],
        [_alert("TritonLatencyP99AboveSla", "2m", None),
         _alert("TritonLatencyP99AboveSla", "4m", {**_Q99, **_tk("critical", "p99")})],
    ),
    "p99 within the SLA does not alert": (
        [_series("nv_inference_request_summary_us", _Q99, "90000x10")],
        [_alert("TritonLatencyP99AboveSla", "10m", None)],
    ),
    "p95 above the SLA": (
        [_series("nv_inference_request_summary_us", _Q95, "85000x10")],
        [_alert("TritonLatencyP95AboveSla", "4m", {**_Q95, **_tk("warning")})],
    ),
    "queue above half the concurrency limit for 5 minutes": (
        [_series("nv_inference_pending_request_count", _MODEL, "5x10"),
         _series("nv_inference_pending_request_count", {**_MODEL, "model": "bounded"}, "5x10")],
        [_alert("TritonQueueDeep", "4m", None),
         # slow: limit 8, alert above 4; bounded: max_queue_size 10, alert above 5.
         _alert("TritonQueueDeep", "6m", {**_MODEL, **_tk("warning", "queue")})],
    ),
    "two of three signals advise scaling out": (
        [_series("nv_gpu_utilization", _GPU, "0.9x10"),
         _series("nv_inference_pending_request_count", _MODEL, "6x10")],
        [_alert("TritonScaleOut", "4m", None),
         _alert("TritonScaleOut", "7m", {"job": "triton", **_tk("warning", "scale_out")}),
         {"expr": "tritonkit:scale_out", "eval_time": "7m",
          "exp_samples": [{"labels": 'tritonkit:scale_out{job="triton"}', "value": 2}]}],
    ),
    "one signal alone does not advise scaling out": (
        [_series("nv_gpu_utilization", _GPU, "0.95x10")],
        [_alert("TritonGpuUtilisationHigh", "7m", {**_GPU, **_tk("warning", "gpu")}),
         _alert("TritonScaleOut", "10m", None),
         {"expr": "tritonkit:scale_out", "eval_time": "10m", "exp_samples": []}],
    ),
    "with nothing firing the signal count is 0, not absent (the autoscaler reads it)": (
        [_series("nv_inference_count", _MODEL, "0+600x10")],
        [{"expr": "tritonkit:scale_out_signals", "eval_time": "10m",
          "exp_samples": [{"labels": 'tritonkit:scale_out_signals{job="triton"}', "value": 0}]},
         {"expr": "tritonkit:scale_out", "eval_time": "10m", "exp_samples": []}],
    ),
    "under traffic the firing signals are counted once, not beside the zero": (
        [_series("nv_inference_count", _MODEL, "0+600x10"),
         _series("nv_gpu_utilization", _GPU, "0.9x10"),
         _series("nv_inference_pending_request_count", _MODEL, "6x10")],
        [{"expr": "tritonkit:scale_out_signals", "eval_time": "7m",
          "exp_samples": [{"labels": 'tritonkit:scale_out_signals{job="triton"}', "value": 2}]}],
    ),
    "two models over their p99 count as one signal": (
        [_series("nv_inference_request_summary_us", _Q99, "150000x10"),
         _series("nv_inference_request_summary_us", {**_Q99, "model": "bounded"}, "150000x10")],
        [_alert("TritonScaleOut", "10m", None)],
    ),
    "failed requests break errors==0": (
        [_series("nv_inference_request_failure", _MODEL, "0 0 0 3 3 3 3")],
        [_alert("TritonRequestsFailing", "2m", None),
         _alert("TritonRequestsFailing", "4m", {**_MODEL, **_tk("critical")})],
    ),
    "an error rate above the SLA": (
        [_series("nv_inference_request_failure", _MODEL, "0+30x10"),
         _series("nv_inference_request_success", _MODEL, "0+570x10")],
        [_alert("TritonErrorRateAboveSla", "6m", {**_MODEL, **_tk("critical")})],
    ),
    "throughput under the floor while requests queue": (
        [_series("nv_inference_count", _MODEL, "0+6000x10"),
         _series("nv_inference_pending_request_count", _MODEL, "3x10")],
        [_alert("TritonThroughputBelowSlaUnderLoad", "6m", {**_MODEL, **_tk("warning")})],
    ),
    "low throughput with an empty queue is quiet traffic": (
        [_series("nv_inference_count", _MODEL, "0+600x10"),
         _series("nv_inference_pending_request_count", _MODEL, "0x10")],
        [_alert("TritonThroughputBelowSlaUnderLoad", "10m", None)],
    ),
    "mean latency and mean queue time above the SLA": (
        [_series("nv_inference_request_success", _MODEL, "0+600x10"),
         _series("nv_inference_request_duration_us", _MODEL, "0+30000000x10"),
         _series("nv_inference_queue_duration_us", _MODEL, "0+6000000x10")],
        # 50 ms mean > 20 ms; 10 ms mean queue time > 5 ms.
        [_alert("TritonMeanLatencyAboveSla", "6m", {**_MODEL, **_tk("warning")}),
         _alert("TritonQueueTimeAboveSla", "6m", {**_MODEL, **_tk("warning")})],
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_alert_fires_on_its_signal_and_only_then(case: str, rule_file: Path) -> None:
    series, checks = CASES[case]
    tests = {
        "rule_files": [rule_file.name],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "promql_expr_test": checks}],
    }
    test_file = rule_file.parent / "tests.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = run_rule_tests(test_file)
    assert result.ok, result.output


def test_alert_annotations_render_with_the_values(rule_file: Path) -> None:
    labels = {**_GPU, **_tk("warning", "gpu")}
    tests = {
        "rule_files": [rule_file.name],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": [_series("nv_gpu_utilization", _GPU, "0.9x10")],
            "alert_rule_test": [{"eval_time": "6m", "alertname": "TritonGpuUtilisationHigh", "exp_alerts": [{
                "exp_labels": labels,
                "exp_annotations": {
                    "summary": "GPU GPU-0 above 85 % for 5m",
                    "description": "GPU utilisation is 90% on 10.0.0.1:8002: the compute wall is near; "
                                   "more load only adds queueing.",
                },
            }]}],
        }],
    }
    test_file = rule_file.parent / "annotations.yml"
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False))
    result = run_rule_tests(test_file)
    assert result.ok, result.output


# ---- mapping, options, command line ------------------------------------------------------------


def test_terms_without_a_server_metric_are_listed_with_the_reason() -> None:
    # Built directly: the LLM terms' spellings belong to the SLA parser, which may or may not know them.
    sla = SLA((Constraint("p99", "<=", 100.0), Constraint("ttft_p99", "<=", 500.0),
               Constraint("tokens_per_s", ">=", 20.0), Constraint("goodput", ">=", 5.0)))
    rules = build_rules(sla)
    assert [m.alert for m in rules.mapped] == ["TritonLatencyP99AboveSla"]
    reasons = {m.term.split("<")[0].split(">")[0]: m.note for m in rules.unmapped}
    assert set(reasons) == {"ttft_p99", "tokens_per_s", "goodput"}
    assert "first-response" in reasons["ttft_p99"] and "tokens" in reasons["tokens_per_s"]
    assert "no alert: time to first token" in rules.render()


def test_llm_terms_the_sla_parser_reads_are_listed_without_an_alert() -> None:
    rules = build_rules(parse_sla("p99<=2s,ttft_p99<=500ms,tokens_per_s>=20/s"))
    assert [m.alert for m in rules.mapped] == ["TritonLatencyP99AboveSla"]
    assert len(rules.unmapped) == 2 and all("tritonkit perf" in m.note for m in rules.unmapped)


def test_without_a_repository_or_limit_the_queue_alert_is_left_out_and_said_so() -> None:
    rules = build_rules(parse_sla("p99<=50ms"))
    assert "TritonQueueDeep" not in rules.alert_names
    assert any("queue-depth alert is left out" in n for n in rules.notes)
    with_limit = build_rules(parse_sla("p99<=50ms"), options=AlertOptions(concurrency_limit=16))
    assert with_limit.rule("TritonQueueDeep")["expr"] == "nv_inference_pending_request_count > 8"


def test_an_sla_without_p99_drops_that_signal_from_the_scale_out_rule(repo_facts: RepositoryFacts) -> None:
    rules = build_rules(parse_sla("errors==0"), repo_facts)
    expr = rules.rule("tritonkit:scale_out_signals")["expr"]
    assert "TritonLatencyP99AboveSla" not in expr and "TritonQueueDeep" in expr
    assert any("no p99" in n for n in rules.notes)


def test_thresholds_and_windows_are_options() -> None:
    rules = build_rules(parse_sla("p99<=50ms"), options=AlertOptions(
        gpu_utilisation=0.9, gpu_for="10m", p99_for="1m", concurrency_limit=10, queue_fraction=0.8, queue_for="30s"))
    assert rules.rule("TritonGpuUtilisationHigh")["expr"] == "nv_gpu_utilization > 0.9"
    assert rules.rule("TritonGpuUtilisationHigh")["for"] == "10m"
    assert rules.rule("TritonLatencyP99AboveSla")["for"] == "1m"
    assert rules.rule("TritonQueueDeep")["expr"].endswith("> 8")
    assert rules.rule("TritonQueueDeep")["for"] == "30s"


def test_a_strict_bound_breaks_at_the_limit_itself() -> None:
    rules = build_rules(parse_sla("p99<50ms,throughput>100/s"))
    assert rules.rule("TritonLatencyP99AboveSla")["expr"].endswith("/ 1000 >= 50")
    assert rules.rule("TritonThroughputBelowSlaUnderLoad")["expr"].split(" and ")[0].endswith("<= 100")


def test_a_bad_window_is_refused_with_a_fix() -> None:
    with pytest.raises(ConfigError) as info:
        AlertOptions(p99_for="3 minutes")
    assert "--p99-for" in info.value.message and info.value.hint and "5m" in info.value.hint


def test_the_rule_file_names_the_server_flags_it_needs(rule_file: Path) -> None:
    text = rule_file.read_text()
    assert "--metrics-config=summary_latencies=true" in text
    assert yaml.safe_load(text)["groups"][0]["name"] == "tritonkit.records"


def test_cli_writes_rules_promtool_accepts_and_reports_the_mapping(tmp_path: Path, repo_facts: RepositoryFacts) -> None:
    out = tmp_path / "rules.yml"
    assert repo_facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "alerts", str(repo_facts.root), "--sla", "p99<=50ms,errors==0",
                                       "--p99-for", "2m", "--out", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["path"] == str(out)
    assert {m["alert"] for m in report["mapped"]} == {"TritonLatencyP99AboveSla", "TritonRequestsFailing"}
    assert yaml.safe_load(out.read_text())["groups"][1]["rules"][1]["for"] == "2m"
    assert check_rules(out).ok


def test_cli_refuses_a_bad_window_without_a_traceback() -> None:
    result = CliRunner().invoke(main, ["deploy", "alerts", "--sla", "p99<=50ms", "--gpu-for", "five"])
    assert result.exit_code != 0
    assert "Traceback" not in result.output and "--gpu-for" in result.output
