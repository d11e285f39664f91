"""What the Kubernetes manifests need besides the repository and the SLA, checked on construction.

Every name and the image are validated here, before anything is rendered or written: a bad one
is a :class:`~tritonkit.errors.ConfigError` naming the option and the rule it breaks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonkit._values import COUNT, GPUS_PER_POD, SECONDS, Bounds, bounded, check_fields
from tritonkit.deploy.k8s_names import (
    check_dns1035_label,
    check_dns1123_label,
    check_dns1123_subdomain,
    check_image,
)
from tritonkit.deploy.k8s_sizing import PodSize
from tritonkit.deploy.source import SCALE_OUT_UTILISATION
from tritonkit.errors import ConfigError
from tritonkit.triton_releases import TritonRelease, release_of_image, release_of_version

#: Replicas of one Deployment: a typo past ten thousand is not a plan.
REPLICAS = Bounds(integer=True, low=1, high=10_000, example="2")
#: Seconds a gRPC connection lives before the server closes it.
_CONNECTION_AGE_S = Bounds(integer=True, low=1, high=86_400, noun="number of seconds", example="300")

__all__ = [
    "CLIENT_LABEL",
    "DEFAULT_NAMESPACE",
    "GRPC_PORT",
    "HEADLESS_SUFFIX",
    "HTTP_PORT",
    "INGRESS_NAMESPACE",
    "METRICS_PORT",
    "PROMETHEUS_LABELS",
    "GrpcIngress",
    "K8sOptions",
    "RepositorySource",
    "object_meta",
]

HTTP_PORT, GRPC_PORT, METRICS_PORT = 8000, 8001, 8002
#: Not ``default``: workloads there share it with everything nobody placed (and checkov
#: CKV_K8S_21 refuses it). ``--namespace default`` still writes it when asked.
DEFAULT_NAMESPACE = "triton"
#: The headless Service's name is the Service's plus this (gRPC clients resolve it to every pod).
HEADLESS_SUFFIX = "-headless"
#: Pods with this label (value: the deployment's name) may call the inference ports.
CLIENT_LABEL = "tritonkit/client-of"
#: Pods with these labels (in any namespace) may scrape the metrics port: the label the
#: Prometheus operator and the prometheus Helm charts put on Prometheus pods.
PROMETHEUS_LABELS = {"app.kubernetes.io/name": "prometheus"}
#: Where ingress-nginx runs by default (its controller pods may reach the gRPC port).
INGRESS_NAMESPACE = "ingress-nginx"


#: Where an autoscaler adds replicas, as a share of a pod's capacity. Under 10 % it adds replicas
#: for pods that are nine-tenths idle (``--scale-out-at 2`` meant as 2 %, or as 200 %?): refused
#: with the rule of thumb instead. 100 % adds them only once pods are already saturated (allowed).
SCALE_OUT = Bounds(integer=False, low=0.1, high=1.0, noun="fraction", example="0.65")


@dataclass(frozen=True)
class RepositorySource:
    """Where the pods read the model repository from: an object store tritonserver reads itself
    (``uri``, with the ``credentials_secret`` its credential file comes from), else a
    PersistentVolumeClaim (``pvc``; default ``<name>-models``)."""

    #: ``s3://…`` / ``gs://…`` / ``as://…``: tritonserver reads the repository from there.
    uri: str | None = None
    #: PersistentVolumeClaim holding the repository (when no URI): default ``<name>-models``.
    pvc: str | None = None
    #: Secret holding Triton's object-store credential file (mounted as a file).
    credentials_secret: str | None = None

    def __post_init__(self) -> None:
        for value, field in ((self.pvc, "--pvc"), (self.credentials_secret, "--credentials-secret")):
            if value is not None:
                check_dns1123_subdomain(value, field)
        if self.uri is not None and not self.uri.startswith(("s3://", "gs://", "as://")):
            raise ConfigError(f"--repo-uri {self.uri!r} is not an object-store URI tritonserver reads",
                              hint="use s3://bucket/path, gs://bucket/path or as://account/container/path; "
                                   "for a volume leave --repo-uri out and pass --pvc")
        if self.uri is not None and not self.uri.partition("://")[2].split("/", 1)[0]:
            raise ConfigError(f"--repo-uri {self.uri!r} names no bucket (or account)",
                              hint="use s3://bucket/path, gs://bucket/path or as://account/container/path")
        if self.uri is not None and any(c.isspace() for c in self.uri):
            raise ConfigError(f"--repo-uri {self.uri!r} contains white space", hint="quote nothing into it")

    def claim(self, name: str) -> str:
        """The PersistentVolumeClaim of the deployment called ``name``."""
        return self.pvc or f"{name}-models"


@dataclass(frozen=True)
class GrpcIngress:
    """An ingress-nginx Ingress routing gRPC for ``host`` to the pods (gRPC through ingress-nginx
    needs HTTP/2, hence TLS: ``tls_secret``, default ``<name>-tls``)."""

    host: str
    ingress_class: str = "nginx"
    tls_secret: str | None = None
    #: Where the ingress controller runs (its pods may reach the gRPC port).
    namespace: str = INGRESS_NAMESPACE

    def __post_init__(self) -> None:
        check_dns1123_subdomain(self.host, "--grpc-ingress")
        if self.tls_secret is not None:
            check_dns1123_subdomain(self.tls_secret, "--ingress-tls-secret")
        check_dns1123_label(self.namespace, "--ingress-namespace")
        check_dns1123_subdomain(self.ingress_class, "--ingress-class")


@dataclass(frozen=True)
class K8sOptions:
    """What the manifests need besides the repository and the SLA."""

    image: str
    name: str = "triton"
    namespace: str = DEFAULT_NAMESPACE
    #: GPUs per pod (None: one when a model asks for a GPU, else none).
    gpus: int | None = bounded(None, GPUS_PER_POD)
    min_replicas: int = bounded(1, REPLICAS)
    max_replicas: int = bounded(4, REPLICAS)
    source: RepositorySource = RepositorySource()
    #: The longest request in seconds; None: from the SLA (see :func:`~tritonkit.deploy.k8s.longest_request_s`).
    max_request_s: float | None = bounded(None, SECONDS)
    #: CPU, memory and ``/dev/shm`` per pod; what is not given is derived from the repository.
    size: PodSize = PodSize()
    #: Requests a pod takes at once before its queues hold them (None: the repository's
    #: concurrency limits, summed over its models).
    concurrency_limit: int | None = bounded(None, COUNT)
    scale_out_utilisation: float = bounded(SCALE_OUT_UTILISATION, SCALE_OUT)
    kserve: bool = False
    #: None: no Ingress (clients balance over the headless Service).
    ingress: GrpcIngress | None = None
    #: gRPC connections are closed after this many seconds (in-flight calls finish first), so
    #: clients balancing over the headless Service re-resolve it and reach new replicas.
    grpc_max_connection_age_s: int = bounded(300, _CONNECTION_AGE_S)
    #: Prometheus the KServe autoscaler (KEDA) queries.
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    #: The Triton release the image runs (``2.68``, or an NGC tag); None: read from an NGC image's tag.
    server_version: str | None = None
    #: Let clients register shared memory: adds ``--allow-client-shm=true`` where the release needs it (2.68+).
    client_shm: bool = False

    def __post_init__(self) -> None:
        if not self.image.strip():
            raise ConfigError("--image is empty", hint="name the tritonserver image, e.g. "
                              "nvcr.io/nvidia/tritonserver:24.10-py3")
        check_image(self.image)
        # The headless Service's name (a DNS-1035 label) is the longest name made from it.
        check_dns1035_label(self.name, "--name", max_len=63 - len(HEADLESS_SUFFIX))
        check_dns1123_label(self.namespace, "--namespace")
        check_fields(self)
        if self.min_replicas > self.max_replicas:
            raise ConfigError(f"replicas {self.min_replicas}:{self.max_replicas} are not 1 <= min <= max",
                              hint="write --replicas 2 or --replicas 1:8")
        if self.kserve and self.source.uri is None and self.source.pvc is None:
            raise ConfigError("KServe loads the repository from a storage URI",
                              hint="pass --repo-uri s3://bucket/repo, or --pvc CLAIM for pvc://CLAIM/")
        if self.server_version is not None:
            release_of_version(self.server_version)  # an unknown release is refused, listing the known ones
        if self.client_shm and self.release is None:
            raise ConfigError(f"--client-shm: whether the server needs a flag for it depends on its release, and the "
                              f"image {self.image} names none", hint="pass --server-version X.Y (the Triton release "
                              "the image runs), or use an NGC image tag such as tritonserver:26.04-py3")
        if not self.prometheus_url.startswith(("http://", "https://")):
            raise ConfigError(f"--prometheus-url {self.prometheus_url!r} is not an http(s) URL",
                              hint="e.g. http://prometheus-operated.monitoring.svc:9090")

    @property
    def release(self) -> TritonRelease | None:
        """The Triton release the pods run: ``server_version``, else the NGC tag of ``image``, else ``None``."""
        if self.server_version is not None:
            return release_of_version(self.server_version)
        return release_of_image(self.image)

    @property
    def headless_name(self) -> str:
        """The headless Service's name."""
        return self.name + HEADLESS_SUFFIX

    @property
    def tls_secret(self) -> str:
        """The Ingress's TLS Secret."""
        return (self.ingress.tls_secret if self.ingress else None) or f"{self.name}-tls"


def object_meta(name: str, namespace: str, labels: dict[str, str], **extra: Any) -> dict[str, Any]:
    """``metadata`` of a namespaced object."""
    return {"name": name, "namespace": namespace, "labels": dict(labels), **extra}
