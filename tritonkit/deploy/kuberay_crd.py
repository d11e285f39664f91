"""What KubeRay's custom resources accept, as data read at a release, and the check that holds
``deploy ray-cluster``'s manifests to it.

Facts read at ray-project/kuberay **v1.7.0**: the field names and required fields of the v1
``RayCluster`` and ``RayJob`` specs (``ray-operator/config/crd/bases/ray.io_rayclusters.yaml`` and
``ray.io_rayjobs.yaml``, the CRDs generated from ``ray-operator/apis/ray/v1/raycluster_types.go`` and
``rayjob_types.go``); the job submission modes (``rayjob_types.go``); what the operator adds to the
Ray container of each pod it builds (``ray-operator/controllers/ray/common/pod.go``: ``BuildPod``,
``addEmptyDir``, ``initLivenessAndReadinessProbe``, ``supportsUnifiedHealthCheck``; the defaults in
``ray-operator/controllers/ray/utils/constant.go``). The pod templates inside are Kubernetes
``PodTemplateSpec`` s, checked as Pods by the Kubernetes schemas (the tests use kubernetes-validate).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["KUBERAY_RELEASE", "KUBERAY_SOURCE", "RAY_API_VERSION", "check_kuberay"]

KUBERAY_RELEASE = "v1.7.0"
KUBERAY_SOURCE = "ray-project/kuberay v1.7.0, ray-operator/config/crd/bases/ray.io_{rayclusters,rayjobs}.yaml"
RAY_API_VERSION = "ray.io/v1"

#: ``RayClusterSpec``'s fields (``spec.required``: headGroupSpec).
RAY_CLUSTER_SPEC = frozenset({
    "authOptions", "autoscalerOptions", "enableInTreeAutoscaling", "gcsFaultToleranceOptions", "headGroupSpec",
    "headServiceAnnotations", "historyServerOptions", "managedBy", "networkPolicy", "rayVersion", "suspend",
    "tlsOptions", "upgradeStrategy", "workerGroupSpecs"})
RAY_CLUSTER_REQUIRED = frozenset({"headGroupSpec"})
#: ``HeadGroupSpec`` (required: template).
HEAD_GROUP = frozenset({"enableIngress", "headService", "ingressOptions", "labels", "rayStartParams", "resources",
                        "serviceType", "template"})
HEAD_GROUP_REQUIRED = frozenset({"template"})
#: ``WorkerGroupSpec`` (required: groupName, maxReplicas, minReplicas, template).
WORKER_GROUP = frozenset({"groupName", "idleTimeoutSeconds", "labels", "maxReplicas", "minReplicas", "numOfHosts",
                          "priority", "rayStartParams", "replicas", "resources", "scaleStrategy", "suspend",
                          "template"})
WORKER_GROUP_REQUIRED = frozenset({"groupName", "maxReplicas", "minReplicas", "template"})
#: ``RayJobSpec`` (nothing required).
RAY_JOB_SPEC = frozenset({
    "activeDeadlineSeconds", "backoffLimit", "clusterSelector", "deletionStrategy", "entrypoint", "entrypointNumCpus",
    "entrypointNumGpus", "entrypointResources", "jobId", "managedBy", "metadata", "preRunningDeadlineSeconds",
    "rayClusterSpec", "runtimeEnvYAML", "shutdownAfterJobFinishes", "submissionMode", "submitterConfig",
    "submitterPodTemplate", "suspend", "ttlSecondsAfterFinished"})
#: ``JobSubmissionMode`` (rayjob_types.go); the CRD's default is K8sJobMode (a submitter Kubernetes Job).
SUBMISSION_MODES = frozenset({"K8sJobMode", "HTTPMode", "InteractiveMode", "SidecarMode"})
#: Integer fields (int32 in the Go types) at the levels checked here.
_INTEGERS = frozenset({"minReplicas", "maxReplicas", "replicas", "numOfHosts", "idleTimeoutSeconds", "priority",
                       "activeDeadlineSeconds", "backoffLimit", "ttlSecondsAfterFinished", "preRunningDeadlineSeconds"})
_BOOLEANS = frozenset({"enableInTreeAutoscaling", "suspend", "shutdownAfterJobFinishes", "enableIngress"})
#: Maps of strings (``map[string]string``): ``rayStartParams`` values are strings, "1" not 1.
_STRING_MAPS = frozenset({"rayStartParams", "resources", "labels", "headServiceAnnotations", "clusterSelector",
                          "metadata"})

# What the operator adds to the Ray container (index 0) of every pod it builds (pod.go, constant.go at v1.7.0),
# unless the template already has it: the tests rebuild those pods from these facts.
#: /dev/shm for the object store (an emptyDir in memory), unless mounted or ``plasma-directory`` is set.
SHARED_MEMORY_MOUNT = "/dev/shm"
#: Ray 2.53 and later are probed on one HTTP endpoint of the dashboard agent.
UNIFIED_HEALTH_CHECK_SINCE = (2, 53, 0)
HEALTH_PATH = "/api/healthz"
DASHBOARD_AGENT_PORT = 52365
#: Probe timings the operator sets (liveness: delay 30 s, period 5 s, 120 failures; readiness:
#: delay 10 s, period 5 s, 10 failures; 2 s timeouts).
LIVENESS = {"initialDelaySeconds": 30, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 120}
READINESS = {"initialDelaySeconds": 10, "periodSeconds": 5, "timeoutSeconds": 2, "failureThreshold": 10}
#: The head's ports (constant.go): GCS, dashboard, Ray client, metrics.
GCS_PORT, DASHBOARD_PORT, CLIENT_PORT, METRICS_PORT = 6379, 8265, 10001, 8080


def _fields(where: str, obj: Any, known: frozenset[str], required: frozenset[str]) -> list[str]:
    if not isinstance(obj, Mapping):
        return [f"{where}: not an object"]
    problems = [f"{where}.{key}: not a field of KubeRay {KUBERAY_RELEASE}" for key in sorted(set(obj) - known)]
    problems += [f"{where}.{key}: required by KubeRay {KUBERAY_RELEASE}, missing" for key in sorted(required - set(obj))]
    for key, value in obj.items():
        if key in _INTEGERS and (not isinstance(value, int) or isinstance(value, bool)):
            problems.append(f"{where}.{key}: {value!r} is not an integer")
        if key in _BOOLEANS and not isinstance(value, bool):
            problems.append(f"{where}.{key}: {value!r} is not true or false")
        if key in _STRING_MAPS and (not isinstance(value, Mapping)
                                    or not all(isinstance(v, str) for v in value.values())):
            problems.append(f"{where}.{key}: every value must be a string (map[string]string)")
    return problems


def _template(where: str, template: Any) -> list[str]:
    containers = template.get("spec", {}).get("containers") if isinstance(template, Mapping) else None
    if not isinstance(containers, list) or not containers:
        return [f"{where}.spec.containers: the Ray container (the first) is missing"]
    return []


def _cluster_spec(where: str, spec: Any) -> list[str]:
    problems = _fields(where, spec, RAY_CLUSTER_SPEC, RAY_CLUSTER_REQUIRED)
    if not isinstance(spec, Mapping):
        return problems
    head = spec.get("headGroupSpec")
    problems += _fields(f"{where}.headGroupSpec", head, HEAD_GROUP, HEAD_GROUP_REQUIRED)
    if isinstance(head, Mapping):
        problems += _template(f"{where}.headGroupSpec.template", head.get("template"))
    for index, group in enumerate(spec.get("workerGroupSpecs") or []):
        at = f"{where}.workerGroupSpecs[{index}]"
        problems += _fields(at, group, WORKER_GROUP, WORKER_GROUP_REQUIRED)
        if isinstance(group, Mapping):
            problems += _template(f"{at}.template", group.get("template"))
            low, high = group.get("minReplicas"), group.get("maxReplicas")
            if isinstance(low, int) and isinstance(high, int) and low > high:
                problems.append(f"{at}: minReplicas {low} is above maxReplicas {high}")
    return problems


def check_kuberay(doc: Mapping[str, Any]) -> list[str]:
    """What in a ``RayCluster`` or ``RayJob`` KubeRay (at :data:`KUBERAY_RELEASE`) would not accept
    (a field it does not know, one it requires, a wrong type): empty when nothing. Other kinds: not checked."""
    kind = doc.get("kind")
    if kind not in ("RayCluster", "RayJob"):
        return []
    problems = [] if doc.get("apiVersion") == RAY_API_VERSION else [f"{kind}.apiVersion: not {RAY_API_VERSION}"]
    if kind == "RayCluster":
        return problems + _cluster_spec("RayCluster.spec", doc.get("spec"))
    spec = doc.get("spec")
    problems += _fields("RayJob.spec", spec, RAY_JOB_SPEC, frozenset())
    if isinstance(spec, Mapping):
        if "rayClusterSpec" in spec:
            problems += _cluster_spec("RayJob.spec.rayClusterSpec", spec["rayClusterSpec"])
        mode = spec.get("submissionMode")
        if mode is not None and mode not in SUBMISSION_MODES:
            problems.append(f"RayJob.spec.submissionMode: {mode!r} is not one of {', '.join(sorted(SUBMISSION_MODES))}")
        if "submitterPodTemplate" in spec:
            problems += _template("RayJob.spec.submitterPodTemplate", spec["submitterPodTemplate"])
    return problems
