"""The pod KServe makes of an InferenceService's predictor, for checking it with Kubernetes tools.

KServe (v1beta1) embeds a PodSpec in ``spec.predictor`` (``securityContext``, ``volumes``,
``automountServiceAccountToken``…) and a Container in ``spec.predictor.model`` (``args``,
``resources``, ``securityContext``, ``volumeMounts``, ``env``…); its controller merges them with
the ServingRuntime's container (image, command, ports, probes). Neither kubernetes-validate nor
checkov knows the InferenceService kind, so the tests rebuild that Pod and check it instead.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KSERVE_ONLY_MODEL_FIELDS", "KSERVE_ONLY_PREDICTOR_FIELDS", "predictor_pod"]

#: ModelSpec fields that are KServe's own, not Container fields.
KSERVE_ONLY_MODEL_FIELDS = {"modelFormat", "runtime", "storageUri", "protocolVersion"}
#: PredictorSpec fields that are KServe's own, not PodSpec fields.
KSERVE_ONLY_PREDICTOR_FIELDS = {"minReplicas", "maxReplicas", "model", "autoScaling", "scaleTarget", "scaleMetric"}


def predictor_pod(isvc: dict[str, Any], image: str) -> dict[str, Any]:
    """A Pod with the predictor's PodSpec fields and the model's Container fields (plus what the
    runtime adds: the image and Triton's probes, as kserve-tritonserver sets them)."""
    predictor = isvc["spec"]["predictor"]
    model = predictor["model"]
    container = {"name": "kserve-container", "image": image, "imagePullPolicy": "Always",
                 **{k: v for k, v in model.items() if k not in KSERVE_ONLY_MODEL_FIELDS}}
    # The runtime's probes (KServe's ServingRuntime for Triton checks the HTTP health endpoint).
    container.setdefault("readinessProbe", {"httpGet": {"path": "/v2/health/ready", "port": 8080}})
    container.setdefault("livenessProbe", {"httpGet": {"path": "/v2/health/live", "port": 8080}})
    spec = {k: v for k, v in predictor.items() if k not in KSERVE_ONLY_PREDICTOR_FIELDS}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": f"{isvc['metadata']['name']}-predictor",
                         "namespace": isvc["metadata"]["namespace"],
                         "labels": {"serving.kserve.io/inferenceservice": isvc["metadata"]["name"]}},
            "spec": {**spec, "containers": [container]}}
