"""``AsyncResponseStream``: the responses of one request to a decoupled model, for ``AsyncClient``."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Awaitable
from types import TracebackType
from typing import Any, Protocol

import tritonclient.grpc.aio as aioclient

from tritonkit.client._errors import RPC_ERRORS, FailedCall
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._response import decode_response, is_final_response
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._settings import Unset
from tritonkit.client._streaming import StreamRequest, idle_timeout_error, in_band_error
from tritonkit.errors import ClientError

__all__ = ["AsyncResponseStream", "AsyncStreamOwner"]


class AsyncStreamOwner(Protocol):
    """What an ``AsyncResponseStream`` uses of the ``AsyncClient`` that opened it: the checks and
    the request building before the call, its gRPC client, and its error translation. Written
    here so that the stream does not import the client that imports it."""

    url: str
    max_message_bytes: int
    _call_s: float | None

    @property
    def _tc(self) -> aioclient.InferenceServerClient: ...

    def _check_open(self) -> None: ...

    def model_metadata(
        self, model: str, *, version: str = "", timeout_s: float | None | Unset = ...,
        retry: RetryPolicy | None | Unset = ...,
    ) -> Awaitable[ModelMetadata]: ...

    def _prepare_stream(self, request: StreamRequest, meta: ModelMetadata) -> PreparedRequest | None: ...

    def _translate(self, failed: FailedCall) -> Awaitable[ClientError]: ...

    def _raise_if_closed(self, operation: str, model: str | None) -> None: ...


def _cancel_call(holder: list[Any]) -> None:
    """Cancel the gRPC call in ``holder`` (a finalizer: it must not hold the stream itself)."""
    call = holder[0]
    holder[0] = None
    if call is not None:
        call.cancel()


class AsyncResponseStream:
    """The responses of one streamed request, as an async iterator of ``{name: array}``.

    Opened on ``async with`` or the first ``__anext__``; ends cleanly after the
    model's final response. The gRPC call is cancelled by ``aclose()``, leaving
    ``async with`` early, leaving an ``async for`` early, cancelling the task
    that waits on it, the idle timeout, the client's close, and garbage collection.
    """

    def __init__(
        self,
        client: AsyncStreamOwner,
        request: StreamRequest,
        *,
        timeout_s: float | None,
        idle_timeout_s: float | None,
    ) -> None:
        self._client = client
        self._request = request
        self._model = request.model
        self._deadline = Deadline(timeout_s)
        self._idle_timeout_s = idle_timeout_s
        # The call lives in a one-slot holder that a finalizer can reach without the stream.
        self._holder: list[Any] = [None]
        self._finalizer = weakref.finalize(self, _cancel_call, self._holder)
        self._done = False
        self._prepared: PreparedRequest | None = None

    @property
    def _call(self) -> Any:
        return self._holder[0]

    async def _open(self) -> None:
        client, request = self._client, self._request
        client._check_open()
        timeout_s = self._deadline.timeout_s or client._call_s
        metadata = client.model_metadata
        prepared = client._prepare_stream(
            request, await metadata(request.model, version=request.version, timeout_s=timeout_s)
        )
        if prepared is None:  # the model changed since its metadata was cached
            prepared = request.prepare(
                await metadata(request.model, version=request.version, timeout_s=timeout_s),
                client.max_message_bytes,
            )
        self._prepared = prepared
        send_kwargs = StreamRequest.send_kwargs(prepared)

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # WAR: tritonclient 2.73's asyncio stream_infer drops enable_empty_final_response,
            # so the server never sends the flag-only final response. Instead our side
            # half-closes after the one request: Triton then ends the stream (status OK)
            # once that request is complete, i.e. right after its final response.
            # Should a later tritonclient pass the flag on, is_final_response() sees it.
            yield send_kwargs

        self._holder[0] = client._tc.stream_infer(requests(), stream_timeout=self._deadline.remaining_s(),
                                                     headers=prepared.headers)

    async def __aiter__(self) -> AsyncIterator[dict[str, Array]]:
        # An async generator, so that leaving the loop early (break, an exception) cancels
        # the request even while the stream is still referenced: asyncio closes the
        # abandoned generator, which runs the finally below.
        try:
            while True:
                try:
                    response = await self.__anext__()
                except StopAsyncIteration:
                    return
                yield response
        finally:
            if not self._done:
                self._cancel()

    async def _next_message(self) -> Any:
        if self._idle_timeout_s is None:
            return await self._call.__anext__()
        try:
            return await asyncio.wait_for(self._call.__anext__(), self._idle_timeout_s)
        except asyncio.TimeoutError:
            self._cancel()
            raise idle_timeout_error(
                self._model, self._client.url, self._idle_timeout_s, "AsyncClient"
            ) from None

    async def __anext__(self) -> dict[str, Array]:
        if self._done:
            raise StopAsyncIteration
        try:
            if self._call is None:
                await self._open()
            while True:
                try:
                    result, error = await self._next_message()
                except StopAsyncIteration:
                    # The server completed the request (see the WAR in _open).
                    self._done = True
                    self._finalizer.detach()
                    raise
                if error is not None:
                    raise in_band_error(self._model, self._client.url, error) from error
                response = result.get_response()
                assert self._prepared is not None  # set by _open
                outputs = decode_response(response, self._prepared)
                if is_final_response(response):
                    self._done = True
                    self._finalizer.detach()
                    if not outputs:
                        raise StopAsyncIteration
                if outputs:
                    return outputs
        except RPC_ERRORS as exc:
            self._cancel()
            failed = FailedCall(exc, "stream", self._model, self._request.version, self._deadline,
                                headers=self._request.headers)
            raise await self._client._translate(failed) from exc
        except StopAsyncIteration:
            raise
        except asyncio.CancelledError:
            self._cancel()
            self._client._raise_if_closed("stream", self._model)
            raise
        except BaseException:
            # Errors above, Ctrl-C: the call must not outlive us.
            self._cancel()
            raise

    def _cancel(self) -> None:
        was_done, self._done = self._done, True
        if not was_done:
            _cancel_call(self._holder)
        self._finalizer.detach()

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
