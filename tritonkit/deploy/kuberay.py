"""A Ray cluster for tritonkit on Kubernetes, through KubeRay: ``tritonkit deploy ray-cluster``.

A ``RayCluster`` (or, with a ``job``, a ``RayJob`` that brings one up, runs one ``tritonkit perf
sweep`` / ``perf run`` on it with ``--cluster auto`` and takes it down) of the image the user built
with tritonkit, Ray, tritonserver and perf_analyzer in it: a head that takes no work (it runs the
driver) and worker groups — GPU workers (``nvidia.com/gpu`` each) and, if asked, CPU workers — on
which every sweep starts its own tritonserver and perf_analyzer (bound to 127.0.0.1 in the pod).
Hardened like the serving manifests (:mod:`tritonkit.deploy.k8s_pod`): UID 10001, no privilege
escalation, every capability dropped, seccomp ``RuntimeDefault``, no service-account token, a
read-only root filesystem with bounded writable ``/tmp`` (Ray's session folder, sweep folders, the
model folders sent to the node) and ``/dev/shm`` (Ray's object store and the python backend's
tensors), requests equal to limits, the image pulled ``Always``; the liveness and readiness probes
KubeRay would inject are written out (so checkers see them); a NetworkPolicy admits traffic to the
Ray pods only from the cluster's own pods (and from pods labelled ``tritonkit/ray-client-of: NAME``,
to the head's GCS, dashboard and client ports). The fields used are those KubeRay v1.7.0 accepts
(:mod:`tritonkit.deploy.kuberay_crd`). :func:`kuberay_pods` rebuilds the pods the operator makes from
the templates, which ``deploy check`` scans.

Example::

    from tritonkit.deploy.kuberay import RayClusterOptions, build_ray_cluster, write_ray_cluster

    manifests = build_ray_cluster(RayClusterOptions(image="registry.example.com/tritonkit:0.1.0", gpu_workers=4,
                                                    job="perf sweep /models a b c d --separately --sla p99<=50ms",
                                                    pvc="models"))
    write_ray_cluster(manifests, "ray/")
"""

from __future__ import annotations

import copy
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write
from tritonkit._values import GPUS_PER_POD, MAX_SECONDS, RAY_WORKERS, Bounds, excerpt
from tritonkit.deploy.k8s_names import (
    check_dns1035_label,
    check_dns1123_label,
    check_dns1123_subdomain,
    check_image,
)
from tritonkit.deploy.k8s_options import DEFAULT_NAMESPACE
from tritonkit.deploy.k8s_pod import TMP_MOUNT, container_security_context, hardened_env, pod_security_context
from tritonkit.deploy.k8s_sizing import check_quantity, quantity_bytes
from tritonkit.deploy.kuberay_crd import (
    CLIENT_PORT,
    DASHBOARD_AGENT_PORT,
    DASHBOARD_PORT,
    GCS_PORT,
    HEALTH_PATH,
    LIVENESS,
    METRICS_PORT,
    RAY_API_VERSION,
    READINESS,
    SHARED_MEMORY_MOUNT,
    check_kuberay,
)
from tritonkit.errors import ConfigError

__all__ = ["MODELS_MOUNT", "RAY_FILES", "KubeRayManifests", "RayClusterOptions", "build_ray_cluster", "kuberay_pods",
           "write_ray_cluster"]

#: Where ``pvc`` is mounted on every Ray pod: pass ``--shared-repo /models`` to sweep it in place.
MODELS_MOUNT = "/models"
#: The files ``write_ray_cluster`` writes (and removes when the options no longer produce them).
RAY_FILES = ("raycluster.yaml", "rayjob.yaml", "networkpolicy.yaml")
#: The Ray version the cluster runs (the ``cluster`` extra's line); KubeRay picks its probes by it.
RAY_VERSION = "2.60.0"
#: A RayJob's ``activeDeadlineSeconds``: whole seconds, at most the longest run any option takes (30 days).
JOB_DEADLINE_S = Bounds(integer=True, low=1, high=MAX_SECONDS, noun="number of seconds", example="86400")
_INSTANCE = "app.kubernetes.io/instance"
_CLIENT_LABEL = "tritonkit/ray-client-of"


