"""Why a perf_analyzer step failed: one classification, with the server's or model's own message.

Classic ladder steps, LLM steps and the sweep read the same answer. :func:`classify` looks at
what perf_analyzer printed, how it ended, and whether the server still answers, and returns a
:class:`Failure` with the most specific message it can find — the model's own exception text, the
python stub that died, the option perf_analyzer refused — instead of one catch-all line.

Evidence (tritonserver 2.51, perf_analyzer 2.60, seen on these machines):

* a python model that raises: ``Thread [0] had error: Failed to process the request(s) for model
  'm_0_0', message: RuntimeError: <the model's text>`` and exit 99;
* a python stub that dies (``os._exit`` in ``execute``): ``Thread [0] had error: Stub process
  'm_0_0' is not healthy.`` and exit 99;
* a model slower than the step's time limit: no line at all; the supervisor stops it (timeout);
* a measurement window shorter than one request: ``No valid requests recorded within time
  interval. Please use a larger time window.`` on stderr and exit 3 — the same status as a
  usage mistake, so the line itself decides (a slow model, not a wrong option);
* a usage mistake: exit 3, or an ``Error: …`` line with nothing measured on stdout;
* a request the dynamic batcher's queue policy refused: ``Thread [0] had error: [request id:
  <id_unknown>] Exceeds maximum queue size`` (the queue full) or ``Thread [0] had error: Request
  timeout expired`` (a wait past the policy's timeout, ``timeout_action: REJECT``) — the texts of
  triton core's request queue (``src/scheduler_utils.cc``); perf_analyzer stops the step at the
  first one (:func:`queue_rejections` counts them).

Every :class:`StepError` (a ``PerfError``) carries ``.failure`` (a :class:`Failure`, a ``str``) and
``.server_message``; ``str(exc)`` says both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from tritonkit._dial import header_refusal
from tritonkit.errors import StepError, StepTimeoutError

__all__ = ["Failure", "Diagnosis", "QUEUE_REJECTIONS", "StepError", "StepTimeoutError", "classify",
           "diagnose_request_errors", "queue_rejections"]


class Failure(str, Enum):
    """The kinds of failed step (values are what ``result.json`` stores)."""

    TIMEOUT = "timeout"  # no end within the step's time limit: the model (or the server) is too slow
    MODEL_CRASH = "model_crash"  # the model's process (a python stub) died
    MODEL_ERROR = "model_error"  # the model answered with an error (raised an exception)
    REQUEST_ERRORS = "request_errors"  # requests failed for another reason the server gave
    REFUSED_OPTIONS = "refused_options"  # perf_analyzer refused its command line: nothing was sent
    NO_REQUESTS = "no_requests"  # requests were sent but none ended within one measurement window
    MODEL_UNAVAILABLE = "model_unavailable"  # the server answers but does not serve the model (ready)
    SERVER_LOST = "server_lost"  # the server stopped answering
    KILLED = "killed"  # perf_analyzer was killed by a signal it did not get from tritonkit
    TOOL_ERROR = "tool_error"  # perf_analyzer failed for a reason it did not explain

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Diagnosis:
    """A failure and the most specific message found for it."""

    failure: Failure
    message: str


_MODEL_ERROR_RE = re.compile(r"Failed to process the request\(s\) for model '(?P<model>[^']*)', message: (?P<msg>.*)")
_STUB_RE = re.compile(r"Stub process '(?P<model>[^']*)' is not healthy\.?|"
                      r"(?P<exited>stub process (?:has )?(?:exited|died|crashed)[^\n]*)", re.IGNORECASE)
_HAD_ERROR_RE = re.compile(r"^Thread \[\d+\] had error: (?P<msg>.*)$", re.MULTILINE)
_CONNECTION = ("failed to connect", "connection refused", "socket closed", "unavailable", "connection reset",
               "broken pipe", "unreachable")
_NO_REQUESTS_RE = re.compile(r"No valid requests recorded within time interval", re.IGNORECASE)


def _instance(name: str) -> str:
    """``'m_0_0'`` (Triton's instance name) → ``'m'``."""
    return re.sub(r"_\d+_\d+$", "", name)


#: What tritonserver answers a request its queue policy refused (see the module docstring).
QUEUE_REJECTIONS = ("Exceeds maximum queue size", "Request timeout expired")


def queue_rejections(text: str) -> tuple[int, int]:
    """(requests the queue policy refused, requests that failed) among the ``had error`` lines of
    ``text`` (a step's console, or its error note: one line per failed perf_analyzer thread)."""
    lines = [m.group("msg") for m in _HAD_ERROR_RE.finditer(text.replace("; Thread [", "\nThread ["))]
    return sum(any(marker in line for marker in QUEUE_REJECTIONS) for line in lines), len(lines)


def diagnose_request_errors(console: str) -> Diagnosis | None:
    """What the ``had error`` lines of a step say, most specific first (``None``: there are none)."""
    stub = _STUB_RE.search(console)
    if stub is not None:
        model = stub.group("model")
        where = f"model '{_instance(model)}'" if model else "the model"
        return Diagnosis(Failure.MODEL_CRASH, f"the python stub of {where} crashed ({stub.group(0).strip()})")
    error = _MODEL_ERROR_RE.search(console)
    if error is not None:
        return Diagnosis(Failure.MODEL_ERROR,
                         f"model '{_instance(error.group('model'))}' raised: {error.group('msg').strip()}")
    lines = [m.group("msg").strip() for m in _HAD_ERROR_RE.finditer(console)]
    if not lines:
        return None
    if any(marker in line.lower() for line in lines for marker in _CONNECTION):
        return Diagnosis(Failure.SERVER_LOST, f"the server dropped the connection: {lines[-1]}")
    if header_refusal(lines[-1], "", ()) is not None:  # measured: perf_analyzer 2.60 drops -H over gRPC
        return Diagnosis(Failure.REQUEST_ERRORS, f"{lines[-1]} (perf_analyzer 2.60 sends --header values over "
                                                 "HTTP only: load-test a restricted inference protocol with --protocol http)")
    return Diagnosis(Failure.REQUEST_ERRORS, lines[-1])


def classify(
    console: str,
    *,
    returncode: int | None,
    option_error: str | None = None,
    timed_out: bool = False,
    timeout_s: float | None = None,
    server_reachable: bool | None = None,
    model_ready: bool | None = None,
    model: str = "",
) -> Diagnosis:
    """Why a step whose perf_analyzer did not exit 0 failed.

    The model's own words win: a crashed stub or a raised exception is named as such even when
    perf_analyzer also printed something about its options. Options count as refused only when
    the server still answers and serves the model ready (``server_reachable`` / ``model_ready``:
    ``None`` when not asked); otherwise the tool's last error line is the server's answer.
    """
    requests = diagnose_request_errors(console)
    if requests is not None and requests.failure is not Failure.SERVER_LOST:
        return requests
    if server_reachable is False or requests is not None:
        return requests or Diagnosis(Failure.SERVER_LOST, "the server stopped answering during the step")
    lines = [line.strip() for line in console.splitlines() if line.strip().lower().startswith("error")]
    said = option_error or (lines[-1].removeprefix("Error:").removeprefix("error:").strip() if lines else "")
    if model_ready is False:
        who = f"model '{model}'" if model else "the model"
        return Diagnosis(Failure.MODEL_UNAVAILABLE, f"the server does not serve {who} ready" + (f": {said}" if said else ""))
    if _NO_REQUESTS_RE.search(console):
        who = f"model '{model}'" if model else "the model"
        return Diagnosis(Failure.NO_REQUESTS,
                         f"no request to {who} ended within one measurement window (perf_analyzer: 'No valid requests "
                         "recorded within time interval'): the model answers more slowly than the window is long; "
                         "give each step (and the warm-up) a longer measurement window")
    if timed_out:
        limit = f" within {timeout_s:g} s" if timeout_s is not None else ""
        who = f"model '{model}'" if model else "the model"
        return Diagnosis(Failure.TIMEOUT, f"{who} did not answer{limit} (the step was stopped)")
    if returncode is not None and returncode < 0:
        return Diagnosis(Failure.KILLED, f"perf_analyzer was killed by signal {-returncode}")
    if returncode == 3 or option_error:
        return Diagnosis(Failure.REFUSED_OPTIONS, option_error or "perf_analyzer refused its options")
    return Diagnosis(Failure.TOOL_ERROR, lines[-1] if lines else f"perf_analyzer exited with status {returncode}")
