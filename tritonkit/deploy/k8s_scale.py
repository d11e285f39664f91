"""Scaling out on the signals the alert rules watch: the HPA, its prometheus-adapter rules, KServe's KEDA metrics.

The alert rules (``tritonkit deploy alerts``) watch three sustained signals — GPU utilisation
above 85 %, p99 above the SLA, the queue above half the concurrency limit — and advise scaling
out when two hold. The autoscaler acts on the same signals, earlier (the planner's rule of
thumb: at 60–70 % of a limit, because a replica takes minutes to arrive):

* **pending requests per pod** at 65 % of the queue alert's depth (half the pod's concurrency limit);
* **mean queue time per request** (with an SLA p99) at 65 % of half the p99 bound: queueing is the
  part of latency that more replicas remove, and the p99 alert fires once it has eaten the budget;
* **GPU utilisation** at 65 % (with GPUs);
* **the two-of-three decision itself**: the alert rules' ``tritonkit:scale_out_signals`` (how many
  signal alerts fire; 0 when none) as an external metric with target 1.5, so two firing signals
  ask for a third more replicas and three for twice as many.

The HPA takes the largest replica count any metric asks for; scale-up is limited to doubling
(or two pods) a minute, so a lasting alert does not run the fleet to its maximum before the new
pods have loaded; scale-down waits five minutes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tritonkit.deploy.alerts import SCALE_OUT_SIGNALS_RECORD
from tritonkit.deploy.k8s_options import K8sOptions, object_meta
from tritonkit.triton_metrics import GPU_UTILIZATION, PENDING_REQUESTS, QUEUE_DURATION_US, REQUEST_SUCCESS

__all__ = [
    "QUEUE_TIME_METRIC",
    "SIGNALS_METRIC",
    "SIGNALS_TARGET",
    "ScaleTargets",
    "adapter_rules",
    "hpa",
    "kserve_autoscaling",
    "pending_query",
    "queue_time_ms_query",
]

#: The pod metric prometheus-adapter serves for mean queue time per request, in ms.
QUEUE_TIME_METRIC = "tritonkit_queue_time_ms"
#: The external metric for the alert rules' count of firing signals (``:`` is not allowed in the name).
SIGNALS_METRIC = SCALE_OUT_SIGNALS_RECORD.replace(":", "_")
#: Between one signal (no scaling) and two (scale out by a third).
SIGNALS_TARGET = 1.5
#: ``rate()`` window of the adapter's queries (at least four scrape intervals of 30 s).
RATE_WINDOW = "2m"


@dataclass(frozen=True)
class ScaleTargets:
    """The per-pod targets, computed once and shared by the HPA, the adapter and KServe."""

    pending: int
    #: None without an SLA p99 bound.
    queue_time_ms: float | None
    #: None without GPUs.
    gpu_utilisation: float | None

    def describe(self) -> str:
        """One line for the notes."""
        parts = [f"{self.pending} pending requests per pod"]
        if self.queue_time_ms is not None:
            parts.append(f"{self.queue_time_ms:g} ms mean queue time")
        if self.gpu_utilisation is not None:
            parts.append(f"{self.gpu_utilisation:.0%} GPU utilisation")
        parts.append(f"{SIGNALS_TARGET:g} firing signal alerts (two of three → scale out)")
        return ", ".join(parts)


def _milli(value: float) -> str:
    return f"{round(value * 1000)}m"


def _pods_metric(name: str, average: str) -> dict[str, Any]:
    return {"type": "Pods", "pods": {"metric": {"name": name}, "target": {"type": "AverageValue", "averageValue": average}}}


def hpa(o: K8sOptions, labels: dict[str, str], targets: ScaleTargets) -> dict[str, Any]:
    """The ``autoscaling/v2`` HorizontalPodAutoscaler of the Deployment."""
    metrics = [_pods_metric(PENDING_REQUESTS.name, str(targets.pending))]
    if targets.queue_time_ms is not None:
        metrics.append(_pods_metric(QUEUE_TIME_METRIC, _milli(targets.queue_time_ms)))
    if targets.gpu_utilisation is not None:
        # nv_gpu_utilization is a fraction: 650m is 65 %.
        metrics.append(_pods_metric(GPU_UTILIZATION.name, _milli(targets.gpu_utilisation)))
    metrics.append({"type": "External", "external": {"metric": {"name": SIGNALS_METRIC},
                                                     "target": {"type": "Value", "value": _milli(SIGNALS_TARGET)}}})
    return {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": object_meta(o.name, o.namespace, labels),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": o.name},
            "minReplicas": o.min_replicas, "maxReplicas": o.max_replicas, "metrics": metrics,
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 60},
                                         {"type": "Pods", "value": 2, "periodSeconds": 60}]},
                # Scale in slowly: a burst that ends should not drop replicas that took minutes to load.
                "scaleDown": {"stabilizationWindowSeconds": 300},
            },
        },
    }


def queue_time_ms_query(matchers: str, group_by: str) -> str:
    """Mean queue time per request, ms, over ``RATE_WINDOW`` (0 without traffic)."""
    return (f"sum(rate({QUEUE_DURATION_US.name}{{{matchers}}}[{RATE_WINDOW}])) by ({group_by}) / "
            f"clamp_min(sum(rate({REQUEST_SUCCESS.name}{{{matchers}}}[{RATE_WINDOW}])) by ({group_by}), 0.001) / 1000")


def pending_query(matchers: str, group_by: str) -> str:
    """Pending requests on a pod, every model's queue together (the pod is what scales)."""
    return f"sum({PENDING_REQUESTS.name}{{{matchers}}}) by ({group_by})"