@dataclass(frozen=True)
class RayClusterOptions:
    """What ``deploy ray-cluster`` is asked (one field per option), each checked when it is built.

    ``image``: pinned (a tag other than latest, or a digest), with tritonkit[cluster,server] and
    perf_analyzer installed. ``gpu_workers`` × ``gpus_per_worker`` GPUs, ``cpu_workers`` more
    without; each worker ``worker_cpu`` / ``worker_memory`` (requests = limits), ``object_store``
    of ``/dev/shm`` and ``tmp_size`` of ``/tmp``; the head ``head_cpu`` / ``head_memory``.
    ``pvc``: a claim holding the model repository, mounted at ``/models`` on every pod (ReadWriteMany
    when workers read it; the driver on the head writes winners back). ``job``: tritonkit's
    arguments (``perf sweep …`` or ``perf run …``): a RayJob instead, ``--cluster auto`` added.
    ``job_deadline_s``: the RayJob's ``activeDeadlineSeconds``.
    """

    image: str
    name: str = "tritonkit-ray"
    namespace: str = DEFAULT_NAMESPACE
    gpu_workers: int = 1
    gpus_per_worker: int = 1
    cpu_workers: int = 0
    worker_cpu: str = "8"
    worker_memory: str = "32Gi"
    head_cpu: str = "2"
    head_memory: str = "8Gi"
    object_store: str = "4Gi"
    tmp_size: str = "20Gi"
    pvc: str | None = None
    job: str | None = None
    job_deadline_s: int | None = None

    def __post_init__(self) -> None:
        check_image(self.image)
        check_dns1035_label(self.name, "--name", max_len=40)  # KubeRay appends group and pod suffixes
        check_dns1123_label(self.namespace, "--namespace")
        if self.pvc is not None:
            check_dns1123_subdomain(self.pvc, "--pvc")
        for value, option in ((self.worker_cpu, "--worker-cpu"), (self.worker_memory, "--worker-memory"),
                              (self.head_cpu, "--head-cpu"), (self.head_memory, "--head-memory"),
                              (self.object_store, "--object-store"), (self.tmp_size, "--tmp-size")):
            check_quantity(value, option)
        for count, bounds, option in ((self.gpu_workers, RAY_WORKERS, "--gpu-workers"),
                                      (self.gpus_per_worker, GPUS_PER_POD, "--gpus-per-worker"),
                                      (self.cpu_workers, RAY_WORKERS, "--cpu-workers")):
            bounds.check(count, option)
        if self.gpu_workers + self.cpu_workers == 0:
            raise ConfigError("a Ray cluster with no worker runs no sweep (the head takes no work)",
                              hint="--gpu-workers N or --cpu-workers N")
        if self.gpu_workers and self.gpus_per_worker == 0:
            raise ConfigError("--gpu-workers with --gpus-per-worker 0", hint="use --cpu-workers for workers without GPUs")
        # /dev/shm is a memory-backed volume: what the object store fills counts against the
        # worker's memory limit, so a store past that limit gets the pod killed, not a bigger store.
        if quantity_bytes(self.object_store, "--object-store") >= quantity_bytes(self.worker_memory, "--worker-memory"):
            raise ConfigError(f"--object-store {self.object_store} does not fit in --worker-memory {self.worker_memory}: "
                              "the object store lives in /dev/shm, which counts against the worker's memory",
                              hint="give a smaller --object-store (Ray's default is 30 % of memory) or a larger "
                                   "--worker-memory")
        if self.job is not None:
            words = self._job_words()
            if words[:2] not in (["perf", "sweep"], ["perf", "run"]):
                raise ConfigError(f"--job {excerpt(self.job, 60)}: a RayJob here runs 'perf sweep …' or 'perf run …'",
                                  hint="e.g. --job \"perf sweep /models a b --sla 'p99<=50ms' --separately\"")
        if self.job_deadline_s is not None:
            JOB_DEADLINE_S.check(self.job_deadline_s, "--job-deadline-s")

    def _job_words(self) -> list[str]:
        """``job`` split as a shell would (a leading ``tritonkit`` dropped); unbalanced quotes refused."""
        try:
            words = shlex.split(self.job or "")
        except ValueError as exc:  # "No closing quotation", "No escaped character"
            raise ConfigError(f"--job {excerpt(self.job, 60)} cannot be split into words: {exc}",
                              hint="close every quote, e.g. --job \"perf sweep /models a --sla 'p99<=50ms'\"") from None
        return words[1:] if words[:1] == ["tritonkit"] else words

    def entrypoint(self) -> str:
        """The RayJob's command: ``tritonkit`` and ``job``, on the cluster it runs in (``--cluster auto``)."""
        words = self._job_words()
        if "--cluster" not in words:
            words += ["--cluster", "auto"]
        return shlex.join(["tritonkit", *words])


