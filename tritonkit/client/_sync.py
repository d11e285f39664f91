"""``Client``: blocking I/O over ``tritonclient.grpc``; everything else is shared."""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
import tritonclient.grpc as grpcclient

from tritonkit.client._base import (
    PROBE_TIMEOUT_S,
    RPC_ERRORS,
    UNSET,
    Array,
    ClientBase,
    ReadyWait,
    ShmUnusable,
    Unset,
)
from tritonkit.client._errors import UnavailableCause, cause_from_probe, status_of
from tritonkit.client._model import ModelSpec
from tritonkit.client._request import PreparedRequest, decode_response, is_final_response
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._shm import Segment, SharedMemoryMode
from tritonkit.errors import ClientError, ServerSideError

__all__ = ["Client", "ResponseStream"]

T = TypeVar("T")


class Client(ClientBase):
    """A blocking Triton gRPC client for services.

    Example::

        with Client("127.0.0.1:8001", timeout_s=5.0) as client:
            outputs = client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

    Every call has a deadline (``timeout_s``, default 60 s; ``None`` for none)
    that bounds everything it does: fetching the model's metadata the first
    time, retries, shared memory registration. Requests are checked against the
    model's metadata and config before anything is sent. Failures raise the
    ``ClientError`` tree (``tritonkit.errors``). Retries are off unless
    ``retry=RetryPolicy(...)`` is given. Safe to share between threads.
    """

    def _open_io(self) -> None:
        self._tc = grpcclient.InferenceServerClient(self.url, channel_args=self._channel_args)
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
        """Close open streams, drop leftover shared memory registrations, close the channel. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        for stream in list(self._streams):
            stream.close()
        self._flush_pending_unregister(Deadline(2.0), final=True)
        self._tc.close()

    # ---- errors ----------------------------------------------------------
    def _probe(self, model: str | None, version: str, deadline: Deadline) -> UnavailableCause:
        timeout = self._probe_timeout_s(deadline)
        try:
            if model is None:
                self._tc.is_server_live(client_timeout=timeout)
                return cause_from_probe(reachable=True, model_ready=None)
            ready = bool(self._tc.is_model_ready(model, version, client_timeout=timeout))
            return cause_from_probe(reachable=True, model_ready=ready)
        except RPC_ERRORS as exc:
            return self._unreachable_cause(exc)

    def _translate(
        self, exc: BaseException, *, model: str | None, version: str, operation: str, deadline: Deadline
    ) -> ClientError:
        cause = self._probe(model, version, deadline) if self._needs_probe(exc, model, version) else None
        return self._translated(exc, model=model, operation=operation, cause=cause, deadline=deadline)

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
        """Run ``fn`` (one attempt), translating failures and retrying what the policy allows."""
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, operation, model)
            try:
                return fn()
            except RPC_ERRORS as exc:
                error = self._translate(
                    exc, model=model, version=version, operation=operation, deadline=deadline
                )
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=retry, deadline=deadline)
            time.sleep(delay)

    # ---- model metadata --------------------------------------------------
    def _spec_once(self, model: str, version: str, deadline: Deadline) -> ModelSpec:
        spec = self._specs.get((model, version))
        if spec is None:
            metadata = self._tc.get_model_metadata(
                model, version, client_timeout=self._timeout(deadline, "model metadata", model)
            )
            config = self._tc.get_model_config(
                model, version, client_timeout=self._timeout(deadline, "model config", model)
            )
            spec = self._remember_spec(model, version, metadata, config)
        return spec

    def model_spec(
        self,
        model: str,
        *,
        version: str = "",
        timeout_s: float | None | Unset = UNSET,
        retry: RetryPolicy | None | Unset = UNSET,
    ) -> ModelSpec:
        """The model's inputs, outputs and batching, fetched once and cached."""
        self._check_open()
        deadline = self._deadline(timeout_s)
        return self._call(
            lambda: self._spec_once(model, version, deadline),
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
        deadline = Deadline(self.timeout_s if timeout_s is UNSET else timeout_s)
        policy = self.retry if retry is UNSET else retry
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, "infer", model)
            try:
                spec = self._specs.get((model, version)) or self._spec_once(model, version, deadline)
                prepared = self._request(
                    spec,
                    inputs,
                    version=version,
                    outputs=outputs,
                    request_id=request_id,
                    priority=priority,
                    parameters=parameters,
                    server_timeout_us=server_timeout_us,
                    shared_memory=shared_memory,
                )
                if prepared.shm is None:
                    result = self._tc.infer(
                        spec.name,
                        prepared.inputs,
                        model_version=prepared.model_version,
                        outputs=prepared.outputs,
                        request_id=prepared.request_id,
                        priority=prepared.priority,
                        timeout=prepared.server_timeout_us,
                        parameters=prepared.parameters,
                        client_timeout=self._timeout(deadline, "infer", model),
                    )
                    return decode_response(result.get_response(), model=spec.name)
                try:
                    return self._send_shm(prepared, deadline, strict=self._strict_shm(shared_memory))
                except ShmUnusable:
                    return self._send(prepared.in_band(), deadline)
            except RPC_ERRORS as exc:
                error = self._translate(
                    exc, model=model, version=version, operation="infer", deadline=deadline
                )
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=policy, deadline=deadline)
            time.sleep(delay)

    def _send(
        self, prepared: PreparedRequest, deadline: Deadline, segment: Segment | None = None
    ) -> dict[str, Array]:
        model = prepared.spec.name
        # The same call as the one inlined in infer(); used with shared memory and for
        # the in-band fallback.
        result = self._tc.infer(
            model,
            prepared.inputs,
            model_version=prepared.model_version,
            outputs=prepared.outputs,
            request_id=prepared.request_id,
            priority=prepared.priority,
            timeout=prepared.server_timeout_us,
            parameters=prepared.parameters,
            client_timeout=self._timeout(deadline, "infer", model),
        )
        return decode_response(result.get_response(), segment=segment, model=model)

    def _send_shm(self, prepared: PreparedRequest, deadline: Deadline, *, strict: bool) -> dict[str, Array]:
        plan = prepared.shm
        assert plan is not None
        model = prepared.spec.name
        self._flush_pending_unregister(deadline)
        segment = Segment(plan)
        # True from the moment the server may hold the registration: a call cut short
        # (deadline, Ctrl-C) cannot know whether it landed.
        maybe_registered = False
        try:
            try:
                maybe_registered = True
                self._tc.register_system_shared_memory(
                    plan.region,
                    plan.key,
                    plan.byte_size,
                    client_timeout=self._timeout(deadline, "infer", model),
                )
            except RPC_ERRORS as exc:
                if not self._registration_refused(exc, strict=strict):
                    raise
                maybe_registered = False  # the server refused it outright
                raise ShmUnusable from exc
            return self._send(prepared, deadline, segment)
        finally:
            # Local segment first: it must never outlive the call, whatever the server does.
            segment.destroy()
            if maybe_registered:
                # Noted before the call, so an interruption cannot lose it.
                self._pending_unregister.add(plan.region)
                self._unregister(plan.region, deadline)

    def _unregister(self, region: str, deadline: Deadline) -> None:
        try:
            self._tc.unregister_system_shared_memory(
                region, client_timeout=max(0.05, deadline.cap(PROBE_TIMEOUT_S))
            )
        except RPC_ERRORS:
            # WAR: tritonserver 2.51 may refuse for a moment after the reply ("currently in
            # use": it frees the request after sending the response). The name stays
            # pending and is retried before the next registration and at close().
            return
        self._pending_unregister.discard(region)

    def _flush_pending_unregister(self, deadline: Deadline, *, final: bool = False) -> None:
        names = self._pending_unregister.take()
        for index, name in enumerate(names):
            try:
                self._tc.unregister_system_shared_memory(name, client_timeout=deadline.cap(PROBE_TIMEOUT_S))
            except RPC_ERRORS as exc:
                if status_of(exc) is grpc.StatusCode.UNAVAILABLE:
                    return  # the server is gone, and its registrations with it
                if final and not deadline.expired():
                    time.sleep(0.01)
                    try:
                        self._tc.unregister_system_shared_memory(
                            name, client_timeout=deadline.cap(PROBE_TIMEOUT_S)
                        )
                        continue
                    except RPC_ERRORS:
                        pass
                if not final:
                    for rest in names[index:]:
                        self._pending_unregister.add(rest)
                    return

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
    ) -> ResponseStream:
        """Send one request to a (decoupled) model; iterate over its responses as they arrive.

        The returned stream ends after the model's final response; ``close()``
        (or leaving its ``with`` block) before that cancels the request.
        ``timeout_s`` bounds the whole stream (default: no deadline, generation
        can be long). The request is checked before anything is sent::

            with client.stream("llm", {"PROMPT": prompt}) as responses:
                for response in responses:
                    print(response["TOKEN"])
        """
        self._check_open()
        deadline = Deadline(timeout_s)
        spec = self.model_spec(model, version=version, timeout_s=timeout_s or self.timeout_s)
        prepared = self._stream_request(
            spec,
            inputs,
            version=version,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
        )
        stream = ResponseStream(self, prepared, deadline)
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
                wait.server_ready = bool(self._tc.is_server_ready(client_timeout=wait.probe_timeout_s()))
                wait.reached = True
                if wait.server_ready and (
                    model is None
                    or self._tc.is_model_ready(model, version, client_timeout=wait.probe_timeout_s())
                ):
                    return
            except RPC_ERRORS as exc:
                wait.failed(exc)
            if wait.deadline.expired():
                raise wait.error() from wait.last
            time.sleep(wait.deadline.cap(poll_interval_s))


