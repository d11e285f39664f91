"""Triton's metric families: one table, every name taken from it, and each claim held against the
bundled 2.51 server's own ``/metrics``."""

from __future__ import annotations

import ast
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from prometheus_client.parser import text_string_to_metric_families

import tritonkit
from tests.support.pymodels import ADD_SUB_CONFIG, ADD_SUB_PY, write_python_model
from tritonkit.perf.metric_registry import METRICS
from tritonkit.provision.server import locate_server
from tritonkit.repository.spec import Hardware
from tritonkit.server import TritonServer
from tritonkit.triton_metrics import (
    FAILURE_REASONS,
    FAMILIES,
    FIRST_RESPONSE_HISTOGRAM_MS,
    GPU_FAMILIES,
    MODEL_LOAD_DURATION_S,
    OLDEST_RELEASE,
    REQUEST_FAILURE,
    SUMMARY_QUANTILES,
    MetricFamily,
    exposed_in,
    family,
    release_key,
    summary_quantile,
)

PACKAGE = Path(tritonkit.__file__).parent
TABLE = PACKAGE / "triton_metrics.py"
#: The newest server release whose facts were read (server repo r26.08).
NEWEST_READ = "2.72"
_FAMILY_NAME = re.compile(r"\bnv_[a-z]")


def nv_literals(source: str) -> list[tuple[int, str]]:
    """``(line, text)`` of every string literal naming an ``nv_…`` metric family, f-string parts
    included; docstrings are prose and left out."""
    tree = ast.parse(source)
    docstrings = {
        id(node.body[0].value) for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            and _FAMILY_NAME.search(node.value)]


# ---- one table, every reader takes names from it ----------------------------------------------------

def test_no_module_but_the_table_writes_a_triton_metric_name() -> None:
    stray = {str(path.relative_to(PACKAGE)): found for path in sorted(PACKAGE.rglob("*.py"))
             if path != TABLE and (found := nv_literals(path.read_text(encoding="utf-8")))}
    assert stray == {}, "take these names from tritonkit.triton_metrics"
    assert len(nv_literals(TABLE.read_text(encoding="utf-8"))) >= len(FAMILIES)  # the check sees the table's


def test_the_check_sees_names_in_plain_strings_and_f_strings_but_not_in_docstrings() -> None:
    source = '''"""Reads nv_inference_count."""
def f(part):
    """nv_gpu_utilization is prose here."""
    a = "nv_inference_count"
    b = f"rate(nv_inference_compute_{part}_duration_us[2m])"
    c = "env_var"
    return a, b, c
'''
    assert [line for line, _ in nv_literals(source)] == [4, 5]


def test_every_family_says_its_type_unit_labels_release_and_source() -> None:
    assert len(FAMILIES) >= 40
    for name, fam in FAMILIES.items():
        assert fam.name == name and name.startswith("nv_") and family(name) is fam
        assert fam.kind in ("counter", "gauge", "summary", "histogram")
        assert fam.meaning and fam.source
        if fam.since is None:
            assert fam.origin == "tensorrtllm_backend" and "tensorrtllm_backend v" in fam.source
        else:
            assert release_key(OLDEST_RELEASE) <= release_key(fam.since) <= release_key(NEWEST_READ)
            assert re.search(r"triton-inference-server/(core|local_cache) r\d\d\.\d\d \(server \d\.\d+\)", fam.source)
        if fam.scope == "model":
            assert fam.labels[:2] == ("model", "version"), name
        if fam.kind == "summary" or (fam.kind == "histogram" and fam.origin == "core"):
            assert fam.unit in ("us", "ms"), name  # latency distributions, in the unit their name ends with
            assert fam.name.endswith("_" + fam.unit) or fam.name.endswith("_per_model"), name
    assert family("nv_no_such_family") is None


def test_the_per_gpu_families_are_those_labelled_by_gpu_uuid() -> None:
    assert "nv_gpu_utilization" in GPU_FAMILIES and "nv_energy_consumption" in GPU_FAMILIES
    assert {n for n, f in FAMILIES.items() if "gpu_uuid" in f.labels} == GPU_FAMILIES


def test_the_families_new_since_2_51_are_absent_from_2_51_and_present_from_2_52() -> None:
    at_2_51 = {f.name for f in exposed_in("2.51")}
    at_2_52 = {f.name for f in exposed_in("2.52")}
    assert {MODEL_LOAD_DURATION_S.name, FIRST_RESPONSE_HISTOGRAM_MS.name} == at_2_52 - at_2_51
    assert FIRST_RESPONSE_HISTOGRAM_MS.kind == "histogram" and FIRST_RESPONSE_HISTOGRAM_MS.unit == "ms"
    assert {f.name for f in exposed_in(NEWEST_READ)} == at_2_52  # none added or removed after 2.52
    assert release_key("2.9") < release_key("2.51")


