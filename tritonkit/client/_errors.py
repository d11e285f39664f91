"""The one place where gRPC / tritonclient failures become ``tritonkit.errors``.

Every branch is on the gRPC status *code*, never on message text. The server's
own words are kept in the message (people read them) and the original
exception is chained by the caller (``raise translate(...) from exc``).

``UNAVAILABLE`` is the one code that means several things, so the caller
resolves it with a structural probe before translating (see
:func:`cause_from_probe`):

* nothing accepted the connection (gRPC's own "failed to connect", or the
  server died mid-call): the probe cannot reach the server either;
* the model's queue is full: measured on tritonserver 2.51, a request refused
  by a ``REJECT`` queue policy (``max_queue_size`` reached) comes back as
  ``UNAVAILABLE`` from a server that is otherwise up, so the probe finds the
  model ready;
* the model went away while the server stayed up: the probe finds it not ready.
"""

from __future__ import annotations

import enum

import grpc
from tritonclient.utils import InferenceServerException

from tritonkit.errors import (
    ClientError,
    ConnectError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
    OverloadedError,
    ServerSideError,
)

__all__ = ["UnavailableCause", "cause_from_probe", "status_of", "translate"]

_BY_NAME = {code.name: code for code in grpc.StatusCode}


def status_of(exc: BaseException) -> grpc.StatusCode | None:
    """The gRPC status code carried by ``exc``, or ``None`` when it has none.

    tritonclient's sync and asyncio unary calls raise ``InferenceServerException``
    whose ``status()`` is the code's ``str()`` (``"StatusCode.UNAVAILABLE"``); its
    asyncio stream raises ``grpc.aio.AioRpcError``; errors tritonclient raises on
    its own, and in-band stream errors, carry no code at all.
    """
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "code"):
        code = exc.code()
        return code if isinstance(code, grpc.StatusCode) else None
    if isinstance(exc, InferenceServerException):
        status = exc.status()
        if not status:
            return None
        return _BY_NAME.get(str(status).rsplit(".", 1)[-1])
    return None


def _details(exc: BaseException) -> str:
    if isinstance(exc, InferenceServerException):
        return str(exc.message() or "").strip()
    if isinstance(exc, grpc.RpcError) and hasattr(exc, "details"):
        return str(exc.details() or "").strip()
    return str(exc).strip()


class UnavailableCause(enum.Enum):
    """What an ``UNAVAILABLE`` status turned out to mean, after probing."""

    UNREACHABLE = "unreachable"
    OVERLOADED = "overloaded"
    MODEL_NOT_READY = "model_not_ready"


def cause_from_probe(*, reachable: bool, model_ready: bool | None) -> UnavailableCause:
    """Resolve ``UNAVAILABLE`` from a follow-up health probe.

    ``reachable`` is False when the probe itself could not connect.
    ``model_ready`` is the model's readiness (None when the probe asked about the
    server only, or could not tell in time: a server too busy to answer a
    readiness call in time is overloaded).
    """
    if not reachable:
        return UnavailableCause.UNREACHABLE
    if model_ready is False:
        return UnavailableCause.MODEL_NOT_READY
    return UnavailableCause.OVERLOADED


def translate(
    exc: BaseException,
    *,
    url: str,
    model: str | None,
    operation: str,
    cause: UnavailableCause | None = None,
    timeout_s: float | None = None,
) -> ClientError:
    """Map ``exc`` to the ``ClientError`` subclass its status code calls for.

    ``operation`` names what was attempted ("infer", "model metadata", ...);
    ``cause`` must be given for ``UNAVAILABLE`` (from :func:`cause_from_probe`);
    ``timeout_s`` is the caller's deadline, quoted in a timeout message.
    """
    code = status_of(exc)
    details = _details(exc)
    where = f"model '{model}' at {url}" if model else f"server {url}"
    said = f" (gRPC {code.name}: {details})" if code is not None else (f" ({details})" if details else "")
    S = grpc.StatusCode

    if code is S.UNAVAILABLE:
        if cause is UnavailableCause.UNREACHABLE or cause is None:
            return ConnectError(
                f"cannot connect to Triton at {url} for {operation}: nothing accepted the connection{said}",
                model=model,
                hint="start the server, or check the host:port given as --url / Client(url)",
            )
        if cause is UnavailableCause.MODEL_NOT_READY:
            return ModelNotReadyError(
                f"{where} is not ready for {operation}{said}",
                model=model,
                hint="wait until the model is loaded (Client.wait_until_ready(model=...)) or load it",
            )
        return OverloadedError(
            f"{where} refused {operation}: the server is overloaded (queue full){said}",
            model=model,
            hint="send less load, retry later with backoff (Client(retry=RetryPolicy())), "
            "or raise max_queue_size / add instances in the model's config",
        )
    if code is S.DEADLINE_EXCEEDED:
        limit = f" of {timeout_s:g} s" if timeout_s is not None else ""
        return DeadlineExceededError(
            f"{operation} on {where} did not finish within the deadline{limit}{said}",
            model=model,
            hint="raise timeout_s, or make the model faster / less loaded",
        )
    if code is S.NOT_FOUND:
        return ModelNotReadyError(
            f"{where} is unknown to the server or has no ready version{said}",
            model=model,
            hint="check the model name and version; list the repository with the server's index, "
            "or load the model (explicit model control)",
        )
    if code in (S.INVALID_ARGUMENT, S.OUT_OF_RANGE, S.FAILED_PRECONDITION):
        return InvalidInputError(
            f"{where} rejected the {operation} request as invalid{said}",
            model=model,
            hint="compare the request with the model's inputs (Client.model_spec(model))",
        )
    if code is S.RESOURCE_EXHAUSTED:
        return OverloadedError(
            f"{where} refused {operation}: a resource is exhausted{said}",
            model=model,
            hint="send less load or smaller requests; large tensors can go through shared memory",
        )
    if code is S.CANCELLED:
        return ClientError(
            f"{operation} on {where} was cancelled{said}",
            model=model,
            hint="the call was cancelled locally (client closed?) or by the server",
        )
    if code in (S.UNAUTHENTICATED, S.PERMISSION_DENIED):
        return ClientError(
            f"{operation} on {where} was refused: not authorised{said}",
            model=model,
            hint="pass the credentials / headers the endpoint expects",
        )
    if code is None:
        return ClientError(f"{operation} on {where} failed{said}", model=model)
    # INTERNAL, UNKNOWN, UNIMPLEMENTED, ABORTED, DATA_LOSS, ALREADY_EXISTS
    return ServerSideError(
        f"{where} failed while handling {operation}{said}",
        model=model,
        hint="read the server log for this model; the message above is the server's own",
    )
