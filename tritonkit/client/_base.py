"""State and decisions both clients share; no I/O happens here."""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
from tritonclient.grpc import KeepAliveOptions

from tritonkit.client._errors import status_of
from tritonkit.client._model import ModelSpec
from tritonkit.client._request import PreparedRequest, prepare_request
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._shm import PendingUnregister, SharedMemoryMode, is_local_url
from tritonkit.errors import ClientError, ConfigError, DeadlineExceededError, InvalidInputError

__all__ = [
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_TIMEOUT_S",
    "UNSET",
    "ClientBase",
    "Unset",
    "normalize_url",
]

log = logging.getLogger("tritonkit.client")

# tritonclient's own limit for both directions (2 GiB - 1): tensors travel in one message.
_MAX_MESSAGE_BYTES = 2**31 - 1

#: Deadline of a unary call when neither the client nor the call sets one.
DEFAULT_TIMEOUT_S = 60.0
#: Tensors at least this large go through system shared memory when the server is local.
DEFAULT_SHM_THRESHOLD_BYTES = 1 << 20
#: How long a follow-up health probe may take when resolving an UNAVAILABLE status.
PROBE_TIMEOUT_S = 1.0


class Unset(enum.Enum):
    """Marks a keyword left to the client's default (``None`` already means "no deadline")."""

    UNSET = "unset"


UNSET = Unset.UNSET


def normalize_url(url: str) -> str:
    """``host:port`` as gRPC wants it; accepts ``grpc://host:port``, adds port 8001 when missing."""
    text = url.strip()
    for scheme in ("grpc://", "dns:///"):
        if text.startswith(scheme):
            text = text[len(scheme) :]
    if "://" in text:
        raise ConfigError(
            f"client URL {url!r} is not a gRPC address",
            hint="pass host:port of Triton's gRPC endpoint (default port 8001), e.g. 127.0.0.1:8001",
        )
    text = text.rstrip("/")
    if not text:
        raise ConfigError("client URL is empty", hint="pass host:port, e.g. 127.0.0.1:8001")
    if text.startswith("["):
        return text if "]:" in text else text + ":8001"
    colons = text.count(":")
    if colons == 0:
        return text + ":8001"
    if colons > 1:  # a bare IPv6 address
        return f"[{text}]:8001"
    return text