def test_the_metric_registry_names_the_quantiles_deploy_alerts_on() -> None:
    quantiles = {m.name: m.prometheus_quantile for m in METRICS.values() if m.prometheus_quantile is not None}
    assert quantiles == {"p50": "0.5", "p90": "0.9", "p95": "0.95", "p99": "0.99"}
    assert set(quantiles.values()) <= set(SUMMARY_QUANTILES)
    assert summary_quantile(0.999) == "0.999" and summary_quantile(0.75) is None


# ---- against the real 2.51 server --------------------------------------------------------------------

def _scrape(url: str) -> dict[str, tuple[str, set[frozenset[str]]]]:
    """``/metrics`` as {family: (type, the label-name sets of its series)}."""
    with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - our own server
        text = response.read().decode()
    found: dict[str, tuple[str, set[frozenset[str]]]] = {}
    for fam in text_string_to_metric_families(text):
        found[fam.name] = (fam.type, {frozenset(s.labels) for s in fam.samples})
    return found


@pytest.fixture(scope="module")
def served_2_51(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[TritonServer, dict[str, tuple[str, set[frozenset[str]]]]]]:
    """The bundled server with every switch 2.51 has on: latency summaries, the local response
    cache (one model uses it, one does not: the request summary is left out for a cached model),
    and a few requests through each model, two of them the same (a cache hit)."""
    from tritonkit.client import Client

    repo = tmp_path_factory.mktemp("metrics_repo")
    write_python_model(repo, "plain", config_pbtxt=ADD_SUB_CONFIG.format(name="plain"), model_py=ADD_SUB_PY)
    write_python_model(repo, "cached", config_pbtxt=ADD_SUB_CONFIG.format(name="cached")
                       + "response_cache { enable: true }\n", model_py=ADD_SUB_PY)
    caches = locate_server().binary.resolve().parent.parent / "caches"
    args = ["--metrics-config=summary_latencies=true", f"--cache-directory={caches}", "--cache-config=local,size=1048576"]
    with TritonServer(repo, extra_args=args) as server:
        ones = np.ones((1, 4), np.float32)
        with Client(server.grpc_url) as client:
            for model in ("plain", "cached", "cached"):
                client.infer(model, {"INPUT0": ones, "INPUT1": ones})
        yield server, _scrape(server.metrics_url)


#: GPUs on this machine, as the library sees them (``nvidia-smi -L``).
GPUS = len(Hardware.detect().gpus)


@pytest.mark.server
def test_the_bundled_server_is_2_51_and_shows_every_family_the_table_gives_2_51(served_2_51) -> None:  # type: ignore[no-untyped-def]
    server, exposed = served_2_51
    assert server.version().startswith(OLDEST_RELEASE + ".")
    # Every switch is on except a GPU: the per-GPU families need one (the gpu test below has them).
    expected = {f.name for f in exposed_in(OLDEST_RELEASE) if f.scope != "gpu" or GPUS}
    assert sorted(expected - set(exposed)) == []


@pytest.mark.server
def test_the_bundled_server_shows_no_family_the_table_does_not_give_2_51(served_2_51) -> None:  # type: ignore[no-untyped-def]
    _, exposed = served_2_51
    in_2_51 = {f.name for f in exposed_in(OLDEST_RELEASE)}
    assert sorted(n for n in exposed if n.startswith("nv_") and n not in in_2_51) == []
    assert MODEL_LOAD_DURATION_S.name not in exposed and FIRST_RESPONSE_HISTOGRAM_MS.name not in exposed


@pytest.mark.server
def test_each_family_on_the_server_has_the_tables_type_and_labels(served_2_51) -> None:  # type: ignore[no-untyped-def]
    _, exposed = served_2_51
    extra = {"summary": {"quantile"}, "histogram": {"le"}}
    for name, (kind, label_sets) in exposed.items():
        fam: MetricFamily | None = family(name)
        if fam is None:
            continue  # the test above names any unknown family
        assert kind == fam.kind, name
        for labels in label_sets:
            assert set(fam.labels) <= labels <= set(fam.labels) | extra.get(kind, set()), (name, sorted(labels))


@pytest.mark.server
def test_the_failure_counter_has_one_series_per_reason_the_table_lists(served_2_51) -> None:  # type: ignore[no-untyped-def]
    server, _ = served_2_51
    with urllib.request.urlopen(server.metrics_url, timeout=10) as response:  # noqa: S310 - our own server
        text = response.read().decode()
    reasons = {s.labels["reason"] for fam in text_string_to_metric_families(text) if fam.name == REQUEST_FAILURE.name
               for s in fam.samples if s.labels.get("model") == "plain"}
    assert reasons == set(FAILURE_REASONS)


@pytest.mark.gpu
@pytest.mark.server
@pytest.mark.skipif(GPUS == 0, reason="needs an NVIDIA GPU (nvidia-smi lists none on this machine)")
def test_with_a_gpu_the_server_shows_every_per_gpu_family_labelled_by_uuid(served_2_51) -> None:  # type: ignore[no-untyped-def]
    _, exposed = served_2_51
    for name in sorted(f.name for f in exposed_in(OLDEST_RELEASE) if f.scope == "gpu"):
        assert name in exposed, name
        assert all("gpu_uuid" in labels for labels in exposed[name][1]), name
