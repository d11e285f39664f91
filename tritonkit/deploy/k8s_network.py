"""How requests reach the pods: Services, a gRPC Ingress, the NetworkPolicy, the disruption budget.

**gRPC that balances.** gRPC keeps one HTTP/2 connection per server and sends every call on
it, so behind a ClusterIP Service (one virtual IP, balanced per *connection* by kube-proxy) a
client sticks to one pod and added replicas take no load from it. Two ways out, both written:

* a **headless Service** (``clusterIP: None``): its DNS name resolves to every ready pod's IP,
  and a client asking for ``dns:///<name>-headless.<namespace>.svc.cluster.local:8001`` with the
  ``round_robin`` policy (``tritonkit.client.Client`` does for ``dns:///`` targets) connects to
  all of them and spreads calls. The server closes connections after
  ``--grpc-max-connection-age`` so clients re-resolve and find new replicas;
* an **Ingress for ingress-nginx** with ``backend-protocol: GRPC`` (``--grpc-ingress HOST``): the
  proxy ends the client's HTTP/2 connection and balances each call over the pods' endpoints,
  for clients that cannot balance themselves. Chosen over an Envoy Deployment because an
  Ingress is a Kubernetes API object that kubernetes-validate checks field by field, where an
  Envoy configuration would be an opaque string in a ConfigMap that no schema check reads.

**NetworkPolicy**: ingress only to the HTTP and gRPC ports from pods labelled
``tritonkit/client-of: <name>`` (any namespace) and, with an Ingress, from the ingress-nginx
controller; to the metrics port only from Prometheus pods. Kubelet probes are not pod traffic
and are not affected. **PodDisruptionBudget**: a voluntary disruption (a node drain) takes at
most one pod at a time.
"""

from __future__ import annotations

from typing import Any

from tritonkit.deploy.k8s_options import (
    CLIENT_LABEL,
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    PROMETHEUS_LABELS,
    GrpcIngress,
    K8sOptions,
    object_meta,
)

__all__ = [
    "disruption_budget",
    "grpc_ingress",
    "headless_service",
    "network_policy",
    "service",
]

_TCP = "TCP"


def _port(name: str, port: int, **extra: str) -> dict[str, Any]:
    return {"name": name, "port": port, "targetPort": name, "protocol": _TCP, **extra}


def service(o: K8sOptions, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """The ClusterIP Service: HTTP (balanced per request by HTTP/1.1 clients' connection pools), gRPC, metrics."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": object_meta(o.name, o.namespace, labels),
        "spec": {"selector": dict(selector),
                 "ports": [_port("http", HTTP_PORT), _port("grpc", GRPC_PORT, appProtocol="grpc"),
                           _port("metrics", METRICS_PORT)]},
    }


def headless_service(o: K8sOptions, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """The headless Service gRPC clients balance over themselves (``dns:///…`` + round_robin)."""
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": object_meta(o.headless_name, o.namespace, labels),
        "spec": {"clusterIP": "None", "selector": dict(selector),
                 # Only ready pods are published: a loading server is not handed calls.
                 "publishNotReadyAddresses": False,
                 "ports": [_port("grpc", GRPC_PORT, appProtocol="grpc"), _port("http", HTTP_PORT)]},
    }


def grpc_ingress(o: K8sOptions, ingress: GrpcIngress, labels: dict[str, str]) -> dict[str, Any]:
    """An ingress-nginx Ingress routing gRPC for ``ingress.host`` to the Service's gRPC port."""
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": object_meta(o.name, o.namespace, labels, annotations={
            "nginx.ingress.kubernetes.io/backend-protocol": "GRPC",
            # A request may take as long as the server drains for; nginx's 60 s default is shorter.
            "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
            "nginx.ingress.kubernetes.io/proxy-send-timeout": "3600",
        }),
        "spec": {
            "ingressClassName": ingress.ingress_class,
            # HTTP/2 to the proxy needs TLS (ALPN); the Secret is yours (cert-manager, or kubectl create secret tls).
            "tls": [{"hosts": [ingress.host], "secretName": o.tls_secret}],
            "rules": [{"host": ingress.host, "http": {"paths": [{
                "path": "/", "pathType": "Prefix",
                "backend": {"service": {"name": o.name, "port": {"name": "grpc"}}},
            }]}}],
        },
    }


def network_policy(o: K8sOptions, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """Ingress to the pods: inference ports from labelled clients (and the ingress controller), metrics from Prometheus."""
    clients: list[dict[str, Any]] = [{"namespaceSelector": {}, "podSelector": {"matchLabels": {CLIENT_LABEL: o.name}}}]
    if o.ingress:
        clients.append({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": o.ingress.namespace}},
                        "podSelector": {"matchLabels": {"app.kubernetes.io/name": "ingress-nginx"}}})
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": object_meta(o.name, o.namespace, labels),
        "spec": {
            "podSelector": {"matchLabels": dict(selector)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": clients, "ports": [{"protocol": _TCP, "port": HTTP_PORT}, {"protocol": _TCP, "port": GRPC_PORT}]},
                {"from": [{"namespaceSelector": {}, "podSelector": {"matchLabels": dict(PROMETHEUS_LABELS)}}],
                 "ports": [{"protocol": _TCP, "port": METRICS_PORT}]},
            ],
        },
    }


def disruption_budget(o: K8sOptions, labels: dict[str, str], selector: dict[str, str]) -> dict[str, Any]:
    """At most one pod down at a time in a drain (``minAvailable`` would block draining a single replica)."""
    return {
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": object_meta(o.name, o.namespace, labels),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": dict(selector)}},
    }