def adapter_rules(targets: ScaleTargets) -> dict[str, Any]:
    """prometheus-adapter Helm values (``rules.custom`` and ``rules.external``) serving the HPA's metrics."""
    resources = {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}}

    def pod_rule(series: str, served: str, query: str) -> dict[str, Any]:
        return {"seriesQuery": f'{series}{{namespace!="",pod!=""}}', "resources": resources,
                "name": {"matches": f"^{series}$", "as": served}, "metricsQuery": query}

    custom = [pod_rule(PENDING_REQUESTS.name, PENDING_REQUESTS.name, pending_query("<<.LabelMatchers>>", "<<.GroupBy>>"))]
    if targets.queue_time_ms is not None:
        custom.append(pod_rule(QUEUE_DURATION_US.name, QUEUE_TIME_METRIC,
                               queue_time_ms_query("<<.LabelMatchers>>", "<<.GroupBy>>")))
    if targets.gpu_utilisation is not None:
        custom.append(pod_rule(GPU_UTILIZATION.name, GPU_UTILIZATION.name,
                               "avg(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)"))
    external = [{
        "seriesQuery": SCALE_OUT_SIGNALS_RECORD,
        # The record is per scrape job, not per namespace.
        "resources": {"namespaced": False},
        "name": {"matches": f"^{SCALE_OUT_SIGNALS_RECORD}$", "as": SIGNALS_METRIC},
        "metricsQuery": "max(<<.Series>>{<<.LabelMatchers>>})",
    }]
    return {"rules": {"custom": custom, "external": external}}


def kserve_autoscaling(o: K8sOptions, targets: ScaleTargets) -> dict[str, Any]:
    """``spec.predictor.autoScaling`` of an InferenceService (KServe's KEDA integration): the same
    signals and targets as the HPA, as Prometheus queries over the predictor's pods."""
    pods = f'namespace="{o.namespace}",pod=~"{o.name}-predictor-.*"'

    def external(query: str, target: dict[str, str]) -> dict[str, Any]:
        return {"type": "External", "external": {
            "metric": {"backend": "prometheus", "serverAddress": o.prometheus_url, "query": query},
            "target": target}}

    # AverageValue: KEDA divides the sum over the pods by the replica count.
    metrics = [external(pending_query(pods, "namespace"),
                        {"type": "AverageValue", "averageValue": str(targets.pending)})]
    if targets.queue_time_ms is not None:
        metrics.append(external(queue_time_ms_query(pods, "namespace"),
                                {"type": "Value", "value": f"{targets.queue_time_ms:g}"}))
    if targets.gpu_utilisation is not None:
        metrics.append(external(f"avg({GPU_UTILIZATION.name}{{{pods}}})",
                                {"type": "Value", "value": f"{targets.gpu_utilisation:g}"}))
    metrics.append(external(f"max({SCALE_OUT_SIGNALS_RECORD}) or vector(0)",
                            {"type": "Value", "value": f"{SIGNALS_TARGET:g}"}))
    return {"metrics": metrics}
