"""Service-level agreements: the constraints a load ladder is judged against, and their parser.

An SLA is a handful of constraints on what a step of a ladder measured::

    p99<=50ms, throughput>=200/s, errors==0

written either as that one-line expression (``--sla``) or as a YAML file::

    sla:                       # the top-level key is optional
      p99: 50ms                # a latency limit is an upper bound; the unit is required
      throughput: 200/s        # a throughput floor
      errors: 0                # no failed request at all
      queue: "<=5ms"           # an explicit operator is allowed too

or a YAML list of expressions (``- p99<=50ms``).

Metrics (canonical name, then the spellings accepted for it):

=============  ==========================================  ==================
``p50``…       ``p50 p90 p95 p99`` latency percentiles      ``ms``, ``us``, ``s``
``mean``       mean request latency (``avg``, ``latency``)  ``ms``, ``us``, ``s``
``queue``      mean server queue time (``queue_time``)      ``ms``, ``us``, ``s``
``throughput`` inferences per second (``qps``, ``rps``)     ``/s`` (optional)
``errors``     failed requests in the step (``failures``)   none
``error_rate`` failed / all requests                        ``%`` or a fraction
``rejected``   refused by the queue policy / all requests   ``%`` or a fraction
=============  ==========================================  ==================

An SLA that bounds ``rejected`` (``rejected<=1%``) lets a queue policy refuse that share: its
``errors``/``error_rate`` bounds then count only the other failures.

Streaming LLM runs (``tritonkit.perf.llm``) add ``ttft_p50`` … ``ttft_p99``, ``ttft_mean`` and
``itl_p50`` … ``itl_mean`` (time to first token, inter-token latency; time units), ``tokens_per_s``
(output tokens per second), ``user_tokens_per_s`` (1 / ITL, median) and ``goodput`` (requests per
second meeting every per-request objective).

Values are kept in canonical units: milliseconds for times, inferences per second for
throughput, a count for errors and a fraction for the error rate.

Judging a ladder against an SLA is :mod:`tritonkit.perf.judge.verdict`.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from tritonkit._fs import expand_user, read_user_text, shown_path
from tritonkit._values import excerpt
from tritonkit.errors import ConfigError
from tritonkit.perf.metric_registry import METRICS, Metric

__all__ = [
    "METRICS",
    "SLA",
    "Constraint",
    "MetricSpec",
    "format_metric",
    "load_sla",
    "parse_sla",
]

Operator = Literal["<=", "<", ">=", ">", "=="]

_OPERATORS: tuple[Operator, ...] = ("<=", ">=", "==", "<", ">")


#: What one SLA metric means: its kind (which units apply) and which bounds make sense — the
#: registry's entry (:mod:`tritonkit.perf.metric_registry`), under the name this module has always used.
MetricSpec = Metric

_ALIASES: dict[str, str] = {
    alias: spec.name for spec in METRICS.values() for alias in (spec.name, *spec.aliases)
}

# Multipliers into the canonical unit of each kind.
_TIME_UNITS_TO_MS = {"ms": 1.0, "msec": 1.0, "us": 1e-3, "µs": 1e-3, "usec": 1e-3, "s": 1000.0, "sec": 1000.0}
_RATE_UNITS = {"/s", "/sec", "qps", "rps", "infer/s", "req/s", "ips", "tok/s", "tokens/s"}

_EXPR_RE = re.compile(
    r"^\s*(?P<metric>[A-Za-z_][A-Za-z0-9_]*)\s*(?P<op><=|>=|==|=<|=>|<|>|=|!=)\s*"
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S*)\s*$"
)
_VALUE_RE = re.compile(
    r"^\s*(?P<op><=|>=|==|=<|=>|<|>|=|!=)?\s*"
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)\s*(?P<unit>\S*)\s*$"
)

_EXAMPLE = "p99<=50ms,throughput>=200/s,errors==0"


@dataclass(frozen=True)
class Constraint:
    """One bound on one metric, in canonical units (ms, inferences/s, count, fraction)."""

    metric: str
    op: Operator
    value: float

    @property
    def spec(self) -> MetricSpec:
        """The metric's description."""
        return METRICS[self.metric]

    def holds(self, measured: float) -> bool:
        """Whether ``measured`` satisfies this bound."""
        if self.op == "<=":
            return measured <= self.value
        if self.op == "<":
            return measured < self.value
        if self.op == ">=":
            return measured >= self.value
        if self.op == ">":
            return measured > self.value
        return measured == self.value

    def headroom(self, measured: float) -> float | None:
        """Margin to the limit as a fraction of it: positive to spare, negative over.

        ``None`` when the limit is zero (``errors==0``): there a margin has no scale.
        """
        if self.value == 0:
            return None
        if self.spec.bound == "upper":
            return (self.value - measured) / self.value
        return (measured - self.value) / self.value

    def format_value(self, value: float | None = None) -> str:
        """``value`` (default: the limit) with the metric's unit, e.g. ``50 ms``."""
        return format_metric(self.metric, self.value if value is None else value)

    def __str__(self) -> str:
        # Compact, and parseable again by parse_sla: p99<=50ms, throughput>=200/s, errors==0.
        unit = {"time": "ms", "rate": "/s", "count": "", "fraction": "%"}[self.spec.kind]
        value = self.value * 100 if self.spec.kind == "fraction" else self.value
        return f"{self.metric}{self.op}{fmt_number(value)}{unit}"


