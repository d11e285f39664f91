"""``Client``: blocking I/O over ``tritonclient.grpc``; everything else is shared."""

from __future__ import annotations

import threading
import time
import weakref
from typing import Any, TypeVar

import tritonclient.grpc as grpcclient

from tritonkit._context import ContextManaged
from tritonkit.client._base import InferArgs
from tritonkit.client._channel import READY, cygrpc_channel, sync_connect, sync_still_connected
from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._flow import Connect, Flows, Metadata, Rpc, Sleep, Step, Steps, StillConnected, advance
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array
from tritonkit.client._response import decode_response
from tritonkit.client._retry import Deadline
from tritonkit.client._settings import SHM_CLOSE_WAIT_S
from tritonkit.client._streaming import StreamRequest
from tritonkit.client._sync_stream import ResponseStream
from tritonkit.errors import ClientError

__all__ = ["Client", "ResponseStream"]

T = TypeVar("T")


class Client(ContextManaged, Flows[dict[str, Array], ModelMetadata, bool, None, ResponseStream]):
    """A blocking Triton gRPC client for services.

    Example::

        with Client("127.0.0.1:8001", timeouts=Timeouts(call_s=5.0)) as client:
            outputs = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

    Every limit is one ``Timeouts`` value (``timeouts=5.0`` is short for
    ``Timeouts(call_s=5.0)``). Every call has a deadline (``Timeouts.call_s``,
    default 60 s; ``None`` for none; ``timeout_s=`` per call) that bounds
    everything it does: fetching the model's metadata the first time, retries,
    shared memory registration. Requests are checked against the
    model's metadata and config before anything is sent (and that metadata is
    fetched again when a request fails the check, or the server says the model
    changed). A request is sent only once a connection is up (``Timeouts.connect_s``),
    so ``ConnectError`` always means "never sent" and ``ConnectionLostError``
    "may have executed". Failures raise the ``ClientError`` tree
    (``tritonkit.errors``). Retries are off unless ``retry=RetryPolicy(...)`` is
    given. Keepalive pings and a stream idle timeout notice a server that froze.
    ``url`` is one server (``host:port``) or a balanced target (``dns:///name:port``,
    ``ipv4:a:p,b:p``: calls go round-robin over every address). Requests larger
    than ``max_message_bytes`` are refused before sending. ``dial``: TLS (mutual too) and headers every
    call carries (:class:`~tritonkit.client.Dial`; default: the one a command registered for ``url``).
    Safe to share between threads.
    """

    def _open_io(self) -> None:
        self._tc = grpcclient.InferenceServerClient(self.url, **self._tc_kwargs)
        self._cy = cygrpc_channel(self._tc)
        # Read before every call: bound once.
        self._channel_state = self._cy.check_connectivity_state
        self._streams: weakref.WeakSet[ResponseStream] = weakref.WeakSet()
        self._lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------
    def _enter(self) -> None:
        self._check_open()

    def _exit(self) -> None:
        self.close()

    def close(self) -> None:
        """Close open streams, release shared memory, close the channel. Idempotent.

        Calls still in flight on other threads end with ``ClientClosedError``.
        Shared memory regions the server still holds (calls that ended by a
        deadline while the server kept running them) are waited for up to
        ``SHM_CLOSE_WAIT_S``; the rest are released in the background as soon
        as the server lets go of them.
        """
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for stream in list(self._streams):
            stream.close()
        self._tc.close()
        self._janitor.wait(SHM_CLOSE_WAIT_S)

    # ---- the driver: performs the steps of a call (see ``_flow``) ----------
    def _run(self, steps: Steps[T], operation: str = "", model: str | None = None) -> T:
        """Perform every step ``steps`` yields, blocking; throw failures back in; return its result."""
        result: Any = None
        failure: BaseException | None = None
        while True:
            done, step = advance(steps, result, failure)
            if done:
                return step
            try:
                result, failure = self._perform(step), None
            except BaseException as exc:  # noqa: BLE001 - the call decides; what it does not handle comes back
                result, failure = None, exc

    def _infer(self, args: InferArgs) -> dict[str, Array]:
        first = self._first_attempt(args)
        failure: BaseException | None = None
        if first is not None:
            prepared, _, _, client_timeout_s = first
            try:
                result = prepared.send(self._tc.infer, client_timeout=client_timeout_s, headers=prepared.headers)
            except RPC_ERRORS as exc:
                failure = exc
            else:
                return decode_response(result.get_response(), prepared)
        # Outside the handler: the steps chain what they raise to the failure themselves.
        return self._run(self._infer_steps(args, first, failure), "infer", args[0])

    def _channel_ready(self) -> bool:
        return bool(self._channel_state(False) == READY)

    def _perform(self, step: Step) -> Any:
        if type(step) is Rpc:
            return getattr(self._tc, step.method)(*step.args, **{"headers": self._headers, **step.kwargs})
        if type(step) is Connect:
            sync_connect(self._cy, self._connect_wait(step.deadline, step.operation, step.model))
            return None
        if type(step) is Metadata:
            return self._metadata_once(step.model, step.version, step.deadline)
        if type(step) is StillConnected:
            return sync_still_connected(self._cy, step.status)
        assert type(step) is Sleep
        time.sleep(step.seconds)
        return None

    def _translate(self, failed: FailedCall, *, connected: bool | None = None) -> ClientError:
        """The ``ClientError`` for ``failed``; ``connected``: the channel state if already seen."""
        return self._run(self._translate_steps(failed, connected))

    # ---- model metadata --------------------------------------------------
    def _metadata_once(self, model: str, version: str, deadline: Deadline) -> ModelMetadata:
        meta = self._metadata.get((model, version))
        return meta if meta is not None else self._run(self._fetch_steps(model, version, deadline))

    # ---- streaming -------------------------------------------------------
    def _open_stream(
        self, request: StreamRequest, timeout_s: float | None, idle_timeout_s: float | None
    ) -> ResponseStream:
        deadline = Deadline(timeout_s)
        metadata_timeout_s = timeout_s or self._call_s
        model, version = request.model, request.version
        prepared = self._prepare_stream(
            request, self.model_metadata(model, version=version, timeout_s=metadata_timeout_s)
        )
        if prepared is None:  # the model changed since its metadata was cached
            prepared = request.prepare(
                self.model_metadata(model, version=version, timeout_s=metadata_timeout_s),
                self.max_message_bytes,
            )
        stream = ResponseStream(self, prepared, deadline, idle_timeout_s)
        self._streams.add(stream)
        return stream