def channel_args(reconnect_backoff_max_s: float) -> list[tuple[str, Any]]:
    """tritonclient's own channel defaults, plus a short reconnect backoff.

    gRPC's default reconnect backoff grows to 120 s; while it waits, every call
    fails at once with UNAVAILABLE even after the server is back. A service
    that retries across a server restart wants the channel to look again soon.
    """
    keepalive = KeepAliveOptions()
    backoff_ms = max(100, int(reconnect_backoff_max_s * 1000))
    return [
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", keepalive.keepalive_time_ms),
        ("grpc.keepalive_timeout_ms", keepalive.keepalive_timeout_ms),
        ("grpc.keepalive_permit_without_calls", keepalive.keepalive_permit_without_calls),
        ("grpc.http2.max_pings_without_data", keepalive.http2_max_pings_without_data),
        ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ("grpc.min_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ("grpc.max_reconnect_backoff_ms", backoff_ms),
    ]


class ClientBase:
    """Configuration, model cache and retry arithmetic shared by ``Client`` and ``AsyncClient``."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float | None,
        retry: RetryPolicy | None,
        shared_memory: SharedMemoryMode,
        shm_threshold_bytes: int,
        reconnect_backoff_max_s: float,
    ) -> None:
        self.url = normalize_url(url)
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0 seconds or None, not {timeout_s}")
        if shared_memory not in ("auto", "always", "never"):
            raise ConfigError(f"shared_memory must be 'auto', 'always' or 'never', not {shared_memory!r}")
        if shm_threshold_bytes < 0:
            raise ConfigError(f"shm_threshold_bytes must be >= 0, not {shm_threshold_bytes}")
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry must be a RetryPolicy or None, not {type(retry).__name__}")
        self.timeout_s = timeout_s
        self.retry = retry
        self.shared_memory: SharedMemoryMode = shared_memory
        self.shm_threshold_bytes = shm_threshold_bytes
        self._channel_args = channel_args(reconnect_backoff_max_s)
        self._server_is_local = is_local_url(self.url)
        self._specs: dict[tuple[str, str], ModelSpec] = {}
        self._closed = False
        self._rng = random.Random()
        self._pending_unregister = PendingUnregister()
        # Set when the server refused a registration in "auto" mode (e.g. it runs in
        # a container with its own /dev/shm): from then on tensors travel in-band.
        self._shm_refused: str | None = None

    # ---- state -----------------------------------------------------------
    @property
    def closed(self) -> bool:
        """True once ``close()`` was called."""
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise ClientError(
                f"this client for {self.url} is closed",
                hint="create a new client, or keep using it inside its `with` block",
            )

    def _deadline(self, timeout_s: float | None | Unset) -> Deadline:
        return Deadline(self.timeout_s if timeout_s is UNSET else timeout_s)

    def _retry_policy(self, retry: RetryPolicy | None | Unset) -> RetryPolicy | None:
        return self.retry if retry is UNSET else retry

    def _threshold(self, shared_memory: SharedMemoryMode | None) -> int | None:
        """Byte threshold for moving a tensor into shared memory, or None for never."""
        mode = shared_memory or self.shared_memory
        if mode not in ("auto", "always", "never"):
            raise ConfigError(f"shared_memory must be 'auto', 'always' or 'never', not {mode!r}")
        if mode == "never":
            return None
        if mode == "auto" and (self._shm_refused is not None or not self._server_is_local):
            return None
        return self.shm_threshold_bytes

    # ---- requests --------------------------------------------------------
    def _prepare(
        self,
        spec: ModelSpec,
        inputs: Mapping[str, Any],
        *,
        version: str,
        outputs: Sequence[str] | None,
        request_id: str,
        priority: int,
        parameters: Mapping[str, Any] | None,
        server_timeout_us: int | None,
        threshold: int | None,
        streaming: bool,
    ) -> PreparedRequest:
        if spec.decoupled and not streaming:
            raise self._decoupled_error(spec)
        return prepare_request(
            spec,
            inputs,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
            server_timeout_us=server_timeout_us,
            shm_threshold_bytes=None if streaming else threshold,
            model_version=version,
        )

    @staticmethod
    def _decoupled_error(spec: ModelSpec) -> InvalidInputError:
        return InvalidInputError(
            f"model '{spec.name}' is decoupled (it may send any number of responses); "
            "a unary infer call cannot receive them",
            model=spec.name,
            hint="use client.stream(model, inputs) and iterate over the responses",
        )

    def _forget_if_stale(self, exc: BaseException, model: str | None, version: str) -> None:
        # The server said the model is gone or the request no longer fits: the model
        # may have been reloaded with another config. Fetch it again next time.
        if model is not None and status_of(exc) in (
            grpc.StatusCode.NOT_FOUND,
            grpc.StatusCode.INVALID_ARGUMENT,
        ):
            self._specs.pop((model, version), None)

    def _retry_delay_s(
        self, policy: RetryPolicy | None, attempt: int, exc: BaseException, deadline: Deadline
    ) -> float | None:
        """Seconds to wait before another attempt, or None to give up now.

        Only UNAVAILABLE is retried (connection refused/lost, queue full); the
        wait always ends, with room for the attempt, before the deadline.
        """
        if policy is None or attempt >= policy.max_attempts:
            return None
        if status_of(exc) is not grpc.StatusCode.UNAVAILABLE:
            return None
        delay = policy.backoff_s(attempt, self._rng.random())
        left = deadline.remaining_s()
        if left is not None and delay >= left:
            return None
        return delay

    @staticmethod
    def _gave_up(error: ClientError, attempts: int) -> ClientError:
        if attempts <= 1:
            return error
        return type(error)(
            f"{error.message} (gave up after {attempts} attempts)", model=error.model, hint=error.hint
        )

    def _expired(self, deadline: Deadline, operation: str, model: str | None) -> DeadlineExceededError:
        where = f"model '{model}' at {self.url}" if model else f"server {self.url}"
        return DeadlineExceededError(
            f"{operation} on {where} did not finish within the deadline of {deadline.timeout_s:g} s",
            model=model,
            hint="raise timeout_s, or make the model faster / less loaded",
        )

    def _shm_refused_by_server(self, reason: str) -> None:
        if self._shm_refused is None:
            log.warning(
                "server %s refused a system shared memory registration (%s); sending tensors in-band from now on",
                self.url,
                reason,
            )
        self._shm_refused = reason
