"""Hardened manifests: who the pod runs as, what it may write and reach, what it asks for, which names pass.

Checked on the rendered objects (and against the Kubernetes schemas with kubernetes-validate);
checkov's view of the same manifests is in test_deploy_checkov.py.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from click.testing import CliRunner

from tests.support.pymodels import write_python_model
from tests.support.sweep_models import SLEEPY_PY, write_sleepy
from tritonkit.cli import main
from tritonkit.deploy import (
    GrpcIngress,
    K8sOptions,
    PodSize,
    RepositoryFacts,
    RepositorySource,
    build_manifests,
    read_repository,
)
from tritonkit.deploy.k8s_sizing import MIB, PYTHON_STUB_BYTES, SHM_STEP_BYTES, shm_bytes
from tritonkit.errors import ConfigError

K8S_VERSION = kubernetes_validate.latest_version()
IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
DIGEST = "sha256:" + "0123456789abcdef" * 4


@pytest.fixture
def facts(tmp_path: Path) -> RepositoryFacts:
    repo = tmp_path / "repo"
    write_sleepy(repo, "slow", instances=2, max_batch=4)
    return read_repository(repo)


def _kinds(docs: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def _pod(facts: RepositoryFacts, **options: Any) -> dict[str, Any]:
    docs = build_manifests(facts, None, K8sOptions(**{"image": IMAGE, **options})).all()
    spec: dict[str, Any] = _kinds(docs)["Deployment"][0]["spec"]["template"]["spec"]
    return spec


def test_the_pod_runs_unprivileged_with_a_read_only_root_and_no_token(facts: RepositoryFacts) -> None:
    pod = _pod(facts)
    container = pod["containers"][0]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] >= 10000
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["allowPrivilegeEscalation"] is False and sc["privileged"] is False
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert container["imagePullPolicy"] == "Always"
    # The only writable places: /tmp on disk and /dev/shm in memory, both bounded.
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {path for path, m in mounts.items() if not m.get("readOnly")}
    assert writable == {"/tmp", "/dev/shm"}
    assert volumes[mounts["/dev/shm"]["name"]]["emptyDir"]["medium"] == "Memory"
    assert all("sizeLimit" in volumes[mounts[p]["name"]]["emptyDir"] for p in writable)
    assert {"name": "HOME", "value": "/tmp"} in container["env"]


def test_requests_equal_limits_and_grow_with_instances_and_model_size(tmp_path: Path) -> None:
    def resources(instances: int, weights_bytes: int) -> dict[str, Any]:
        repo = tmp_path / f"repo-{instances}-{weights_bytes}"
        folder = write_sleepy(repo, "slow", instances=instances, max_batch=4)
        (folder / "1" / "weights.bin").write_bytes(b"\0" * weights_bytes)
        pod = _pod(read_repository(repo))
        got: dict[str, Any] = pod["containers"][0]["resources"]
        return got

    small, more, heavy = resources(1, 0), resources(3, 0), resources(3, 64 * MIB)
    for r in (small, more, heavy):
        assert r["requests"] == r["limits"]  # Guaranteed QoS
    # One core per KIND_CPU instance, half a core for the frontends.
    assert (small["limits"]["cpu"], more["limits"]["cpu"]) == ("1500m", "3500m")
    mem = {name: int(r["limits"]["memory"].removesuffix("Mi")) for name, r in
           (("small", small), ("more", more), ("heavy", heavy))}
    # Two more python stubs; then 64 MiB of weights loaded by each of the 3 CPU instances.
    assert mem["more"] - mem["small"] >= 2 * PYTHON_STUB_BYTES // MIB
    assert mem["heavy"] - mem["more"] >= 3 * 64
    # /dev/shm is counted in the memory limit (a memory-backed emptyDir is charged to the pod).
    assert mem["small"] * MIB > SHM_STEP_BYTES


def test_shm_follows_the_python_models_tensors(tmp_path: Path) -> None:
    big = """
