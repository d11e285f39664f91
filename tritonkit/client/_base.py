"""State and decisions both clients share; no I/O happens here."""

from __future__ import annotations

import enum
import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc
import numpy as np
from tritonclient.utils import InferenceServerException

from tritonkit.client._channel import ConnectState
from tritonkit.client._errors import UnavailableCause, status_of, translate, unavailable_cause
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import PreparedRequest, prepare_request
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._shm import SharedMemoryMode, ShmJanitor, is_local_url
from tritonkit.errors import (
    ClientClosedError,
    ClientError,
    ConfigError,
    ConnectError,
    ConnectionLostError,
    ConnectTimeoutError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
    OverloadedError,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIMEOUT_S",
    "DEFAULT_KEEPALIVE_TIME_S",
    "DEFAULT_SHM_THRESHOLD_BYTES",
    "DEFAULT_STREAM_IDLE_TIMEOUT_S",
    "DEFAULT_TIMEOUT_S",
    "SHM_CLOSE_WAIT_S",
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
#: At most one readiness probe per model in this many seconds: under overload every
#: refusal would otherwise add one more call to the server's load.
PROBE_INTERVAL_S = 1.0
#: How long a connection (TCP and the HTTP/2 handshake) may take; the request is not
#: sent before. A server on a working network answers in milliseconds.
DEFAULT_CONNECT_TIMEOUT_S = 5.0
#: gRPC keepalive ping interval while calls are in flight. Rule of thumb: not below the
#: server's minimum ping interval, which is 300 s in Triton's defaults
#: (--grpc-http2-min-recv-ping-interval-without-data): measured on tritonserver 2.51, a
#: client pinging more often during a silent call gets the connection closed
#: ("too_many_pings"), and the call with it. Lower it when the server allows it.
DEFAULT_KEEPALIVE_TIME_S = 330.0
#: How long a keepalive ping may go unanswered before the connection is declared dead.
DEFAULT_KEEPALIVE_TIMEOUT_S = 20.0
#: A stream with no response for this long is cancelled (the server froze or the path
#: died): token streams answer every few hundred milliseconds at most.
DEFAULT_STREAM_IDLE_TIMEOUT_S = 60.0
#: How long a READY channel is watched after an UNAVAILABLE, to be sure the connection
#: survived it (a broken one leaves READY within microseconds, more on a loaded machine).
CONFIRM_READY_S = 0.02
#: How long ``close()`` waits for the server to release shared memory regions of calls
#: that ended early; what is left is released in the background after that.
SHM_CLOSE_WAIT_S = 5.0

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


def channel_args(
    *,
    reconnect_backoff_max_s: float,
    connect_timeout_s: float,
    keepalive_time_s: float,
    keepalive_timeout_s: float,
) -> list[tuple[str, Any]]:
    """The gRPC channel options both clients use.

    Reconnect backoff: gRPC's default grows to 120 s; while it waits, every call
    fails at once even after the server is back, so it is capped (default 1 s).
    Connect timeout: gRPC takes ``min_reconnect_backoff_ms`` as the time one
    connection attempt may take (measured: an attempt against a listener that
    never answers ends after exactly that long), so it is set from
    ``connect_timeout_s``, apart from the backoff. Keepalive pings go out while
    calls are in flight, never on an idle connection (Triton's default refuses
    those), and keep going during a long silent call (no limit on pings without data).
    """
    backoff_ms = max(100, int(reconnect_backoff_max_s * 1000))
    return [
        ("grpc.max_send_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.max_receive_message_length", _MAX_MESSAGE_BYTES),
        ("grpc.keepalive_time_ms", max(1, int(keepalive_time_s * 1000))),
        ("grpc.keepalive_timeout_ms", max(1, int(keepalive_timeout_s * 1000))),
        # WAR: grpcio 1.85 waits for a ping's answer for ping_timeout_ms (default 60 s), not
        # keepalive_timeout_ms: measured against a SIGSTOPped server, a call failed after 61 s
        # without it and after 2 s with it (keepalive 1 s, timeout 1 s).
        ("grpc.http2.ping_timeout_ms", max(1, int(keepalive_timeout_s * 1000))),
        ("grpc.keepalive_permit_without_calls", 0),
        ("grpc.http2.max_pings_without_data", 0),
        ("grpc.initial_reconnect_backoff_ms", min(backoff_ms, 1000)),
        ("grpc.max_reconnect_backoff_ms", backoff_ms),
        ("grpc.min_reconnect_backoff_ms", max(100, int(connect_timeout_s * 1000))),
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
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        keepalive_time_s: float = DEFAULT_KEEPALIVE_TIME_S,
        keepalive_timeout_s: float = DEFAULT_KEEPALIVE_TIMEOUT_S,
        stream_idle_timeout_s: float | None = DEFAULT_STREAM_IDLE_TIMEOUT_S,
    ) -> None:
        self.url = normalize_url(url)
        if timeout_s is not None and timeout_s <= 0:
            raise ConfigError(f"timeout_s must be > 0 seconds or None, not {timeout_s}")
        for option, value in (
            ("reconnect_backoff_max_s", reconnect_backoff_max_s),
            ("connect_timeout_s", connect_timeout_s),
            ("keepalive_time_s", keepalive_time_s),
            ("keepalive_timeout_s", keepalive_timeout_s),
            ("stream_idle_timeout_s", stream_idle_timeout_s),
        ):
            if value is not None and value <= 0:
                raise ConfigError(f"{option} must be > 0 seconds, not {value}")
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
        self.connect_timeout_s = connect_timeout_s
        self.stream_idle_timeout_s = stream_idle_timeout_s
        self._channel_args = channel_args(
            reconnect_backoff_max_s=reconnect_backoff_max_s,
            connect_timeout_s=connect_timeout_s,
            keepalive_time_s=keepalive_time_s,
            keepalive_timeout_s=keepalive_timeout_s,
        )
        self._server_is_local = is_local_url(self.url)
        self._metadata: dict[tuple[str, str], ModelMetadata] = {}
        self._closed = False
        self._rng = random.Random()
        self._connect_state = ConnectState()
        # (model, version) -> (monotonic time of the probe, model ready?)
        self._ready_probes: dict[tuple[str, str], tuple[float, bool | None]] = {}
        self._janitor = ShmJanitor(self.url, self._channel_args)
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
            raise ClientClosedError(
                f"this client for {self.url} is closed",
                hint="create a new client, or keep using it inside its `with` block",
            )

    def _closed_during(self, operation: str, model: str | None) -> ClientClosedError:
        where = f" on model '{model}'" if model else ""
        return ClientClosedError(
            f"{operation}{where} at {self.url} was cancelled: the client was closed while it was in flight",
            model=model,
            hint="close the client only after its calls finished (await them, or leave `with` last)",
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
    def _remember_metadata(self, model: str, version: str, metadata: Any, config: Any) -> ModelMetadata:
        """Cache the metadata built from a ``get_model_metadata`` and ``get_model_config`` reply."""
        meta = ModelMetadata.from_server(metadata, config.config)
        self._metadata[(model, version)] = meta
        return meta

    def _stale(self, model: str, version: str, meta: ModelMetadata) -> bool:
        """Forget ``meta`` if it is still the cached one; True when it was (fetch again and retry once).

        Called when a request failed the local check against cached metadata: the
        model may have been reloaded with another config since it was fetched.
        """
        if self._metadata.get((model, version)) is meta:
            del self._metadata[(model, version)]
            return True
        return False

    # ---- requests --------------------------------------------------------
    def _request(
        self,
        meta: ModelMetadata,
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
        if meta.decoupled:
            raise self._decoupled_error(meta)
        return prepare_request(
            meta,
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
        meta: ModelMetadata,
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
            meta,
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
    def _decoupled_error(meta: ModelMetadata) -> InvalidInputError:
        return InvalidInputError(
            f"model '{meta.name}' is decoupled (it may send any number of responses); "
            "a unary infer call cannot receive them",
            model=meta.name,
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
        # At least 0.1 s even when the deadline is spent: a starved probe would say nothing.
        return max(0.1, deadline.cap(PROBE_TIMEOUT_S))

    def _recent_probe(self, model: str, version: str) -> tuple[bool, bool | None]:
        """(fresh, ready): a readiness probe of this model less than ``PROBE_INTERVAL_S`` old, if any."""
        seen = self._ready_probes.get((model, version))
        if seen is not None and time.monotonic() - seen[0] < PROBE_INTERVAL_S:
            return True, seen[1]
        return False, None

    def _remember_probe(self, model: str, version: str, ready: bool | None) -> None:
        self._ready_probes[(model, version)] = (time.monotonic(), ready)

    def _forget_stale(self, status: grpc.StatusCode | None, model: str | None, version: str) -> None:
        # The server says the model is gone or the request no longer fits: it may have
        # been reloaded with another config. Fetch its metadata again next time.
        if model is not None and status in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            self._metadata.pop((model, version), None)

    def _cause(
        self,
        status: grpc.StatusCode | None,
        *,
        connected: bool,
        model: str | None,
        version: str,
        meta: ModelMetadata | None,
        server_timeout_us: int | None,
        started: float,
    ) -> tuple[UnavailableCause | None, bool]:
        """The cause of an UNAVAILABLE (or None), and whether a readiness probe must decide it."""
        if status is not grpc.StatusCode.UNAVAILABLE:
            return None, False
        cause = unavailable_cause(
            connected=connected,
            meta=meta,
            server_timeout_us=server_timeout_us,
            elapsed_s=time.monotonic() - started,
        )
        if cause is not None or model is None:
            return cause or UnavailableCause.OVERLOADED, False
        fresh, ready = self._recent_probe(model, version)
        if fresh:
            return self._cause_from_ready(model, version, ready), False
        return None, True

    def _cause_from_ready(self, model: str, version: str, ready: bool | None) -> UnavailableCause:
        if ready is False:
            self._metadata.pop((model, version), None)
            return UnavailableCause.MODEL_NOT_READY
        if ready is None:
            # The probe could not reach the server either: the connection went away
            # (the safe reading: the request may have run).
            return UnavailableCause.CONNECTION_LOST
        return UnavailableCause.OVERLOADED

    def _translated(
        self,
        exc: BaseException,
        *,
        model: str | None,
        operation: str,
        cause: UnavailableCause | None,
        deadline: Deadline,
    ) -> ClientError:
        if self._closed and status_of(exc) is grpc.StatusCode.CANCELLED:
            return self._closed_during(operation, model)
        return translate(
            exc, url=self.url, model=model, operation=operation, cause=cause, timeout_s=deadline.timeout_s
        )

    def _retry_or_raise(
        self,
        error: ClientError,
        exc: BaseException | None,
        *,
        attempt: int,
        retry: RetryPolicy | None,
        deadline: Deadline,
        sent: bool = True,
    ) -> float:
        """Seconds to wait before the next attempt; raise ``error`` (chained to ``exc``) to give up.

        ``sent``: the request that may execute something had been sent when it
        failed (False while fetching metadata, or for reads).
        """
        delay = None
        if retry is not None and self._retryable(error, exc, retry, sent=sent):
            delay = self._retry_delay_s(retry, attempt, deadline)
        if delay is None:
            raise self._gave_up(error, attempt) from exc
        return delay

    @staticmethod
    def _retryable(error: ClientError, exc: BaseException | None, policy: RetryPolicy, *, sent: bool) -> bool:
        """What the server never executed (never sent; refused unexecuted, or a model not ready
        that a live server reported as UNAVAILABLE); a call lost mid-flight only for an
        idempotent model (see ``RetryPolicy``)."""
        if isinstance(error, ConnectionLostError):
            return policy.idempotent or not sent
        if isinstance(error, ModelNotReadyError):
            return exc is not None and status_of(exc) is grpc.StatusCode.UNAVAILABLE
        return isinstance(error, (ConnectError, OverloadedError))

    def _retry_delay_s(self, policy: RetryPolicy, attempt: int, deadline: Deadline) -> float | None:
        """Seconds to wait before another attempt, or None to give up now.

        The wait always ends, with room for the attempt, before the deadline.
        """
        if attempt >= policy.max_attempts:
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
        #: A probe ran out of time without an answer (something accepted TCP but stayed silent).
        self.silent = False
        self.last: BaseException | None = None

    def probe_timeout_s(self) -> float:
        return self.deadline.cap(PROBE_TIMEOUT_S)

    def failed(self, exc: BaseException) -> None:
        self.last = exc
        status = status_of(exc)
        if status is grpc.StatusCode.DEADLINE_EXCEEDED:
            self.silent = True
        elif status is not grpc.StatusCode.UNAVAILABLE:
            self.reached = True

    def error(self) -> ClientError:
        """Connect error if nothing answered, model-not-ready if only the model was missing, else timeout."""
        url, timeout_s, model = self.url, self.timeout_s, self.model
        if not self.reached and self.silent:
            return ConnectTimeoutError(
                f"no answer from Triton at {url} within {timeout_s:g} s: something accepted the "
                "connection but did not answer as a gRPC server",
                model=model,
                hint="check that host:port is Triton's gRPC port (default 8001) and that the server "
                "is not frozen",
            )
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
