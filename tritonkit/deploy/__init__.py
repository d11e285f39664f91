"""Beyond one machine: Kubernetes / KServe manifests, Prometheus rules and a Grafana dashboard.

All three are generated from the same inputs — the model repository (whose configs hold the
sweep's winner), the SLA, and a few options — so the fleet is sized, scaled and alerted on the
numbers the toolkit measured::

    from tritonkit.deploy import (AlertOptions, K8sOptions, build_dashboard, build_manifests,
                                  build_rules, read_repository)
    from tritonkit.perf import parse_sla

    facts = read_repository("model_repository")
    sla = parse_sla("p99<=50ms,throughput>=200/s")
    manifests = build_manifests(facts, sla, K8sOptions(image="nvcr.io/nvidia/tritonserver:24.10-py3",
                                                       namespace="serving"))
    rules = build_rules(sla, facts, AlertOptions())
    dashboard = build_dashboard(facts)

Rendering is pure; ``write_manifests`` / ``write_rules`` / ``write_dashboard`` write atomically.
``install_prometheus`` fetches Debian's Prometheus privately for ``promtool`` checks;
``install_checkov`` gives checkov its own venv, ``scan_manifests`` runs it on written manifests and
``check_manifest_folder`` judges a written folder against the accepted failures (``deploy check``).
``build_ray_cluster`` writes a KubeRay RayCluster (or RayJob) for sweeps and load tests on a Ray
cluster (``deploy ray-cluster``; :mod:`tritonkit.perf.cluster` runs them).
"""

from __future__ import annotations

from tritonkit.deploy.alerts import AlertOptions, RuleSet, TermMapping, build_rules, write_rules
from tritonkit.deploy.checkov import (
    CheckovReport,
    ManifestCheck,
    accepted_checks,
    check_manifest_folder,
    install_checkov,
    locate_checkov,
    scan_manifests,
)
from tritonkit.deploy.dashboard import DashboardOptions, build_dashboard, panel_queries, write_dashboard
from tritonkit.deploy.k8s import (
    GrpcIngress,
    K8sOptions,
    Manifests,
    PodSize,
    RepositorySource,
    build_manifests,
    render_yaml,
    write_manifests,
)
from tritonkit.deploy.kuberay import KubeRayManifests, RayClusterOptions, build_ray_cluster, write_ray_cluster
from tritonkit.deploy.prometheus import (
    PrometheusInstall,
    check_rules,
    install_prometheus,
    locate_prometheus,
    run_rule_tests,
)
from tritonkit.deploy.source import SCALE_OUT_UTILISATION, ModelFacts, RepositoryFacts, read_repository

__all__ = [
    "SCALE_OUT_UTILISATION",
    "AlertOptions",
    "CheckovReport",
    "DashboardOptions",
    "GrpcIngress",
    "K8sOptions",
    "KubeRayManifests",
    "ManifestCheck",
    "Manifests",
    "ModelFacts",
    "PodSize",
    "PrometheusInstall",
    "RayClusterOptions",
    "RepositoryFacts",
    "RepositorySource",
    "RuleSet",
    "TermMapping",
    "accepted_checks",
    "build_dashboard",
    "build_manifests",
    "build_ray_cluster",
    "build_rules",
    "check_manifest_folder",
    "check_rules",
    "install_checkov",
    "install_prometheus",
    "locate_checkov",
    "locate_prometheus",
    "panel_queries",
    "read_repository",
    "render_yaml",
    "run_rule_tests",
    "scan_manifests",
    "write_dashboard",
    "write_manifests",
    "write_ray_cluster",
    "write_rules",
]