@dataclass(frozen=True)
class SLA:
    """A set of constraints, each on a different metric, all of which a step must meet."""

    constraints: tuple[Constraint, ...]
    #: Where it came from (the expression or the file), for messages; not part of equality.
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if not self.constraints:
            raise ConfigError("the SLA has no constraints", hint=f"write one, e.g. --sla '{_EXAMPLE}'")

    @property
    def metrics(self) -> tuple[str, ...]:
        """The metrics this SLA constrains, in the order given."""
        return tuple(c.metric for c in self.constraints)

    def constraint(self, metric: str) -> Constraint | None:
        """The constraint on ``metric`` (canonical name), if any."""
        for c in self.constraints:
            if c.metric == metric:
                return c
        return None

    def with_zero_errors(self) -> SLA:
        """This SLA plus ``errors==0`` unless it already bounds ``errors`` or ``error_rate``.

        A load test passes only with zero failed requests unless told otherwise: an overloaded
        server that drops requests must not pass on the latency of the ones it answered.
        """
        if self.constraint("errors") or self.constraint("error_rate"):
            return self
        return SLA((*self.constraints, Constraint("errors", "==", 0.0)), source=self.source)

    def check_measurable(self, mode: Literal["classic", "llm"]) -> SLA:
        """This SLA when a ``mode`` run measures every metric it bounds; else a :class:`ConfigError`
        naming the terms it never measures (``ttft_p99`` in a classic run would never be judged)."""
        unmeasured = [str(c) for c in self.constraints if mode not in METRICS[c.metric].modes]
        if unmeasured:
            other = "LLM load tests (--llm)" if mode == "classic" else "classic load tests"
            raise ConfigError(f"--sla {', '.join(unmeasured)}: only {other} measure "
                              f"{'it' if len(unmeasured) == 1 else 'them'}",
                              hint="add --llm for a streaming LLM load test, or drop the term"
                              if mode == "classic" else "drop the term")
        return self

    def __str__(self) -> str:
        return ",".join(str(c) for c in self.constraints)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form, read back by :meth:`from_dict`."""
        return {
            "expression": str(self),
            "constraints": [{"metric": c.metric, "op": c.op, "value": c.value} for c in self.constraints],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SLA:
        """Inverse of :meth:`to_dict`."""
        constraints = tuple(
            Constraint(str(c["metric"]), check_op(str(c["op"]), "result.json"), float(c["value"]))
            for c in data["constraints"]
        )
        return cls(constraints, source=str(data.get("expression", "")))


def format_metric(metric: str, value: float) -> str:
    """A metric's value with its canonical unit, for people: ``12.3 ms``, ``210 infer/s``."""
    kind = METRICS[metric].kind
    if kind == "time":
        return f"{fmt_number(value)} ms"
    if kind == "rate":
        unit = {"tokens_per_s": "tokens/s", "user_tokens_per_s": "tokens/s", "goodput": "req/s"}.get(metric, "infer/s")
        return f"{fmt_number(value)} {unit}"
    if kind == "fraction":
        return f"{fmt_number(value * 100)}%"
    return fmt_number(value)


