"""``tritonkit deploy ray-cluster``: a KubeRay RayCluster (or RayJob) held to the fields KubeRay v1.7.0
accepts (tritonkit/deploy/kuberay_crd.py, our own check), its pod templates and NetworkPolicy to the
Kubernetes schemas (kubernetes-validate, offline), hardened like the serving manifests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.deploy.kuberay import RayClusterOptions, build_ray_cluster, kuberay_pods
from tritonkit.deploy.kuberay_crd import check_kuberay
from tritonkit.errors import ConfigError

K8S_VERSION = kubernetes_validate.latest_version()
IMAGE = "registry.example.com/tritonkit:0.1.0"


def _doc(**options: Any) -> dict[str, Any]:
    manifests = build_ray_cluster(RayClusterOptions(image=IMAGE, **options))
    return manifests.all()[0]


def _cluster_spec(doc: dict[str, Any]) -> dict[str, Any]:
    return doc["spec"] if doc["kind"] == "RayCluster" else doc["spec"]["rayClusterSpec"]


def _templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    spec = _cluster_spec(doc)
    found = [spec["headGroupSpec"]["template"], *[g["template"] for g in spec["workerGroupSpecs"]]]
    return found + ([doc["spec"]["submitterPodTemplate"]] if doc["kind"] == "RayJob" else [])


@pytest.mark.parametrize("options", [
    {"gpu_workers": 2, "cpu_workers": 1, "pvc": "models"},
    {"gpu_workers": 1, "job": "perf sweep /models a b --sla p99<=50ms --separately", "job_deadline_s": 3600},
])
def test_the_manifests_are_what_kuberay_and_kubernetes_accept(options: dict[str, Any]) -> None:
    manifests = build_ray_cluster(RayClusterOptions(image=IMAGE, namespace="sweeps", **options))
    doc, policy = manifests.all()
    assert check_kuberay(doc) == []
    for template in _templates(doc):  # each template is the Pod the operator builds from it
        kubernetes_validate.validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", **template["metadata"]},
                                      "spec": template["spec"]}, K8S_VERSION, strict=True)
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/instance": "tritonkit-ray"}
    assert all(t["metadata"]["labels"]["app.kubernetes.io/instance"] == "tritonkit-ray" for t in _templates(doc))


def test_every_pod_is_hardened_and_sized_like_the_serving_pods() -> None:
    doc = _doc(gpu_workers=2, gpus_per_worker=2, cpu_workers=1, job="perf run m --url triton:8001 --clients 3")
    for template in _templates(doc):
        spec = template["spec"]
        assert spec["automountServiceAccountToken"] is False
        assert spec["securityContext"]["runAsNonRoot"] and spec["securityContext"]["runAsUser"] >= 10000
        for container in spec["containers"]:
            security = container["securityContext"]
            assert security["readOnlyRootFilesystem"] and not security["allowPrivilegeEscalation"]
            assert security["capabilities"] == {"drop": ["ALL"]} and security["seccompProfile"]["type"] == "RuntimeDefault"
            assert container["resources"]["requests"] == container["resources"]["limits"]
            assert container["imagePullPolicy"] == "Always" and container["image"] == IMAGE
            assert {"name": "HOME", "value": "/tmp"} in container["env"]
            assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"])
    spec = _cluster_spec(doc)
    head = spec["headGroupSpec"]
    assert head["rayStartParams"] == {"num-cpus": "0", "dashboard-host": "0.0.0.0"}  # the head runs drivers only
    gpu, cpu = spec["workerGroupSpecs"]
    assert gpu["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert "nvidia.com/gpu" not in cpu["template"]["spec"]["containers"][0]["resources"]["limits"]
    assert gpu["minReplicas"] == gpu["maxReplicas"] == gpu["replicas"] == 2 and spec["enableInTreeAutoscaling"] is False
    shm = next(v for v in gpu["template"]["spec"]["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": "4Gi"}
    assert doc["spec"]["entrypoint"] == "tritonkit perf run m --url triton:8001 --clients 3 --cluster auto"
    assert doc["spec"]["shutdownAfterJobFinishes"] is True and doc["spec"]["submissionMode"] == "K8sJobMode"


def test_the_kuberay_check_refuses_what_the_crd_would() -> None:
    doc = _doc(gpu_workers=1)
    for mutate, expected in [
        (lambda d: d["spec"].update(autoscaling=True), "RayCluster.spec.autoscaling: not a field of KubeRay v1.7.0"),
        (lambda d: d["spec"]["workerGroupSpecs"][0].pop("groupName"), "groupName: required by KubeRay v1.7.0"),
        (lambda d: d["spec"]["workerGroupSpecs"][0].update(minReplicas=3, maxReplicas=1), "minReplicas 3 is above"),
        (lambda d: d["spec"]["headGroupSpec"]["rayStartParams"].update({"num-gpus": 1}), "map[string]string"),
        (lambda d: d["spec"]["workerGroupSpecs"][0].update(replicas="2"), "replicas: '2' is not an integer"),
        (lambda d: d.update(apiVersion="ray.io/v1alpha1"), "apiVersion: not ray.io/v1"),
    ]:
        broken = copy.deepcopy(doc)
        mutate(broken)
        assert any(expected in problem for problem in check_kuberay(broken)), (expected, check_kuberay(broken))
    job = _doc(gpu_workers=1, job="perf sweep /m a --sla p99<=9ms")
    job["spec"]["submissionMode"] = "BatchMode"
    assert any("submissionMode: 'BatchMode' is not one of" in p for p in check_kuberay(job))


def test_the_pods_kuberay_builds_keep_the_templates_and_add_shm_and_probes_only_where_missing() -> None:
    doc = _doc(gpu_workers=1, job="perf sweep /m a --sla p99<=9ms")
    pods = kuberay_pods(doc)
    assert [p["kind"] for p in pods] == ["Pod", "Pod", "Job"]
    head = pods[0]["spec"]["containers"][0]
    assert head["livenessProbe"]["httpGet"] == {"path": "/api/healthz", "port": 52365}
    assert [m["mountPath"] for m in head["volumeMounts"]].count("/dev/shm") == 1
    bare = copy.deepcopy(doc)
    template = bare["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    template["containers"][0]["volumeMounts"] = []
    del template["containers"][0]["livenessProbe"]
    built = kuberay_pods(bare)[0]["spec"]
    assert {"name": "shared-mem", "emptyDir": {"medium": "Memory"}} in built["volumes"]
    assert built["containers"][0]["livenessProbe"]["failureThreshold"] == 120


@pytest.mark.parametrize(("options", "message"), [
    ({"gpu_workers": 0}, "no worker runs no sweep"),
    ({"job": "serve /models"}, "runs 'perf sweep …' or 'perf run …'"),
    ({"name": "Ray_Cluster"}, "--name"),
    ({"worker_memory": "lots"}, "--worker-memory"),
    ({"gpus_per_worker": 0}, "--gpus-per-worker 0"),
])
def test_bad_options_are_refused_naming_the_option(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        RayClusterOptions(image=IMAGE, **options)
    with pytest.raises(ConfigError, match="latest"):
        RayClusterOptions(image="registry.example.com/tritonkit:latest")


def test_the_command_writes_one_file_per_kind_and_removes_what_no_longer_applies(tmp_path: Path) -> None:
    out = tmp_path / "ray"
    runner = CliRunner()
    first = runner.invoke(main, ["deploy", "ray-cluster", "--image", IMAGE, "--job", "perf sweep /models a --sla p99<=9ms",
                                 "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert sorted(p.name for p in out.iterdir()) == ["networkpolicy.yaml", "rayjob.yaml"]
    second = runner.invoke(main, ["deploy", "ray-cluster", "--image", IMAGE, "--cpu-workers", "2", "--out", str(out)])
    assert second.exit_code == 0, second.output
    assert sorted(p.name for p in out.iterdir()) == ["networkpolicy.yaml", "raycluster.yaml"]
    [cluster] = list(yaml.safe_load_all((out / "raycluster.yaml").read_text()))
    assert cluster["kind"] == "RayCluster" and check_kuberay(cluster) == []
    bad = runner.invoke(main, ["deploy", "ray-cluster", "--image", IMAGE, "--gpu-workers", "0", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2 and "error:" in bad.output and not (tmp_path / "x").exists()
