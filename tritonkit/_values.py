"""The limits of the numbers and words a user gives, checked by one piece of code wherever they arrive.

A limit is a :class:`Bounds` value (whole or real, low and high ends, what the number counts). A
settings dataclass declares a field's limit with :func:`bounded` and checks every such field in its
``__post_init__`` with :func:`check_fields`; the command line's option for the same value takes
:class:`tritonkit.cli._common.Number` of the same :class:`Bounds` (read from the field with
:func:`field_bounds`). So ``--duration-s nan`` and ``LoadTestSettings(duration_s=float("nan"))`` are
refused by the same check, one naming the option, the other the field, both with what to give instead.
The option's default is read from the field too (:func:`field_default`), so ``--help`` cannot drift
from the settings dataclass, the contract between a command and the library.

The limits are the real ones where there is one: Triton's ``model_config.proto`` declares
``max_batch_size``, ``max_queue_size`` and an instance group's ``count`` as ``int32`` and ``dims`` as
``int64`` (tritonclient's ``model_config_pb2``); a number past them never reaches protobuf. Elsewhere a limit is a sane upper bound, named here with the reason, so that
a typo (``--concurrency 1:1e9``, ``--gpus 1000``) is an error instead of a plan nobody meant.
"""

from __future__ import annotations

import http.client
import ipaddress
import math
import numbers
import re
import unicodedata
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from tritonkit.errors import ConfigError

__all__ = [
    "BUILD_VERSION",
    "CONCURRENCY_LEVEL",
    "COUNT",
    "DIM",
    "FRACTION",
    "GPUS_PER_POD",
    "INT32_MAX",
    "INT64_MAX",
    "INSTANCES",
    "MAX_CLIENT_NODES",
    "MAX_INSTANCES",
    "MAX_RAY_WORKERS",
    "MAX_CONCURRENCY",
    "MAX_GPUS",
    "MAX_GPUS_PER_POD",
    "MAX_LADDER_LEVELS",
    "MAX_REQUESTS",
    "MAX_REQUEST_RATE_PER_S",
    "MAX_SECONDS",
    "NON_NEGATIVE",
    "CLIENT_NODES",
    "PORT",
    "RAY_WORKERS",
    "PARALLEL",
    "POSITIVE",
    "PROMPTS",
    "PROTO_INT32",
    "RATE_LEVEL",
    "REQUESTS",
    "SECONDS",
    "SECONDS_OR_ZERO",
    "SEED",
    "REPEATS",
    "STEPS",
    "TOKENS",
    "TOLERANCE",
    "TOLERANCE_PERCENT",
    "VERSION",
    "WINDOW_MS",
    "Bounds",
    "bounded",
    "check_choice",
    "ascii_int",
    "check_fields",
    "check_host_port",
    "check_http_url",
    "check_text",
    "excerpt",
    "field_bounds",
    "field_default",
    "host_port_problem",
    "port_problem",
    "text_problem",
]

#: protobuf's ``int32`` and ``int64`` (Triton's config fields of those types).
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
#: The longest duration any option takes: 30 days. Longer is a typo (a soak runs hours), and
#: seconds turn into integer milliseconds and microseconds on perf_analyzer's command line.
MAX_SECONDS = 30 * 24 * 3600.0
#: Requests in flight at one load level. perf_analyzer keeps a context per request in flight;
#: ten thousand is already far past what one client machine drives.
MAX_CONCURRENCY = 10_000
#: Requests per second at one load level.
MAX_REQUEST_RATE_PER_S = 1_000_000.0
#: Steps of one load ladder (a doubling ladder from 1 to MAX_CONCURRENCY has 15).
MAX_LADDER_LEVELS = 64
#: GPUs one pod (one node) can hold: the largest NVIDIA systems have 16 in a node.
MAX_GPUS_PER_POD = 16
#: GPUs one deployment spans (tensor × pipeline parallelism, GPU ids).
MAX_GPUS = 4096