def fmt_number(value: float) -> str:
    """A number as short as it can be written: ``50``, ``0.8``, ``12.35``."""
    if math.isfinite(value) and value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.4g}"


# --------------------------------------------------------------------------- parsing


def _suggest(word: str, choices: Iterable[str], cutoff: float = 0.6) -> str:
    close = difflib.get_close_matches(word.lower(), list(choices), n=1, cutoff=cutoff)
    return f"did you mean '{close[0]}'? " if close else ""


def _resolve_metric(name: str, where: str) -> str:
    key = name.strip().lower().replace("-", "_")
    # Accept unit-suffixed spellings (p99_ms, throughput_per_s, queue_time_ms) as their metric.
    for suffix in ("_ms", "_us", "_s", "_per_s", "_per_sec"):
        if key not in _ALIASES and key.endswith(suffix) and key[: -len(suffix)] in _ALIASES:
            key = key[: -len(suffix)]
    if key in _ALIASES:
        return _ALIASES[key]
    known = ", ".join(METRICS)
    raise ConfigError(
        f"{where}: unknown SLA metric '{name}'",
        hint=f"{_suggest(key, _ALIASES)}known metrics: {known}",
    )


def check_op(op: str, where: str) -> Operator:
    fixes = {"=": "==", "=<": "<=", "=>": ">="}
    if op in fixes:
        raise ConfigError(f"{where}: operator '{op}' is not allowed", hint=f"did you mean '{fixes[op]}'?")
    if op not in _OPERATORS:
        raise ConfigError(f"{where}: operator '{op}' is not allowed", hint="use one of <= < >= > ==")
    return op


def _convert(metric: str, number: float, unit: str, where: str) -> float:
    """``number`` with ``unit`` in the metric's canonical unit."""
    spec = METRICS[metric]
    unit_l = unit.strip().lower()
    if spec.kind == "time":
        if not unit_l:
            raise ConfigError(
                f"{where}: the {spec.description} limit {number:g} has no unit",
                hint=f"write it with a unit, e.g. {metric}<={number:g}ms (ms, us or s)",
            )
        if unit_l not in _TIME_UNITS_TO_MS:
            raise ConfigError(
                f"{where}: unknown time unit '{unit}' for {metric}",
                hint=f"{_suggest(unit_l, _TIME_UNITS_TO_MS, 0.5)}use ms, us or s",
            )
        return number * _TIME_UNITS_TO_MS[unit_l]
    if spec.kind == "rate":
        if unit_l and unit_l not in _RATE_UNITS:
            raise ConfigError(
                f"{where}: unknown throughput unit '{unit}'",
                hint=f"{_suggest(unit_l, _RATE_UNITS, 0.5)}write inferences per second as e.g. {number:g}/s",
            )
        return number
    if spec.kind == "fraction":
        if unit_l == "%":
            if number > 100:
                raise ConfigError(
                    f"{where}: {metric} {number:g}% is above 100%: no share of requests is larger than all of them",
                    hint=f"write a share of requests from 0% to 100%, e.g. {metric}<=1%",
                )
            return number / 100.0
        if unit_l:
            raise ConfigError(
                f"{where}: unknown unit '{unit}' for {metric}", hint=f"write e.g. {metric}<=1%"
            )
        if number > 1:
            raise ConfigError(
                f"{where}: {metric} {number:g} is above 1",
                hint=f"write a percentage with '%' ({metric}<={number:g}%) or a fraction up to 1",
            )
        return number
    if unit_l:
        raise ConfigError(
            f"{where}: '{metric}' counts failed requests and takes no unit (got '{unit}')",
            hint="write errors==0, or error_rate<=1% for a share of requests",
        )
    if number != int(number):
        raise ConfigError(f"{where}: '{metric}' is a count; {number:g} is not a whole number",
                          hint=f"write a whole number, e.g. {metric}<={math.floor(number):g}")
    return number


