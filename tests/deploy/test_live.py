"""The generated rules and dashboard against a real Prometheus scraping a real tritonserver.

A python-backend model made slow on purpose (every execution sleeps 60 ms, one instance, batch
of at most 2) is loaded by the real perf_analyzer at concurrency 8 on 127.0.0.1: requests queue
and p99 climbs far past the SLA's 100 ms. Prometheus (Debian's 2.42, on 127.0.0.1, its own data
folder, 1 s scrape and rule evaluation) evaluates the generated rules with short ``for:`` windows:
the p99 and queue alerts must fire under load, and with both of them the scale-out rule; all
must resolve once the load stops. The autoscaler's queries (the prometheus-adapter rules of
the HPA) must stand above the HPA's targets under that load, and the two-of-three signal count
must read 0 (not vanish) once it stops. Every panel of the CPU dashboard must return data from that
Prometheus while the load runs. GPU panels cannot have data on a machine without a GPU: the GPU
dashboard's other panels are checked, and its GPU queries are checked for the metric names only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.sweep_models import write_sleepy
from tritonkit.deploy import (
    AlertOptions,
    DashboardOptions,
    K8sOptions,
    Manifests,
    build_dashboard,
    build_manifests,
    build_rules,
    locate_prometheus,
    panel_queries,
    read_repository,
    write_rules,
)
from tritonkit.deploy.alerts import SCALE_OUT_SIGNALS_RECORD
from tritonkit.deploy.k8s_scale import (
    QUEUE_TIME_METRIC,
    SIGNALS_TARGET,
    ScaleTargets,
    pending_query,
    queue_time_ms_query,
)
from tritonkit.errors import MissingComponentError
from tritonkit.perf import PerfSpec, parse_sla
from tritonkit.perf.measure import ConcurrencyRange, LadderPlan, run_ladder
from tritonkit.server import TritonServer, free_ports
from tritonkit.server.children import spawn

pytestmark = [pytest.mark.timeout(420), pytest.mark.server, pytest.mark.perf_analyzer]

SLA_TEXT = "p99<=100ms"
IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
FIRING = {"TritonLatencyP99AboveSla", "TritonQueueDeep", "TritonScaleOut"}


def _get(url: str, timeout_s: float = 5.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout_s) as response:  # noqa: S310 (loopback only)
        return json.loads(response.read())


class Prometheus:
    """A Prometheus process on 127.0.0.1 that dies with this test process."""

    def __init__(self, folder: Path, rules: Path, target: str) -> None:
        self.port = free_ports(1)[0]
        self.url = f"http://127.0.0.1:{self.port}"
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(rules)],
            "scrape_configs": [{"job_name": "triton", "static_configs": [{"targets": [target]}]}],
        }
        (folder / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.log = folder / "prometheus.log"
        argv = [str(locate_prometheus().prometheus), f"--config.file={folder / 'prometheus.yml'}",
                f"--storage.tsdb.path={folder / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"]
        with self.log.open("wb") as log:
            self.proc = spawn(argv, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"prometheus exited: {self.log.read_text()[-2000:]}"
            try:
                urllib.request.urlopen(f"{self.url}/-/ready", timeout=1).close()  # noqa: S310
                return
            except OSError:
                time.sleep(0.3)
        raise AssertionError(f"prometheus not ready in 60 s: {self.log.read_text()[-2000:]}")

    def query(self, expr: str) -> list[dict[str, Any]]:
        data = _get(f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
        assert data["status"] == "success", data
        return list(data["data"]["result"])

    def firing(self) -> set[str]:
        alerts = _get(f"{self.url}/api/v1/alerts")["data"]["alerts"]
        return {a["labels"]["alertname"] for a in alerts if a["state"] == "firing"}

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=5)


@pytest.fixture
def prometheus_bin() -> None:
    try:
        locate_prometheus()
    except MissingComponentError as exc:
        pytest.fail(f"{exc} — scripts/test installs it (tritonkit deploy install-prometheus)")


class Load:
    """The real perf_analyzer at concurrency 8 on 127.0.0.1, ladder after ladder, until stopped.

    Bounded: at most ``max_runs`` ladders of a few seconds each.
    """

    def __init__(self, grpc_url: str, results: Path, max_runs: int = 12) -> None:
        self.spec = PerfSpec(model="slow", url=grpc_url, load=ConcurrencyRange(8))
        self.plan = LadderPlan(levels=(8,), step_window_ms=3000, max_trials=4, total_timeout_s=60)
        self.results, self.max_runs = results, max_runs
        self.stop_event = threading.Event()
        self.errors: list[str] = []
        self.runs = 0
        self.thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self.stop_event.is_set() and self.runs < self.max_runs:
            self.runs += 1
            outcome = run_ladder(self.spec, self.plan, results_dir=self.results / f"run{self.runs}")
            if outcome.error is not None:
                self.errors.append(str(outcome.error))

    def __enter__(self) -> Load:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop_event.set()
        self.thread.join(timeout=120)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[TritonServer]:
    repo = tmp_path / "repo"
    write_sleepy(repo, "slow", instances=1, max_batch=2, window_us=1000, base_ms=60, per_item_ms=0)
    server = TritonServer(repo, extra_args=["--metrics-config=summary_latencies=true"])
    try:
        yield server.start()
    finally:
        server.stop()


def _scale_targets_of(manifests: Manifests) -> ScaleTargets:
    """The HPA's per-pod targets, read back from the HPA written."""
    hpa = next(d for d in manifests.all() if d["kind"] == "HorizontalPodAutoscaler")
    pods = {m["pods"]["metric"]["name"]: m["pods"]["target"]["averageValue"]
            for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    queue = pods.get(QUEUE_TIME_METRIC)
    return ScaleTargets(int(pods["nv_inference_pending_request_count"]),
                        int(queue.removesuffix("m")) / 1000 if queue else None, None)


def _wait_for(what: str, check: Any, timeout_s: float, interval_s: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"{what}: not within {timeout_s:.0f} s (last: {last!r})")


def test_p99_and_queue_alerts_fire_under_load_and_resolve_after_it_and_every_panel_has_data(
    tmp_path: Path, served: TritonServer, prometheus_bin: None,
) -> None:
    facts = read_repository(served.repositories[0])
    scaling = build_manifests(facts, parse_sla(SLA_TEXT), K8sOptions(image=IMAGE, max_replicas=4))
    scale_targets = _scale_targets_of(scaling)
    rules = build_rules(parse_sla(SLA_TEXT), facts, AlertOptions(
        gpu_for="3s", p99_for="3s", queue_for="3s", sla_for="3s", rate_window="10s"))
    rule_file = write_rules(rules, tmp_path / "rules.yml")
    cpu_panels = panel_queries(build_dashboard(facts, DashboardOptions(device="cpu", job="triton")),
                               rate_interval="10s")
    gpu_panels = panel_queries(build_dashboard(facts, DashboardOptions(device="gpu", job="triton")),
                               rate_interval="10s")
    prom = Prometheus(tmp_path, rule_file, f"127.0.0.1:{served.metrics_port}")
    try:
        _wait_for("Prometheus scrapes tritonserver",
                  lambda: prom.query('up{job="triton"} == 1'), timeout_s=30)
        assert not prom.firing() & FIRING, "alerts fire before any load"

        started = time.monotonic()
        with Load(served.grpc_url, tmp_path / "perf") as load:
            def all_firing() -> set[str]:
                now = prom.firing()
                return now if now >= FIRING else set()

            fired = _wait_for("p99, queue and scale-out alerts fire", all_firing, timeout_s=150)
            assert {"TritonLatencyP99AboveSla", "TritonQueueDeep"} <= fired
            print(f"alerts firing {time.monotonic() - started:.1f} s after the load started: {sorted(fired)}")
            # The recording rule says "scale out": two of the three signals hold (no GPU here).
            scale = prom.query("tritonkit:scale_out")
            assert scale and float(scale[0]["value"][1]) == 2.0
            p99 = prom.query("tritonkit:request_latency_p99:ms")
            assert p99 and float(p99[0]["value"][1]) > 100.0
            # The autoscaler's own queries (prometheus-adapter's, with this scrape job's labels in
            # place of a pod's) stand above the HPA's targets: it would be adding replicas.
            for what, expr, target in (
                ("pending requests", pending_query('job="triton"', "job"), scaling.pending_target),
                ("mean queue time ms", queue_time_ms_query('job="triton"', "job"), scale_targets.queue_time_ms),
                ("firing signals", SCALE_OUT_SIGNALS_RECORD, SIGNALS_TARGET),
            ):
                got = prom.query(expr)
                assert got and float(got[0]["value"][1]) > (target or 0), f"{what}: {got} not above {target}"

            empty = [title for title, exprs in cpu_panels.items() for expr in exprs if not prom.query(expr)]
            assert not empty, f"CPU dashboard panels with no data under load: {empty}"
            gpu_only = {"GPU utilisation", "GPU memory used"}
            empty = [title for title, exprs in gpu_panels.items() if title not in gpu_only
                     for expr in exprs if not prom.query(expr)]
            assert not empty, f"GPU dashboard panels with no data under load: {empty}"
            assert all("nv_gpu_" in expr for title in gpu_only for expr in gpu_panels[title])
        assert load.runs >= 1 and not load.errors, load.errors

        stopped = time.monotonic()
        _wait_for("the alerts resolve after the load stops",
                  lambda: not (prom.firing() & FIRING), timeout_s=150, interval_s=2.0)
        print(f"alerts resolved {time.monotonic() - stopped:.1f} s after the load stopped "
              f"({load.runs} perf_analyzer ladder(s))")
        # Calm: the signal count the HPA reads is 0, not absent (an absent metric blocks scaling in).
        signals = prom.query(SCALE_OUT_SIGNALS_RECORD)
        assert signals and float(signals[0]["value"][1]) == 0.0, signals
    finally:
        prom.stop()
    assert prom.proc.poll() is not None