#: Instances of one model on one machine (Triton's ``count``, per GPU for KIND_GPU). Each holds its
#: own copy of the model and its own thread or process; the largest machines have a few hundred
#: cores, so more than 1024 instances of one model is a typo, not a configuration.
MAX_INSTANCES = 1024
#: Load-generating nodes of one ``perf run --cluster`` step. Each runs its own perf_analyzer on a
#: node of its own with at least one request in flight, and the driver merges every client's
#: requests per step: 256 such nodes already drive more connections than one Triton endpoint's
#: frontends serve, so a larger count is a typo (``--clients 1000000``).
MAX_CLIENT_NODES = 256
#: Workers of one KubeRay worker group. Each runs one model's sweep (its own tritonserver and
#: perf_analyzer) at a time, all driven from one head; a thousand sweeps at once is already far
#: past the models one repository holds, so more is a typo (``--gpu-workers 1000000000``).
MAX_RAY_WORKERS = 1000

_FIELD_KEY = "tritonkit.bounds"
_OPTIONAL_KEY = "tritonkit.optional"


def excerpt(value: Any, limit: int = 40) -> str:
    """``value`` as it may appear in an error message: its ``repr`` (control characters escaped),
    cut to ``limit`` characters. A file read where a word was expected is never echoed whole."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _number_text(value: float) -> str:
    return f"{int(value)}" if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


@dataclass(frozen=True)
class Bounds:
    """The numbers a value may take: whole (``integer``) or real and finite, from ``low`` to ``high``
    (either end ``None`` for none; ``low_open``/``high_open`` leave the end itself out). ``noun`` says
    what the number counts in messages (``"number of seconds"``); ``example`` is a good value."""

    integer: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    noun: str = ""
    example: str = "1"

    @property
    def metavar(self) -> str:
        """How ``--help`` names the value."""
        return "INTEGER" if self.integer else "NUMBER"

    def describe(self) -> str:
        """``"a whole number from 1 to 2147483647"``, ``"a number of seconds > 0 and ≤ 2592000"``."""
        noun = self.noun or ("whole number" if self.integer else "number")
        article = "an" if noun[0] in "aeiou" else "a"
        if self.integer and self.low is not None and self.high is not None:
            low = int(self.low) + (1 if self.low_open else 0)
            high = int(self.high) - (1 if self.high_open else 0)
            return f"{article} {noun} from {low} to {high}"
        ends = []
        if self.low is not None:
            ends.append(f"{'>' if self.low_open else '≥'} {_number_text(self.low)}")
        if self.high is not None:
            ends.append(f"{'<' if self.high_open else '≤'} {_number_text(self.high)}")
        return f"{article} {noun}" + (f" {' and '.join(ends)}" if ends else "")

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` (a number already), or ``None``."""
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return f"not a number ({type(value).__name__})"
        if self.integer and not isinstance(value, numbers.Integral):
            return "not a whole number"
        if not isinstance(value, numbers.Integral) and not math.isfinite(value):  # a whole one always is
            return "not a finite number"
        number = float(value) if not isinstance(value, numbers.Integral) else int(value)
        if self.low is not None and (number < self.low or (self.low_open and number == self.low)):
            return "too small"
        if self.high is not None and (number > self.high or (self.high_open and number == self.high)):
            return "too large"
        return None

    def check(self, value: Any, where: str) -> Any:
        """``value`` unchanged when it is within bounds; else a :class:`ConfigError` naming ``where``
        (an option ``--duration-s`` or a field ``LoadTestSettings.duration_s``)."""
        problem = self.problem(value)
        if problem is not None:
            raise self._error(where, excerpt(value), problem)
        return value

    def parse(self, text: str, where: str, *, shown: str | None = None) -> int | float:
        """The number ``text`` spells (as typed on a command line), checked; ``shown``: what the
        user typed, when ``text`` is part of it (``20`` of ``20%``)."""
        stripped = text.strip()
        typed = excerpt(text if shown is None else shown)
        try:
            if not stripped.isascii() or "_" in stripped:  # int() and float() read "١٢" and "1_0" as 12 and 10
                raise ValueError(stripped)
            value: int | float = int(stripped, 10) if self.integer else float(stripped)
        except ValueError:
            raise self._error(where, typed, "not a whole number" if self.integer else "not a number") from None
        problem = self.problem(value)
        if problem is not None:
            raise self._error(where, typed, problem)
        return value

    def _error(self, where: str, shown: str, problem: str) -> ConfigError:
        name = where.rsplit(".", 1)[-1]
        if where.startswith("-"):
            example = f"{where} {self.example}"  # an option
        elif name.isidentifier():
            example = f"{name}={self.example}"  # a field
        else:
            example = self.example
        return ConfigError(f"{where} {shown}: {problem}", hint=f"give {self.describe()}, e.g. {example}")