def _make_constraint(
    metric_name: str, op_text: str | None, number_text: str, unit: str, where: str
) -> Constraint:
    metric = _resolve_metric(metric_name, where)
    spec = METRICS[metric]
    default_op: Operator = "<=" if spec.bound == "upper" else ">="
    op = default_op if op_text is None else check_op(op_text, where)
    number = float(number_text)
    if not math.isfinite(number) or number < 0:
        shown = f"{abs(number):g}" if math.isfinite(number) else "50"
        raise ConfigError(f"{where}: the limit for {metric} must be a finite number >= 0, not {number_text}",
                          hint=f"write a limit of 0 or more, e.g. {metric}{default_op}{shown}{unit}")
    value = _convert(metric, number, unit, where)
    if spec.bound == "upper" and op in (">", ">="):
        raise ConfigError(
            f"{where}: '{metric_name}{op}…' asks for *more* {spec.description}; an SLA caps it",
            hint=f"write {metric}<={number_text}{unit}",
        )
    if spec.bound == "lower" and op in ("<", "<=", "=="):
        raise ConfigError(
            f"{where}: '{metric_name}{op}…' caps throughput; an SLA asks for at least some",
            hint=f"write {metric}>={number_text}{unit or '/s'}",
        )
    if op == "==" and value != 0:
        raise ConfigError(
            f"{where}: '{metric}=={number_text}' demands an exact value",
            hint=f"write {metric}<={number_text}{unit} (== is only for zero, as in errors==0)",
        )
    return Constraint(metric, op, value)


def _parse_expression(text: str, where: str) -> Constraint:
    match = _EXPR_RE.match(text)
    if match is None:
        raise ConfigError(
            f"{where}: cannot read it as METRIC OP VALUE[UNIT]",
            hint=f"write METRIC OP VALUE[UNIT] terms separated by commas, e.g. '{_EXAMPLE}'",
        )
    if match["op"] == "!=":
        raise ConfigError(f"{where}: '!=' is not an SLA bound", hint="use <=, <, >=, > or ==")
    return _make_constraint(match["metric"], match["op"], match["number"], match["unit"], where)


def _collect(constraints: Sequence[Constraint], source: str) -> SLA:
    seen: dict[str, Constraint] = {}
    for c in constraints:
        if c.metric in seen:
            raise ConfigError(
                f"{source}: {c.metric} is constrained twice ({seen[c.metric]} and {c})",
                hint="keep one limit per metric",
            )
        seen[c.metric] = c
    return SLA(tuple(constraints), source=source)


#: The refusal of an empty SLA (message, hint): the library's and the command line's ``--sla ''``.
EMPTY_SLA = ("the SLA is empty",
             f"write e.g. --sla '{_EXAMPLE}'; to measure without an SLA, leave the --sla option out")


def parse_sla(expression: str) -> SLA:
    """Parse a one-line SLA such as ``"p99<=50ms,throughput>=200/s,errors==0"``.

    Terms are separated by commas (or semicolons); spaces are ignored. Raises
    :class:`~tritonkit.errors.ConfigError` naming the bad term and what to write instead.
    """
    terms = [t for t in re.split(r"[,;]", expression) if t.strip()]
    if not terms:
        raise ConfigError(EMPTY_SLA[0], hint=EMPTY_SLA[1])
    constraints = [_parse_expression(term, f"SLA term {excerpt(term.strip(), 60)}") for term in terms]
    return _collect(constraints, expression.strip())


def _from_yaml_data(data: Any, where: str) -> SLA:
    if isinstance(data, Mapping) and set(data) == {"sla"}:
        data = data["sla"]
    constraints: list[Constraint] = []
    if isinstance(data, str):
        try:
            return _collect(parse_sla(data).constraints, where)
        except ConfigError as exc:
            if _looks_like_sla(data):  # an SLA with a mistake: its own term is quoted, after the file
                raise ConfigError(f"{where}: {exc.message}", hint=exc.hint) from exc
            # One line of a file that is not an SLA expression: never echo it (the file may be anything).
            raise ConfigError(f"{where} holds one line of text that is not an SLA expression",
                              hint=f"an SLA file holds a mapping (p99: 50ms), a list of expressions or one "
                                   f"expression like '{_EXAMPLE}'") from exc
    if isinstance(data, list):
        for i, item in enumerate(data):
            if not isinstance(item, str):
                raise ConfigError(
                    f"{where}: item {i} of the SLA list is not an expression", hint="write '- p99<=50ms'"
                )
            shown = f" {excerpt(item, 60)}" if _looks_like_sla(item) else " (not an SLA expression)"
            constraints.append(_parse_expression(item, f"{where}: item {i}{shown}"))
    elif isinstance(data, Mapping):
        for key, raw in data.items():
            term_where = f"{where}: key {excerpt(str(key), 60)}"
            if isinstance(raw, bool) or not isinstance(raw, (int, float, str)):
                raise ConfigError(f"{term_where}: the value must be a number or a string like '<=50ms'",
                                  hint="an SLA file maps each metric to one limit, e.g. 'p99: 50ms' or "
                                       "'throughput: \">=200/s\"'")
            match = _VALUE_RE.match(str(raw))
            if match is None:
                raise ConfigError(
                    f"{term_where}: cannot read the value {excerpt(str(raw), 60)}",
                    hint="write a limit with a unit, e.g. 50ms, '>=200/s' or 0",
                )
            if match["op"] == "!=":
                raise ConfigError(f"{term_where}: '!=' is not an SLA bound", hint="use <=, <, >=, > or ==")
            unit = match["unit"] or _unit_from_key(str(key))
            constraints.append(_make_constraint(str(key), match["op"], match["number"], unit, term_where))
    else:
        raise ConfigError(
            f"{where}: an SLA file holds a mapping (p99: 50ms) or a list of expressions",
            hint="see `tritonkit perf run --help` for an example",
        )
    if not constraints:
        raise ConfigError(f"{where}: the SLA has no constraints", hint="add e.g. 'p99: 50ms'")
    return _collect(constraints, where)