@dataclass
class KubeRayManifests:
    """The documents to write, by file, and what was decided (``notes``)."""

    files: dict[str, list[dict[str, Any]]]
    notes: list[str] = field(default_factory=list)

    def all(self) -> list[dict[str, Any]]:
        return [doc for docs in self.files.values() for doc in docs]


def _probe(timings: Mapping[str, int]) -> dict[str, Any]:
    return {"httpGet": {"path": HEALTH_PATH, "port": DASHBOARD_AGENT_PORT}, **timings}


def _template(o: RayClusterOptions, role: str, cpu: str, memory: str, gpus: int) -> dict[str, Any]:
    """A pod template of the Ray container (the operator's index 0), hardened; ``role``: head, gpu or cpu."""
    limits: dict[str, Any] = {"cpu": cpu, "memory": memory}
    if gpus:
        limits["nvidia.com/gpu"] = gpus
    mounts = [{"name": "dshm", "mountPath": SHARED_MEMORY_MOUNT}, {"name": "tmp", "mountPath": TMP_MOUNT}]
    volumes: list[dict[str, Any]] = [
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": o.object_store if role != "head" else "1Gi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": o.tmp_size}}]
    if o.pvc is not None:
        mounts.append({"name": "models", "mountPath": MODELS_MOUNT})
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": o.pvc}})
    container: dict[str, Any] = {
        "name": "ray-head" if role == "head" else "ray-worker", "image": o.image, "imagePullPolicy": "Always",
        "env": [*hardened_env(), {"name": "RAY_USAGE_STATS_ENABLED", "value": "0"}],
        "resources": {"requests": dict(limits), "limits": dict(limits)},
        "securityContext": container_security_context(), "volumeMounts": mounts,
        # What KubeRay v1.7.0 injects for Ray >= 2.53, written out so that checkers see it.
        "livenessProbe": _probe(LIVENESS), "readinessProbe": _probe(READINESS),
    }
    if role == "head":
        container["ports"] = [{"name": "gcs", "containerPort": GCS_PORT}, {"name": "dashboard", "containerPort": DASHBOARD_PORT},
                              {"name": "client", "containerPort": CLIENT_PORT}, {"name": "metrics", "containerPort": METRICS_PORT}]
    labels = {"app.kubernetes.io/name": "tritonkit-ray", _INSTANCE: o.name, "tritonkit/ray-role": role}
    return {"metadata": {"labels": labels},
            "spec": {"securityContext": pod_security_context(), "automountServiceAccountToken": False,
                     "containers": [container], "volumes": volumes}}


def _cluster_spec(o: RayClusterOptions) -> dict[str, Any]:
    groups = []
    for role, count, gpus in (("gpu", o.gpu_workers, o.gpus_per_worker), ("cpu", o.cpu_workers, 0)):
        if count:
            groups.append({"groupName": f"{role}-workers", "replicas": count, "minReplicas": count, "maxReplicas": count,
                           "rayStartParams": {}, "template": _template(o, role, o.worker_cpu, o.worker_memory, gpus)})
    return {
        "rayVersion": RAY_VERSION,
        # No autoscaler: it would need a service-account token in the head pod; the groups are fixed.
        "enableInTreeAutoscaling": False,
        "headGroupSpec": {
            # The head runs the driver only: no sweep or load generator lands on it. Its dashboard
            # takes job submissions from the RayJob's submitter.
            "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
            "template": _template(o, "head", o.head_cpu, o.head_memory, 0)},
        "workerGroupSpecs": groups,
    }


def _submitter(o: RayClusterOptions) -> dict[str, Any]:
    """The hardened pod template of the RayJob's submitter (``ray job submit``; KubeRay sets its command)."""
    limits = {"cpu": "500m", "memory": "512Mi"}
    container = {"name": "ray-job-submitter", "image": o.image, "imagePullPolicy": "Always", "env": hardened_env(),
                 "resources": {"requests": dict(limits), "limits": dict(limits)},
                 "securityContext": container_security_context(),
                 "volumeMounts": [{"name": "tmp", "mountPath": TMP_MOUNT}]}
    return {"metadata": {"labels": {"app.kubernetes.io/name": "tritonkit-ray", _INSTANCE: o.name,
                                    "tritonkit/ray-role": "submitter"}},
            "spec": {"restartPolicy": "Never", "securityContext": pod_security_context(),
                     "automountServiceAccountToken": False, "containers": [container],
                     "volumes": [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]}}


def _network_policy(o: RayClusterOptions) -> dict[str, Any]:
    own = {"podSelector": {"matchLabels": {_INSTANCE: o.name}}}
    head_ports = [{"protocol": "TCP", "port": p} for p in (GCS_PORT, DASHBOARD_PORT, CLIENT_PORT)]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": f"{o.name}-ray", "namespace": o.namespace, "labels": {_INSTANCE: o.name}},
            "spec": {"podSelector": {"matchLabels": {_INSTANCE: o.name}}, "policyTypes": ["Ingress"],
                     "ingress": [{"from": [own]},
                                 {"from": [{"podSelector": {"matchLabels": {_CLIENT_LABEL: o.name}}}],
                                  "ports": head_ports}]}}