name: "big"
backend: "python"
max_batch_size: 8
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 1024, 1024 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 1024, 1024 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
"""
    repo = tmp_path / "repo"
    write_python_model(repo, "big", config_pbtxt=big, model_py=SLEEPY_PY)
    facts = read_repository(repo)
    assert facts.models[0].io_bytes == 2 * 4 * MIB
    # 2 instances × (1 MiB + 2 × 8 MiB × batch 8) = 258 MiB → 320 MiB in 64 MiB steps.
    assert shm_bytes(facts) == 320 * MIB
    pod = _pod(facts)
    assert next(v for v in pod["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "320Mi"
    given = _pod(facts, size=PodSize(shm_size="1Gi", cpu="3", memory="6Gi"))
    assert next(v for v in given["volumes"] if v["name"] == "dshm")["emptyDir"]["sizeLimit"] == "1024Mi"
    assert given["containers"][0]["resources"]["limits"] == {"cpu": "3", "memory": "6Gi"}


def test_the_namespace_is_never_default_unless_asked(facts: RepositoryFacts) -> None:
    docs = build_manifests(facts, None, K8sOptions(image=IMAGE)).all()
    assert {d["metadata"]["namespace"] for d in docs} == {"triton"}
    asked = build_manifests(facts, None, K8sOptions(image=IMAGE, namespace="default")).all()
    assert {d["metadata"]["namespace"] for d in asked} == {"default"}


def test_the_network_policy_admits_labelled_clients_and_prometheus_only(facts: RepositoryFacts) -> None:
    docs = build_manifests(facts, None, K8sOptions(image=IMAGE, name="det")).all()
    (policy,) = _kinds(docs)["NetworkPolicy"]
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    assert policy["spec"]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "det"}}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    inference, metrics = policy["spec"]["ingress"]
    assert [p["port"] for p in inference["ports"]] == [8000, 8001]
    assert inference["from"] == [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"tritonkit/client-of": "det"}}}]
    assert [p["port"] for p in metrics["ports"]] == [8002]
    assert metrics["from"][0]["podSelector"] == {"matchLabels": {"app.kubernetes.io/name": "prometheus"}}
    (pdb,) = _kinds(docs)["PodDisruptionBudget"]
    kubernetes_validate.validate(pdb, K8S_VERSION, strict=True)
    assert pdb["spec"] == {"maxUnavailable": 1, "selector": {"matchLabels": {"app.kubernetes.io/name": "det"}}}


def test_grpc_balances_through_a_headless_service_or_an_ingress(facts: RepositoryFacts) -> None:
    docs = build_manifests(facts, None, K8sOptions(image=IMAGE, namespace="serving",
                                                   ingress=GrpcIngress("triton.example.com"))).all()
    services = {s["metadata"]["name"]: s for s in _kinds(docs)["Service"]}
    headless = services["triton-headless"]
    assert headless["spec"]["clusterIP"] == "None"
    assert headless["spec"]["publishNotReadyAddresses"] is False
    assert {"name": "grpc", "port": 8001, "targetPort": "grpc", "protocol": "TCP", "appProtocol": "grpc"} in \
        headless["spec"]["ports"]
    (ingress,) = _kinds(docs)["Ingress"]
    for doc in (headless, ingress):
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    assert ingress["metadata"]["annotations"]["nginx.ingress.kubernetes.io/backend-protocol"] == "GRPC"
    assert ingress["spec"]["tls"] == [{"hosts": ["triton.example.com"], "secretName": "triton-tls"}]
    backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "triton", "port": {"name": "grpc"}}
    # The ingress controller may reach the gRPC port; connections age out so clients re-resolve.
    (policy,) = _kinds(docs)["NetworkPolicy"]
    assert any(peer.get("podSelector") == {"matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}}
               for peer in policy["spec"]["ingress"][0]["from"])
    args = _kinds(docs)["Deployment"][0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--grpc-max-connection-age=300000" in args


@pytest.mark.parametrize("image", [
    IMAGE, f"nvcr.io/nvidia/tritonserver@{DIGEST}", f"nvcr.io/nvidia/tritonserver:24.10-py3@{DIGEST}",
    "localhost:5000/triton:1.0", "registry.example.com:443/team/triton-server:2.51.0", "tritonserver:24.10",
    f"nvcr.io/nvidia/tritonserver:latest@{DIGEST}",
])
def test_pinned_images_are_accepted(image: str, facts: RepositoryFacts) -> None:
    assert _pod(facts, image=image)["containers"][0]["image"] == image


@pytest.mark.parametrize(("image", "words"), [
    ("nvcr.io/nvidia/tritonserver:latest", "pinned to :latest"),
    ("nvcr.io/nvidia/tritonserver", "has no tag"),
    ("localhost:5000/triton", "has no tag"),
    ("x y z", "not a container image reference"),
    ("Nvcr.io/NVIDIA/Triton:1", "not a container image reference"),
    ("triton:bad tag", "not a container image reference"),
    ("triton@sha256:short", "not a container image reference"),
])
def test_unpinned_and_malformed_images_are_refused(image: str, words: str) -> None:
    with pytest.raises(ConfigError) as info:
        K8sOptions(image=image)
    assert words in info.value.message and "--image" in info.value.message and info.value.hint


@pytest.mark.parametrize(("build", "field"), [
    (partial(K8sOptions, image=IMAGE, name="Bad Name$(rm -rf /)"), "--name"),
    (partial(K8sOptions, image=IMAGE, name="1triton"), "--name"),  # Service names must start with a letter
    # The headless Service's name would pass 63 characters.
    (partial(K8sOptions, image=IMAGE, name="t" * 60), "--name"),
    (partial(K8sOptions, image=IMAGE, namespace="it's"), "--namespace"),
    (partial(K8sOptions, image=IMAGE, namespace="Serving"), "--namespace"),
    (partial(RepositorySource, pvc="models/../x"), "--pvc"),
    (partial(RepositorySource, credentials_secret="s3 creds"), "--credentials-secret"),
    (partial(GrpcIngress, "triton_example.com"), "--grpc-ingress"),
    (partial(GrpcIngress, "triton.example.com", tls_secret="tls/x"), "--ingress-tls-secret"),
    (partial(PodSize, cpu="two"), "--cpu"),
    (partial(PodSize, memory="-4Gi"), "--memory"),
    (partial(PodSize, shm_size="1.5Gi"), "--shm-size"),
])
def test_names_are_checked_as_kubernetes_names(build: Callable[[], object], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.message.startswith(field) and info.value.hint


@pytest.mark.parametrize("argv", [
    ["--image", "nvcr.io/nvidia/tritonserver:latest"],
    ["--image", "x y z"],
    ["--image", IMAGE, "--name", "Bad Name$(touch /tmp/pwned)"],
    ["--image", IMAGE, "--namespace", "it's"],
])
def test_cli_refuses_bad_input_with_exit_2_and_writes_nothing(tmp_path: Path, facts: RepositoryFacts,
                                                              argv: list[str]) -> None:
    out = tmp_path / "k8s"
    assert facts.root is not None
    result = CliRunner().invoke(main, ["deploy", "k8s", str(facts.root), *argv, "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "error:" in result.output and "Traceback" not in result.output
    assert not out.exists()
