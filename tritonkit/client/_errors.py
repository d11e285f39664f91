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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import grpc
from tritonclient.utils import InferenceServerException

from tritonkit._dial import header_refusal
from tritonkit.client._model import ModelMetadata
from tritonkit.client._retry import Deadline
from tritonkit.errors import (
    ClientError,
    ConnectionLostError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
    NotAuthorisedError,
    OverloadedError,
    QueueTimeoutError,
    ServerSideError,
    SharedMemoryRefusedError,
)
from tritonkit.triton_releases import CLIENT_SHM, CLIENT_SHM_FLAG, is_client_shm_refusal

__all__ = ["RPC_ERRORS", "FailedCall", "UnavailableCause", "shm_refusal", "status_of", "translate",
           "unavailable_cause"]

_BY_NAME = {code.name: code for code in grpc.StatusCode}

#: What a tritonclient call raises: its own exception (sync) or gRPC's (asyncio).
RPC_ERRORS = (InferenceServerException, grpc.RpcError)


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


def shm_refusal(exc: BaseException, *, url: str) -> SharedMemoryRefusedError | None:
    """The error to raise (or the line to say) when a failed system shared-memory registration is
    the server's policy refusal: Triton 2.68+ started without ``--allow-client-shm=true`` answers
    UNIMPLEMENTED with its own words (:data:`tritonkit.triton_releases.CLIENT_SHM`); ``None`` for
    any other failure. The status decides; the words tell this refusal from another UNIMPLEMENTED.
    """
    status = status_of(exc)
    if status is None or not is_client_shm_refusal(status.name, _details(exc)):
        return None
    return SharedMemoryRefusedError(
        f"server {url} refuses client shared-memory registration (Triton {CLIENT_SHM.since}+ started without "
        f"{CLIENT_SHM_FLAG}): {_details(exc)}",
        hint=f"start the server with {CLIENT_SHM_FLAG}, or send tensors in-band (shared_memory='auto' or 'never')")


@dataclass(slots=True)
class FailedCall:
    """What a client knows about one failed RPC: enough to explain it, once it has seen the channel.

    Built only when a call failed (never on the hot path). ``meta`` (the model's
    cached metadata, for its queue policy) and ``server_timeout_us`` are given for
    inference; ``started`` is when the attempt began (``time.monotonic()``).
    """

    exc: BaseException
    operation: str
    model: str | None
    version: str
    deadline: Deadline
    meta: ModelMetadata | None = None
    server_timeout_us: int | None = None
    started: float = 0.0
    #: The call's own headers (besides the client's).
    headers: Mapping[str, str] | None = None
    status: grpc.StatusCode | None = field(init=False)

    def __post_init__(self) -> None:
        self.status = status_of(self.exc)


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
    balanced: bool = False,
) -> UnavailableCause | None:
    """Resolve ``UNAVAILABLE`` from what the client saw; None when only a readiness probe can tell.

    ``connected``: the channel was still READY right after the error (the server
    itself answered). ``meta``: the model's cached metadata (its queue policy),
    None for calls that are not inference. ``elapsed_s``: how long the call took.
    On None the caller asks whether the model is ready (rate-limited, so an
    overloaded server is not sent one more call per refusal) and picks
    ``MODEL_NOT_READY`` or ``OVERLOADED``. ``balanced``: the channel spreads calls
    over several servers; then it never returns None (see below).
    """
    # A balanced channel stays READY while any of its servers is connected, so its state
    # cannot tell a broken connection from a refusal, and a readiness probe may reach
    # another server: only the model's queue policy can explain the status; otherwise
    # the safe reading, the request may have run.
    if not connected:
        return UnavailableCause.CONNECTION_LOST
    if meta is None:
        return UnavailableCause.CONNECTION_LOST if balanced else None
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
    return UnavailableCause.CONNECTION_LOST if balanced else None