def build_ray_cluster(options: RayClusterOptions) -> KubeRayManifests:
    """The manifests (pure): a RayCluster, or a RayJob with the cluster in it, and its NetworkPolicy;
    each checked against KubeRay's fields (``ConfigError`` if one were not accepted)."""
    o = options
    meta = {"name": o.name, "namespace": o.namespace, "labels": {"app.kubernetes.io/name": "tritonkit-ray", _INSTANCE: o.name}}
    notes = [f"{o.gpu_workers} GPU worker(s) × {o.gpus_per_worker} GPU, {o.cpu_workers} CPU worker(s); "
             f"each worker {o.worker_cpu} CPU, {o.worker_memory} memory, /dev/shm {o.object_store}, /tmp {o.tmp_size}"]
    if o.job is None:
        doc = {"apiVersion": RAY_API_VERSION, "kind": "RayCluster", "metadata": meta, "spec": _cluster_spec(o)}
        files = {"raycluster.yaml": [doc]}
        notes.append(f"drivers reach it at {o.name}-head-svc.{o.namespace}.svc.cluster.local:{GCS_PORT} "
                     f"(label their pods {_CLIENT_LABEL}: {o.name})")
    else:
        spec: dict[str, Any] = {"entrypoint": o.entrypoint(), "submissionMode": "K8sJobMode",
                                "shutdownAfterJobFinishes": True, "ttlSecondsAfterFinished": 600,
                                "submitterPodTemplate": _submitter(o), "rayClusterSpec": _cluster_spec(o)}
        if o.job_deadline_s is not None:
            spec["activeDeadlineSeconds"] = o.job_deadline_s
        doc = {"apiVersion": RAY_API_VERSION, "kind": "RayJob", "metadata": meta, "spec": spec}
        files = {"rayjob.yaml": [doc]}
        notes.append(f"the job runs: {o.entrypoint()}")
    if o.pvc is not None:
        notes.append(f"the claim {o.pvc} is mounted at {MODELS_MOUNT} on every pod: sweep it in place with "
                     f"--shared-repo {MODELS_MOUNT} (a ReadWriteMany claim when several nodes read it)")
    problems = check_kuberay(doc)
    if problems:  # a fault of this module, not of the options: say it plainly
        raise ConfigError("the RayCluster written would not be accepted by KubeRay: " + "; ".join(problems))
    files["networkpolicy.yaml"] = [_network_policy(o)]
    return KubeRayManifests(files, notes)


