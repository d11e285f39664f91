"""Before any load: is the server reachable, and is the model there, ready and able to take the batch?"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from tritonclient.grpc import model_config_pb2 as mc

from tritonkit._dial import diagnose
from tritonkit.errors import ConfigError, ConnectError, ModelNotReadyError, TritonKitError
from tritonkit.perf.measure.result import ServedInstanceGroup, ServedModelConfig
from tritonkit.perf.measure.spec import PerfSpec
from tritonkit.repository.pbtxt import enum_name
from tritonkit.server.admin import ServerAdmin

__all__ = ["check_target", "served_model_config", "server_answers"]


def check_target(spec: PerfSpec, *, timeout_s: float = 5.0) -> dict[str, Any]:
    """Before launching: is the server reachable, and is the model there and ready?

    Raises ``ConnectError`` (nothing listens at ``spec.url``) or ``ModelNotReadyError`` (unknown or
    not ready, with the models the server does serve), both naming the URL. Returns the model's
    basic facts (``max_batch_size``, input names) and refuses a batch size above the model's.
    """
    version = spec.model_version or ""
    with _admin(spec, timeout_s) as admin:
        if not admin.is_live():  # a TLS mismatch says which it is (tritonkit._dial.diagnose)
            raise diagnose(admin.dial, spec.url, spec.url) or ConnectError(
                f"cannot reach Triton over {_protocol(spec)} at {spec.url}: nothing answered",
                model=spec.model,
                hint=f"start the server, or pass its {_protocol(spec)} host:port with --url",
            )
        if not admin.model_ready(spec.model, version):
            known = sorted({s.name for s in admin.index() if s.ready})
            raise ModelNotReadyError(
                f"model '{spec.model}' is not ready or unknown at {spec.url} (it serves: {', '.join(known) or 'nothing'})",
                model=spec.model, hint="check the model name, or wait until it has loaded (explicit model control)",
            )
        config = admin.model_config(spec.model, version)
    max_batch = int(config.max_batch_size)
    if spec.batch_size > 1 and spec.batch_size > max_batch:
        raise ConfigError(
            f"batch size {spec.batch_size} exceeds model '{spec.model}' max_batch_size {max_batch}",
            hint=f"use a batch size of at most {max(max_batch, 1)}",
        )
    return {
        "max_batch_size": max_batch,
        "inputs": [t.name for t in config.input],
        "decoupled": bool(config.model_transaction_policy.decoupled),
    }


def _admin(spec: PerfSpec, timeout_s: float) -> contextlib.closing[ServerAdmin]:
    return contextlib.closing(
        ServerAdmin(spec.url, protocol="grpc" if spec.protocol == "grpc" else "http", timeout_s=timeout_s))


def _protocol(spec: PerfSpec) -> str:
    return "gRPC" if spec.protocol == "grpc" else "HTTP"


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
    with _admin(spec, timeout_s) as admin:
        config = admin.model_config(spec.model, spec.model_version or "")
    batching = config.HasField("dynamic_batching")
    return ServedModelConfig(
        max_batch_size=int(config.max_batch_size),
        dynamic_batching=batching,
        max_queue_delay_us=int(config.dynamic_batching.max_queue_delay_microseconds) if batching else None,
        preferred_batch_sizes=[int(b) for b in config.dynamic_batching.preferred_batch_size],
        instance_groups=[
            ServedInstanceGroup(count=int(g.count), kind=enum_name(mc.ModelInstanceGroup.Kind, g.kind, field="instance_group.kind"),
                                gpus=[int(i) for i in g.gpus])
            for g in config.instance_group
        ],
        source=f"the server at {spec.url} ({_protocol(spec)} model config)",
    )
