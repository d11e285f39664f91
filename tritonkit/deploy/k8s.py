"""Kubernetes (and KServe) manifests that serve a model repository with tritonserver.

Generated, not templated: each manifest is a plain dict built from the repository's configs
(instances, GPUs, concurrency limits — the sweep's winner once it wrote them back), the SLA
(how long the longest request may take) and the options; :func:`render_yaml` turns them into one
YAML stream for ``kubectl apply -f -``.

* **Deployment**: tritonserver on the repository (a volume, or an ``s3://`` / ``gs://`` URI the
  server reads itself); GPU limits; a startup probe (model loading takes minutes) then readiness
  and liveness on Triton's ``/v2/health/ready`` and ``/v2/health/live``; graceful shutdown: a
  short ``preStop`` pause so the Service stops routing, then ``--exit-timeout-secs`` longer than
  the longest request, inside ``terminationGracePeriodSeconds``; the metrics port annotated for
  scraping; ``/dev/shm`` in memory (the python backend passes tensors through it).
* **Service** for HTTP, gRPC and metrics.
* **HorizontalPodAutoscaler** (``autoscaling/v2``) on pending requests per pod and, with GPUs,
  GPU utilisation — custom pod metrics served by prometheus-adapter (its rules are generated
  too) — scaling out at the planner's rule of thumb: 60–70 % utilisation, not 100 %.
* With ``kserve``: an **InferenceService** on KServe's Triton runtime instead.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tritonkit._fs import atomic_write
from tritonkit.deploy.source import SCALE_OUT_UTILISATION, RepositoryFacts
from tritonkit.deploy.triton_metrics import ALWAYS, GPU
from tritonkit.errors import ConfigError
from tritonkit.perf.judge.sla import METRICS, SLA

__all__ = [
    "ADAPTER_FILE",
    "MIN_EXIT_TIMEOUT_S",
    "PRESTOP_PAUSE_S",
    "TAIL_FACTOR",
    "K8sOptions",
    "Manifests",
    "build_manifests",
    "longest_request_s",
    "parse_replicas",
    "render_yaml",
    "write_manifests",
]

HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
MODEL_MOUNT = "/models"
ADAPTER_FILE = "prometheus-adapter-values.yaml"

#: Seconds the pod keeps serving after it is marked terminating, before tritonserver gets
#: SIGTERM: endpoints controllers and kube-proxy need a moment to stop routing new requests to it.
PRESTOP_PAUSE_S = 5
#: Rule of thumb for the longest request when only the SLA is known: the tail past p99 runs to
#: several times the bound under load, so drain for ten times the largest latency bound…
TAIL_FACTOR = 10
#: …and never less than this (an SLA of milliseconds still needs time to drain queued requests).
MIN_EXIT_TIMEOUT_S = 30


@dataclass(frozen=True)
class K8sOptions:
    """What the manifests need besides the repository and the SLA."""

    image: str
    name: str = "triton"
    namespace: str | None = None
    #: GPUs per pod (None: one when a model asks for a GPU, else none).
    gpus: int | None = None
    min_replicas: int = 1
    max_replicas: int = 4
    #: ``s3://…`` / ``gs://…`` / ``as://…``: tritonserver reads the repository from there.
    repo_uri: str | None = None
    #: PersistentVolumeClaim holding the repository (when no URI): default ``<name>-models``.
    pvc: str | None = None
    #: Secret whose keys become the container's environment (object-store credentials).
    credentials_secret: str | None = None
    #: The longest request in seconds; None: from the SLA (see :func:`longest_request_s`).
    max_request_s: float | None = None
    shm_size: str = "1Gi"
    #: Requests a pod takes at once before its queues hold them (None: the repository's
    #: concurrency limits, summed over its models).
    concurrency_limit: int | None = None
    scale_out_utilisation: float = SCALE_OUT_UTILISATION
    kserve: bool = False

    def __post_init__(self) -> None:
        if not self.image.strip():
            raise ConfigError("--image is empty", hint="name the tritonserver image, e.g. "
                              "nvcr.io/nvidia/tritonserver:24.10-py3")
        if self.concurrency_limit is not None and self.concurrency_limit < 1:
            raise ConfigError(f"--concurrency-limit {self.concurrency_limit} must be at least 1")
        if self.gpus is not None and self.gpus < 0:
            raise ConfigError(f"--gpus {self.gpus} is negative", hint="give 0 for a CPU deployment")
        if not 1 <= self.min_replicas <= self.max_replicas:
            raise ConfigError(f"replicas {self.min_replicas}:{self.max_replicas} are not 1 <= min <= max",
                              hint="write --replicas 2 or --replicas 1:8")
        if self.repo_uri is not None and not self.repo_uri.startswith(("s3://", "gs://", "as://")):
            raise ConfigError(f"--repo-uri {self.repo_uri!r} is not an object-store URI tritonserver reads",
                              hint="use s3://bucket/path, gs://bucket/path or as://account/container/path; "
                                   "for a volume leave --repo-uri out and pass --pvc")
        if not 0 < self.scale_out_utilisation <= 1:
            raise ConfigError(f"scale-out utilisation {self.scale_out_utilisation} is not in (0, 1]",
                              hint="rule of thumb: 60–70 %, e.g. --scale-out-at 65%")
        if self.kserve and self.repo_uri is None and self.pvc is None:
            raise ConfigError("KServe loads the repository from a storage URI",
                              hint="pass --repo-uri s3://bucket/repo, or --pvc CLAIM for pvc://CLAIM/")


@dataclass(frozen=True)
class Manifests:
    """The generated objects, by file name, plus the figures they were sized from."""

    files: dict[str, list[dict[str, Any]]]
    exit_timeout_s: int
    grace_period_s: int
    pending_target: int
    notes: tuple[str, ...]
    #: prometheus-adapter rules serving the HPA's pod metrics (not a Kubernetes object: Helm
    #: value ``rules.custom`` of the prometheus-adapter chart); None without an HPA.
    adapter_rules: dict[str, Any] | None = None

    def all(self) -> list[dict[str, Any]]:
        """Every manifest, in apply order."""
        return [doc for docs in self.files.values() for doc in docs]


def parse_replicas(text: str) -> tuple[int, int]:
    """``"3"`` → (3, 3); ``"1:8"`` → (1, 8)."""
    try:
        low, _, high = text.partition(":")
        lo, hi = int(low), int(high or low)
    except ValueError as exc:
        raise ConfigError(f"--replicas {text!r} is not N or MIN:MAX", hint="write --replicas 2 or --replicas 1:8") from exc
    if not 1 <= lo <= hi:
        raise ConfigError(f"--replicas {text!r}: need 1 <= MIN <= MAX", hint="write --replicas 1:8")
    return lo, hi


def longest_request_s(sla: SLA | None, given_s: float | None) -> tuple[float, str]:
    """The longest request to drain on shutdown, and where the figure came from."""
    if given_s is not None:
        if given_s <= 0:
            raise ConfigError(f"--max-request-s {given_s} must be positive")
        return given_s, "--max-request-s"
    bounds_ms = [c.value for c in (sla.constraints if sla else ())
                 if c.metric in METRICS and METRICS[c.metric].kind == "time"]
    if bounds_ms:
        longest = max(bounds_ms) / 1000 * TAIL_FACTOR
        return longest, f"{TAIL_FACTOR} × the SLA's largest latency bound ({max(bounds_ms):g} ms)"
    return float(MIN_EXIT_TIMEOUT_S), "no SLA latency bound and no --max-request-s: the minimum"


def _labels(name: str) -> dict[str, str]:
    return {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "inference-server",
            "app.kubernetes.io/managed-by": "tritonkit"}


def _meta(name: str, namespace: str | None, labels: dict[str, str]) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": labels}
    if namespace:
        meta["namespace"] = namespace
    return meta


def _server_args(repository: str, exit_timeout_s: int, gpus: int) -> list[str]:
    args = [
        f"--model-repository={repository}",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        "--allow-metrics=true",
        f"--metrics-port={METRICS_PORT}",
        # p50…p99 for the alert rules and the dashboard: summaries are off by default in 2.51.
        "--metrics-config=summary_latencies=true",
        f"--exit-timeout-secs={exit_timeout_s}",
    ]
    if gpus:
        args.append("--allow-gpu-metrics=true")
    return args


def _resources(gpus: int) -> dict[str, Any]:
    if not gpus:
        return {}
    return {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}


def _add_resources_and_credentials(container: dict[str, Any], o: K8sOptions, gpus: int) -> None:
    """The GPU requests and the object-store credentials of the tritonserver container (a
    Deployment's or a KServe predictor's: the same container either way)."""
    resources = _resources(gpus)
    if resources:
        container["resources"] = resources
    if o.credentials_secret:
        container["envFrom"] = [{"secretRef": {"name": o.credentials_secret}}]


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
    labels = _labels(o.name)
    queue_limit = o.concurrency_limit or sum(m.concurrency_limit for m in facts.queued_models())
    # The queue alert fires at half the concurrency limit; the autoscaler acts at 60–70 % of that
    # depth (rule of thumb: scale out before the alarm, a replica takes minutes to arrive).
    pending_target = max(1, math.floor(o.scale_out_utilisation * queue_limit / 2))
    notes.append(f"HPA: scale out above {pending_target} pending requests per pod "
                 f"({o.scale_out_utilisation:.0%} of half the pod's concurrency limit {queue_limit})"
                 + (f" or {o.scale_out_utilisation:.0%} GPU utilisation" if gpus else ""))

    files: dict[str, list[dict[str, Any]]] = {}
    if o.kserve:
        files["inferenceservice.yaml"] = [_inference_service(o, labels, exit_timeout_s, gpus)]
        notes.append("KServe: scaling follows the InferenceService's min/max replicas; queue and GPU "
                     "signals still alert through the Prometheus rules")
    else:
        files["deployment.yaml"] = [_deployment(o, labels, exit_timeout_s, grace_s, gpus)]
        files["service.yaml"] = [_service(o, labels)]
        if o.max_replicas > o.min_replicas:
            files["hpa.yaml"] = [_hpa(o, labels, pending_target, gpus)]
    adapter = _adapter_rules(gpus) if "hpa.yaml" in files else None
    return Manifests(files, exit_timeout_s, grace_s, pending_target, tuple(notes), adapter)


def _deployment(o: K8sOptions, labels: dict[str, str], exit_timeout_s: int, grace_s: int, gpus: int) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": o.shm_size}}]
    mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
    if o.repo_uri:
        repository = o.repo_uri
    else:
        repository = MODEL_MOUNT
        volumes.append({"name": "models", "persistentVolumeClaim": {"claimName": o.pvc or f"{o.name}-models",
                                                                     "readOnly": True}})
        mounts.append({"name": "models", "mountPath": MODEL_MOUNT, "readOnly": True})
    container: dict[str, Any] = {
        "name": "tritonserver",
        "image": o.image,
        "command": ["tritonserver"],
        "args": _server_args(repository, exit_timeout_s, gpus),
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
        "volumeMounts": mounts,
    }
    _add_resources_and_credentials(container, o, gpus)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(o.name, o.namespace, labels),
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
                "spec": {
                    "terminationGracePeriodSeconds": grace_s,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def _service(o: K8sOptions, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(o.name, o.namespace, labels),
        "spec": {
            "selector": {"app.kubernetes.io/name": o.name},
            "ports": [{"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                      {"name": "grpc", "port": GRPC_PORT, "targetPort": "grpc", "protocol": "TCP",
                       "appProtocol": "grpc"},
                      {"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def _hpa(o: K8sOptions, labels: dict[str, str], pending_target: int, gpus: int) -> dict[str, Any]:
    metrics: list[dict[str, Any]] = [{
        "type": "Pods",
        "pods": {"metric": {"name": ALWAYS["pending"]},
                 "target": {"type": "AverageValue", "averageValue": str(pending_target)}},
    }]
    if gpus:
        metrics.append({
            "type": "Pods",
            "pods": {"metric": {"name": GPU["utilization"]},
                     # nv_gpu_utilization is a fraction: 650m is 65 %.
                     "target": {"type": "AverageValue",
                                "averageValue": f"{round(o.scale_out_utilisation * 1000)}m"}},
        })
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(o.name, o.namespace, labels),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": o.name},
            "minReplicas": o.min_replicas,
            "maxReplicas": o.max_replicas,
            "metrics": metrics,
            # Scale out at once, scale in slowly: a burst that ends should not drop replicas that
            # took minutes to load.
            "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0},
                         "scaleDown": {"stabilizationWindowSeconds": 300}},
        },
    }


def _adapter_rules(gpus: int) -> dict[str, Any]:
    """prometheus-adapter ``rules`` serving the HPA's pod metrics (Helm value ``rules.custom``)."""
    resources = {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}}
    rules = [{
        "seriesQuery": f'{ALWAYS["pending"]}{{namespace!="",pod!=""}}',
        "resources": resources,
        "name": {"matches": ALWAYS["pending"], "as": ALWAYS["pending"]},
        # Every model's queue on the pod together: the pod is what scales.
        "metricsQuery": "sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
    }]
    if gpus:
        rules.append({
            "seriesQuery": f'{GPU["utilization"]}{{namespace!="",pod!=""}}',
            "resources": resources,
            "name": {"matches": GPU["utilization"], "as": GPU["utilization"]},
            "metricsQuery": "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
        })
    return {"rules": {"custom": rules}}


