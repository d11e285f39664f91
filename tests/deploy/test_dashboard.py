"""The Grafana dashboard: its structure here; its queries against a live Prometheus in test_deploy_live.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.pymodels import write_python_model
from tests.support.sweep_models import write_sleepy
from tritonkit.cli import main
from tritonkit.deploy import DashboardOptions, build_dashboard, panel_queries, read_repository
from tritonkit.perf import parse_sla
from tritonkit.triton_metrics import FAMILIES, OLDEST_RELEASE, exposed_in

TRTLLM_CONFIG = """
name: "tensorrt_llm"
backend: "tensorrtllm"
max_batch_size: 64
model_transaction_policy { decoupled: true }
input [ { name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] } ]
output [ { name: "output_ids" data_type: TYPE_INT32 dims: [ -1, -1 ] } ]
instance_group [ { count: 1 kind: KIND_CPU } ]
"""

# What every server release tritonkit knows exposes, and the TensorRT-LLM backend's own families.
KNOWN = {f.name for f in exposed_in(OLDEST_RELEASE)} | {f.name for f in FAMILIES.values() if f.since is None}


def _metric_names(expr: str) -> set[str]:
    return set(re.findall(r"\b(nv_[a-z_]+)", expr))


def _panels(dashboard: dict[str, object]) -> list[dict[str, object]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]  # type: ignore[index,union-attr]


def test_the_dashboard_covers_throughput_latency_queue_in_flight_and_gpu_per_model() -> None:
    dashboard = build_dashboard()
    queries = panel_queries(dashboard)
    titles = set(queries)
    assert {"Throughput", "Request latency percentiles", "Mean latency and queue time",
            "In-flight (pending) requests", "GPU utilisation", "GPU memory used"} <= titles
    used = set().union(*(_metric_names(e) for exprs in queries.values() for e in exprs))
    assert {"nv_inference_count", "nv_inference_request_summary_us", "nv_inference_queue_duration_us",
            "nv_inference_pending_request_count", "nv_gpu_utilization", "nv_gpu_memory_used_bytes"} <= used
    # Per model: every model-level query carries the $model selector and keeps the model label.
    for panel in _panels(dashboard):
        for target in panel["targets"]:  # type: ignore[attr-defined]
            if "nv_inference_" in target["expr"]:
                assert 'model=~"$model"' in target["expr"] and "model" in target["legendFormat"]


def test_every_query_names_only_metrics_triton_exposes() -> None:
    for options in (DashboardOptions(), DashboardOptions(device="cpu", llm=True, job="triton")):
        for exprs in panel_queries(build_dashboard(options=options)).values():
            for expr in exprs:
                assert _metric_names(expr) <= KNOWN, expr


def test_panels_have_unique_ids_and_do_not_overlap() -> None:
    dashboard = build_dashboard(options=DashboardOptions(llm=True))
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    cells: set[tuple[int, int]] = set()
    for panel in dashboard["panels"]:
        g = panel["gridPos"]
        assert g["x"] + g["w"] <= 24
        area = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not area & cells, panel["title"]
        cells |= area


def test_a_cpu_deployment_shows_cpu_gauges_instead_of_gpu_ones() -> None:
    queries = panel_queries(build_dashboard(options=DashboardOptions(device="cpu")))
    assert "CPU utilisation" in queries and "GPU utilisation" not in queries
    assert all("nv_gpu" not in e for exprs in queries.values() for e in exprs)


def test_a_tensorrt_llm_repository_adds_the_llm_row_and_says_where_ttft_comes_from(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    write_python_model(repo, "tensorrt_llm", config_pbtxt=TRTLLM_CONFIG, model_py="")
    dashboard = build_dashboard(read_repository(repo))
    llm = [p for p in _panels(dashboard) if "LLM" in str(p["title"]) or "KV" in str(p["title"])]
    assert len(llm) == 2
    assert any("tritonkit perf" in str(p["description"]) for p in llm)
    plain = tmp_path / "plain"
    write_sleepy(plain, "slow")
    assert not any("LLM" in str(p["title"]) for p in _panels(build_dashboard(read_repository(plain))))


def _p99_line(dashboard: dict[str, object]) -> object:
    panel = next(p for p in _panels(dashboard) if p["title"] == "Request latency percentiles")
    defaults = panel["fieldConfig"]["defaults"]  # type: ignore[index]
    return defaults["thresholds"]["steps"][-1] if "thresholds" in defaults else None


def test_the_sla_p99_is_drawn_on_the_latency_panel() -> None:
    assert _p99_line(build_dashboard(options=DashboardOptions(p99_limit_ms=50))) == {"color": "red", "value": 50}
    assert _p99_line(build_dashboard(sla=parse_sla("p99<=75ms,errors==0"))) == {"color": "red", "value": 75}
    assert _p99_line(build_dashboard(sla=parse_sla("p50<=75ms"))) is None  # no p99 bound, no line
    chosen = build_dashboard(options=DashboardOptions(p99_limit_ms=40), sla=parse_sla("p99<=75ms"))
    assert _p99_line(chosen) == {"color": "red", "value": 40}  # the options say otherwise


@pytest.mark.parametrize("args", [["--sla", "p99<=75ms", "--device", "cpu"], []])
def test_cli_writes_the_dashboard_json(tmp_path: Path, args: list[str]) -> None:
    out = tmp_path / "dash.json"
    result = CliRunner().invoke(main, ["deploy", "dashboard", *args, "--out", str(out)])
    assert result.exit_code == 0, result.output
    dashboard = json.loads(out.read_text())
    assert dashboard["uid"] == "tritonkit-triton"
    assert {v["name"] for v in dashboard["templating"]["list"]} == {"datasource", "model"}
    titles = {p["title"] for p in dashboard["panels"]}
    assert ("CPU utilisation" in titles) == ("cpu" in args)