class ResponseStream:
    """The responses of one streamed request, as an iterator of ``{name: array}``.

    Ends cleanly after the model's final response. ``close()`` (also on leaving
    ``with``, on the owning client's close, or when garbage collected) cancels
    a request still running and releases its gRPC stream.
    """

    def __init__(self, client: Client, prepared: PreparedRequest, deadline: Deadline) -> None:
        self._client = client
        self._prepared = prepared
        self._deadline = deadline
        self._queue: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
        self._done = False
        self._close_lock = threading.Lock()
        # tritonclient allows one stream per client object: each stream gets its own
        # (the channel's TCP connection is shared by gRPC's subchannel pool).
        self._tc: grpcclient.InferenceServerClient | None = grpcclient.InferenceServerClient(
            client.url, channel_args=client._channel_args
        )
        try:
            self._tc.start_stream(callback=self._on_response, stream_timeout=deadline.remaining_s())
            self._tc.async_stream_infer(**prepared.send_kwargs(), enable_empty_final_response=True)
        except BaseException:
            self.close()
            raise

    def _on_response(self, result: Any, error: BaseException | None) -> None:
        # Runs on tritonclient's reader thread: only hand over, never block or raise.
        self._queue.put((result, error))

    def __iter__(self) -> Iterator[dict[str, Array]]:
        return self

    def __next__(self) -> dict[str, Array]:
        while not self._done:
            result, error = self._queue.get()
            if error is not None:
                model = self._prepared.spec.name
                self.close()
                if status_of(error) is None:
                    # An in-band error the model sent in a response: it carries no status code.
                    raise ServerSideError(
                        f"model '{model}' at {self._client.url} reported an error in its stream: {error}",
                        model=model,
                        hint="read the server log for this model",
                    ) from error
                raise self._client._translate(
                    error,
                    model=model,
                    version=self._prepared.model_version,
                    operation="stream",
                    deadline=self._deadline,
                ) from error
            response = result.get_response()
            outputs = decode_response(response, model=self._prepared.spec.name)
            if is_final_response(response):
                self._finish(cancel=False)
            if outputs:
                return outputs
        raise StopIteration

    def _finish(self, *, cancel: bool) -> None:
        with self._close_lock:
            self._done = True
            tc, self._tc = self._tc, None
        if tc is not None:
            # Not cancelling lets the final exchange complete; cancelling stops the model's work.
            tc.stop_stream(cancel_requests=cancel)
            tc.close()

    def close(self) -> None:
        """Cancel the request if still running and release the stream. Idempotent."""
        self._finish(cancel=True)

    @property
    def done(self) -> bool:
        """True after the final response, an error, or ``close()``."""
        return self._done

    def __enter__(self) -> ResponseStream:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __del__(self) -> None:
        # At interpreter shutdown there is nothing useful to report.
        with contextlib.suppress(Exception):
            self.close()