def _inference_service(o: K8sOptions, labels: dict[str, str], exit_timeout_s: int, gpus: int) -> dict[str, Any]:
    storage = o.repo_uri or f"pvc://{o.pvc}/"
    model: dict[str, Any] = {
        "modelFormat": {"name": "triton"},
        "runtime": "kserve-tritonserver",
        "storageUri": storage,
        # KServe's runtime sets the repository and ports; these add what the alerts need.
        "args": ["--allow-metrics=true", "--metrics-config=summary_latencies=true",
                 f"--exit-timeout-secs={exit_timeout_s}"],
    }
    _add_resources_and_credentials(model, o, gpus)
    return {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {**_meta(o.name, o.namespace, labels),
                     "annotations": {"serving.kserve.io/enable-prometheus-scraping": "true",
                                     "prometheus.io/port": str(METRICS_PORT)}},
        "spec": {"predictor": {"minReplicas": o.min_replicas, "maxReplicas": o.max_replicas, "model": model}},
    }


def render_yaml(docs: list[dict[str, Any]]) -> str:
    """One YAML stream (``---`` between documents)."""
    return yaml.safe_dump_all(docs, sort_keys=False, width=1000, explicit_start=True)


def write_manifests(manifests: Manifests, folder: str | Path) -> list[Path]:
    """One file per kind in ``folder`` (atomic writes); returns the paths."""
    out = Path(folder)
    paths = [atomic_write(out / name, render_yaml(docs)) for name, docs in manifests.files.items()]
    if manifests.adapter_rules is not None:
        text = yaml.safe_dump(manifests.adapter_rules, sort_keys=False, width=1000)
        paths.append(atomic_write(out / ADAPTER_FILE, text))
    return paths
