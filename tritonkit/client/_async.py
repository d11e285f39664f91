"""``AsyncClient``: asyncio I/O over ``tritonclient.grpc.aio``; everything else is shared."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

import grpc
import tritonclient.grpc.aio as aioclient

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

__all__ = ["AsyncClient", "AsyncResponseStream"]

T = TypeVar("T")


class AsyncClient(ClientBase):
    """The asyncio twin of ``Client``: same options, same checks, same errors.

    Example::

        async with AsyncClient("127.0.0.1:8001", timeout_s=5.0) as client:
            outputs = await client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

    Use it from one event loop (the one of its first call); many calls may be
    in flight at once. Cancelling a task cancels its gRPC call.
    """

    def _open_io(self) -> None:
        # Created on first use, inside the event loop that will drive it.
        self._tc_aio: aioclient.InferenceServerClient | None = None
        self._streams: weakref.WeakSet[AsyncResponseStream] = weakref.WeakSet()
        self._spec_locks: dict[tuple[str, str], asyncio.Lock] = {}

    @property
    def _tc(self) -> aioclient.InferenceServerClient:
        if self._tc_aio is None:
            self._tc_aio = aioclient.InferenceServerClient(self.url, channel_args=self._channel_args)
        return self._tc_aio

    # ---- lifecycle -------------------------------------------------------
    async def __aenter__(self) -> AsyncClient:
        self._check_open()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Cancel open streams, drop leftover shared memory registrations, close the channel. Idempotent."""
        if self._closed:
            return
        self._closed = True
        for stream in list(self._streams):
            await stream.aclose()
        if self._tc_aio is not None:
            await self._flush_pending_unregister(Deadline(2.0), final=True)
            await self._tc_aio.close()

    aclose = close

    # ---- errors ----------------------------------------------------------
    async def _probe(self, model: str | None, version: str, deadline: Deadline) -> UnavailableCause:
        timeout = self._probe_timeout_s(deadline)
        try:
            if model is None:
                await self._tc.is_server_live(client_timeout=timeout)
                return cause_from_probe(reachable=True, model_ready=None)
            ready = bool(await self._tc.is_model_ready(model, version, client_timeout=timeout))
            return cause_from_probe(reachable=True, model_ready=ready)
        except RPC_ERRORS as exc:
            return self._unreachable_cause(exc)

    async def _translate(
        self, exc: BaseException, *, model: str | None, version: str, operation: str, deadline: Deadline
    ) -> ClientError:
        cause = (
            await self._probe(model, version, deadline) if self._needs_probe(exc, model, version) else None
        )
        return self._translated(exc, model=model, operation=operation, cause=cause, deadline=deadline)

    async def _call(
        self,
        fn: Callable[[], Awaitable[T]],
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
                return await fn()
            except RPC_ERRORS as exc:
                error = await self._translate(
                    exc, model=model, version=version, operation=operation, deadline=deadline
                )
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=retry, deadline=deadline)
            await asyncio.sleep(delay)

    # ---- model metadata --------------------------------------------------
    async def _spec_once(self, model: str, version: str, deadline: Deadline) -> ModelSpec:
        key = (model, version)
        spec = self._specs.get(key)
        if spec is not None:
            return spec
        # One fetch for a crowd of first calls, not one each.
        lock = self._spec_locks.setdefault(key, asyncio.Lock())
        async with lock:
            spec = self._specs.get(key)
            if spec is None:
                metadata = await self._tc.get_model_metadata(
                    model, version, client_timeout=self._timeout(deadline, "model metadata", model)
                )
                config = await self._tc.get_model_config(
                    model, version, client_timeout=self._timeout(deadline, "model config", model)
                )
                spec = self._remember_spec(model, version, metadata, config)
        return spec

    async def model_spec(
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
        return await self._call(
            lambda: self._spec_once(model, version, deadline),
            model=model,
            version=version,
            operation="model metadata",
            deadline=deadline,
            retry=self._retry_policy(retry),
        )

    # ---- inference -------------------------------------------------------
    async def infer(
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
        """Run ``model`` on ``inputs``; see ``Client.infer`` for every option."""
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
                spec = self._specs.get((model, version)) or await self._spec_once(model, version, deadline)
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
                    tc = self._tc_aio if self._tc_aio is not None else self._tc
                    result = await tc.infer(
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
                    return await self._send_shm(prepared, deadline, strict=self._strict_shm(shared_memory))
                except ShmUnusable:
                    return await self._send(prepared.in_band(), deadline)
            except RPC_ERRORS as exc:
                error = await self._translate(
                    exc, model=model, version=version, operation="infer", deadline=deadline
                )
                delay = self._retry_or_raise(error, exc, attempt=attempt, retry=policy, deadline=deadline)
            await asyncio.sleep(delay)

    async def _send(
        self, prepared: PreparedRequest, deadline: Deadline, segment: Segment | None = None
    ) -> dict[str, Array]:
        model = prepared.spec.name
        # The same call as the one inlined in infer(); used with shared memory and for
        # the in-band fallback.
        result = await self._tc.infer(
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

    async def _send_shm(
        self, prepared: PreparedRequest, deadline: Deadline, *, strict: bool
    ) -> dict[str, Array]:
        plan = prepared.shm
        assert plan is not None
        model = prepared.spec.name
        await self._flush_pending_unregister(deadline)
        segment = Segment(plan)
        # True from the moment the server may hold the registration: a call cut short
        # (deadline, cancellation) cannot know whether it landed.
        maybe_registered = False
        try:
            try:
                maybe_registered = True
                await self._tc.register_system_shared_memory(
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
            return await self._send(prepared, deadline, segment)
        finally:
            # Local segment first, synchronously: it must never outlive the call, even
            # when the task is cancelled.
            segment.destroy()
            if maybe_registered:
                # Noted before the await, so a second cancellation cannot lose it.
                self._pending_unregister.add(plan.region)
                await self._unregister(plan.region, deadline)

    async def _unregister(self, region: str, deadline: Deadline) -> None:
        try:
            await self._tc.unregister_system_shared_memory(
                region, client_timeout=max(0.05, deadline.cap(PROBE_TIMEOUT_S))
            )
        except RPC_ERRORS:
            # WAR: tritonserver 2.51 may refuse for a moment after the reply ("currently in
            # use"); the name stays pending and is retried later.
            return
        self._pending_unregister.discard(region)

    async def _flush_pending_unregister(self, deadline: Deadline, *, final: bool = False) -> None:
        names = self._pending_unregister.take()
        for index, name in enumerate(names):
            try:
                await self._tc.unregister_system_shared_memory(
                    name, client_timeout=deadline.cap(PROBE_TIMEOUT_S)
                )
            except RPC_ERRORS as exc:
                if status_of(exc) is grpc.StatusCode.UNAVAILABLE:
                    return  # the server is gone, and its registrations with it
                if final and not deadline.expired():
                    await asyncio.sleep(0.01)
                    try:
                        await self._tc.unregister_system_shared_memory(
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
    ) -> AsyncResponseStream:
        """Stream the responses of one request to a (decoupled) model::

            async with client.stream("llm", {"PROMPT": prompt}) as responses:
                async for response in responses:
                    print(response["TOKEN"])

        The request is checked and sent on entering ``async with`` (or on the
        first iteration); the stream ends after the model's final response.
        Leaving early, ``aclose()``, or cancelling the consuming task cancels
        the request.
        """
        self._check_open()
        stream = AsyncResponseStream(
            self,
            model,
            inputs,
            version=version,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
            timeout_s=timeout_s,
        )
        self._streams.add(stream)
        return stream

    # ---- health ----------------------------------------------------------
    async def is_live(self, *, timeout_s: float = PROBE_TIMEOUT_S) -> bool:
        """True when the server answers that it is live; False when it cannot be reached or says no."""
        self._check_open()
        try:
            return bool(await self._tc.is_server_live(client_timeout=timeout_s))
        except RPC_ERRORS:
            return False

    async def is_ready(
        self, *, model: str | None = None, version: str = "", timeout_s: float = PROBE_TIMEOUT_S
    ) -> bool:
        """True when the server (or ``model``) is ready; False when not, or unreachable."""
        self._check_open()
        try:
            if model is None:
                return bool(await self._tc.is_server_ready(client_timeout=timeout_s))
            return bool(await self._tc.is_model_ready(model, version, client_timeout=timeout_s))
        except RPC_ERRORS:
            return False

    async def wait_until_ready(
        self, timeout_s: float, *, model: str | None = None, version: str = "", poll_interval_s: float = 0.1
    ) -> None:
        """Wait until the server (and ``model``, if given) is ready; errors as ``Client.wait_until_ready``."""
        self._check_open()
        wait = ReadyWait(self.url, timeout_s, model)
        while True:
            try:
                wait.server_ready = bool(
                    await self._tc.is_server_ready(client_timeout=wait.probe_timeout_s())
                )
                wait.reached = True
                if wait.server_ready and (
                    model is None
                    or await self._tc.is_model_ready(model, version, client_timeout=wait.probe_timeout_s())
                ):
                    return
            except RPC_ERRORS as exc:
                wait.failed(exc)
            if wait.deadline.expired():
                raise wait.error() from wait.last
            await asyncio.sleep(wait.deadline.cap(poll_interval_s))


class AsyncResponseStream:
    """The responses of one streamed request, as an async iterator of ``{name: array}``.

    Opened on ``async with`` or the first ``__anext__``; ends cleanly after the
    model's final response; ``aclose()``, leaving ``async with`` early, or
    cancelling the task that waits on it cancels the gRPC call.
    """

    def __init__(
        self,
        client: AsyncClient,
        model: str,
        inputs: Mapping[str, Array],
        *,
        version: str,
        outputs: Sequence[str] | None,
        request_id: str,
        priority: int,
        parameters: Mapping[str, str | int | float | bool] | None,
        timeout_s: float | None,
    ) -> None:
        self._client = client
        self._model = model
        self._inputs = inputs
        self._version = version
        self._outputs = outputs
        self._request_id = request_id
        self._priority = priority
        self._parameters = parameters
        self._deadline = Deadline(timeout_s)
        self._call: Any = None
        self._done = False

    async def _open(self) -> None:
        client = self._client
        client._check_open()
        spec = await client.model_spec(
            self._model,
            version=self._version,
            timeout_s=self._deadline.timeout_s or client.timeout_s,
        )
        prepared = client._stream_request(
            spec,
            self._inputs,
            version=self._version,
            outputs=self._outputs,
            request_id=self._request_id,
            priority=self._priority,
            parameters=self._parameters,
        )
        request = {**prepared.send_kwargs(), "enable_empty_final_response": True}

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # WAR: tritonclient 2.73's asyncio stream_infer drops enable_empty_final_response,
            # so the server never sends the flag-only final response. Instead our side
            # half-closes after the one request: Triton then ends the stream (status OK)
            # once that request is complete, i.e. right after its final response.
            # Should a later tritonclient pass the flag on, is_final_response() sees it.
            yield request

        self._call = client._tc.stream_infer(requests(), stream_timeout=self._deadline.remaining_s())

    def __aiter__(self) -> AsyncResponseStream:
        return self

    async def __anext__(self) -> dict[str, Array]:
        if self._done:
            raise StopAsyncIteration
        try:
            if self._call is None:
                await self._open()
            while True:
                try:
                    result, error = await self._call.__anext__()
                except StopAsyncIteration:
                    # The server completed the request (see the WAR in _open).
                    self._done = True
                    raise
                if error is not None:
                    raise ServerSideError(
                        f"model '{self._model}' at {self._client.url} reported an error in its stream: {error}",
                        model=self._model,
                        hint="read the server log for this model",
                    ) from error
                response = result.get_response()
                outputs = decode_response(response, model=self._model)
                if is_final_response(response):
                    self._done = True
                    if not outputs:
                        raise StopAsyncIteration
                if outputs:
                    return outputs
        except RPC_ERRORS as exc:
            self._cancel()
            raise await self._client._translate(
                exc, model=self._model, version=self._version, operation="stream", deadline=self._deadline
            ) from exc
        except StopAsyncIteration:
            raise
        except BaseException:
            # Errors above, task cancellation, Ctrl-C: the call must not outlive us.
            self._cancel()
            raise

    def _cancel(self) -> None:
        if self._done and self._call is None:
            return
        was_done, self._done = self._done, True
        if self._call is not None and not was_done:
            self._call.cancel()

    async def aclose(self) -> None:
        """Cancel the request if still running. Idempotent."""
        self._cancel()

    @property
    def done(self) -> bool:
        """True after the final response, an error, or ``aclose()``."""
        return self._done

    async def __aenter__(self) -> AsyncResponseStream:
        if self._call is None and not self._done:
            try:
                await self._open()
            except BaseException:
                self._done = True
                raise
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
