"""``AsyncResponseStream``: the responses of one request to a decoupled model, for ``AsyncClient``."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator, Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tritonkit.client._base import RPC_ERRORS, Array
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import PreparedRequest, decode_response, is_final_response
from tritonkit.client._retry import Deadline
from tritonkit.errors import DeadlineExceededError, InvalidInputError, ServerSideError

if TYPE_CHECKING:
    from tritonkit.client._async import AsyncClient

__all__ = ["AsyncResponseStream"]


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
        idle_timeout_s: float | None,
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
        self._idle_timeout_s = idle_timeout_s
        # The call lives in a one-slot holder that a finalizer can reach without the stream.
        self._holder: list[Any] = [None]
        self._finalizer = weakref.finalize(self, _cancel_call, self._holder)
        self._done = False

    @property
    def _call(self) -> Any:
        return self._holder[0]

    async def _open(self) -> None:
        client = self._client
        client._check_open()
        timeout_s = self._deadline.timeout_s or client.timeout_s
        meta = await client.model_metadata(self._model, version=self._version, timeout_s=timeout_s)
        try:
            prepared = self._prepare(meta)
        except InvalidInputError:
            if not client._stale(self._model, self._version, meta):
                raise
            prepared = self._prepare(
                await client.model_metadata(self._model, version=self._version, timeout_s=timeout_s)
            )
        request = {**prepared.send_kwargs(), "enable_empty_final_response": True}

        async def requests() -> AsyncIterator[dict[str, Any]]:
            # WAR: tritonclient 2.73's asyncio stream_infer drops enable_empty_final_response,
            # so the server never sends the flag-only final response. Instead our side
            # half-closes after the one request: Triton then ends the stream (status OK)
            # once that request is complete, i.e. right after its final response.
            # Should a later tritonclient pass the flag on, is_final_response() sees it.
            yield request

        self._holder[0] = client._tc.stream_infer(requests(), stream_timeout=self._deadline.remaining_s())

    def _prepare(self, meta: ModelMetadata) -> PreparedRequest:
        return self._client._stream_request(
            meta,
            self._inputs,
            version=self._version,
            outputs=self._outputs,
            request_id=self._request_id,
            priority=self._priority,
            parameters=self._parameters,
        )

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
            raise DeadlineExceededError(
                f"stream from model '{self._model}' at {self._client.url}: no response for "
                f"{self._idle_timeout_s:g} s; the request was cancelled",
                model=self._model,
                hint="the server may be frozen or overloaded; raise idle_timeout_s "
                "(AsyncClient(stream_idle_timeout_s=...)) for models that think longer between responses",
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
                    raise ServerSideError(
                        f"model '{self._model}' at {self._client.url} reported an error in its stream: {error}",
                        model=self._model,
                        hint="read the server log for this model",
                    ) from error
                response = result.get_response()
                outputs = decode_response(response, model=self._model)
                if is_final_response(response):
                    self._done = True
                    self._finalizer.detach()
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
        except asyncio.CancelledError:
            self._cancel()
            closed = self._client._cancelled("stream", self._model)
            if closed is None:
                raise
            raise closed from None
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