# What each status (and each cause of UNAVAILABLE) becomes: (error class, message, hint).
# Message fields: {url}, {where} (the model, or the server), {operation}, {said} (the
# server's own words), {limit} (the deadline, for DEADLINE_EXCEEDED).
_Meaning = tuple[type[ClientError], str, str | None]
_BY_CAUSE: dict[UnavailableCause, _Meaning] = {
    UnavailableCause.CONNECTION_LOST: (
        ConnectionLostError,
        "the connection to Triton at {url} broke during {operation} on {where}: "
        "the server may have executed the request{said}",
        "check that the server is still running (its log says why it stopped); "
        "send the request again only if the model is idempotent "
        "(RetryPolicy(idempotent=True) does that)",
    ),
    UnavailableCause.MODEL_NOT_READY: (
        ModelNotReadyError,
        "{where} is not ready for {operation}{said}",
        "wait until the model is loaded (Client.wait_until_ready(model=...)) or load it",
    ),
    UnavailableCause.QUEUE_TIMEOUT: (
        QueueTimeoutError,
        "{where} dropped the {operation} request unexecuted: it waited in the model's queue "
        "past its queue timeout{said}",
        "send less load, raise the queue timeout (server_timeout_us, or the queue policy's "
        "default_timeout_microseconds), or add instances in the model's config",
    ),
    UnavailableCause.QUEUE_FULL: (
        OverloadedError,
        "{where} refused {operation} unexecuted: the model's queue is full{said}",
        "send less load, retry later with backoff (Client(retry=RetryPolicy())), "
        "or raise max_queue_size / add instances in the model's config",
    ),
    UnavailableCause.OVERLOADED: (
        OverloadedError,
        "{where} refused {operation}: the server is up but unavailable for it (overloaded?){said}",
        "send less load, retry later with backoff (Client(retry=RetryPolicy())), and read the server log",
    ),
}
_INVALID: _Meaning = (
    InvalidInputError,
    "{where} rejected the {operation} request as invalid{said}",
    "compare the request with the model's inputs (Client.model_metadata(model))",
)
_NOT_AUTHORISED: _Meaning = (
    NotAuthorisedError,
    "{operation} on {where} was refused: not authorised{said}",
    "pass the credentials / headers the endpoint expects (--header NAME=VALUE; Client(dial=Dial(headers=...)))",
)
_BY_STATUS: dict[grpc.StatusCode, _Meaning] = {
    grpc.StatusCode.DEADLINE_EXCEEDED: (
        DeadlineExceededError,
        "{operation} on {where} did not finish within the deadline{limit}{said}",
        "raise timeout_s, or make the model faster / less loaded",
    ),
    grpc.StatusCode.NOT_FOUND: (
        ModelNotReadyError,
        "{where} is unknown to the server or has no ready version{said}",
        "check the model name and version; list the repository with the server's index, "
        "or load the model (explicit model control)",
    ),
    grpc.StatusCode.INVALID_ARGUMENT: _INVALID,
    grpc.StatusCode.OUT_OF_RANGE: _INVALID,
    grpc.StatusCode.FAILED_PRECONDITION: _INVALID,
    # Triton reports a full queue as UNAVAILABLE; RESOURCE_EXHAUSTED comes from gRPC itself
    # when a request or a response is larger than the channel's max message size (measured
    # on grpcio 1.85 both ways: "Sent message larger than max", and after the model ran,
    # "Received message larger than max"). Not an overload: sending it again cannot help,
    # and for a response it would run the model again.
    grpc.StatusCode.RESOURCE_EXHAUSTED: (
        InvalidInputError,
        "{operation} on {where}: a message was larger than gRPC's max message size{said}",
        "for a large request, send its tensors through shared memory (a server on this machine) or "
        "split the batch; for a large response, ask for fewer outputs or a smaller batch; or raise "
        "Client(max_message_bytes=...) and the server's limit",
    ),
    grpc.StatusCode.CANCELLED: (
        ClientError,
        "{operation} on {where} was cancelled{said}",
        "the call was cancelled locally (client closed?) or by the server",
    ),
    grpc.StatusCode.UNAUTHENTICATED: _NOT_AUTHORISED,
    grpc.StatusCode.PERMISSION_DENIED: _NOT_AUTHORISED,
}
_NO_STATUS: _Meaning = (ClientError, "{operation} on {where} failed{said}", None)
# INTERNAL, UNKNOWN, UNIMPLEMENTED, ABORTED, DATA_LOSS, ALREADY_EXISTS
_SERVER_SIDE: _Meaning = (
    ServerSideError,
    "{where} failed while handling {operation}{said}",
    "read the server log for this model; the message above is the server's own",
)


def translate(
    exc: BaseException,
    *,
    url: str,
    model: str | None,
    operation: str,
    cause: UnavailableCause | None = None,
    timeout_s: float | None = None,
    headers: Iterable[str] = (),
) -> ClientError:
    """Map ``exc`` to the ``ClientError`` subclass its status code calls for.

    ``operation`` names what was attempted ("infer", "model metadata", ...);
    ``cause`` should be given for ``UNAVAILABLE`` (from :func:`unavailable_cause`;
    without it the safe reading applies: the connection broke, the request may have run);
    ``timeout_s`` is the caller's deadline, quoted in a timeout message. A restricted protocol's
    refusal (UNAVAILABLE too) is :class:`NotAuthorisedError`: whether the call sent (``headers``, names)
    the header it expects.
    """
    code = status_of(exc)
    details = _details(exc)
    refused = header_refusal(details, url, headers, model=model) if code is grpc.StatusCode.UNAVAILABLE else None
    if refused is not None:
        return refused
    if code is grpc.StatusCode.UNAVAILABLE:
        meaning = _BY_CAUSE[cause or UnavailableCause.CONNECTION_LOST]
    elif code is None:
        meaning = _NO_STATUS
    else:
        meaning = _BY_STATUS.get(code, _SERVER_SIDE)
    error_class, message, hint = meaning
    said = f" (gRPC {code.name}: {details})" if code is not None else (f" ({details})" if details else "")
    text = message.format(
        url=url,
        where=f"model '{model}' at {url}" if model else f"server {url}",
        operation=operation,
        said=said,
        limit=f" of {timeout_s:g} s" if timeout_s is not None else "",
    )
    return error_class(text, model=model, hint=hint)