#: A count protobuf holds as ``int32``: instances, a batch size, a count of things.
COUNT = Bounds(integer=True, low=1, high=INT32_MAX, example="4")
#: A duration that must pass: a step, a timeout, a deadline.
SECONDS = Bounds(integer=False, low=0, high=MAX_SECONDS, low_open=True, noun="number of seconds", example="6")
#: A duration that may be nothing: a warm-up, a settle time.
SECONDS_OR_ZERO = Bounds(integer=False, low=0, high=MAX_SECONDS, noun="number of seconds", example="5")
#: A share of something, more than none and at most all (``0.9`` of free GPU memory).
FRACTION = Bounds(integer=False, low=0, high=1, low_open=True, noun="fraction", example="0.9")
#: A finite quantity above zero (gigabytes, TFLOPS, milliseconds of a target).
POSITIVE = Bounds(integer=False, low=0, low_open=True, example="1.5")
#: A finite quantity of zero or more.
NON_NEGATIVE = Bounds(integer=False, low=0, example="0")
#: model_config.proto's ``int32`` fields that cannot be negative (``max_batch_size``, ``max_queue_size``).
PROTO_INT32 = Bounds(integer=True, low=0, high=INT32_MAX, example="8")
#: A tensor dimension (model_config.proto's ``int64`` ``dims``): -1 for a variable size, else a size.
DIM = Bounds(integer=True, low=-1, high=INT64_MAX, example="4")
#: A model version: a folder name Triton reads as an ``int64``.
VERSION = Bounds(integer=True, low=0, high=INT64_MAX, example="1")
#: A version the builders write: they number versions from 1.
BUILD_VERSION = Bounds(integer=True, low=1, high=INT64_MAX, example="2")
#: Trials, retries, steps: small counts, where a thousand is already a typo.
STEPS = Bounds(integer=True, low=1, high=1000, example="3")
#: Whole ladders run again to measure run-to-run spread: each is minutes long, so a hundred is a typo.
REPEATS = Bounds(integer=True, low=1, high=100, example="5")
#: A relative tolerance as a fraction, none to almost all: ``0.05`` is 5 %.
TOLERANCE = Bounds(integer=False, low=0, high=1, high_open=True, noun="fraction", example="0.05")
#: The same tolerance in percent, as the command line takes it.
TOLERANCE_PERCENT = Bounds(integer=False, low=0, high=100, high_open=True, noun="percentage", example="5")
#: A random seed (numpy takes 0 to 2**32 - 1 everywhere).
SEED = Bounds(integer=True, low=0, high=2**32 - 1, example="0")
#: GPUs per pod.
GPUS_PER_POD = Bounds(integer=True, low=0, high=MAX_GPUS_PER_POD, example="1")
#: A parallel degree or a GPU count of one deployment (tensor, pipeline parallelism).
PARALLEL = Bounds(integer=True, low=1, high=MAX_GPUS, example="2")
#: One measurement window in milliseconds: perf_analyzer needs at least a few requests in it.
WINDOW_MS = Bounds(integer=True, low=50, high=3_600_000, noun="number of milliseconds", example="500")
#: A concurrency level: requests in flight.
CONCURRENCY_LEVEL = Bounds(integer=True, low=1, high=MAX_CONCURRENCY, example="8")
#: A request-rate level, per second.
RATE_LEVEL = Bounds(integer=False, low=0, high=MAX_REQUEST_RATE_PER_S, low_open=True,
                    noun="number of requests per second", example="50")
