"""State and decisions both clients share: options, metadata cache, request building, error and retry
decisions. No I/O happens here; ``Client`` and ``AsyncClient`` add it.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import grpc

from tritonkit._dial import Dial, dial_for, header_refusal
from tritonkit.client._channel import ConnectState, ConnectWait
from tritonkit.client._errors import (
    FailedCall,
    UnavailableCause,
    shm_refusal,
    status_of,
    translate,
    unavailable_cause,
)
from tritonkit.client._health import ProbeLog
from tritonkit.client._model import ModelMetadata
from tritonkit.client._request import Array, PreparedRequest, prepare_request
from tritonkit.client._retry import Deadline, RetryPolicy
from tritonkit.client._settings import (
    DEFAULT_SHM_THRESHOLD_BYTES,
    MAX_MESSAGE_BYTES,
    UNSET,
    Timeouts,
    Unset,
    channel_args,
    parse_target,
)
from tritonkit.client._shm import SharedMemoryMode, ShmJanitor
from tritonkit.client._streaming import StreamRequest
from tritonkit.errors import (
    ClientClosedError,
    ClientError,
    ConfigError,
    ConnectError,
    ConnectionLostError,
    DeadlineExceededError,
    InvalidInputError,
    ModelNotReadyError,
    OverloadedError,
    TLSError,
)

__all__ = ["ClientBase"]

#: ``infer``'s arguments, in its order: model, inputs, outputs, version, request_id, priority,
#: parameters, timeout_s, server_timeout_us, retry, shared_memory, headers. One tuple, passed along
#: as it is: the hot path pays for no argument lists.
InferArgs = tuple[
    str,
    Mapping[str, Array],
    Sequence[str] | None,
    str,
    str,
    int,
    Mapping[str, str | int | float | bool] | None,
    float | None | Unset,
    int | None,
    RetryPolicy | None | Unset,
    SharedMemoryMode | None,
    Mapping[str, str] | None,
]

log = logging.getLogger("tritonkit.client")

#: The limits a client has when none are given (every field at its documented default).
DEFAULT_TIMEOUTS = Timeouts()


class ClientBase:
    """Configuration, model cache, request building and error and retry decisions shared by both clients.

    Subclasses add the I/O: ``_open_io`` (called at the end of ``__init__``)
    and the methods that call tritonclient.
    """

    def __init__(
        self,
        url: str = "127.0.0.1:8001",
        *,
        timeouts: Timeouts | float | None = DEFAULT_TIMEOUTS,
        retry: RetryPolicy | None = None,
        shared_memory: SharedMemoryMode = "auto",
        shm_threshold_bytes: int = DEFAULT_SHM_THRESHOLD_BYTES,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
        dial: Dial | None = None,
    ) -> None:
        target = parse_target(url)
        #: TLS and headers (:class:`~tritonkit.Dial`; default: the one registered for ``url``, else none).
        self.dial = dial if dial is not None else dial_for(target.addresses[0])
        # Sent with every call: kept as a plain attribute.
        self._headers = self.dial.header_map
        self.url = target.target
        #: Every time limit of this client (``timeouts=5.0`` is ``Timeouts(call_s=5.0)``).
        self.timeouts = Timeouts.of(timeouts)
        if shared_memory not in ("auto", "always", "never"):
            raise ConfigError(f"shared_memory must be 'auto', 'always' or 'never', not {shared_memory!r}")
        if target.balanced and shared_memory == "always":
            raise ConfigError(
                f"shared_memory='always' cannot work with the balanced target {url!r}: a region registered "
                "on one server is unknown to the others the calls go to",
                hint="use shared_memory='auto' (in-band for balanced targets) or one server's host:port",
            )
        if shm_threshold_bytes < 0:
            raise ConfigError(f"shm_threshold_bytes must be >= 0, not {shm_threshold_bytes}")
        if not 0 < max_message_bytes <= MAX_MESSAGE_BYTES:
            raise ConfigError(
                f"max_message_bytes must be from 1 to {MAX_MESSAGE_BYTES} (gRPC's limit), not {max_message_bytes}"
            )
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry must be a RetryPolicy or None, not {type(retry).__name__}")
        self.retry = retry
        self.shared_memory: SharedMemoryMode = shared_memory
        self.shm_threshold_bytes = shm_threshold_bytes
        #: The largest message either side may send on this client's channel.
        self.max_message_bytes = max_message_bytes
        #: The target spreads calls over several servers (``dns:///``, ``ipv4:`` lists).
        self.balanced = target.balanced
        self._addresses = target.addresses
        # Read on every call: kept as a plain attribute.
        self._call_s = self.timeouts.call_s
        #: tritonclient's keywords for this client's channels (options, TLS credentials).
        self._tc_kwargs: dict[str, Any] = {"channel_args": channel_args(
            self.timeouts, balanced=target.balanced, max_message_bytes=max_message_bytes) + self.dial.channel_args(),
            **self.dial.grpc_kwargs()}
        # Shared memory only with one local server: with several, a region registered on
        # one is unknown to the server the call lands on.
        self._server_is_local = target.all_local and not target.balanced
        self._metadata: dict[tuple[str, str], ModelMetadata] = {}
        self._closed = False
        self._rng = random.Random()
        self._connect_state = ConnectState()
        self._probes = ProbeLog()
        self._janitor = ShmJanitor(self.url, self._tc_kwargs)
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
        return Deadline(self._call_s if timeout_s is UNSET else timeout_s)

    def _timeout(self, deadline: Deadline, operation: str, model: str | None) -> float | None:
        """What is left of ``deadline`` for the next RPC; expired: raise rather than send."""
        left = deadline.remaining_s()
        if left is not None and left <= 0:
            raise self._expired(deadline, operation, model)
        return left

    def _connect_wait(self, deadline: Deadline, operation: str, model: str | None) -> ConnectWait:
        """The bookkeeping of one wait for a connection (see ``_channel``)."""
        return ConnectWait(
            self._connect_state,
            url=self.url,
            operation=operation,
            model=model,
            deadline=deadline,
            connect_timeout_s=self.timeouts.connect_s,
            addresses=self._addresses,
            dial=self.dial,
        )

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
        """The metadata built from a ``get_model_metadata`` and ``get_model_config`` reply, cached
        unless it lists no inputs: a model caught between an unload and its next load, or one that
        takes none, would otherwise answer every later request "The model expects: " (nothing)."""
        meta = ModelMetadata.from_server(metadata, config.config)
        if meta.inputs:
            self._metadata[(model, version)] = meta
        return meta

    def _forget(self, model: str, version: str, meta: ModelMetadata) -> None:
        """Forget ``meta`` if it is still the cached one: a request failed the local check against
        it, and the model may have been reloaded with another config since it was fetched."""
        if self._metadata.get((model, version)) is meta:
            del self._metadata[(model, version)]

    def _refetch(self, model: str, version: str, meta: ModelMetadata, fetched: bool) -> bool:
        """After a request failed the local check (an input it does not know, a shape): True to fetch
        the metadata again and check once more, once per call.

        Not when ``meta`` was ``fetched`` for this very call: it is as fresh as it gets. Otherwise
        always, even when another call has replaced the cached answer meanwhile (the call then
        checks against that one).
        """
        if fetched:
            return False
        self._forget(model, version, meta)
        return True

    # ---- requests --------------------------------------------------------
    def _prepare_unary(self, meta: ModelMetadata, args: InferArgs) -> PreparedRequest:
        """The checked request of ``infer(*args)``; large tensors in shared memory where the mode allows."""
        inputs, outputs, version, request_id, priority, parameters = args[1:7]
        server_timeout_us, shared_memory = args[8], args[10]
        if meta.decoupled:
            raise self._decoupled_error(meta)
        prepared = prepare_request(
            meta,
            inputs,
            outputs=outputs,
            request_id=request_id,
            priority=priority,
            parameters=parameters,
            server_timeout_us=server_timeout_us,
            shm_threshold_bytes=self._threshold(shared_memory),
            model_version=version,
            max_message_bytes=self.max_message_bytes,
        )
        prepared.headers = self._call_headers(args[11])
        return prepared

    def _call_headers(self, headers: Mapping[str, str] | None) -> dict[str, str] | None:
        """The client's headers and a call's own (checked as a ``Dial`` checks them; the call's win)."""
        return {**(self._headers or {}), **dict(Dial(headers=tuple(headers.items())).headers)} if headers else self._headers

    def _prepare_stream(self, request: StreamRequest, meta: ModelMetadata) -> PreparedRequest | None:
        """``request`` checked against ``meta``; None when that failed.

        On None the caller fetches the metadata again and prepares once more (the model may have
        been reloaded with another config since ``meta`` was cached).
        """
        try:
            return request.prepare(meta, self.max_message_bytes)
        except InvalidInputError:
            # Cached or fetched just now, the caller cannot tell: fetch once more either way.
            self._forget(request.model, request.version, meta)
            return None

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
        deadline: those are the call's failure, not the server's refusal. A server that
        refuses client shared memory by policy (2.68+ without ``--allow-client-shm=true``)
        is said in one line naming the flag; in "always" mode that is
        :class:`~tritonkit.errors.SharedMemoryRefusedError`.
        """
        status = status_of(exc)
        policy = shm_refusal(exc, url=self.url)
        if strict and policy is not None:
            raise policy from exc
        if strict or status in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
            return False
        if self._shm_refused is None:
            if policy is not None:
                log.warning("%s; sending tensors in-band from now on", policy.message.split("): ", 1)[0] + ")")
            else:
                log.warning(
                    "server %s refused a system shared memory registration (%s); sending tensors in-band from now on",
                    self.url,
                    status,
                )
        self._shm_refused = str(status)
        return True

    # ---- errors and retries ----------------------------------------------
    def _explain(self, failed: FailedCall, *, connected: bool) -> tuple[UnavailableCause | None, str | None]:
        """The cause of an UNAVAILABLE (None for other statuses), or the model whose readiness must decide it.

        ``connected``: the channel was still READY right after the error. A
        readiness probe is asked for only when neither the connection nor the
        model's queue policy explains the status, and not again within
        ``PROBE_INTERVAL_S`` of the last one (its answer is reused).
        """
        status, model, version = failed.status, failed.model, failed.version
        # The server says the model is gone or the request no longer fits: it may have
        # been reloaded with another config. Fetch its metadata again next time.
        if model is not None and status in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT):
            self._metadata.pop((model, version), None)
        if status is not grpc.StatusCode.UNAVAILABLE or header_refusal(str(failed.exc), self.url, ()):
            return None, None  # a restricted protocol's refusal says what it is: no probe
        cause = unavailable_cause(
            connected=connected,
            meta=failed.meta,
            server_timeout_us=failed.server_timeout_us,
            elapsed_s=time.monotonic() - failed.started,
            balanced=self.balanced,
        )
        if cause is not None or model is None:
            return cause or UnavailableCause.OVERLOADED, None
        fresh, ready = self._probes.recent(model, version)
        if fresh:
            return self._cause_from_ready(model, version, ready), None
        return None, model

    def _probed(self, model: str, version: str, ready: bool | None) -> UnavailableCause:
        """The cause a readiness probe (``ready``; None: no answer) gives; remembered for ``PROBE_INTERVAL_S``."""
        self._probes.remember(model, version, ready)
        return self._cause_from_ready(model, version, ready)

    def _cause_from_ready(self, model: str, version: str, ready: bool | None) -> UnavailableCause:
        if ready is False:
            self._metadata.pop((model, version), None)
            return UnavailableCause.MODEL_NOT_READY
        if ready is None:
            # The probe could not reach the server either: the connection went away
            # (the safe reading: the request may have run).
            return UnavailableCause.CONNECTION_LOST
        return UnavailableCause.OVERLOADED

    def _error(self, failed: FailedCall, cause: UnavailableCause | None) -> ClientError:
        """The ``ClientError`` for ``failed`` once its cause is known."""
        if self._closed and failed.status is grpc.StatusCode.CANCELLED:
            return self._closed_during(failed.operation, failed.model)
        return translate(
            failed.exc,
            url=self.url,
            model=failed.model,
            operation=failed.operation,
            cause=cause,
            timeout_s=failed.deadline.timeout_s,
            headers={**(self._headers or {}), **(failed.headers or {})},
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
        return isinstance(error, (ConnectError, OverloadedError)) and not isinstance(error, TLSError)

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