def kuberay_pods(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The pods KubeRay v1.7.0 builds from a RayCluster's (or RayJob's) templates, and a RayJob's
    submitter Job (``BuildPod``: the template's metadata and spec, ``/dev/shm`` added when not mounted,
    the Ray container's probes when absent; K8sJobMode: a Job of the submitter template). The
    ``ray start`` command and Ray's environment are left out: no checker reads them."""
    kind = doc.get("kind")
    if kind not in ("RayCluster", "RayJob"):
        return []
    spec = doc["spec"] if kind == "RayCluster" else doc["spec"].get("rayClusterSpec", {})
    name = doc["metadata"]["name"]
    namespace = doc["metadata"].get("namespace", "default")
    groups = [("head", spec["headGroupSpec"]["template"])] + [
        (g["groupName"], g["template"]) for g in spec.get("workerGroupSpecs") or []]
    pods = []
    for group, template in groups:
        pod_spec = copy.deepcopy(template.get("spec", {}))
        ray = pod_spec["containers"][0]
        if not any(m.get("mountPath") == SHARED_MEMORY_MOUNT for m in ray.get("volumeMounts", [])):
            ray.setdefault("volumeMounts", []).append({"name": "shared-mem", "mountPath": SHARED_MEMORY_MOUNT})
            pod_spec.setdefault("volumes", []).append({"name": "shared-mem", "emptyDir": {"medium": "Memory"}})
        ray.setdefault("livenessProbe", _probe(LIVENESS))
        ray.setdefault("readinessProbe", _probe(READINESS))
        labels = {**template.get("metadata", {}).get("labels", {}), "ray.io/cluster": name, "ray.io/group": group}
        pods.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": f"{name}-{group}", "namespace": namespace, "labels": labels},
                     "spec": pod_spec})
    submitter = doc["spec"].get("submitterPodTemplate") if kind == "RayJob" else None
    if submitter is not None:
        pods.append({"apiVersion": "batch/v1", "kind": "Job",
                     "metadata": {"name": name, "namespace": namespace, "labels": dict(submitter["metadata"]["labels"])},
                     "spec": {"backoffLimit": 2, "template": copy.deepcopy(submitter)}})
    return pods


def write_ray_cluster(manifests: KubeRayManifests, folder: str | Path) -> list[Path]:
    """One file per kind in ``folder`` (atomic); files of :data:`RAY_FILES` the manifests no longer
    produce are removed (``kubectl apply -f FOLDER`` applies the folder). Returns the paths."""
    from tritonkit.deploy.k8s import render_yaml

    out = Path(folder)
    paths = [atomic_write(out / name, render_yaml(docs)) for name, docs in manifests.files.items()]
    for stale in sorted(set(RAY_FILES) - {p.name for p in paths}):
        (out / stale).unlink(missing_ok=True)
    return paths
