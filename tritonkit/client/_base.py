"""State and decisions both clients share; no I/O happens here."""

from __future__ import annotations

import enum
import logging
import random
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import numpy as np
from tritonclient.grpc import KeepAliveOptions
from tritonclient.utils import InferenceServerException

from tritonkit.client._errors import UnavailableCause, cause_from_probe, status_of, translate
from tritonkit.client._model import ModelSpec
from tritonkit.client._request import PreparedRequest, prepare_request
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._shm import PendingUnregister, SharedMemoryMode, is_local_url
from tritonkit.errors import (
    ClientError,
    ConfigError,
    ConnectError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
)

__all__ = [
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_TIMEOUT_S",
    "PROBE_TIMEOUT_S",
    "RPC_ERRORS",
    "UNSET",
    "Array",
    "ClientBase",
    "ReadyWait",
    "ShmUnusable",
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

Array = np.ndarray[Any, Any]
#: What a tritonclient call raises: its own exception (sync) or gRPC's (asyncio).
RPC_ERRORS = (InferenceServerException, grpc.RpcError)


class ShmUnusable(Exception):
    """The server refused a registration in "auto" mode: resend the request in-band."""


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
    """Configuration, model cache, request building and retry arithmetic shared by both clients.

    Subclasses add the I/O: ``_open_io`` (called at the end of ``__init__``)
    and the methods that call tritonclient.
    """

    def __init__(
        self,
        url: str = "127.0.0.1:8001",
        *,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        retry: RetryPolicy | None = None,
        shared_memory: SharedMemoryMode = "auto",
        shm_threshold_bytes: int = DEFAULT_SHM_THRESHOLD_BYTES,
        reconnect_backoff_max_s: float = 1.0,
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
        self._open_io()

    def _open_io(self) -> None:
        """Set up what the subclass's I/O needs (channel, stream registry, locks)."""
        raise NotImplementedError

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

    def _timeout(self, deadline: Deadline, operation: str, model: str | None) -> float | None:
        """What is left of ``deadline`` for the next RPC; expired: raise rather than send."""
        left = deadline.remaining_s()
        if left is not None and left <= 0:
            raise self._expired(deadline, operation, model)
        return left

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

    def _strict_shm(self, shared_memory: SharedMemoryMode | None) -> bool:
        """True when a refused registration is an error rather than a reason to send in-band."""
        return (shared_memory or self.shared_memory) == "always"

    # ---- model metadata --------------------------------------------------
    def _remember_spec(self, model: str, version: str, metadata: Any, config: Any) -> ModelSpec:
        """Cache the spec built from a ``get_model_metadata`` and ``get_model_config`` reply."""
        spec = ModelSpec.from_server(metadata, config.config)
        self._specs[(model, version)] = spec
        return spec

    # ---- requests --------------------------------------------------------
    def _request(
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
        shared_memory: SharedMemoryMode | None,
    ) -> PreparedRequest:
        """A checked unary request; large tensors in shared memory where the mode allows."""
        if spec.decoupled:
            raise self._decoupled_error(spec)
        return prepare_request(
            spec,
            inputs,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
            server_timeout_us=server_timeout_us,
            shm_threshold_bytes=self._threshold(shared_memory),
            model_version=version,
        )

    @staticmethod
    def _stream_request(
        spec: ModelSpec,
        inputs: Mapping[str, Any],
        *,
        version: str,
        outputs: Sequence[str] | None,
        request_id: str,
        priority: int,
        parameters: Mapping[str, Any] | None,
    ) -> PreparedRequest:
        """A checked streaming request: every tensor in the message (a stream outlives a segment)."""
        return prepare_request(
            spec,
            inputs,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
            server_timeout_us=None,
            shm_threshold_bytes=None,
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

    # ---- shared memory ---------------------------------------------------
    def _registration_refused(self, exc: BaseException, *, strict: bool) -> bool:
        """True when a failed registration means "send in-band from now on" rather than an error.

        Never in "always" mode, and never for an unreachable server or a spent
        deadline: those are the call's failure, not the server's refusal.
        """
        status = status_of(exc)
        if strict or status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return False
        if self._shm_refused is None:
            log.warning(
                "server %s refused a system shared memory registration (%s); sending tensors in-band from now on",
                self.url,
                status,
            )
        self._shm_refused = str(status)
        return True

    # ---- errors and retries ----------------------------------------------
    @staticmethod
    def _probe_timeout_s(deadline: Deadline) -> float:
        # At least 0.1 s even when the deadline is spent: a refused connection answers in
        # about a millisecond, and a starved probe would call it "overloaded".
        return max(0.1, deadline.cap(PROBE_TIMEOUT_S))

    @staticmethod
    def _unreachable_cause(exc: BaseException) -> UnavailableCause:
        """What a failed probe says about why the call was UNAVAILABLE."""
        return cause_from_probe(reachable=status_of(exc) is not grpc.StatusCode.UNAVAILABLE, model_ready=None)

    def _needs_probe(self, exc: BaseException, model: str | None, version: str) -> bool:
        """Forget a stale spec; True when only a probe can tell why the call was UNAVAILABLE."""
        # The server said the model is gone or the request no longer fits: the model
        # may have been reloaded with another config. Fetch it again next time.
        status = status_of(exc)
        if model is not None and status in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            self._specs.pop((model, version), None)
        return status is grpc.StatusCode.UNAVAILABLE

    def _translated(
        self,
        exc: BaseException,
        *,
        model: str | None,
        operation: str,
        cause: UnavailableCause | None,
        deadline: Deadline,
    ) -> ClientError:
        return translate(
            exc, url=self.url, model=model, operation=operation, cause=cause, timeout_s=deadline.timeout_s
        )

    def _retry_or_raise(
        self,
        error: ClientError,
        exc: BaseException,
        *,
        attempt: int,
        retry: RetryPolicy | None,
        deadline: Deadline,
    ) -> float:
        """Seconds to wait before the next attempt; raise ``error`` (chained to ``exc``) to give up."""
        delay = self._retry_delay_s(retry, attempt, exc, deadline)
        if delay is None:
            raise self._gave_up(error, attempt) from exc
        return delay

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


class ReadyWait:
    """What ``wait_until_ready`` saw while polling, and the error to raise when time ran out."""

    def __init__(self, url: str, timeout_s: float, model: str | None) -> None:
        self.url = url
        self.timeout_s = timeout_s
        self.model = model
        self.deadline = Deadline(timeout_s)
        #: Something answered (even with an error other than UNAVAILABLE).
        self.reached = False
        self.server_ready = False
        self.last: BaseException | None = None

    def probe_timeout_s(self) -> float:
        return self.deadline.cap(PROBE_TIMEOUT_S)

    def failed(self, exc: BaseException) -> None:
        self.last = exc
        if status_of(exc) is not grpc.StatusCode.UNAVAILABLE:
            self.reached = True

    def error(self) -> ClientError:
        """Connect error if nothing answered, model-not-ready if only the model was missing, else timeout."""
        url, timeout_s, model = self.url, self.timeout_s, self.model
        if not self.reached:
            return ConnectError(
                f"cannot connect to Triton at {url}: nothing accepted the connection within {timeout_s:g} s",
                model=model,
                hint="start the server, or check the host:port given as --url / Client(url)",
            )
        if self.server_ready and model is not None:
            return ModelNotReadyError(
                f"model '{model}' at {url} was not ready within {timeout_s:g} s",
                model=model,
                hint="check that the model is in the repository and loads (server log), or load it",
            )
        return DeadlineExceededError(
            f"server {url} answered but was not ready within {timeout_s:g} s",
            model=model,
            hint="wait longer (models may still be loading), or read the server log",
        )
