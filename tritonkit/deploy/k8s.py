"""Kubernetes (and KServe) manifests that serve a model repository with tritonserver.

Generated, not templated: each manifest is a plain dict built from the repository's configs
(instances, GPUs, concurrency limits, model sizes — the sweep's winner once it wrote them back),
the SLA (how long the longest request may take, the p99 the queue time is held under) and the
options (:class:`K8sOptions`, which validates every name and the image first);
:func:`render_yaml` turns them into one YAML stream for ``kubectl apply -f -``.

* **Deployment**: tritonserver on the repository (a volume, or an ``s3://`` / ``gs://`` URI the
  server reads itself) in a hardened pod (:mod:`tritonkit.deploy.k8s_pod`) with CPU and memory
  requests equal to limits derived from the repository (:mod:`tritonkit.deploy.k8s_sizing`);
  GPU limits; a startup probe (model loading takes minutes) then readiness and liveness on
  Triton's ``/v2/health/ready`` and ``/v2/health/live``; graceful shutdown: a short ``preStop``
  pause so the Services stop routing, then ``--exit-timeout-secs`` longer than the longest
  request, inside ``terminationGracePeriodSeconds``; the metrics port annotated for scraping.
* **Services, Ingress, NetworkPolicy, PodDisruptionBudget** (:mod:`tritonkit.deploy.k8s_network`):
  a ClusterIP Service, a headless one for gRPC clients that balance themselves, an optional
  ingress-nginx gRPC Ingress.
* **HorizontalPodAutoscaler** on the alert rules' signals, with its prometheus-adapter rules
  (:mod:`tritonkit.deploy.k8s_scale`).
* With ``kserve``: an **InferenceService** on KServe's Triton runtime instead, with the same
  hardening, resources and scaling signals (through KServe's KEDA integration).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonkit._fs import atomic_write
from tritonkit._values import SECONDS, excerpt
from tritonkit.deploy.k8s_names import image_has_digest
from tritonkit.deploy.k8s_network import (
    disruption_budget,
    grpc_ingress,
    headless_service,
    network_policy,
    service,
)
from tritonkit.deploy.k8s_options import (
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    REPLICAS,
    GrpcIngress,
    K8sOptions,
    RepositorySource,
    object_meta,
)
from tritonkit.deploy.k8s_pod import (
    container_security_context,
    hardened_env,
    pod_security_context,
    writable_mounts,
)
from tritonkit.deploy.k8s_scale import ScaleTargets, adapter_rules, hpa, kserve_autoscaling
from tritonkit.deploy.k8s_sizing import PodResources, PodSize, pod_resources
from tritonkit.deploy.source import RepositoryFacts
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import METRICS, SLA
from tritonkit.triton_releases import CLIENT_SHM, CLIENT_SHM_FLAG, check_server_flags, client_shm_refused_by

__all__ = [
    "ADAPTER_FILE",
    "MANIFEST_FILES",
    "MIN_EXIT_TIMEOUT_S",
    "PRESTOP_PAUSE_S",
    "TAIL_FACTOR",
    "GrpcIngress",
    "K8sOptions",
    "Manifests",
    "PodSize",
    "RepositorySource",
    "build_manifests",
    "longest_request_s",
    "parse_replicas",
    "render_yaml",
    "write_manifests",
]

MODEL_MOUNT = "/models"
#: Where the credentials Secret is mounted, and the key holding Triton's credential file (JSON:
#: ``{"s3": {"": {"key_id": …, "secret_key": …, "region": …}}}``, likewise ``"gs"`` and ``"as"``).
CREDENTIALS_MOUNT = "/var/run/secrets/tritonkit"
CREDENTIALS_KEY = "cloud-credentials.json"
ADAPTER_FILE = "prometheus-adapter-values.yaml"
#: Every file :func:`write_manifests` can write.
MANIFEST_FILES = ("deployment.yaml", "service.yaml", "ingress.yaml", "hpa.yaml", "inferenceservice.yaml",
                  "networkpolicy.yaml", "pdb.yaml", ADAPTER_FILE)

#: Seconds the pod keeps serving after it is marked terminating, before tritonserver gets
#: SIGTERM: endpoints controllers and kube-proxy need a moment to stop routing new requests to it.
PRESTOP_PAUSE_S = 5
#: Rule of thumb for the longest request when only the SLA is known: the tail past p99 runs to
#: several times the bound under load, so drain for ten times the largest latency bound…
TAIL_FACTOR = 10
#: …and never less than this (an SLA of milliseconds still needs time to drain queued requests).
MIN_EXIT_TIMEOUT_S = 30
#: Clients may keepalive-ping this often (Triton's default minimum is 300 s; a client pinging
#: more often is disconnected with "too_many_pings").
MIN_PING_INTERVAL_S = 10


@dataclass(frozen=True)
class Manifests:
    """The generated objects, by file name, plus the figures they were sized from."""

    files: dict[str, list[dict[str, Any]]]
    exit_timeout_s: int
    grace_period_s: int
    pending_target: int
    notes: tuple[str, ...]
    #: prometheus-adapter rules serving the HPA's metrics (not a Kubernetes object: Helm values
    #: ``rules.custom`` / ``rules.external`` of the prometheus-adapter chart); None without an HPA.
    adapter_rules: dict[str, Any] | None = None
    resources: PodResources | None = None

    def all(self) -> list[dict[str, Any]]:
        """Every manifest, in apply order."""
        return [doc for docs in self.files.values() for doc in docs]


def parse_replicas(text: str) -> tuple[int, int]:
    """``"3"`` → (3, 3); ``"1:8"`` → (1, 8)."""
    low, sep, high = text.partition(":")
    if not low.strip() or (sep and not high.strip()):
        raise ConfigError(f"--replicas {excerpt(text)} is not N or MIN:MAX", hint="write --replicas 2 or --replicas 1:8")
    lo = int(REPLICAS.parse(low, "--replicas"))
    hi = int(REPLICAS.parse(high, "--replicas")) if sep else lo
    if lo > hi:
        raise ConfigError(f"--replicas {excerpt(text)}: need 1 <= MIN <= MAX", hint="write --replicas 1:8")
    return lo, hi


def longest_request_s(sla: SLA | None, given_s: float | None) -> tuple[float, str]:
    """The longest request to drain on shutdown, and where the figure came from."""
    if given_s is not None:
        return SECONDS.check(given_s, "--max-request-s"), "--max-request-s"
    bounds_ms = [c.value for c in (sla.constraints if sla else ())
                 if c.metric in METRICS and METRICS[c.metric].kind == "time"]
    if bounds_ms:
        longest = max(bounds_ms) / 1000 * TAIL_FACTOR
        return longest, f"{TAIL_FACTOR} × the SLA's largest latency bound ({max(bounds_ms):g} ms)"
    return float(MIN_EXIT_TIMEOUT_S), "no SLA latency bound and no --max-request-s: the minimum"


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "inference-server",
            "app.kubernetes.io/managed-by": "tritonkit"}


def _server_args(exit_timeout_s: int, gpus: int, o: K8sOptions) -> list[str]:
    """Flags besides the repository and ports (KServe's runtime sets those): metrics and gRPC connection handling."""
    args = [
        "--allow-metrics=true",
        # p50…p99 for the alert rules and the dashboard: summaries are off by default in 2.51.
        "--metrics-config=summary_latencies=true",
        f"--exit-timeout-secs={exit_timeout_s}",
        # Connections end after this age (calls in flight get the drain time to finish), so
        # clients balancing over the headless Service re-resolve it and reach new replicas.
        f"--grpc-max-connection-age={o.grpc_max_connection_age_s * 1000}",
        f"--grpc-max-connection-age-grace={exit_timeout_s * 1000}",
        f"--grpc-http2-min-recv-ping-interval-without-data={MIN_PING_INTERVAL_S * 1000}",
    ]
    if gpus:
        args.append("--allow-gpu-metrics=true")
    at = o.release
    if o.client_shm and at is not None and client_shm_refused_by(at):
        args.append(CLIENT_SHM_FLAG)
    if at is not None:
        # A flag the image's release predates keeps every pod from starting.
        check_server_flags(args, at, where=f"image {o.image}")
    return args


def _client_shm_note(o: K8sOptions) -> str | None:
    """What the pods do with clients' shared memory, when the release makes that worth a line."""
    at = o.release
    if at is None:
        return None
    if o.client_shm and not client_shm_refused_by(at):
        return f"Triton {at} takes client shared memory without a flag: --client-shm adds nothing"
    if not o.client_shm and client_shm_refused_by(at):
        return (f"Triton {at} refuses client shared-memory registration ({CLIENT_SHM.since}+): clients on the pod's "
                f"host send tensors in-band; --client-shm adds {CLIENT_SHM_FLAG}")
    return None


def _scale_targets(o: K8sOptions, sla: SLA | None, queue_limit: int, gpus: int) -> ScaleTargets:
    # The queue alert fires at half the concurrency limit; the autoscaler acts at 60–70 % of that
    # depth (rule of thumb: scale out before the alarm, a replica takes minutes to arrive).
    pending = max(1, math.floor(o.scale_out_utilisation * queue_limit / 2))
    p99 = sla.constraint("p99") if sla else None
    queue_ms = round(o.scale_out_utilisation * p99.value / 2, 3) if p99 else None
    return ScaleTargets(pending, queue_ms, o.scale_out_utilisation if gpus else None)


def build_manifests(facts: RepositoryFacts, sla: SLA | None, options: K8sOptions) -> Manifests:
    """Every manifest for serving ``facts`` under ``sla`` (pure: nothing is written)."""
    o = options
    gpus = o.gpus if o.gpus is not None else (1 if facts.uses_gpu else 0)
    longest_s, source = longest_request_s(sla, o.max_request_s)
    exit_timeout_s = max(MIN_EXIT_TIMEOUT_S, math.ceil(longest_s))
    # preStop pause + draining + a margin for the process to exit before SIGKILL.
    grace_s = PRESTOP_PAUSE_S + exit_timeout_s + 10
    notes = [f"exit timeout {exit_timeout_s} s from {source}; terminationGracePeriodSeconds {grace_s} s"]
    if gpus == 0 and facts.uses_gpu:
        notes.append("a model asks for KIND_GPU but --gpus 0: it will fail to load")
    resources = pod_resources(facts, gpus, o.size)
    notes += [f"resources per pod (requests = limits): {line}" for line in resources.basis]
    shm_note = _client_shm_note(o)
    if shm_note:
        notes.append(shm_note)
    if not image_has_digest(o.image):
        notes.append(f"image {o.image} is pinned by tag only: pin its digest (…@sha256:…) for identical bytes "
                     "on every node")
    labels = _labels(o.name)
    queue_limit = o.concurrency_limit or sum(m.concurrency_limit for m in facts.queued_models())
    targets = _scale_targets(o, sla, queue_limit, gpus)
    scaling = o.max_replicas > o.min_replicas
    if scaling:
        notes.append(f"autoscaling at {o.scale_out_utilisation:.0%} of the alert thresholds: {targets.describe()} "
                     f"(pod concurrency limit {queue_limit}); the external signal needs the rules of "
                     "`tritonkit deploy alerts` loaded in Prometheus")

    files: dict[str, list[dict[str, Any]]] = {}
    if o.kserve:
        selector = {"serving.kserve.io/inferenceservice": o.name}
        files["inferenceservice.yaml"] = [_inference_service(o, labels, exit_timeout_s, grace_s, gpus, resources,
                                                             targets if scaling else None, facts)]
    else:
        selector = {"app.kubernetes.io/name": o.name}
        files["deployment.yaml"] = [_deployment(o, labels, exit_timeout_s, grace_s, gpus, resources, facts)]
        files["service.yaml"] = [service(o, labels, selector), headless_service(o, labels, selector)]
        notes.append(f"gRPC clients that balance themselves: dns:///{o.headless_name}.{o.namespace}.svc.cluster.local:"
                     f"{GRPC_PORT} with round_robin; label client pods {{tritonkit/client-of: {o.name}}}")
        if o.ingress:
            files["ingress.yaml"] = [grpc_ingress(o, o.ingress, labels)]
            notes.append(f"Ingress: gRPC on {o.ingress.host}:443 through ingress-nginx; create the TLS secret "
                         f"{o.tls_secret}")
        if scaling:
            files["hpa.yaml"] = [hpa(o, labels, targets)]
    files["networkpolicy.yaml"] = [network_policy(o, labels, selector)]
    files["pdb.yaml"] = [disruption_budget(o, labels, selector)]
    assert set(files) <= set(MANIFEST_FILES)  # write_manifests removes stale files by that list
    adapter = adapter_rules(targets) if "hpa.yaml" in files else None
    return Manifests(files, exit_timeout_s, grace_s, targets.pending, tuple(notes), adapter, resources)


def _container(o: K8sOptions, args: list[str], gpus: int, resources: PodResources,
               mounts: list[dict[str, Any]]) -> dict[str, Any]:
    """The tritonserver container's hardening, resources, mounts and credentials (Deployment and KServe alike)."""
    container: dict[str, Any] = {
        "args": args,
        "env": hardened_env(),
        "resources": resources.size.as_k8s(gpus),
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    if o.source.credentials_secret:
        # As a file, not as environment (which leaks into crash dumps and child processes):
        # tritonserver reads its object-store credentials from TRITON_CLOUD_CREDENTIAL_PATH.
        container["env"].append({"name": "TRITON_CLOUD_CREDENTIAL_PATH",
                                 "value": f"{CREDENTIALS_MOUNT}/{CREDENTIALS_KEY}"})
        mounts.append({"name": "credentials", "mountPath": CREDENTIALS_MOUNT, "readOnly": True})
    return container


def _pod_spec(o: K8sOptions, volumes: list[dict[str, Any]], grace_s: int) -> dict[str, Any]:
    if o.source.credentials_secret:
        volumes.append({"name": "credentials", "secret": {"secretName": o.source.credentials_secret,
                                                          "defaultMode": 0o440}})
    return {"automountServiceAccountToken": False, "securityContext": pod_security_context(),
            "terminationGracePeriodSeconds": grace_s, "volumes": volumes}


def _deployment(o: K8sOptions, labels: dict[str, str], exit_timeout_s: int, grace_s: int, gpus: int,
                resources: PodResources, facts: RepositoryFacts) -> dict[str, Any]:
    volumes, mounts = writable_mounts(resources, facts.model_bytes if o.source.uri else 0)
    if o.source.uri:
        repository = o.source.uri
    else:
        repository = MODEL_MOUNT
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": o.source.claim(o.name),
                                                                     "readOnly": True}})
        mounts.append({"name": "models", "mountPath": MODEL_MOUNT, "readOnly": True})
    args = [f"--model-repository={repository}", f"--http-port={HTTP_PORT}", f"--grpc-port={GRPC_PORT}",
            f"--metrics-port={METRICS_PORT}", *_server_args(exit_timeout_s, gpus, o)]
    container: dict[str, Any] = {
        "name": "tritonserver",
        "image": o.image,
        "imagePullPolicy": "Always",
        "command": ["tritonserver"],
        "ports": [{"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
                  {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"}],
        # Model loading can take minutes: liveness starts only once the server first answers.
        "startupProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"},
                         "periodSeconds": 10, "failureThreshold": 60},
        "readinessProbe": {"httpGet": {"path": "/v2/health/ready", "port": "http"},
                           "periodSeconds": 5, "failureThreshold": 3},
        "livenessProbe": {"httpGet": {"path": "/v2/health/live", "port": "http"},
                          "periodSeconds": 10, "failureThreshold": 3},
        "lifecycle": {"preStop": {"exec": {"command": ["sleep", str(PRESTOP_PAUSE_S)]}}},
        **_container(o, args, gpus, resources, mounts),
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": object_meta(o.name, o.namespace, labels),
        "spec": {
            "replicas": o.min_replicas,
            "selector": {"matchLabels": {"app.kubernetes.io/name": o.name}},
            # Bring a new pod up (and ready) before taking an old one away.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "template": {
                "metadata": {
                    "labels": labels,
                    "annotations": {"prometheus.io/scrape": "true", "prometheus.io/port": str(METRICS_PORT),
                                    "prometheus.io/path": "/metrics"},
                },
                "spec": {**_pod_spec(o, volumes, grace_s), "containers": [container]},
            },
        },
    }


