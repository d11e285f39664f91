"""Kubernetes / KServe manifests from a repository and an SLA, validated against the Kubernetes schemas.

``kubernetes-validate`` ships the Kubernetes OpenAPI schemas and validates offline (strict:
unknown fields are errors). It has no schema for KServe's InferenceService (a custom resource),
so that one is checked field by field against the structure KServe documents.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from tests.support import deploy_repos
from tests.support.kserve import predictor_pod
from tritonkit.cli import main
from tritonkit.deploy import (
    GrpcIngress,
    K8sOptions,
    RepositoryFacts,
    RepositorySource,
    build_manifests,
    render_yaml,
    write_manifests,
)
from tritonkit.deploy.k8s import MIN_EXIT_TIMEOUT_S, TAIL_FACTOR, parse_replicas
from tritonkit.deploy.source import SCALE_OUT_UTILISATION
from tritonkit.errors import ConfigError
from tritonkit.perf import parse_sla
from tritonkit.planner import PlanAssumptions

K8S_VERSION = kubernetes_validate.latest_version()
# The shared repositories, as fixtures of this module.
cpu_facts, gpu_facts = deploy_repos.cpu_facts, deploy_repos.gpu_facts
IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"



def _validate(doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def _kinds(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {d["kind"]: d for d in docs}


def test_every_manifest_passes_the_kubernetes_schemas(gpu_facts: RepositoryFacts) -> None:
    manifests = build_manifests(gpu_facts, parse_sla("p99<=50ms"),
                                K8sOptions(image=IMAGE, namespace="serving", min_replicas=2, max_replicas=8))
    docs = manifests.all()
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "Service", "HorizontalPodAutoscaler",
                                         "NetworkPolicy", "PodDisruptionBudget"]
    for doc in docs:
        _validate(doc)
        assert doc["metadata"]["namespace"] == "serving"


def test_the_schema_check_catches_a_misspelt_field(cpu_facts: RepositoryFacts) -> None:
    deployment = build_manifests(cpu_facts, None, K8sOptions(image=IMAGE)).all()[0]
    deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = {"httpGet": {"path": "/"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        _validate(deployment)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare to cut the network")
def test_validation_needs_no_network(tmp_path: Path, cpu_facts: RepositoryFacts) -> None:
    stream = tmp_path / "all.yaml"
    stream.write_text(render_yaml(build_manifests(cpu_facts, None, K8sOptions(image=IMAGE)).all()))
    script = ("import sys, yaml, kubernetes_validate as kv\n"
              "docs = list(yaml.safe_load_all(open(sys.argv[1])))\n"
              "[kv.validate(d, kv.latest_version(), strict=True) for d in docs]\n"
              "print(len(docs))\n")
    # A new network namespace has no interface but a downed loopback: nothing can be fetched.
    proc = subprocess.run(["unshare", "--net", sys.executable, "-c", script, str(stream)],
                          capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
        pytest.skip("unshare --net is not permitted here")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "6"


def test_the_deployment_serves_the_repository_with_health_probes_and_scrape_annotations(
    gpu_facts: RepositoryFacts,
) -> None:
    deployment = _kinds(build_manifests(gpu_facts, None, K8sOptions(image=IMAGE)).all())["Deployment"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert container["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert pod["metadata"]["annotations"] == {"prometheus.io/scrape": "true", "prometheus.io/port": "8002",
                                              "prometheus.io/path": "/metrics"}
    assert "--model-repository=/models" in container["args"]
    assert "--metrics-config=summary_latencies=true" in container["args"]
    assert {"name": "models", "mountPath": "/models", "readOnly": True} in container["volumeMounts"]
    claim = next(v for v in pod["spec"]["volumes"] if v["name"] == "models")
    assert claim["persistentVolumeClaim"]["claimName"] == "triton-models"
    # KIND_GPU in the config → one GPU per pod by default.
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"


def test_gpus_follow_the_option_and_a_cpu_repository_asks_for_none(
    gpu_facts: RepositoryFacts, cpu_facts: RepositoryFacts,
) -> None:
    four = _kinds(build_manifests(gpu_facts, None, K8sOptions(image=IMAGE, gpus=4)).all())["Deployment"]
    assert four["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "4"
    cpu = _kinds(build_manifests(cpu_facts, None, K8sOptions(image=IMAGE)).all())["Deployment"]
    container = cpu["spec"]["template"]["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in container["resources"]["limits"]
    assert "--allow-gpu-metrics=true" not in container["args"]


def test_shutdown_drains_longer_than_the_longest_request(cpu_facts: RepositoryFacts) -> None:
    # From the SLA: ten times its largest latency bound (p99 8 s → 80 s), never under 30 s.
    manifests = build_manifests(cpu_facts, parse_sla("p99<=8s"), K8sOptions(image=IMAGE))
    assert manifests.exit_timeout_s == 8 * TAIL_FACTOR
    pod = _kinds(manifests.all())["Deployment"]["spec"]["template"]["spec"]
    assert f"--exit-timeout-secs={8 * TAIL_FACTOR}" in pod["containers"][0]["args"]
    assert pod["terminationGracePeriodSeconds"] > 8 * TAIL_FACTOR
    assert pod["containers"][0]["lifecycle"]["preStop"]["exec"]["command"][0] == "sleep"
    # From the option; and a millisecond SLA still drains for the minimum.
    given = build_manifests(cpu_facts, parse_sla("p99<=8s"), K8sOptions(image=IMAGE, max_request_s=600))
    assert given.exit_timeout_s == 600 and given.grace_period_s > 600
    assert build_manifests(cpu_facts, parse_sla("p99<=50ms"), K8sOptions(image=IMAGE)).exit_timeout_s == \
        MIN_EXIT_TIMEOUT_S


def test_the_autoscaler_scales_on_pending_requests_and_gpu_at_the_rule_of_thumb(
    gpu_facts: RepositoryFacts, cpu_facts: RepositoryFacts,
) -> None:
    assert PlanAssumptions().scale_out_utilisation == SCALE_OUT_UTILISATION
    assert 0.6 <= SCALE_OUT_UTILISATION <= 0.7
    manifests = build_manifests(gpu_facts, parse_sla("p99<=50ms"),
                                K8sOptions(image=IMAGE, min_replicas=2, max_replicas=6))
    hpa = _kinds(manifests.all())["HorizontalPodAutoscaler"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    targets = {m["pods"]["metric"]["name"]: m["pods"]["target"]["averageValue"]
               for m in hpa["spec"]["metrics"] if m["type"] == "Pods"}
    # detector: 2 GPU instances × max batch 8 = 16; queue alert at 8; scale out at 65 % of that → 5.
    # Queue time: 65 % of half the p99 bound of 50 ms = 16.25 ms.
    assert targets == {"nv_inference_pending_request_count": "5", "tritonkit_queue_time_ms": "16250m",
                       "nv_gpu_utilization": "650m"}
    # The alert rules' two-of-three decision: 1.5 lies between one firing signal and two.
    external = [m["external"] for m in hpa["spec"]["metrics"] if m["type"] == "External"]
    assert external == [{"metric": {"name": "tritonkit_scale_out_signals"},
                         "target": {"type": "Value", "value": "1500m"}}]
    assert manifests.adapter_rules is not None
    served = {r["name"]["as"] for r in manifests.adapter_rules["rules"]["custom"]}
    assert served == set(targets)
    assert [r["name"]["as"] for r in manifests.adapter_rules["rules"]["external"]] == ["tritonkit_scale_out_signals"]
    assert manifests.adapter_rules["rules"]["external"][0]["seriesQuery"] == "tritonkit:scale_out_signals"
    given = build_manifests(gpu_facts, None, K8sOptions(image=IMAGE, concurrency_limit=40))
    assert given.pending_target == 13  # 65 % of half of 40
    cpu_hpa = _kinds(build_manifests(cpu_facts, None, K8sOptions(image=IMAGE)).all())["HorizontalPodAutoscaler"]
    # No SLA p99, no GPU: pending requests and the external signal only.
    assert [m.get("pods", m.get("external"))["metric"]["name"] for m in cpu_hpa["spec"]["metrics"]] == \
        ["nv_inference_pending_request_count", "tritonkit_scale_out_signals"]


def test_fixed_replicas_need_no_autoscaler(cpu_facts: RepositoryFacts) -> None:
    manifests = build_manifests(cpu_facts, None, K8sOptions(image=IMAGE, min_replicas=3, max_replicas=3))
    assert "HorizontalPodAutoscaler" not in _kinds(manifests.all())
    assert "PodDisruptionBudget" in _kinds(manifests.all())
    assert manifests.adapter_rules is None
    assert _kinds(manifests.all())["Deployment"]["spec"]["replicas"] == 3


def test_an_object_store_repository_is_read_by_the_server_with_credentials(cpu_facts: RepositoryFacts) -> None:
    options = K8sOptions(image=IMAGE, source=RepositorySource(uri="s3://models/prod", credentials_secret="s3-creds"))
    deployment = _kinds(build_manifests(cpu_facts, None, options).all())["Deployment"]
    _validate(deployment)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert "--model-repository=s3://models/prod" in container["args"]
    # A file, not environment variables: tritonserver 2.51 reads TRITON_CLOUD_CREDENTIAL_PATH.
    assert "envFrom" not in container
    assert {"name": "TRITON_CLOUD_CREDENTIAL_PATH",
            "value": "/var/run/secrets/tritonkit/cloud-credentials.json"} in container["env"]
    assert {"name": "credentials", "mountPath": "/var/run/secrets/tritonkit", "readOnly": True} in \
        container["volumeMounts"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["credentials"]["secret"]["secretName"] == "s3-creds"
    assert "models" not in volumes
    # The localised repository goes to /tmp: sized for it.
    assert volumes["tmp"]["emptyDir"]["sizeLimit"].endswith("Mi")


def test_kserve_gets_an_inference_service_on_the_triton_runtime(gpu_facts: RepositoryFacts) -> None:
    options = K8sOptions(image=IMAGE, source=RepositorySource(uri="gs://bucket/repo"), kserve=True, min_replicas=1,
                         max_replicas=3)
    docs = build_manifests(gpu_facts, parse_sla("p99<=50ms"), options).all()
    assert [d["kind"] for d in docs] == ["InferenceService", "NetworkPolicy", "PodDisruptionBudget"]
    isvc = docs[0]
    assert isvc["apiVersion"] == "serving.kserve.io/v1beta1"
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        _validate(isvc)  # a custom resource: the Kubernetes schemas do not cover it, so check it here
    predictor = isvc["spec"]["predictor"]
    model = predictor["model"]
    assert model["modelFormat"] == {"name": "triton"}
    assert model["runtime"] == "kserve-tritonserver"
    assert model["storageUri"] == "gs://bucket/repo"
    assert model["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert model["resources"]["limits"] == model["resources"]["requests"]
    assert "--metrics-config=summary_latencies=true" in model["args"]
    # The same hardening as the Deployment, where KServe's schema has the field.
    assert predictor["automountServiceAccountToken"] is False
    assert predictor["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert model["securityContext"]["readOnlyRootFilesystem"] is True
    # The same scaling signals, through KServe's KEDA integration (raw deployment mode).
    assert isvc["metadata"]["annotations"]["serving.kserve.io/autoscalerClass"] == "keda"
    queries = [m["external"]["metric"]["query"] for m in predictor["autoScaling"]["metrics"]]
    assert queries[0] == \
        'sum(nv_inference_pending_request_count{namespace="triton",pod=~"triton-predictor-.*"}) by (namespace)'
    assert any("nv_inference_queue_duration_us" in q for q in queries)
    assert any("nv_gpu_utilization" in q for q in queries)
    assert queries[-1] == "max(tritonkit:scale_out_signals) or vector(0)"
    targets = [m["external"]["target"] for m in predictor["autoScaling"]["metrics"]]
    assert targets[0] == {"type": "AverageValue", "averageValue": "5"}
    assert targets[-1] == {"type": "Value", "value": "1.5"}
    # Every field KServe passes through is a PodSpec / Container field: check the Pod it makes.
    _validate(predictor_pod(isvc, IMAGE))
    # NetworkPolicy and PDB select the predictor's pods by KServe's own label.
    for doc in docs[1:]:
        _validate(doc)
        selector = doc["spec"].get("podSelector", doc["spec"].get("selector"))
        assert selector == {"matchLabels": {"serving.kserve.io/inferenceservice": "triton"}}


@pytest.mark.parametrize(("build", "words"), [
    (partial(RepositorySource, uri="http://example/models"), "object-store URI"),
    (partial(K8sOptions, image=IMAGE, min_replicas=3, max_replicas=2), "min <= max"),
    (partial(K8sOptions, image=" "), "--image is empty"),
    (partial(K8sOptions, image=IMAGE, kserve=True), "storage URI"),
])
def test_bad_options_are_refused_with_a_fix(build: Callable[[], object], words: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert words in info.value.message and info.value.hint


def test_replicas_text_is_n_or_min_max() -> None:
    assert parse_replicas("3") == (3, 3)
    assert parse_replicas("1:8") == (1, 8)
    with pytest.raises(ConfigError):
        parse_replicas("8:1")
    with pytest.raises(ConfigError):
        parse_replicas("many")


def test_cli_writes_one_valid_file_per_kind(tmp_path: Path, gpu_facts: RepositoryFacts) -> None:
    out = tmp_path / "k8s"
    assert gpu_facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "k8s", str(gpu_facts.root), "--image", IMAGE, "--gpus", "2",
                                       "--replicas", "2:8", "--sla", "p99<=50ms", "--out", str(out)])
    assert result.exit_code == 0, result.output
    names = sorted(p.name for p in out.iterdir())
    assert names == ["deployment.yaml", "hpa.yaml", "networkpolicy.yaml", "pdb.yaml",
                     "prometheus-adapter-values.yaml", "service.yaml"]
    for name in set(names) - {"prometheus-adapter-values.yaml"}:
        for doc in yaml.safe_load_all((out / name).read_text()):
            _validate(doc)
    assert "exit timeout 30 s" in result.output


def test_cli_prints_one_stream_for_kubectl_without_out(cpu_facts: RepositoryFacts) -> None:
    assert cpu_facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "k8s", str(cpu_facts.root), "--image", IMAGE,
                                                       "--replicas", "2"])
    assert result.exit_code == 0, result.stderr
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Deployment", "Service", "Service", "NetworkPolicy", "PodDisruptionBudget"]
    json.dumps(docs)  # plain data all the way down


def test_cli_builds_the_repository_source_pod_size_and_ingress_from_its_flags(cpu_facts: RepositoryFacts) -> None:
    assert cpu_facts.root is not None
    result = CliRunner().invoke(main, [
        "deploy", "k8s", str(cpu_facts.root), "--image", IMAGE, "--name", "det", "--kserve",
        "--repo-uri", "s3://models/prod", "--credentials-secret", "s3-creds", "--cpu", "3", "--memory", "6Gi",
        "--shm-size", "1Gi", "--prometheus-url", "http://prom.monitoring.svc:9090"])
    assert result.exit_code == 0, result.output
    isvc = next(yaml.safe_load_all(result.stdout))
    model = isvc["spec"]["predictor"]["model"]
    assert isvc["metadata"]["name"] == "det" and model["storageUri"] == "s3://models/prod"
    assert model["resources"]["limits"] == {"cpu": "3", "memory": "6Gi"}
    volumes = {v["name"]: v for v in isvc["spec"]["predictor"]["volumes"]}
    assert volumes["credentials"]["secret"]["secretName"] == "s3-creds"
    assert volumes["dshm"]["emptyDir"]["sizeLimit"] == "1024Mi"
    servers = {m["external"]["metric"]["serverAddress"] for m in isvc["spec"]["predictor"]["autoScaling"]["metrics"]}
    assert servers == {"http://prom.monitoring.svc:9090"}
    result = CliRunner().invoke(main, ["deploy", "k8s", str(cpu_facts.root), "--image", IMAGE,
                                       "--grpc-ingress", "t.example.com", "--ingress-tls-secret", "t-tls"])
    assert result.exit_code == 0, result.output
    ingress = next(d for d in yaml.safe_load_all(result.stdout) if d["kind"] == "Ingress")
    assert ingress["spec"]["tls"] == [{"hosts": ["t.example.com"], "secretName": "t-tls"}]


def test_cli_refuses_an_ingress_tls_secret_without_an_ingress(tmp_path: Path, cpu_facts: RepositoryFacts) -> None:
    assert cpu_facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "k8s", str(cpu_facts.root), "--image", IMAGE,
                                       "--ingress-tls-secret", "t-tls", "--out", str(tmp_path / "k8s")])
    assert result.exit_code == 2
    assert "--ingress-tls-secret" in result.output and "--grpc-ingress" in result.output
    assert not (tmp_path / "k8s").exists()


def test_cli_names_a_missing_model_with_the_ones_there(cpu_facts: RepositoryFacts) -> None:
    assert cpu_facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "k8s", str(cpu_facts.root), "--image", IMAGE, "--model", "nope"])
    assert result.exit_code != 0
    assert "nope" in result.output and "slow" in result.output and "Traceback" not in result.output


def test_writing_again_removes_what_the_new_options_no_longer_produce(tmp_path: Path,
                                                                      cpu_facts: RepositoryFacts) -> None:
    """`kubectl apply -f k8s/` applies every file there: a stale hpa.yaml from an earlier run with
    --replicas 1:4 would fight a fixed replica count, and a stale ingress.yaml would stay exposed."""
    out = tmp_path / "k8s"
    write_manifests(build_manifests(cpu_facts, None, K8sOptions(image=IMAGE, ingress=GrpcIngress("t.example.com"))), out)
    assert {"hpa.yaml", "ingress.yaml", "prometheus-adapter-values.yaml"} <= {p.name for p in out.iterdir()}
    (out / "notes.txt").write_text("mine")  # not ours: left alone
    write_manifests(build_manifests(cpu_facts, None, K8sOptions(image=IMAGE, min_replicas=2, max_replicas=2)), out)
    assert sorted(p.name for p in out.iterdir()) == ["deployment.yaml", "networkpolicy.yaml", "notes.txt",
                                                     "pdb.yaml", "service.yaml"]
