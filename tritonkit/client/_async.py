"""``AsyncClient``: asyncio I/O over ``tritonclient.grpc.aio``; everything else is shared."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable
from types import TracebackType
from typing import Any, TypeVar

import tritonclient.grpc.aio as aioclient

from tritonkit.client._async_stream import AsyncResponseStream
from tritonkit.client._base import InferArgs
from tritonkit.client._channel import aio_connect, aio_is_ready, aio_still_connected
from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._flow import Connect, Flows, Metadata, Rpc, Sleep, Step, Steps, StillConnected, advance
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array
from tritonkit.client._response import decode_response
from tritonkit.client._retry import Deadline
from tritonkit.client._settings import SHM_CLOSE_WAIT_S
from tritonkit.client._streaming import StreamRequest
from tritonkit.errors import ClientError

__all__ = ["AsyncClient", "AsyncResponseStream"]

T = TypeVar("T")


def _own_cancellation() -> bool:
    """True when the current task itself is being cancelled (not only a call it awaited)."""
    task = asyncio.current_task()
    cancelling = getattr(task, "cancelling", None)  # Python 3.11+
    return task is None or cancelling is None or bool(cancelling())


class AsyncClient(
    Flows[
        Awaitable[dict[str, Array]],
        Awaitable[ModelMetadata],
        Awaitable[bool],
        Awaitable[None],
        AsyncResponseStream,
    ]
):
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
            self._tc_aio = aioclient.InferenceServerClient(self.url, **self._tc_kwargs)
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

    # ---- the driver: performs the steps of a call (see ``_flow``) ----------
    async def _run(self, steps: Steps[T], operation: str, model: str | None) -> T:
        """Perform every step ``steps`` yields, awaited; throw failures back in; return its result."""
        result: Any = None
        failure: BaseException | None = None
        try:
            while True:
                done, step = advance(steps, result, failure)
                if done:
                    return step
                try:
                    result, failure = await self._perform(step), None
                except BaseException as exc:  # noqa: BLE001 - the call decides; what it does not handle comes back
                    result, failure = None, exc
        except asyncio.CancelledError:
            self._raise_if_closed(operation, model)
            raise

    async def _infer(self, args: InferArgs) -> dict[str, Array]:
        first = self._first_attempt(args)
        failure: BaseException | None = None
        if first is not None:
            prepared, _, _, client_timeout_s = first
            try:
                result = await prepared.send(self._tc.infer, client_timeout=client_timeout_s, headers=prepared.headers)
            except RPC_ERRORS as exc:
                failure = exc
            except asyncio.CancelledError:
                self._raise_if_closed("infer", args[0])
                raise
            else:
                return decode_response(result.get_response(), prepared)
        return await self._run(self._infer_steps(args, first, failure), "infer", args[0])

    def _channel_ready(self) -> bool:
        # The channel as it is, without the loop check of ``_tc``: the step that follows
        # (the send, or the wait for a connection) goes through ``_tc`` and makes it.
        tc = self._tc_aio
        return tc is not None and aio_is_ready(tc._channel)

    async def _perform(self, step: Step) -> Any:
        if type(step) is Rpc:
            return await getattr(self._tc, step.method)(*step.args, **{"headers": self._headers, **step.kwargs})
        if type(step) is Connect:
            await aio_connect(
                self._tc._channel, self._connect_wait(step.deadline, step.operation, step.model)
            )
            return None
        if type(step) is Metadata:
            return await self._metadata_once(step.model, step.version, step.deadline)
        if type(step) is StillConnected:
            return await aio_still_connected(
                None if self._tc_aio is None else self._tc_aio._channel, step.status
            )
        assert type(step) is Sleep
        await asyncio.sleep(step.seconds)
        return None

    async def _translate(self, failed: FailedCall) -> ClientError:
        """The ``ClientError`` for ``failed``."""
        return await self._run(self._translate_steps(failed), failed.operation, failed.model)

    def _raise_if_closed(self, operation: str, model: str | None) -> None:
        """Raise ``ClientClosedError`` for a gRPC call cancelled by ``close()``; return for a task cancel.

        grpc.aio cancels the calls in flight when the channel closes: that is our
        close(), not a cancellation of the caller's task, which gets it as raised.
        """
        if self._closed and not _own_cancellation():
            raise self._closed_during(operation, model) from None

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
                meta = await self._run(self._fetch_steps(model, version, deadline), "model metadata", model)
        return meta

    # ---- streaming -------------------------------------------------------
    def _open_stream(
        self, request: StreamRequest, timeout_s: float | None, idle_timeout_s: float | None
    ) -> AsyncResponseStream:
        stream = AsyncResponseStream(self, request, timeout_s=timeout_s, idle_timeout_s=idle_timeout_s)
        self._streams.add(stream)
        return stream
