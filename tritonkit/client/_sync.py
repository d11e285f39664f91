"""``Client``: blocking I/O over ``tritonclient.grpc``; everything else is shared."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar

import tritonclient.grpc as grpcclient

from tritonkit.client._base import ClientBase
from tritonkit.client._channel import READY, cygrpc_channel, sync_connect, sync_still_connected
from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._health import ProbeLog, ReadyWait
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._response import decode_response
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._settings import PROBE_TIMEOUT_S, SHM_CLOSE_WAIT_S, UNSET, Unset
from tritonkit.client._shm import Segment, SharedMemoryMode, ShmCall, ShmUnusable
from tritonkit.client._streaming import StreamRequest
from tritonkit.client._sync_stream import ResponseStream
from tritonkit.errors import ClientError, ConnectError, InvalidInputError

__all__ = ["Client", "ResponseStream"]

T = TypeVar("T")


class Client(ClientBase):
    """A blocking Triton gRPC client for services.

    Example::

        with Client("127.0.0.1:8001", timeouts=Timeouts(call_s=5.0)) as client:
            outputs = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

    Every limit is one ``Timeouts`` value (``timeouts=5.0`` is short for
    ``Timeouts(call_s=5.0)``). Every call has a deadline (``Timeouts.call_s``,
    default 60 s; ``None`` for none; ``timeout_s=`` per call) that bounds everything it does: fetching the model's metadata the first
    time, retries, shared memory registration. Requests are checked against the
    model's metadata and config before anything is sent (and that metadata is
    fetched again when a request fails the check, or the server says the model
    changed). A request is sent only once a connection is up (``Timeouts.connect_s``),
    so ``ConnectError`` always means "never sent" and ``ConnectionLostError``
    "may have executed". Failures raise the ``ClientError`` tree
    (``tritonkit.errors``). Retries are off unless ``retry=RetryPolicy(...)`` is
    given. Keepalive pings and a stream idle timeout notice a server that froze.
    ``url`` is one server (``host:port``) or a balanced target (``dns:///name:port``,
    ``ipv4:a:p,b:p``: calls go round-robin over every address). Requests larger
    than ``max_message_bytes`` are refused before sending. Safe to share between threads.
    """

    def _open_io(self) -> None:
        self._tc = grpcclient.InferenceServerClient(self.url, channel_args=self._channel_args)
        self._cy = cygrpc_channel(self._tc)
        self._streams: weakref.WeakSet[ResponseStream] = weakref.WeakSet()
        self._lock = threading.Lock()

    # ---- lifecycle -------------------------------------------------------
    def __enter__(self) -> Client:
        self._check_open()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
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

    # ---- errors ----------------------------------------------------------
    def _connect(self, deadline: Deadline, operation: str, model: str | None) -> None:
        """Wait for a connection; the request is sent only after this (see ``_channel``)."""
        sync_connect(self._cy, self._connect_wait(deadline, operation, model))

    def _translate(self, failed: FailedCall, *, connected: bool | None = None) -> ClientError:
        """The ``ClientError`` for ``failed``; ``connected``: the channel state if already seen."""
        if connected is None:
            # First, before anything else: whether the connection outlived the error.
            connected = sync_still_connected(self._cy, failed.status)
        cause, probe = self._explain(failed, connected=connected)
        if probe is not None:
            try:
                ready: bool | None = bool(
                    self._tc.is_model_ready(
                        probe, failed.version, client_timeout=ProbeLog.timeout_s(failed.deadline)
                    )
                )
            except RPC_ERRORS:
                ready = None
            cause = self._probed(probe, failed.version, ready)
        return self._error(failed, cause)

    def _call(
        self,
        fn: Callable[[], T],
        *,
        model: str | None,
        version: str,
        operation: str,
        deadline: Deadline,
        retry: RetryPolicy | None,
    ) -> T:
        """Run ``fn`` (one attempt of a read), translating failures and retrying what the policy allows."""
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, operation, model)
            started = time.monotonic()
            try:
                if self._cy.check_connectivity_state(False) != READY:
                    self._connect(deadline, operation, model)
                return fn()
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=retry, deadline=deadline)
            except RPC_ERRORS as exc:
                error = self._translate(FailedCall(exc, operation, model, version, deadline, started=started))
                # A read: sending it again is harmless even if it was lost mid-call.
                delay = self._retry_or_raise(
                    error, exc, attempt=attempt, retry=retry, deadline=deadline, sent=False
                )
            time.sleep(delay)

    # ---- model metadata --------------------------------------------------
    def _metadata_once(self, model: str, version: str, deadline: Deadline) -> ModelMetadata:
        meta = self._metadata.get((model, version))
        if meta is None:
            metadata = self._tc.get_model_metadata(
                model, version, client_timeout=self._timeout(deadline, "model metadata", model)
            )
            config = self._tc.get_model_config(
                model, version, client_timeout=self._timeout(deadline, "model config", model)
            )
            meta = self._remember_metadata(model, version, metadata, config)
        return meta

    def model_metadata(
        self,
        model: str,
        *,
        version: str = "",
        timeout_s: float | None | Unset = UNSET,
        retry: RetryPolicy | None | Unset = UNSET,
    ) -> ModelMetadata:
        """The model's inputs, outputs and batching, fetched once and cached."""
        self._check_open()
        deadline = self._deadline(timeout_s)
        return self._call(
            lambda: self._metadata_once(model, version, deadline),
            model=model,
            version=version,
            operation="model metadata",
            deadline=deadline,
            retry=self._retry_policy(retry),
        )

    # ---- inference -------------------------------------------------------
    def infer(
        self,
        model: str,
        inputs: Mapping[str, Array],
        *,
        outputs: Sequence[str] | None = None,
        version: str = "",
        request_id: str = "",
        priority: int = 0,
        parameters: Mapping[str, str | int | float | bool] | None = None,
        timeout_s: float | None | Unset = UNSET,
        server_timeout_us: int | None = None,
        retry: RetryPolicy | None | Unset = UNSET,
        shared_memory: SharedMemoryMode | None = None,
    ) -> dict[str, Array]:
        """Run ``model`` on ``inputs`` (name → numpy array); return its outputs (name → array).

        ``outputs`` selects outputs (default: all). ``priority`` (1 = highest,
        0 = the model's default) and ``server_timeout_us`` (how long the request
        may wait in the server's queue, for models whose queue policy honours it)
        are passed to Triton. ``timeout_s`` is the deadline for this whole call.
        ``shared_memory`` overrides the client's mode for this call.
        """
        # The hot path: every helper call and object here costs a little on every
        # request (about a microsecond each once the reply has left the CPU caches cold),
        # so the checks are written out and the in-band send is inlined.
        if self._closed:
            self._check_open()
        deadline = Deadline(self._call_s if timeout_s is UNSET else timeout_s)
        policy = self.retry if retry is UNSET else retry
        key = (model, version)
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, "infer", model)
            started = time.monotonic()
            meta: ModelMetadata | None = None
            sent = False
            try:
                if self._cy.check_connectivity_state(False) != READY:
                    self._connect(deadline, "infer", model)
                meta = self._metadata.get(key)
                fetched = meta is None
                if meta is None:
                    meta = self._metadata_once(model, version, deadline)
                while True:  # once more only after fetching the metadata again (see _refetch)
                    try:
                        prepared = self._prepare_unary(
                            meta,
                            inputs,
                            version=version,
                            outputs=outputs,
                            request_id=request_id,
                            priority=priority,
                            parameters=parameters,
                            server_timeout_us=server_timeout_us,
                            shared_memory=shared_memory,
                        )
                        break
                    except InvalidInputError:
                        if not self._refetch(model, version, meta, fetched):
                            raise
                        meta, fetched = self._metadata_once(model, version, deadline), True
                sent = True
                if prepared.shm is None:
                    result = self._tc.infer(
                        meta.name,
                        prepared.inputs,
                        model_version=prepared.model_version,
                        outputs=prepared.outputs,
                        request_id=prepared.request_id,
                        priority=prepared.priority,
                        timeout=prepared.server_timeout_us,
                        parameters=prepared.parameters,
                        client_timeout=self._timeout(deadline, "infer", model),
                    )
                    return decode_response(result.get_response(), prepared)
                try:
                    return self._send_shm(prepared, deadline, strict=self._strict_shm(shared_memory))
                except ShmUnusable:
                    return self._send(prepared.in_band(), deadline)
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=policy, deadline=deadline)
            except RPC_ERRORS as exc:
                failed = FailedCall(exc, "infer", model, version, deadline, meta, server_timeout_us, started)
                delay = self._retry_or_raise(
                    self._translate(failed), exc, attempt=attempt, retry=policy, deadline=deadline, sent=sent
                )
            time.sleep(delay)

    def _send(
        self, prepared: PreparedRequest, deadline: Deadline, segment: Segment | None = None
    ) -> dict[str, Array]:
        # The call inlined in infer(), for shared memory and the in-band fallback (not the hot path).
        result = self._tc.infer(
            **prepared.send_kwargs(), client_timeout=self._timeout(deadline, "infer", prepared.meta.name)
        )
        return decode_response(result.get_response(), prepared, segment)

    def _send_shm(self, prepared: PreparedRequest, deadline: Deadline, *, strict: bool) -> dict[str, Array]:
        plan = prepared.shm
        assert plan is not None
        call = ShmCall(plan)
        try:
            try:
                self._tc.register_system_shared_memory(
                    plan.region,
                    plan.key,
                    plan.byte_size,
                    client_timeout=self._timeout(deadline, "infer", prepared.meta.name),
                )
            except RPC_ERRORS as exc:
                if not self._registration_refused(exc, strict=strict):
                    raise
                raise call.refused() from exc
            try:
                outputs = self._send(prepared, deadline, call.segment)
            except RPC_ERRORS as exc:
                call.ended(exc)
                raise
            call.ended(None)
            return outputs
        finally:
            if call.release_local() and not (call.answered and self._unregister_now(plan.region)):
                # The server still runs the request (deadline, Ctrl-C) or has not let go yet:
                # the janitor unregisters it when the request really ended.
                self._janitor.add(plan.region)

    def _unregister_now(self, region: str) -> bool:
        try:
            self._tc.unregister_system_shared_memory(region, client_timeout=PROBE_TIMEOUT_S)
        except RPC_ERRORS:
            # WAR: tritonserver 2.51 may refuse for a moment after the reply ("currently in
            # use": it frees the request after sending the response).
            return False
        return True

    # ---- streaming -------------------------------------------------------
    def stream(
        self,
        model: str,
        inputs: Mapping[str, Array],
        *,
        outputs: Sequence[str] | None = None,
        version: str = "",
        request_id: str = "",
        priority: int = 0,
        parameters: Mapping[str, str | int | float | bool] | None = None,
        timeout_s: float | None = None,
        idle_timeout_s: float | None | Unset = UNSET,
    ) -> ResponseStream:
        """Send one request to a (decoupled) model; iterate over its responses as they arrive.

        The returned stream ends after the model's final response. The request
        is cancelled on the server when the stream is left early: ``close()``,
        leaving its ``with`` block, leaving a ``for`` loop over it (``break``,
        an exception), or dropping the last reference to it. ``timeout_s``
        bounds the whole stream (default: no deadline, generation can be long);
        ``idle_timeout_s`` (default: the client's ``timeouts.stream_idle_s``)
        ends it with ``DeadlineExceededError`` when no response came for that
        long. The request is checked before anything is sent::

            with client.stream("llm", {"PROMPT": prompt}) as responses:
                for response in responses:
                    print(response["TOKEN"])
        """
        self._check_open()
        deadline = Deadline(timeout_s)
        request = StreamRequest(model, inputs, version, outputs, request_id, priority, parameters)
        metadata_timeout_s = timeout_s or self._call_s
        prepared = self._prepare_stream(
            request, self.model_metadata(model, version=version, timeout_s=metadata_timeout_s)
        )
        if prepared is None:  # the model changed since its metadata was cached
            prepared = request.prepare(
                self.model_metadata(model, version=version, timeout_s=metadata_timeout_s),
                self.max_message_bytes,
            )
        idle = self.timeouts.stream_idle_s if idle_timeout_s is UNSET else idle_timeout_s
        stream = ResponseStream(self, prepared, deadline, idle)
        self._streams.add(stream)
        return stream

    # ---- health ----------------------------------------------------------
    def is_live(self, *, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        """True when the server answers that it is live; False when it cannot be reached or says no."""
        self._check_open()
        try:
            return bool(self._tc.is_server_live(client_timeout=timeout_s))
        except RPC_ERRORS:
            return False

    def is_ready(
        self, *, model: str | None = None, version: str = "", timeout_s: float = PROBE_TIMEOUT_S
    ) -> bool:
        """True when the server (or ``model``) is ready; False when not, or unreachable."""
        self._check_open()
        try:
            if model is None:
                return bool(self._tc.is_server_ready(client_timeout=timeout_s))
            return bool(self._tc.is_model_ready(model, version, client_timeout=timeout_s))
        except RPC_ERRORS:
            return False

    def wait_until_ready(
        self, timeout_s: float, *, model: str | None = None, version: str = "", poll_interval_s: float = 0.1
    ) -> None:
        """Block until the server (and ``model``, if given) is ready.

        Raise ``ConnectError`` if nothing accepted a connection by then,
        ``ModelNotReadyError`` if the server was ready but the model not, and
        ``DeadlineExceededError`` if the server answered but never became ready.
        """
        self._check_open()
        wait = ReadyWait(self.url, timeout_s, model)
        while True:
            try:
                if wait.server_answered(
                    bool(self._tc.is_server_ready(client_timeout=wait.probe_timeout_s()))
                ) and (
                    model is None
                    or self._tc.is_model_ready(model, version, client_timeout=wait.probe_timeout_s())
                ):
                    return
            except RPC_ERRORS as exc:
                wait.failed(exc)
            time.sleep(wait.pause_s(poll_interval_s))
