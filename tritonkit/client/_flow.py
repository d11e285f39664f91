"""What every client call does, written once: generators that yield the I/O they need.

``Client`` and ``AsyncClient`` differ only in how they perform I/O (blocking, or
awaited). So each call is a generator here that yields *steps* (send this RPC,
wait for a connection, sleep, fetch metadata) and receives their results; the
client's driver (``_run``) performs each step its own way and throws failures
back in, where the call decides, in one place, what they mean: retries, the
metadata fetched again, shared memory released, errors translated.

The common ``infer`` (channel connected, metadata cached, tensors in-band)
needs no step before it sends, and stepping a generator for it (create, send,
catch its StopIteration, through the driver) was most of what this client cost
over raw tritonclient: about 3 us of the 35 us of client CPU a call took, on a
loaded 2-core machine. So ``_first_attempt`` prepares that request without a
generator, the client sends it at once (``Client._infer`` / ``AsyncClient._infer``:
send, decode), and only when that is not possible, or the send failed, do the
steps of ``_infer_steps`` run, taking over the failed attempt: what happens
next is decided there alone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import Any, Generic, TypeVar

import grpc

from tritonkit.client._base import ClientBase, InferArgs
from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._health import ProbeLog, ReadyWait
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._response import decode_response
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._settings import PROBE_TIMEOUT_S, UNSET, Unset
from tritonkit.client._shm import Segment, SharedMemoryMode, ShmCall
from tritonkit.client._streaming import StreamRequest
from tritonkit.errors import ClientError, ConnectError, InvalidInputError, ShmUnusable

__all__ = [
    "Connect",
    "FirstAttempt",
    "Flows",
    "advance",
    "Metadata",
    "Rpc",
    "Sleep",
    "StillConnected",
    "Step",
    "Steps",
]

T = TypeVar("T")
# What each public call returns: the value (Client) or an awaitable of it (AsyncClient).
OutputsT = TypeVar("OutputsT")
MetadataT = TypeVar("MetadataT")
BoolT = TypeVar("BoolT")
NoneT = TypeVar("NoneT")
StreamT = TypeVar("StreamT")


class Rpc:
    """Call ``method`` of the client's tritonclient with these arguments; send back what it returns."""

    __slots__ = ("args", "kwargs", "method")

    def __init__(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.method = method
        self.args = args
        self.kwargs = kwargs


class Connect:
    """Wait until the channel is connected (see ``_channel``); raise ``ConnectError`` if it will not be.

    Yielded only when ``_channel_ready()`` says it is not: not on the hot path.
    """

    __slots__ = ("deadline", "model", "operation")

    def __init__(self, deadline: Deadline, operation: str, model: str | None) -> None:
        self.deadline = deadline
        self.operation = operation
        self.model = model


class Sleep:
    """Wait ``seconds`` (between retries, between readiness polls)."""

    __slots__ = ("seconds",)

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds


class StillConnected:
    """Whether the connection outlived a call's error with ``status`` (send back a bool)."""

    __slots__ = ("status",)

    def __init__(self, status: grpc.StatusCode | None) -> None:
        self.status = status


class Metadata:
    """The model's metadata, from the cache or fetched (once for a crowd of first calls)."""

    __slots__ = ("deadline", "model", "version")

    def __init__(self, model: str, version: str, deadline: Deadline) -> None:
        self.model = model
        self.version = version
        self.deadline = deadline


Step = Rpc | Connect | Sleep | StillConnected | Metadata
#: A call as steps: it yields steps, is sent their results, and returns its own.
Steps = Generator[Step, Any, T]


def advance(steps: Steps[Any], result: Any, failure: BaseException | None) -> tuple[bool, Any]:
    """Hand a step's ``result`` (or its ``failure``) to the call.

    Return (True, the call's result) once it returned, else (False, its next step).
    """
    try:
        return False, steps.send(result) if failure is None else steps.throw(failure)
    except StopIteration as done:
        return True, done.value


#: An ``infer``'s first attempt, prepared to be sent at once (see ``Flows._first_attempt``):
#: the request, the call's deadline, when the attempt started, and its RPC timeout.
FirstAttempt = tuple[PreparedRequest, Deadline, float, float | None]


class Flows(ClientBase, Generic[OutputsT, MetadataT, BoolT, NoneT, StreamT]):
    """Every call of both clients, as steps, and their public methods, declared once.

    A subclass adds ``_run``, which performs a call's steps: ``Client`` blocks and
    returns the result; ``AsyncClient``'s is a coroutine function, so its public
    methods return awaitables. The type parameters say which, per method.
    """

    def _run(self, steps: Steps[Any], operation: str, model: str | None) -> Any:
        """Perform the steps of one call (the result, or an awaitable of it)."""
        raise NotImplementedError

    def _infer(self, args: InferArgs) -> Any:
        """Send ``_first_attempt(args)`` at once if there is one, else (or once it failed) run ``_infer_steps``."""
        raise NotImplementedError

    def _channel_ready(self) -> bool:
        """Whether the channel is connected now (a state read, no I/O: a few hundred nanoseconds)."""
        raise NotImplementedError

    def _open_stream(self, request: StreamRequest, timeout_s: float | None, idle_timeout_s: float | None) -> StreamT:
        """The stream of ``request`` (see ``stream``)."""
        raise NotImplementedError

    # ---- the public calls --------------------------------------------------
    def model_metadata(
        self,
        model: str,
        *,
        version: str = "",
        timeout_s: float | None | Unset = UNSET,
        retry: RetryPolicy | None | Unset = UNSET,
    ) -> MetadataT:
        """The model's inputs, outputs and batching, fetched once and cached."""
        steps = self._model_metadata_steps(model, version, timeout_s, retry)
        result: MetadataT = self._run(steps, "model metadata", model)
        return result

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
        headers: Mapping[str, str] | None = None,
    ) -> OutputsT:
        """Run ``model`` on ``inputs`` (name → numpy array); return its outputs (name → array).

        ``outputs`` selects outputs (default: all). ``priority`` (1 = highest,
        0 = the model's default) and ``server_timeout_us`` (how long the request
        may wait in the server's queue, for models whose queue policy honours it)
        are passed to Triton. ``timeout_s`` is the deadline for this whole call.
        ``shared_memory`` overrides the client's mode for this call; ``headers`` are sent with this
        call besides the client's (``dial``'s). Every output is checked against the model's declared
        datatype and shape.
        """
        args = (model, inputs, outputs, version, request_id, priority, parameters, timeout_s, server_timeout_us,
                retry, shared_memory, headers)
        result: OutputsT = self._infer(args)
        return result

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
        headers: Mapping[str, str] | None = None,
    ) -> StreamT:
        """Send one request to a (decoupled) model; iterate over its responses as they arrive::

            with client.stream("llm", {"PROMPT": prompt}) as responses:        # Client
                for response in responses:
                    print(response["TOKEN"])

            async with client.stream("llm", {"PROMPT": prompt}) as responses:  # AsyncClient
                async for response in responses:
                    print(response["TOKEN"])

        The stream ends after the model's final response. The request is
        cancelled on the server when the stream is left early: ``close()`` /
        ``aclose()``, leaving its ``with`` block, leaving a ``for`` loop over it
        (``break``, an exception), cancelling the task that reads it, or dropping
        the last reference to it. ``timeout_s`` bounds the whole stream (default:
        no deadline, generation can be long); ``idle_timeout_s`` (default: the
        client's ``timeouts.stream_idle_s``) ends it with ``DeadlineExceededError``
        when no response came for that long. The request is checked before
        anything is sent (``Client``: here; ``AsyncClient``: on entering
        ``async with`` or on the first iteration). ``headers``: as ``infer``'s.
        """
        self._check_open()
        request = StreamRequest(model, inputs, version, outputs, request_id, priority, parameters,
                                self._call_headers(headers))
        idle = self.timeouts.stream_idle_s if idle_timeout_s is UNSET else idle_timeout_s
        return self._open_stream(request, timeout_s, idle)

    def is_live(self, *, timeout_s: float = PROBE_TIMEOUT_S) -> BoolT:
        """True when the server answers that it is live; False when it cannot be reached or says no."""
        result: BoolT = self._run(self._is_live_steps(timeout_s), "liveness", None)
        return result

    def is_ready(self, *, model: str | None = None, version: str = "",
                 timeout_s: float = PROBE_TIMEOUT_S) -> BoolT:
        """True when the server (or ``model``) is ready; False when not, or unreachable."""
        result: BoolT = self._run(self._is_ready_steps(model, version, timeout_s), "readiness", model)
        return result

    def wait_until_ready(self, timeout_s: float, *, model: str | None = None, version: str = "",
                         poll_interval_s: float = 0.1) -> NoneT:
        """Wait until the server (and ``model``, if given) is ready.

        Raise ``ConnectError`` if nothing accepted a connection by then,
        ``ModelNotReadyError`` if the server was ready but the model not, and
        ``DeadlineExceededError`` if the server answered but never became ready.
        """
        result: NoneT = self._run(self._wait_steps(timeout_s, model, version, poll_interval_s), "readiness", model)
        return result

    # ---- the steps of each call ----------------------------------------------

    def _fetch_steps(self, model: str, version: str, deadline: Deadline) -> Steps[ModelMetadata]:
        """Fetch the model's metadata and config, and cache what they say."""
        metadata = yield Rpc("get_model_metadata", model, version,
                             client_timeout=self._timeout(deadline, "model metadata", model))
        config = yield Rpc("get_model_config", model, version,
                           client_timeout=self._timeout(deadline, "model config", model))
        return self._remember_metadata(model, version, metadata, config)

    def _translate_steps(self, failed: FailedCall, connected: bool | None = None) -> Steps[ClientError]:
        """The ``ClientError`` for ``failed``; ``connected``: the channel state if already seen."""
        if connected is None:
            # First, before anything else: whether the connection outlived the error.
            connected = bool((yield StillConnected(failed.status)))
        cause, probe = self._explain(failed, connected=connected)
        if probe is not None:
            try:
                answer = yield Rpc("is_model_ready", probe, failed.version,
                                   client_timeout=ProbeLog.timeout_s(failed.deadline))
                ready: bool | None = bool(answer)
            except RPC_ERRORS:
                ready = None
            cause = self._probed(probe, failed.version, ready)
        return self._error(failed, cause)

    def _read_steps(self, steps: Callable[[], Steps[T]], *, model: str | None, version: str, operation: str,
                    deadline: Deadline, retry: RetryPolicy | None) -> Steps[T]:
        """Run ``steps()`` (one attempt of a read), translating failures and retrying what the policy allows."""
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, operation, model)
            started = time.monotonic()
            try:
                if not self._channel_ready():
                    yield Connect(deadline, operation, model)
                return (yield from steps())
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=retry, deadline=deadline)
            except RPC_ERRORS as exc:
                failed = FailedCall(exc, operation, model, version, deadline, started=started)
                error = yield from self._translate_steps(failed)
                # A read: sending it again is harmless even if it was lost mid-call.
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=retry, deadline=deadline, sent=False)
            yield Sleep(delay)

    def _model_metadata_steps(self, model: str, version: str, timeout_s: float | None | Unset,
                              retry: RetryPolicy | None | Unset) -> Steps[ModelMetadata]:
        self._check_open()
        deadline = self._deadline(timeout_s)

        def fetch() -> Steps[ModelMetadata]:
            meta: ModelMetadata = yield Metadata(model, version, deadline)
            return meta

        return (yield from self._read_steps(fetch, model=model, version=version, operation="model metadata",
                                            deadline=deadline, retry=self._retry_policy(retry)))

    def _first_attempt(self, args: InferArgs) -> FirstAttempt | None:
        """The request of ``infer(*args)`` if it needs no step before it is sent; else None.

        None also where the request failed its check or goes through shared
        memory: ``_infer_steps`` then does it all, checks and errors included.
        The hot path: every helper call and object here costs a little on every request.
        """
        if self._closed:
            return None
        model, timeout_s = args[0], args[7]
        deadline = Deadline(self._call_s if timeout_s is UNSET else timeout_s)
        started = time.monotonic()
        if not self._channel_ready():
            return None
        meta = self._metadata.get((model, args[3]))
        if meta is None:
            return None
        try:
            prepared = self._prepare_unary(meta, args)
        except InvalidInputError:
            return None  # the metadata may be stale: _infer_steps decides
        if prepared.shm is not None:
            return None
        return prepared, deadline, started, self._timeout(deadline, "infer", model)

    def _infer_steps(self, args: InferArgs, first: FirstAttempt | None = None,
                     failure: BaseException | None = None) -> Steps[dict[str, Array]]:
        """Every attempt of ``infer(*args)``; ``first``: its first attempt, sent already, that ended in ``failure``."""
        model, _, _, version, _, _, _, timeout_s, server_timeout_us, retry, shared_memory, headers = args
        if self._closed:
            self._check_open()
        deadline = Deadline(self._call_s if timeout_s is UNSET else timeout_s) if first is None else first[1]
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
                if first is not None and failure is not None:
                    # Sent at once (see _first_attempt): its failure is decided below, as if sent here.
                    meta, sent, started = first[0].meta, True, first[2]
                    first, exc, failure = None, failure, None
                    raise exc
                if not self._channel_ready():
                    yield Connect(deadline, "infer", model)
                meta = self._metadata.get(key)
                fetched = meta is None
                if meta is None:
                    meta = yield Metadata(model, version, deadline)
                while True:  # once more only after fetching the metadata again (see _refetch)
                    try:
                        prepared = self._prepare_unary(meta, args)
                        break
                    except InvalidInputError:
                        if not self._refetch(model, version, meta, fetched):
                            raise
                        meta, fetched = (yield Metadata(model, version, deadline)), True
                sent = True
                if prepared.shm is None:
                    return (yield from self._send_steps(prepared, deadline))
                try:
                    return (yield from self._shm_steps(prepared, deadline, strict=self._strict_shm(shared_memory)))
                except ShmUnusable:
                    return (yield from self._send_steps(prepared.in_band(), deadline))
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=policy, deadline=deadline)
            except RPC_ERRORS as exc:
                failed = FailedCall(exc, "infer", model, version, deadline, meta, server_timeout_us, started, headers)
                error = yield from self._translate_steps(failed)
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=policy, deadline=deadline, sent=sent)
            yield Sleep(delay)

    def _send_steps(self, prepared: PreparedRequest, deadline: Deadline,
                    segment: Segment | None = None) -> Steps[dict[str, Array]]:
        result = yield Rpc("infer", **prepared.send_kwargs(), headers=prepared.headers,
                           client_timeout=self._timeout(deadline, "infer", prepared.meta.name))
        return decode_response(result.get_response(), prepared, segment)

    def _shm_steps(self, prepared: PreparedRequest, deadline: Deadline, *, strict: bool) -> Steps[dict[str, Array]]:
        plan = prepared.shm
        assert plan is not None
        call = ShmCall(plan)
        try:
            try:
                yield Rpc("register_system_shared_memory", plan.region, plan.key, plan.byte_size,
                          client_timeout=self._timeout(deadline, "infer", prepared.meta.name))
            except RPC_ERRORS as exc:
                if not self._registration_refused(exc, strict=strict):
                    raise
                raise call.refused() from exc
            try:
                outputs = yield from self._send_steps(prepared, deadline, call.segment)
            except RPC_ERRORS as exc:
                call.ended(exc)
                raise
            call.ended(None)
            return outputs
        finally:
            # Local segment first: it never outlives the call, even when a task is cancelled
            # (then the call has no answer and nothing more is sent).
            if call.release_local():
                released = False
                if call.answered and not self._closed:
                    try:
                        yield Rpc("unregister_system_shared_memory", plan.region, client_timeout=PROBE_TIMEOUT_S)
                        released = True
                    except RPC_ERRORS:
                        # WAR: tritonserver 2.51 may refuse for a moment after the reply ("currently
                        # in use": it frees the request after sending the response).
                        pass
                if not released:
                    # The server still runs the request (deadline, cancellation) or has not
                    # let go yet: the janitor unregisters it when the request really ended.
                    self._janitor.add(plan.region)

    # ---- health ----------------------------------------------------------
    def _is_live_steps(self, timeout_s: float) -> Steps[bool]:
        self._check_open()
        try:
            return bool((yield Rpc("is_server_live", client_timeout=timeout_s)))
        except RPC_ERRORS:
            return False

    def _is_ready_steps(self, model: str | None, version: str, timeout_s: float) -> Steps[bool]:
        self._check_open()
        try:
            if model is None:
                return bool((yield Rpc("is_server_ready", client_timeout=timeout_s)))
            return bool((yield Rpc("is_model_ready", model, version, client_timeout=timeout_s)))
        except RPC_ERRORS:
            return False

    def _wait_steps(self, timeout_s: float, model: str | None, version: str, poll_interval_s: float) -> Steps[None]:
        self._check_open()
        wait = ReadyWait(self.url, timeout_s, model)
        while True:
            try:
                ready = bool((yield Rpc("is_server_ready", client_timeout=wait.probe_timeout_s())))
                if wait.server_answered(ready) and (
                    model is None
                    or (yield Rpc("is_model_ready", model, version, client_timeout=wait.probe_timeout_s()))
                ):
                    return
            except RPC_ERRORS as exc:
                wait.failed(exc)
            yield Sleep(wait.pause_s(poll_interval_s))
