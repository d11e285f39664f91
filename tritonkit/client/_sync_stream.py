"""``ResponseStream``: the responses of one request to a decoupled model, for ``Client``."""

from __future__ import annotations

import contextlib
import functools
import queue
import threading
import weakref
from collections.abc import Iterator
from types import TracebackType
from typing import Any, Protocol

import tritonclient.grpc as grpcclient

from tritonkit.client._channel import READY, cygrpc_channel
from tritonkit.client._errors import FailedCall, status_of
from tritonkit.client._request import Array, PreparedRequest
from tritonkit.client._response import decode_response, is_final_response
from tritonkit.client._retry import Deadline
from tritonkit.client._streaming import StreamRequest, idle_timeout_error, in_band_error
from tritonkit.errors import ClientError

__all__ = ["ResponseStream", "StreamOwner"]


class StreamOwner(Protocol):
    """What a ``ResponseStream`` uses of the ``Client`` that opened it: its address and channel
    options (each stream has its own tritonclient object), and its error translation. Written
    here so that the stream does not import the client that imports it."""

    url: str
    _tc_kwargs: dict[str, Any]

    def _translate(self, failed: FailedCall, *, connected: bool | None = None) -> ClientError: ...


def _hand_over(inbox: queue.SimpleQueue[tuple[Any, BaseException | None]], result: Any, error: Any) -> None:
    # Runs on tritonclient's reader thread: only hand over, never block or raise. A plain
    # function over the queue, not a method: the reader thread must not keep the stream alive.
    inbox.put((result, error))


class _StreamHandle:
    """The gRPC side of one stream, kept apart so that a finalizer can stop it without the stream."""

    def __init__(self, tc: grpcclient.InferenceServerClient) -> None:
        self.lock = threading.Lock()
        self.tc: grpcclient.InferenceServerClient | None = tc

    def connected(self) -> bool:
        tc = self.tc
        return tc is not None and cygrpc_channel(tc).check_connectivity_state(False) == READY

    def stop(self, cancel: bool) -> None:
        with self.lock:
            tc, self.tc = self.tc, None
        if tc is not None:
            stream = getattr(tc, "_stream", None)
            # Not cancelling lets the final exchange complete; cancelling stops the model's work.
            with contextlib.suppress(Exception):
                tc.stop_stream(cancel_requests=cancel)
            # WAR: tritonclient 2.73's _InferStream.close(cancel_requests=True) cancels the call
            # but never ends its request iterator, so gRPC's thread that reads requests waits in
            # the request queue forever, holding the stream and its channel: one thread and about
            # 40 kB per abandoned stream (2,000 streams: 1,990 threads, +80 MB). The end marker
            # it waits for lets that thread finish; on a stream that ended normally it is unread.
            queue_ = getattr(stream, "_request_queue", None)
            if queue_ is not None:
                queue_.put(None)
            tc.close()


class ResponseStream:
    """The responses of one streamed request, as an iterator of ``{name: array}``.

    Ends cleanly after the model's final response. The request is cancelled on
    the server by ``close()``, on leaving ``with``, on leaving a ``for`` loop
    over it early, on the owning client's close, when no response came within
    the idle timeout, and when the stream is garbage collected.
    """

    def __init__(
        self, client: StreamOwner, prepared: PreparedRequest, deadline: Deadline, idle_timeout_s: float | None
    ) -> None:
        self._client = client
        self._prepared = prepared
        self._deadline = deadline
        self._idle_timeout_s = idle_timeout_s
        self._queue: queue.SimpleQueue[tuple[Any, BaseException | None]] = queue.SimpleQueue()
        self._done = False
        # tritonclient allows one stream per client object: each stream gets its own
        # (the channel's TCP connection is shared by gRPC's subchannel pool).
        self._handle = _StreamHandle(
            grpcclient.InferenceServerClient(client.url, **client._tc_kwargs)
        )
        # Whoever drops the last reference, the request is cancelled: the finalizer holds
        # the handle, never the stream.
        self._finalizer = weakref.finalize(self, self._handle.stop, True)
        tc = self._handle.tc
        assert tc is not None
        try:
            tc.start_stream(
                callback=functools.partial(_hand_over, self._queue), stream_timeout=deadline.remaining_s(),
                headers=prepared.headers)
            tc.async_stream_infer(**StreamRequest.send_kwargs(prepared))
        except BaseException:
            self.close()
            raise

    def __iter__(self) -> Iterator[dict[str, Array]]:
        # A generator, so that leaving the loop early (break, an exception, the loop's
        # generator closed) cancels the request even while the stream is still referenced.
        try:
            while True:
                try:
                    response = self.__next__()
                except StopIteration:
                    return
                yield response
        finally:
            if not self._done:
                self.close()

    def __next__(self) -> dict[str, Array]:
        model = self._prepared.meta.name
        while not self._done:
            try:
                result, error = self._queue.get(timeout=self._idle_timeout_s)
            except queue.Empty:
                self.close()
                assert self._idle_timeout_s is not None  # the queue waits forever without one
                raise idle_timeout_error(model, self._client.url, self._idle_timeout_s, "Client") from None
            if error is not None:
                connected = self._handle.connected()
                self.close()
                if status_of(error) is None:
                    # An in-band error the model sent in a response: it carries no status code.
                    raise in_band_error(model, self._client.url, error) from error
                failed = FailedCall(error, "stream", model, self._prepared.model_version, self._deadline,
                                    headers=self._prepared.headers)
                raise self._client._translate(failed, connected=connected) from error
            response = result.get_response()
            outputs = decode_response(response, self._prepared)
            if is_final_response(response):
                self._finish(cancel=False)
            if outputs:
                return outputs
        raise StopIteration

    def _finish(self, *, cancel: bool) -> None:
        self._done = True
        self._handle.stop(cancel)
        self._finalizer.detach()

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
