"""Every error tritonkit raises on purpose, and the few signals it passes to itself.

One root, so a caller (or the CLI) can catch everything the toolkit means to say::

    TritonKitError                  root; ``message`` + optional ``hint`` (what to do)
    ├── ConfigError                 bad user input: a spec, a config.pbtxt, an SLA, a flag
    │   ├── ConfigSyntaxError       a config.pbtxt does not parse (``path``, ``line``, ``column``)
    │   ├── LintError               the linter found errors (``findings`` attached)
    │   ├── LockedError             another live process holds a folder's lock (``holder``: pid, host, since)
    │   ├── StoredResultError       a stored sweep result is malformed or impossible (``field_name``)
    │   └── UnsupportedByReleaseError  the target Triton release cannot parse or serve it:
    │                               a config field, platform or server flag (``release``,
    │                               ``first_release``: the first that has it, or None)
    ├── MissingComponentError       an optional piece is absent (perf_analyzer, tensorrt,
    │                               a GPU); ``hint`` is the command that installs it
    ├── BuildError                  a builder could not produce a servable model
    │   └── VerificationError       its numbers are wrong (``comparisons``: the tables)
    ├── ServerError                 tritonserver could not start, or died
    │   └── ModelLoadError          a model failed to load (``model``, ``reason``, ``log_path``)
    ├── ClientError                 an inference call failed
    │   ├── ConnectError            never sent: nothing accepted the connection (refused, unknown host)
    │   │   ├── ConnectTimeoutError never sent: no connection in time (also a DeadlineExceededError)
    │   │   └── TLSError            never sent: the two ends disagree on TLS (plain text to a TLS port,
    │   │                           TLS to a plain one, an unknown CA, no client certificate)
    │   ├── ConnectionLostError     the connection broke mid-call: the request may have executed
    │   ├── DeadlineExceededError   the per-request deadline passed
    │   ├── NotAuthorisedError      refused for a missing or wrong header or credential (a restricted
    │   │                           protocol: ``header``, the one the server expects)
    │   ├── ModelNotReadyError      unknown model, or not loaded / not ready
    │   ├── InvalidInputError       refused before sending, or INVALID_ARGUMENT from the server
    │   ├── OverloadedError         the server refused the request unexecuted (queue policy REJECT)
    │   │   └── QueueTimeoutError   it waited in the model's queue past its queue timeout
    │   ├── ServerSideError         the server failed while handling the request
    │   ├── SharedMemoryRefusedError the server refuses client shared-memory registration
    │   │                           (2.68+ started without ``--allow-client-shm=true``)
    │   └── ClientClosedError       the client was closed before or during the call
    ├── PerfError                   perf_analyzer failed (``returncode``, ``stderr_tail``)
    │   ├── PerfTimeoutError        a perf run passed its time limit and was stopped
    │   └── StepError               one load step failed, classified (``failure``, ``server_message``)
    │       └── StepTimeoutError    it passed its time limit (also a PerfTimeoutError)
    ├── PlanError                   the planner cannot compute from what it was given
    └── ClusterError                a Ray cluster cannot do what was asked: unreachable, no node with
        │                           the resources asked, a node without tritonkit or perf_analyzer
        └── NodeLostError           the node running a piece of work died (``node_id``, ``host``)

Not errors: signals that carry a decision from where it is made to where it is acted on, inside
tritonkit; none reaches a library caller::

    Exception
    ├── CommandExit                 a CLI command printed its result: exit with ``code``
    ├── ShmUnusable                 the server refused a shared-memory registration in "auto"
    │                               mode: the client sends the request in-band instead
    ├── AdminRefused                the server's admin API said no (``code``, ``text``); ServerAdmin
    │                               turns it into ModelLoadError, ModelNotReadyError, ServerError…
    └── AdminNoAnswer               nothing answered, or not in time (``timed_out``); ServerAdmin
                                    turns it into ConnectError or DeadlineExceededError

Every exception class of the package is defined here and drawn above (a test keeps it so). Third-party
errors are translated in one place per subsystem and chained with ``raise ... from exc`` so the
original is never lost. Every error survives pickling whole (its class, message, hint and fields), so
one raised in a Ray task on another machine reaches the driver as itself.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = [
    "AdminNoAnswer",
    "AdminRefused",
    "BuildError",
    "ClientClosedError",
    "ClusterError",
    "ClientError",
    "CommandExit",
    "ConfigError",
    "ConfigSyntaxError",
    "ConnectError",
    "ConnectTimeoutError",
    "ConnectionLostError",
    "DeadlineExceededError",
    "InvalidInputError",
    "LintError",
    "LockedError",
    "MissingComponentError",
    "ModelLoadError",
    "ModelNotReadyError",
    "NodeLostError",
    "NotAuthorisedError",
    "OverloadedError",
    "PerfError",
    "PerfTimeoutError",
    "PlanError",
    "QueueTimeoutError",
    "ServerError",
    "ServerSideError",
    "SharedMemoryRefusedError",
    "ShmUnusable",
    "StepError",
    "StepTimeoutError",
    "StoredResultError",
    "TLSError",
    "TritonKitError",
    "UnsupportedByReleaseError",
    "VerificationError",
]


class TritonKitError(Exception):
    """Root of every error the toolkit raises deliberately.

    ``message`` says what was wrong and where; ``hint`` says what to do about it.
    """

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message} (fix: {self.hint})"
        return self.message

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled by its fields, not by re-calling __init__ with ``args`` (which would lose the hint
        # and break ModelLoadError(model, reason)): a Ray task sends its error to the driver so.
        return (_rebuild_error, (type(self), self.args, dict(self.__dict__)))


def _rebuild_error(cls: type[TritonKitError], args: tuple[Any, ...], state: dict[str, Any]) -> TritonKitError:
    """The unpickled twin of an error :meth:`TritonKitError.__reduce__` wrote."""
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    error.__dict__.update(state)
    return error


class ConfigError(TritonKitError):
    """Bad user input: a spec, a config file, an SLA expression, a command-line value."""


class ConfigSyntaxError(ConfigError):
    """A ``config.pbtxt`` does not parse; ``line``/``column`` are 1-based where known."""

    def __init__(
        self,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        path: Path | str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.line = line
        self.column = column
        self.path = Path(path) if path is not None else None


class LintError(ConfigError):
    """The linter found errors; ``findings`` holds them all."""

    def __init__(self, message: str, *, findings: list[Any] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.findings: list[Any] = list(findings or [])


class LockedError(ConfigError):
    """Another live process holds the lock on a folder. ``holder`` is what it wrote (pid, host, since)."""

    def __init__(self, message: str, *, holder: dict[str, Any], hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.holder = holder


class StoredResultError(ConfigError):
    """A stored sweep result is malformed or holds an impossible value; ``field_name`` names which."""

    def __init__(self, message: str, *, field_name: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.field_name = field_name


class UnsupportedByReleaseError(ConfigError):
    """The target Triton release cannot parse or serve something: a config field, a platform, a flag.

    ``release`` is the target (``"2.51"``); ``first_release`` the first release that has the
    thing (``"2.52"``), or ``None`` when no release tritonkit knows has it.
    """

    def __init__(self, message: str, *, release: str, first_release: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.release = release
        self.first_release = first_release


class MissingComponentError(TritonKitError):
    """An optional component is not available here (perf_analyzer, tensorrt, a GPU)."""


class BuildError(TritonKitError):
    """A builder could not turn the model into a servable repository entry."""


class VerificationError(BuildError):
    """Numeric verification failed; ``comparisons`` holds every table that was computed."""

    def __init__(self, message: str, *, comparisons: list[Any] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.comparisons: list[Any] = list(comparisons or [])


class ServerError(TritonKitError):
    """tritonserver could not be started, did not become ready, or died."""

    def __init__(self, message: str, *, log_path: Path | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.log_path = log_path


class ModelLoadError(ServerError):
    """A model failed to load; ``reason`` is the server's own words from its log."""

    def __init__(
        self,
        model: str,
        reason: str,
        *,
        log_path: Path | None = None,
        hint: str | None = None,
    ) -> None:
        where = f" (server log: {log_path})" if log_path else ""
        super().__init__(f"model '{model}' failed to load: {reason}{where}", log_path=log_path, hint=hint)
        self.model = model
        self.reason = reason