#: Tokens of one request (2**20: the longest context windows of today's models).
TOKENS = Bounds(integer=False, low=0, high=2**20, low_open=True, noun="number of tokens", example="128")
#: Requests one LLM load level or traffic shape sends: load stays bounded in count and time.
MAX_REQUESTS = 100_000
REQUESTS = Bounds(integer=True, low=1, high=MAX_REQUESTS, example="32")
#: Synthetic prompts generated up front (each held in memory for the whole run).
PROMPTS = Bounds(integer=True, low=1, high=100_000, example="100")
#: A TCP port (16 bits; 0 means "any port", which no one can connect to).
PORT = Bounds(integer=True, low=1, high=65535, noun="port number", example="8001")
#: Instances of one model (see :data:`MAX_INSTANCES`).
INSTANCES = Bounds(integer=True, low=1, high=MAX_INSTANCES, example="2")
#: Load-generating nodes of one cluster run (see :data:`MAX_CLIENT_NODES`).
CLIENT_NODES = Bounds(integer=True, low=1, high=MAX_CLIENT_NODES, example="4")
#: Workers of one KubeRay worker group, none allowed (see :data:`MAX_RAY_WORKERS`).
RAY_WORKERS = Bounds(integer=True, low=0, high=MAX_RAY_WORKERS, example="4")


def ascii_int(text: str) -> int | None:
    """The whole number ``text`` spells in ASCII digits only, or ``None``.

    ``str.isdigit`` is true for ``²`` (which ``int`` refuses) and ``int`` reads ``١٢`` (Arabic-Indic
    digits) as 12: a port, a version folder or a GPU id is written in ASCII digits or not at all."""
    return int(text) if text.isascii() and text.isdigit() else None


def port_problem(port: str) -> str | None:
    """What is wrong with ``port`` as a TCP port, or ``None``."""
    number = ascii_int(port)
    if number is None or not 1 <= number <= 65535:
        return f"port {excerpt(port) if port else '(none)'} is not a number from 1 to 65535 in ASCII digits"
    return None


#: A host name or an IPv4 address: letters, digits, ``.``, ``-`` and ``_`` (as DNS and /etc/hosts hold).
_HOST_RE = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9._-]{0,251}[A-Za-z0-9_])?")


def _host_problem(host: str, port: str) -> str | None:
    if host.startswith("[") or host.endswith("]"):
        inner = host[1:-1].partition("%")[0] if host.startswith("[") and host.endswith("]") else ""
        try:
            ipaddress.IPv6Address(inner)
        except ValueError:
            return f"{excerpt(host)} is not an IPv6 address in brackets, e.g. [::1]:{port or 8001}"
        return None
    if ":" in host:
        return f"write an IPv6 host in brackets, e.g. [{host}]:{port}" if not port_problem(port) \
            else "write an IPv6 host in brackets, e.g. [::1]:8001"
    if not _HOST_RE.fullmatch(host):
        return f"host {excerpt(host)} is not a host name or an IP address"
    return None


def host_port_problem(text: str) -> str | None:
    """What is wrong with ``text`` as ``HOST:PORT`` (an IPv6 host in brackets), or ``None``.

    ``::1:6379`` is refused with the fix ``[::1]:6379``: without brackets nobody can tell where an
    IPv6 address ends and the port begins."""
    if "://" in text:
        return "give host:port without a scheme"
    if text.startswith("[") and "]" in text:  # [IPv6]:PORT: the port is what follows the bracket
        host, _, rest = text.partition("]")
        host, sep, port = host + "]", rest[:1] == ":", rest[1:]
        if rest and not sep:
            return f"write [IPv6]:PORT, e.g. {host}:8001"
    else:
        host, sep_text, port = text.rpartition(":")
        sep = bool(sep_text)
    if not sep or not host:
        return "a host and a port are both needed"
    return _host_problem(host, port) or port_problem(port)


def check_host_port(text: str, where: str, *, example: str = "127.0.0.1:8001") -> str:
    """``text`` when it is a usable ``HOST:PORT``; else a :class:`ConfigError` naming ``where``."""
    problem = host_port_problem(text)
    if problem is not None:
        raise ConfigError(f"{where} {excerpt(text)} is not host:port: {problem}",
                          hint=f"give HOST:PORT, an IPv6 host in brackets, e.g. {where} {example} or {where} [::1]:"
                               f"{example.rpartition(':')[2]}")
    return text


#: What urllib raises when what answers speaks no HTTP (a bad status line, an answer cut short, a
#: Content-Length no index holds), and with ``OSError``: nothing answered, or no HTTP did.
NOT_HTTP: tuple[type[Exception], ...] = (http.client.HTTPException, ValueError, OverflowError)
NO_ANSWER: tuple[type[Exception], ...] = (OSError, *NOT_HTTP)


