"""What both clients' response streams share: the request they send, and how a stream ends badly.

No I/O here: ``ResponseStream`` (threads) and ``AsyncResponseStream`` (asyncio)
receive the responses; both decode them and decide with these.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, ParamValue, PreparedRequest, prepare_request
from tritonkit.errors import DeadlineExceededError, ServerSideError

__all__ = ["StreamRequest", "idle_timeout_error", "in_band_error"]


@dataclass(frozen=True, slots=True)
class StreamRequest:
    """What the caller asked to stream, kept to check it again should the model's metadata change."""

    model: str
    inputs: Mapping[str, Array]
    version: str
    outputs: Sequence[str] | None
    request_id: str
    priority: int
    parameters: Mapping[str, ParamValue] | None
    headers: dict[str, str] | None = None

    def prepare(self, meta: ModelMetadata, max_message_bytes: int) -> PreparedRequest:
        """The checked request: every tensor in the message (a stream outlives a shared memory segment)."""
        prepared = prepare_request(
            meta,
            self.inputs,
            outputs=self.outputs,
            request_id=self.request_id,
            priority=self.priority,
            parameters=self.parameters,
            server_timeout_us=None,
            shm_threshold_bytes=None,
            model_version=self.version,
            max_message_bytes=max_message_bytes,
        )
        prepared.headers = self.headers
        return prepared

    @staticmethod
    def send_kwargs(prepared: PreparedRequest) -> dict[str, Any]:
        """Keyword arguments of tritonclient's streaming send, asking for the final-response flag."""
        return {**prepared.send_kwargs(), "enable_empty_final_response": True}


def idle_timeout_error(model: str, url: str, idle_timeout_s: float, client: str) -> DeadlineExceededError:
    """No response came for ``idle_timeout_s``; the stream was cancelled. ``client``: the class, for the hint."""
    return DeadlineExceededError(
        f"stream from model '{model}' at {url}: no response for {idle_timeout_s:g} s; the request was cancelled",
        model=model,
        hint="the server may be frozen or overloaded; raise idle_timeout_s "
        f"({client}(timeouts=Timeouts(stream_idle_s=...))) for models that think longer between responses",
    )


def in_band_error(model: str, url: str, error: BaseException) -> ServerSideError:
    """An error the model sent in a response of its stream (it carries no gRPC status code)."""
    return ServerSideError(
        f"model '{model}' at {url} reported an error in its stream: {error}",
        model=model,
        hint="read the server log for this model",
    )