class ClientError(TritonKitError):
    """An inference or metadata call failed."""

    def __init__(self, message: str, *, model: str | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.model = model


class ConnectError(ClientError):
    """The request was never sent: nothing accepted the connection (server down, wrong address).

    Safe to send again: the server cannot have seen it.
    """


class ConnectionLostError(ClientError):
    """The connection broke while the call was in flight: the server may have executed it.

    Sending it again is only safe for idempotent models (``RetryPolicy(idempotent=True)``).
    """


class DeadlineExceededError(ClientError):
    """The request's deadline passed before the server answered."""


class ConnectTimeoutError(ConnectError, DeadlineExceededError):
    """No connection was made in time (something accepted TCP but never spoke gRPC, or a slow path).

    A timeout, and like every ``ConnectError`` the request was never sent.
    """


class TLSError(ConnectError):
    """The request was never sent: client and server disagree on TLS; the message says how and the
    hint names the option that fixes it. Sending again cannot help."""


class NotAuthorisedError(ClientError):
    """The server refused the call: a header it expects (``header``) is missing or has another
    value, or a credential was refused. Sending again cannot help."""

    def __init__(self, message: str, *, model: str | None = None, hint: str | None = None,
                 header: str | None = None) -> None:
        super().__init__(message, model=model, hint=hint)
        self.header = header


class ModelNotReadyError(ClientError):
    """The model is unknown to the server, or known but not ready."""


class InvalidInputError(ClientError):
    """The request does not match what the model expects."""


class OverloadedError(ClientError):
    """The server refused the request without executing it (the model's queue is full)."""


class QueueTimeoutError(OverloadedError):
    """The request waited in the model's queue past its queue timeout and was dropped unexecuted."""


class ServerSideError(ClientError):
    """The server failed while handling the request."""


class SharedMemoryRefusedError(ClientError):
    """The server refuses client shared-memory registration: from Triton 2.68 a server started
    without ``--allow-client-shm=true`` answers every register call with UNIMPLEMENTED."""


class ClientClosedError(ClientError):
    """The client was closed before the call, or while the call was in flight."""


class PerfError(TritonKitError):
    """perf_analyzer (or the native load generator) failed."""

    def __init__(
        self,
        message: str,
        *,
        returncode: int | None = None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.returncode = returncode
        self.stderr_tail = stderr_tail


class PerfTimeoutError(PerfError):
    """A perf_analyzer run passed its time limit; it was stopped and what it wrote was kept."""


class StepError(PerfError):
    """A load step that failed, classified: ``failure`` (a :class:`tritonkit.perf.measure.failures.Failure`,
    a ``str`` enum) and the server's or model's own message."""

    def __init__(
        self,
        message: str,
        *,
        failure: str,
        server_message: str = "",
        returncode: int | None = None,
        stderr_tail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, returncode=returncode, stderr_tail=stderr_tail, hint=hint)
        self.failure = failure
        self.server_message = server_message


class StepTimeoutError(StepError, PerfTimeoutError):
    """A step that passed its time limit (``failure`` is ``Failure.TIMEOUT``)."""


class PlanError(TritonKitError):
    """The capacity planner cannot compute from the inputs it was given."""


class ClusterError(TritonKitError):
    """A Ray cluster cannot do what was asked: it cannot be reached, no node has the resources
    asked, or a node lacks tritonkit, perf_analyzer or tritonserver. Raised before any server starts."""


class NodeLostError(ClusterError):
    """The node running a piece of work (a model's sweep, a load generator) died before it finished."""

    def __init__(self, message: str, *, node_id: str = "", host: str = "", hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.node_id = node_id
        self.host = host


# ---- signals: never reach a library caller ------------------------------------------------------


class CommandExit(Exception):
    """Raised by a CLI command that has printed its result and wants a given exit status."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class ShmUnusable(Exception):
    """The server refused a registration in "auto" mode: resend the request in-band."""


class AdminRefused(Exception):
    """What the server answered when it did not say yes: the HTTP status (or gRPC code name) and its words."""

    def __init__(self, code: str, text: str) -> None:
        super().__init__(text)
        self.code = code
        self.text = text


class AdminNoAnswer(Exception):
    """Nothing answered; ``timed_out`` when something accepted but said nothing in time."""

    def __init__(self, detail: str, *, timed_out: bool) -> None:
        super().__init__(detail)
        self.timed_out = timed_out