def check_http_url(text: str, where: str, *, example: str = "http://127.0.0.1:8002/metrics") -> str:
    """``text`` when it is an ``http://`` or ``https://`` URL whose host (and port, if given) pass
    :func:`host_port_problem`'s rules; else a :class:`ConfigError` naming ``where``."""
    scheme, sep, rest = text.partition("://")
    netloc = rest.split("/", 1)[0].split("?", 1)[0]
    if not sep or scheme.lower() not in ("http", "https"):
        problem: str | None = "not an http:// or https:// URL"
    elif not netloc:
        problem = "no host"
    elif netloc.endswith("]") or ":" not in netloc.rsplit("]", 1)[-1]:
        problem = _host_problem(netloc, "")  # no port: the scheme's own
    else:
        problem = host_port_problem(netloc)
    if problem is None and any(c.isspace() or unicodedata.category(c) == "Cc" for c in text):
        problem = "white space or a control character in it"
    if problem is not None:
        raise ConfigError(f"{where} {excerpt(text)}: {problem}", hint=f"give a URL like {where} {example}")
    return text


def text_problem(text: str) -> str | None:
    """What makes ``text`` (a word or a path from a command line) unusable, or ``None``: bytes that
    are not UTF-8 (Python keeps them as surrogate escapes, which no file or terminal can write)
    and control characters (a newline forges a line of every file and log the text reaches)."""
    if any("\udc80" <= c <= "\udcff" for c in text):
        return "is not UTF-8 text"
    control = next((c for c in text if unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp")), None)
    if control is not None:
        return f"holds the control character {control!r}"
    return None


def check_text(text: str, where: str) -> str:
    """``text`` when :func:`text_problem` finds nothing; else a :class:`ConfigError` naming ``where``."""
    problem = text_problem(text)
    if problem is not None:
        shown = ascii(text) if len(text) <= 40 else ascii(text[:39]) + "…"
        raise ConfigError(f"{where} {shown} {problem}",
                          hint="give it in UTF-8 without control characters (a terminal's locale, or "
                               "$'…' quoting in a script, may have put them there)")
    return text


def bounded(default: Any, bounds: Bounds, *, optional: bool = False) -> Any:
    """A dataclass field with ``default`` whose values :func:`check_fields` holds to ``bounds``
    (``optional``: ``None`` is allowed too)."""
    return field(default=default, metadata={_FIELD_KEY: bounds, _OPTIONAL_KEY: optional or default is None})


def field_bounds(cls: type, name: str) -> Bounds:
    """The :class:`Bounds` a dataclass declares for its field ``name`` (with :func:`bounded`)."""
    for item in fields(cls):
        if item.name == name and _FIELD_KEY in item.metadata:
            bounds: Bounds = item.metadata[_FIELD_KEY]
            return bounds
    raise KeyError(f"{cls.__name__}.{name} declares no bounds")


def field_default(cls: type, name: str) -> Any:
    """The default of dataclass ``cls``'s field ``name`` (a factory's value when it has one)."""
    for item in fields(cls):
        if item.name == name and item.default is not MISSING:
            return item.default
        if item.name == name and item.default_factory is not MISSING:
            return item.default_factory()
    raise KeyError(name)


def check_fields(obj: Any) -> None:
    """Hold every :func:`bounded` field of the dataclass ``obj`` to its bounds (call it from
    ``__post_init__``); the first value out of bounds is a :class:`ConfigError` naming the field."""
    for item in fields(obj):
        bounds = item.metadata.get(_FIELD_KEY)
        if bounds is None:
            continue
        value = getattr(obj, item.name)
        if value is None and item.metadata.get(_OPTIONAL_KEY):
            continue
        bounds.check(value, f"{type(obj).__name__}.{item.name}")


def check_choice(value: Any, where: str, choices: tuple[str, ...] | list[str]) -> str:
    """``value`` when it is one of ``choices``; else a :class:`ConfigError` listing them."""
    if value not in choices:
        raise ConfigError(f"{where} {excerpt(value)}: not one of {', '.join(choices)}",
                          hint=f"give one of {', '.join(choices)}")
    return str(value)
