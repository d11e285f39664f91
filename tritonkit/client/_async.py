"""``AsyncClient``: asyncio I/O over ``tritonclient.grpc.aio``; everything else is shared."""

from __future__ import annotations

import asyncio
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import TypeVar

import tritonclient.grpc.aio as aioclient

from tritonkit.client._async_stream import AsyncResponseStream
from tritonkit.client._base import ClientBase
from tritonkit.client._channel import aio_connect, aio_is_ready, aio_still_connected
from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._health import ProbeLog, ReadyWait
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._response import decode_response
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._settings import PROBE_TIMEOUT_S, SHM_CLOSE_WAIT_S, UNSET, Unset
from tritonkit.client._shm import Segment, SharedMemoryMode, ShmCall, ShmUnusable
from tritonkit.client._streaming import StreamRequest
from tritonkit.errors import ClientError, ConnectError, InvalidInputError

__all__ = ["AsyncClient", "AsyncResponseStream"]

T = TypeVar("T")


def _own_cancellation() -> bool:
    """True when the current task itself is being cancelled (not only a call it awaited)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return task is None or cancelling is None or bool(cancelling())


class AsyncClient(ClientBase):
    """The asyncio twin of ``Client``: same options, same checks, same errors.

    Example::

        async with AsyncClient("127.0.0.1:8001", timeouts=Timeouts(call_s=5.0)) as client:
            outputs = await client.infer("add_sub", {"INPUT0": a, "INPUT1": b})

    Use it from one event loop (the one of its first call: another loop is
    refused with ``ClientError``); many calls may be in flight at once.
    Cancelling a task cancels its gRPC call; closing the client ends the calls
    still in flight with ``ClientClosedError``.
    """

    def _open_io(self) -> None:
        # Created on first use, inside the event loop that will drive it.
        self._tc_aio: aioclient.InferenceServerClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._streams: weakref.WeakSet[AsyncResponseStream] = weakref.WeakSet()
        self._metadata_locks: dict[tuple[str, str], asyncio.Lock] = {}

    def _bind_loop(self) -> None:
        """Tie the client to the running event loop on first use; refuse any other loop after that."""
        loop = asyncio.get_running_loop()
        if self._loop is None:
            self._loop = loop
        elif loop is not self._loop:
            raise ClientError(
                f"this AsyncClient for {self.url} belongs to another event loop: its gRPC channel "
                "cannot be used from this one",
                hint="create one AsyncClient per event loop (each asyncio.run() starts a new loop), "
                "e.g. inside the coroutine that asyncio.run() runs",
            )

    @property
    def _tc(self) -> aioclient.InferenceServerClient:
        if self._loop is not asyncio.get_running_loop():
            self._bind_loop()
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
        """Cancel open streams and calls in flight, release shared memory, close the channel. Idempotent.

        Calls still in flight end with ``ClientClosedError``. Shared memory
        regions the server still holds are waited for up to ``SHM_CLOSE_WAIT_S``,
        then released in the background (see ``Client.close``).
        """
        if self._closed:
            return
        self._closed = True
        for stream in list(self._streams):
            await stream.aclose()
        if self._tc_aio is not None:
            await self._tc_aio.close()
        if self._janitor.pending():
            await asyncio.get_running_loop().run_in_executor(None, self._janitor.wait, SHM_CLOSE_WAIT_S)

    aclose = close

    # ---- errors ----------------------------------------------------------
    async def _connect(self, deadline: Deadline, operation: str, model: str | None) -> None:
        """Wait for a connection; the request is sent only after this (see ``_channel``)."""
        await aio_connect(self._tc._channel, self._connect_wait(deadline, operation, model))

    async def _translate(self, failed: FailedCall) -> ClientError:
        """The ``ClientError`` for ``failed``."""
        # First, before anything else: whether the connection outlived the error.
        channel = None if self._tc_aio is None else self._tc_aio._channel
        cause, probe = self._explain(failed, connected=await aio_still_connected(channel, failed.status))
        if probe is not None:
            try:
                ready: bool | None = bool(
                    await self._tc.is_model_ready(
                        probe, failed.version, client_timeout=ProbeLog.timeout_s(failed.deadline)
                    )
                )
            except RPC_ERRORS:
                ready = None
            cause = self._probed(probe, failed.version, ready)
        return self._error(failed, cause)

    def _raise_if_closed(self, operation: str, model: str | None) -> None:
        """Raise ``ClientClosedError`` for a gRPC call cancelled by ``close()``; return for a task cancel.

        grpc.aio cancels the calls in flight when the channel closes: that is our
        close(), not a cancellation of the caller's task, which gets it as raised.
        """
        if self._closed and not _own_cancellation():
            raise self._closed_during(operation, model) from None

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
        """Run ``fn`` (one attempt of a read), translating failures and retrying what the policy allows."""
        attempt = 0
        while True:
            attempt += 1
            if attempt > 1 and deadline.expired():
                raise self._expired(deadline, operation, model)
            started = time.monotonic()
            try:
                if not aio_is_ready(self._tc._channel):
                    await self._connect(deadline, operation, model)
                return await fn()
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=retry, deadline=deadline)
            except RPC_ERRORS as exc:
                error = await self._translate(
                    FailedCall(exc, operation, model, version, deadline, started=started)
                )
                # A read: sending it again is harmless even if it was lost mid-call.
                delay = self._retry_or_raise(
                    error, exc, attempt=attempt, retry=retry, deadline=deadline, sent=False
                )
            except asyncio.CancelledError:
                self._raise_if_closed(operation, model)
                raise
            await asyncio.sleep(delay)

    # ---- model metadata --------------------------------------------------
    async def _metadata_once(self, model: str, version: str, deadline: Deadline) -> ModelMetadata:
        key = (model, version)
        meta = self._metadata.get(key)
        if meta is not None:
            return meta
        # One fetch for a crowd of first calls, not one each.
        lock = self._metadata_locks.setdefault(key, asyncio.Lock())
        async with lock:
            meta = self._metadata.get(key)
            if meta is None:
                metadata = await self._tc.get_model_metadata(
                    model, version, client_timeout=self._timeout(deadline, "model metadata", model)
                )
                config = await self._tc.get_model_config(
                    model, version, client_timeout=self._timeout(deadline, "model config", model)
                )
                meta = self._remember_metadata(model, version, metadata, config)
        return meta

    async def model_metadata(
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
        return await self._call(
            lambda: self._metadata_once(model, version, deadline),
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
        if self._loop is not asyncio.get_running_loop():
            self._bind_loop()
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
                tc = self._tc_aio if self._tc_aio is not None else self._tc
                if not aio_is_ready(tc._channel):
                    await self._connect(deadline, "infer", model)
                meta = self._metadata.get(key)
                fetched = meta is None
                if meta is None:
                    meta = await self._metadata_once(model, version, deadline)
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
                        meta, fetched = await self._metadata_once(model, version, deadline), True
                sent = True
                if prepared.shm is None:
                    result = await tc.infer(
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
                    return await self._send_shm(prepared, deadline, strict=self._strict_shm(shared_memory))
                except ShmUnusable:
                    return await self._send(prepared.in_band(), deadline)
            except ConnectError as not_sent:
                delay = self._retry_or_raise(not_sent, None, attempt=attempt, retry=policy, deadline=deadline)
            except RPC_ERRORS as exc:
                failed = FailedCall(exc, "infer", model, version, deadline, meta, server_timeout_us, started)
                delay = self._retry_or_raise(
                    await self._translate(failed),
                    exc,
                    attempt=attempt,
                    retry=policy,
                    deadline=deadline,
                    sent=sent,
                )
            except asyncio.CancelledError:
                self._raise_if_closed("infer", model)
                raise
            await asyncio.sleep(delay)

    async def _send(
        self, prepared: PreparedRequest, deadline: Deadline, segment: Segment | None = None
    ) -> dict[str, Array]:
        # The call inlined in infer(), for shared memory and the in-band fallback (not the hot path).
        result = await self._tc.infer(
            **prepared.send_kwargs(), client_timeout=self._timeout(deadline, "infer", prepared.meta.name)
        )
        return decode_response(result.get_response(), prepared, segment)

    async def _send_shm(
        self, prepared: PreparedRequest, deadline: Deadline, *, strict: bool
    ) -> dict[str, Array]:
        plan = prepared.shm
        assert plan is not None
        call = ShmCall(plan)
        try:
            try:
                await self._tc.register_system_shared_memory(
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
                outputs = await self._send(prepared, deadline, call.segment)
            except RPC_ERRORS as exc:
                call.ended(exc)
                raise
            call.ended(None)
            return outputs
        finally:
            # Local segment first, synchronously: it must never outlive the call, even
            # when the task is cancelled.
            if call.release_local():
                released = False
                try:
                    if call.answered and not self._closed:
                        await self._tc.unregister_system_shared_memory(
                            plan.region, client_timeout=PROBE_TIMEOUT_S
                        )
                        released = True
                except RPC_ERRORS:
                    # WAR: tritonserver 2.51 may refuse for a moment after the reply ("currently
                    # in use"): the janitor tries again.
                    pass
                finally:
                    if not released:
                        # The server still runs the request (deadline, cancellation) or has not
                        # let go yet: the janitor unregisters it when the request really ended.
                        self._janitor.add(plan.region)

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
    ) -> AsyncResponseStream:
        """Stream the responses of one request to a (decoupled) model::

            async with client.stream("llm", {"PROMPT": prompt}) as responses:
                async for response in responses:
                    print(response["TOKEN"])

        The request is checked and sent on entering ``async with`` (or on the
        first iteration); the stream ends after the model's final response.
        Leaving early (``aclose()``, ``async with``, an ``async for`` left by
        ``break`` or an exception, the last reference dropped) or cancelling the
        consuming task cancels the request. ``timeout_s`` and ``idle_timeout_s``
        as in ``Client.stream``.
        """
        self._check_open()
        stream = AsyncResponseStream(
            self,
            StreamRequest(model, inputs, version, outputs, request_id, priority, parameters),
            timeout_s=timeout_s,
            idle_timeout_s=self.timeouts.stream_idle_s if idle_timeout_s is UNSET else idle_timeout_s,
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
                ready = bool(await self._tc.is_server_ready(client_timeout=wait.probe_timeout_s()))
                if wait.server_answered(ready) and (
                    model is None
                    or await self._tc.is_model_ready(model, version, client_timeout=wait.probe_timeout_s())
                ):
                    return
            except RPC_ERRORS as exc:
                wait.failed(exc)
            await asyncio.sleep(wait.pause_s(poll_interval_s))
