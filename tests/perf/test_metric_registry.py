"""One registry of metrics: the SLA parser, reports and compare read it; importing it is light."""

from __future__ import annotations

import subprocess
import sys

from tritonkit.perf.judge.sla import METRICS as SLA_METRICS
from tritonkit.perf.judge.sla import parse_sla
from tritonkit.perf.metric_registry import METRICS, metric, metrics_for


def test_every_sla_metric_is_a_registry_entry_and_its_aliases_parse_to_it() -> None:
    assert SLA_METRICS is METRICS
    for entry in METRICS.values():
        bound = "<=" if entry.bound == "upper" else ">="
        for spelling in (entry.name, *entry.aliases):
            (constraint,) = parse_sla(f"{spelling}{bound}1{entry.unit if entry.kind == 'time' else ''}").constraints
            assert constraint.metric == entry.name
            assert metric(spelling.upper()) is entry


def test_latency_percentiles_name_the_prometheus_quantile_and_a_report_column() -> None:
    assert METRICS["p99"].prometheus_quantile == "0.99" and METRICS["p50"].prometheus_quantile == "0.5"
    assert METRICS["p99"].column == "p99 (ms)" and METRICS["throughput"].worse_when == "drop"
    assert METRICS["ttft_p99"].worse_when == "rise" and "llm" in METRICS["ttft_p99"].modes
    assert "ttft_p99" not in {m.name for m in metrics_for("classic")}
    assert all(m.definition for m in METRICS.values())


def test_importing_the_registry_loads_no_plotting_templating_or_client_library() -> None:
    code = ("import sys, tritonkit.perf.metric_registry; "
            "print(sorted(m for m in ('matplotlib', 'jinja2', 'grpc', 'tritonclient', 'numpy') if m in sys.modules))")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"