def _inference_service(o: K8sOptions, labels: dict[str, str], exit_timeout_s: int, grace_s: int, gpus: int,
                       resources: PodResources, targets: ScaleTargets | None,
                       facts: RepositoryFacts) -> dict[str, Any]:
    """An InferenceService on ``kserve-tritonserver``: KServe's runtime sets the repository, ports and
    probes; the predictor carries the pod's hardening (KServe passes PodSpec fields through) and the
    model the container's."""
    volumes, mounts = writable_mounts(resources, facts.model_bytes)
    model: dict[str, Any] = {
        "modelFormat": {"name": "triton"},
        "runtime": "kserve-tritonserver",
        "storageUri": o.source.uri or f"pvc://{o.source.pvc}/",
        **_container(o, _server_args(exit_timeout_s, gpus, o), gpus, resources, mounts),
    }
    predictor: dict[str, Any] = {"minReplicas": o.min_replicas, "maxReplicas": o.max_replicas,
                                 **_pod_spec(o, volumes, grace_s), "model": model}
    annotations = {"serving.kserve.io/enable-prometheus-scraping": "true", "prometheus.io/port": str(METRICS_PORT)}
    if targets is not None:
        # KServe scales on custom metrics only through KEDA, which needs the raw-deployment mode.
        annotations |= {"serving.kserve.io/deploymentMode": "RawDeployment",
                        "serving.kserve.io/autoscalerClass": "keda"}
        predictor["autoScaling"] = kserve_autoscaling(o, targets)
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": object_meta(o.name, o.namespace, labels, annotations=annotations),
        "spec": {"predictor": predictor},
    }


def render_yaml(docs: list[dict[str, Any]]) -> str:
    """One YAML stream (``---`` between documents)."""
    return yaml.safe_dump_all(docs, sort_keys=False, width=1000, explicit_start=True)


def write_manifests(manifests: Manifests, folder: str | Path) -> list[Path]:
    """One file per kind in ``folder`` (atomic writes); returns the paths.

    Files this toolkit writes there but that these manifests do not include (an ``hpa.yaml``
    from an earlier run with an autoscaler, say) are removed: ``kubectl apply -f FOLDER`` applies
    whatever is in the folder. Other files are left alone.
    """
    out = Path(folder)
    paths = [atomic_write(out / name, render_yaml(docs)) for name, docs in manifests.files.items()]
    if manifests.adapter_rules is not None:
        text = yaml.safe_dump(manifests.adapter_rules, sort_keys=False, width=1000)
        paths.append(atomic_write(out / ADAPTER_FILE, text))
    for stale in sorted(set(MANIFEST_FILES) - {p.name for p in paths}):
        (out / stale).unlink(missing_ok=True)
    return paths
