"""Before any load: is the server reachable, and is the model there, ready and able to take the batch?"""

from __future__ import annotations

import time
from typing import Any

from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError, TritonKitError
from tritonkit.perf.measure.result import ServedInstanceGroup, ServedModelConfig
from tritonkit.perf.measure.spec import PerfSpec

__all__ = ["check_target", "served_model_config", "server_answers"]


def check_target(spec: PerfSpec, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """Before launching: is the server reachable, and is the model there and ready?

    Raises ``ConnectError`` (nothing listens at ``spec.url``) or ``ModelNotReadyError`` (unknown or
    not ready, with the models the server does serve), both naming the URL. Returns the model's
    basic facts (``max_batch_size``, input names) and refuses a batch size above the model's.
    """
    facts = _check_grpc(spec, timeout_s) if spec.protocol == "grpc" else _check_http(spec, timeout_s)
    max_batch = int(facts.get("max_batch_size", 0))
    if spec.batch_size > 1 and spec.batch_size > max_batch:
        raise ConfigError(
            f"batch size {spec.batch_size} exceeds model '{spec.model}' max_batch_size {max_batch}",
            hint=f"use a batch size of at most {max(max_batch, 1)}",
        )
    return facts


def _check_grpc(spec: PerfSpec, timeout_s: float) -> dict[str, Any]:
    # Lazy: the client pulls in grpc; install / parse users need not pay for it.
    from tritonkit.client import Client

    with Client(spec.url, timeouts=timeout_s) as client:
        if not client.is_live(timeout_s=timeout_s):
            raise ConnectError(
                f"cannot reach Triton over gRPC at {spec.url}: nothing answered",
                model=spec.model,
                hint="start the server, or pass its gRPC host:port with --url",
            )
        metadata = client.model_metadata(spec.model, version=spec.model_version or "")
        if not client.is_ready(model=spec.model, version=spec.model_version or "", timeout_s=timeout_s):
            raise ModelNotReadyError(
                f"model '{spec.model}' at {spec.url} is not ready", model=spec.model,
                hint="wait until it has loaded, or load it (explicit model control)",
            )
    return {
        "max_batch_size": metadata.max_batch_size,
        "inputs": [t.name for t in metadata.inputs],
        "decoupled": metadata.decoupled,
    }


def _check_http(spec: PerfSpec, timeout_s: float) -> dict[str, Any]:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(spec.url, connection_timeout=timeout_s, network_timeout=timeout_s)
    try:
        try:
            client.is_server_live()
        except (OSError, InferenceServerException) as exc:
            raise ConnectError(
                f"cannot reach Triton over HTTP at {spec.url}: {exc}", model=spec.model,
                hint="start the server, or pass its HTTP host:port with --url",
            ) from exc
        try:
            ready = client.is_model_ready(spec.model, spec.model_version or "")
            config = client.get_model_config(spec.model, spec.model_version or "") if ready else {}
        except InferenceServerException as exc:
            raise ModelNotReadyError(f"model '{spec.model}' at {spec.url}: {exc}", model=spec.model) from exc
        if not ready:
            known = sorted(m.get("name", "") for m in client.get_model_repository_index())
            raise ModelNotReadyError(
                f"model '{spec.model}' is not ready or unknown at {spec.url} (it serves: {', '.join(known) or 'nothing'})",
                model=spec.model, hint="check the model name, or wait until it has loaded",
            )
    finally:
        client.close()
    return {
        "max_batch_size": int(config.get("max_batch_size", 0)),
        "inputs": [i.get("name") for i in config.get("input", [])],
        "decoupled": bool(config.get("model_transaction_policy", {}).get("decoupled", False)),
    }


def server_answers(spec: PerfSpec, *, attempts: int = 3, timeout_s: float = 5.0, pause_s: float = 1.0) -> bool:
    """Whether the server at ``spec.url`` still answers and still serves the model ready.

    Asked after a step failed: failures while the server is gone say nothing about the load.
    An overloaded server can miss one probe, so it counts as gone only after ``attempts``
    failed probes in a row (a dead one refuses at once, so that costs about ``pause_s`` each).
    """
    for attempt in range(attempts):
        try:
            check_target(spec, timeout_s=timeout_s)
        except ConfigError:
            return True  # it answered; what it said is not this question's business
        except (TritonKitError, OSError):  # refused, reset, timed out, model gone: no answer
            if attempt + 1 < attempts:
                time.sleep(pause_s)
            continue
        return True
    return False


def served_model_config(spec: PerfSpec, *, timeout_s: float = 5.0) -> ServedModelConfig:
    """The model's config as the server loaded it, asked over ``spec.protocol``.

    The loaded config, not the file: the server fills in what the file left out (instance
    groups and their GPUs, a default batcher). Raises ``ConnectError`` / ``ModelNotReadyError``
    when the server or the model does not answer.
    """
    config = _config_grpc(spec, timeout_s) if spec.protocol == "grpc" else _config_http(spec, timeout_s)
    batcher = config.get("dynamic_batching")
    return ServedModelConfig(
        max_batch_size=int(config.get("max_batch_size", 0)),
        dynamic_batching=batcher is not None,
        max_queue_delay_us=int(batcher.get("max_queue_delay_microseconds", 0)) if batcher is not None else None,
        # JSON renders protobuf's 64-bit integers as text over gRPC, as numbers over HTTP: int() takes both.
        preferred_batch_sizes=[int(b) for b in (batcher or {}).get("preferred_batch_size", [])],
        instance_groups=[
            ServedInstanceGroup(count=int(g.get("count", 1)), kind=str(g.get("kind", "KIND_AUTO")),
                                gpus=[int(i) for i in g.get("gpus", [])])
            for g in config.get("instance_group", [])
        ],
        source=f"the server at {spec.url} ({'gRPC' if spec.protocol == 'grpc' else 'HTTP'} model config)",
    )


def _config_grpc(spec: PerfSpec, timeout_s: float) -> dict[str, Any]:
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException

    client = grpcclient.InferenceServerClient(spec.url)
    try:
        answer = client.get_model_config(spec.model, spec.model_version or "", as_json=True, client_timeout=timeout_s)
    except InferenceServerException as exc:
        raise ModelNotReadyError(f"model '{spec.model}' at {spec.url}: no config: {exc}", model=spec.model,
                                 hint="check the model name, or wait until it has loaded") from exc
    finally:
        client.close()
    config = answer.get("config", {}) if isinstance(answer, dict) else {}
    return config if isinstance(config, dict) else {}


def _config_http(spec: PerfSpec, timeout_s: float) -> dict[str, Any]:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(spec.url, connection_timeout=timeout_s, network_timeout=timeout_s)
    try:
        config = client.get_model_config(spec.model, spec.model_version or "")
    except (OSError, InferenceServerException) as exc:
        raise ModelNotReadyError(f"model '{spec.model}' at {spec.url}: no config: {exc}", model=spec.model,
                                 hint="check the model name, or wait until it has loaded") from exc
    finally:
        client.close()
    return config if isinstance(config, dict) else {}