def _looks_like_sla(text: str) -> bool:
    """Whether ``text`` (read from a file) is SLA terms at all: each starts with a known metric. Text
    that is not is never quoted in an error: the file given may be anything."""
    names = [re.match(r"[A-Za-z_][A-Za-z0-9_-]*", t.strip()) for t in re.split(r"[,;]", text) if t.strip()]
    return bool(names) and all(name is not None and _known_metric(name[0]) for name in names)


def _known_metric(name: str) -> bool:
    try:
        _resolve_metric(name, "")
    except ConfigError:
        return False
    return True


def _unit_from_key(key: str) -> str:
    """The unit a key spells (``p99_ms`` → ``ms``), so ``p99_ms: 50`` needs no unit twice."""
    key = key.lower()
    for suffix, unit in (("_ms", "ms"), ("_us", "us"), ("_per_s", "/s"), ("_per_sec", "/s"), ("_s", "s")):
        if key.endswith(suffix):
            return unit
    return ""


def load_sla(source: str | Path) -> SLA:
    """An SLA from a YAML/JSON file path, or from a one-line expression.

    A string naming an existing file, or ending in ``.yaml``/``.yml``/``.json``, is read as a
    file; anything else is parsed with :func:`parse_sla`.
    """
    text = str(source)
    path = expand_user(text)
    looks_like_file = path.suffix.lower() in (".yaml", ".yml", ".json")
    if isinstance(source, Path) or looks_like_file or (text and _exists(path)):
        if not _exists(path):
            raise ConfigError(f"SLA file {shown_path(path)} does not exist", hint="check the path, or pass an expression")
        content = read_user_text(path, what="SLA file", max_bytes=_MAX_SLA_FILE_BYTES,
                                 hint="an SLA file holds a mapping (p99: 50ms) or a list of expressions")
        try:
            data = yaml.safe_load(content)
        except (yaml.YAMLError, RecursionError) as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise ConfigError(f"SLA file {shown_path(path)} is not valid YAML{where}",
                              hint="an SLA file holds a mapping (p99: 50ms) or a list of expressions") from None
        lines = [line for line in content.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if isinstance(data, str) and len(lines) > 1:
            # YAML reads any text as one string: lines of text are another file given by mistake.
            # Its text is never echoed: the file may be anything (/etc/shadow given by mistake).
            raise ConfigError(f"SLA file {shown_path(path)} is not an SLA: {len(lines)} lines of text that are not "
                              "a mapping or a list",
                              hint="an SLA file holds a mapping (p99: 50ms), a list of expressions or one expression")
        return _from_yaml_data(data, f"SLA file {shown_path(path)}")
    return parse_sla(text)


#: An SLA file holds a few lines; anything past this is another file given by mistake.
_MAX_SLA_FILE_BYTES = 1024 * 1024


def _exists(path: Path) -> bool:
    """Whether something is at ``path`` (a file, or what the reader will refuse): never an error."""
    try:
        return path.exists()
    except (OSError, ValueError):
        return False
