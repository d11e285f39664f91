"""The one place where gRPC / tritonclient failures become ``tritonkit.errors``.

Every branch is on the gRPC status *code* and on what the client observed
(its channel's state, the model's queue policy, the time the call took), never
on message text. The server's own words are kept in the message (people read
them) and the original exception is chained by the caller
(``raise translate(...) from exc``).

``UNAVAILABLE`` means several things, so the caller works out which before
translating (see :func:`unavailable_cause`); all were measured on tritonserver
2.51:

* the connection broke while the call was in flight (the server was killed,
  the network path died): the channel has left READY by the time the error
  arrives. The server may have executed the request;
* the model's queue is full (``max_queue_size`` reached): answered at once by
  a server whose connection stays READY;
* the request waited in the queue past its queue timeout (``REJECT`` policy):
  answered after that timeout, connection READY;
* the model is not ready: answered by a live server; only a (rate-limited)
  readiness probe tells this from the above when the config explains neither.

A request that never left the client (refused, unknown host, no connection in
time) fails before it is sent, in the client's connect step, as
``ConnectError``; it never reaches this module as ``UNAVAILABLE``.
"""

from __future__ import annotations

import enum

import grpc
from tritonclient.utils import InferenceServerException

from tritonkit.client._model import ModelMetadata
from tritonkit.errors import (
    ClientError,
    ConnectionLostError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
    OverloadedError,
    QueueTimeoutError,
    ServerSideError,
)

__all__ = ["UnavailableCause", "status_of", "translate", "unavailable_cause"]

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
    """What an ``UNAVAILABLE`` status turned out to mean."""

    #: The connection broke mid-call: the request may have executed.
    CONNECTION_LOST = "connection_lost"
    #: The model's queue was full: refused unexecuted.
    QUEUE_FULL = "queue_full"
    #: The request timed out in the model's queue: dropped unexecuted.
    QUEUE_TIMEOUT = "queue_timeout"
    #: A live server said the model is not ready.
    MODEL_NOT_READY = "model_not_ready"
    #: A live server refused the request for a reason the model's config does not explain.
    OVERLOADED = "overloaded"


def unavailable_cause(
    *,
    connected: bool,
    meta: ModelMetadata | None,
    server_timeout_us: int | None,
    elapsed_s: float,
) -> UnavailableCause | None:
    """Resolve ``UNAVAILABLE`` from what the client saw; None when only a readiness probe can tell.

    ``connected``: the channel was still READY right after the error (the server
    itself answered). ``meta``: the model's cached metadata (its queue policy),
    None for calls that are not inference. ``elapsed_s``: how long the call took.
    On None the caller asks whether the model is ready (rate-limited, so an
    overloaded server is not sent one more call per refusal) and picks
    ``MODEL_NOT_READY`` or ``OVERLOADED``.
    """
    if not connected:
        return UnavailableCause.CONNECTION_LOST
    if meta is None:
        return None
    timeouts = [t for t in (meta.queue_timeout_us, server_timeout_us or 0) if t > 0]
    may_time_out = meta.queue_timeout_rejects and bool(timeouts)
    may_be_full = meta.max_queue_size > 0
    if may_time_out and may_be_full:
        # A full queue answers at once; a timeout only after the shorter timeout.
        return (
            UnavailableCause.QUEUE_TIMEOUT
            if elapsed_s * 1e6 >= 0.5 * min(timeouts)
            else UnavailableCause.QUEUE_FULL
        )
    if may_time_out:
        return UnavailableCause.QUEUE_TIMEOUT
    if may_be_full:
        return UnavailableCause.QUEUE_FULL
    return None


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
    ``cause`` should be given for ``UNAVAILABLE`` (from :func:`unavailable_cause`;
    without it the safe reading applies: the connection broke, the request may have run);
    ``timeout_s`` is the caller's deadline, quoted in a timeout message.
    """
    code = status_of(exc)
    details = _details(exc)
    where = f"model '{model}' at {url}" if model else f"server {url}"
    said = f" (gRPC {code.name}: {details})" if code is not None else (f" ({details})" if details else "")
    S = grpc.StatusCode

    if code is S.UNAVAILABLE:
        if cause is None or cause is UnavailableCause.CONNECTION_LOST:
            return ConnectionLostError(
                f"the connection to Triton at {url} broke during {operation} on {where}: "
                f"the server may have executed the request{said}",
                model=model,
                hint="check that the server is still running (its log says why it stopped); "
                "send the request again only if the model is idempotent "
                "(RetryPolicy(idempotent=True) does that)",
            )
        if cause is UnavailableCause.MODEL_NOT_READY:
            return ModelNotReadyError(
                f"{where} is not ready for {operation}{said}",
                model=model,
                hint="wait until the model is loaded (Client.wait_until_ready(model=...)) or load it",
            )
        if cause is UnavailableCause.QUEUE_TIMEOUT:
            return QueueTimeoutError(
                f"{where} dropped the {operation} request unexecuted: it waited in the model's queue "
                f"past its queue timeout{said}",
                model=model,
                hint="send less load, raise the queue timeout (server_timeout_us, or the queue policy's "
                "default_timeout_microseconds), or add instances in the model's config",
            )
        if cause is UnavailableCause.QUEUE_FULL:
            return OverloadedError(
                f"{where} refused {operation} unexecuted: the model's queue is full{said}",
                model=model,
                hint="send less load, retry later with backoff (Client(retry=RetryPolicy())), "
                "or raise max_queue_size / add instances in the model's config",
            )
        return OverloadedError(
            f"{where} refused {operation}: the server is up but unavailable for it (overloaded?){said}",
            model=model,
            hint="send less load, retry later with backoff (Client(retry=RetryPolicy())), "
            "and read the server log",
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
            hint="compare the request with the model's inputs (Client.model_metadata(model))",
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
