"""LLM serving metrics from perf_analyzer's per-request export, with GenAI-Perf's definitions.

Every request in the export carries its send time and the time of each streamed response (ns),
and each response's outputs. From those, per request:

* **time to first token (TTFT)** = first response carrying a token − request sent;
* **request latency** = last response − request sent (a final empty "complete" response counts,
  as it does in GenAI-Perf: the stream is not over before it);
* **inter-token latency (ITL)** = (request latency − TTFT) / (output tokens − 1), for requests
  with at least two tokens;
* **per-user tokens/s** = 1 / ITL (the speed one reader sees);
* **input / output sequence length (ISL / OSL)** in tokens.

Over the run: **output token throughput** = Σ output tokens / (last response − first request),
**request throughput** = answered requests / the same span (GenAI-Perf divides every request of
the export; the two differ only when some were never answered), and **goodput** = requests
meeting *every* per-request objective given (``GoodputSLO``), each request judged on its own,
per second of the same span.

Token counts come from the responses, never from re-tokenising text: ``output_ids`` (its
element count) where the model returns it, or an integer output named like ids
(``generated_ids``); otherwise a response that carries new text (``text_output``) counts as
one token — in a stream of the whole text so far, new means longer than the last (what a streaming TensorRT-LLM or vLLM model sends: one
token per response) — a response with only log-prob outputs, or the final empty one, is none. For
a decoupled model of unknown outputs, each response with any other non-empty output is one
"token": TTFT is then the time to first response, ITL the inter-response latency.
Input length: ``input_ids`` / ``input_lengths`` where the request carries them, else the prompt's
tokens as the model's tokenizer counts them when one is given, else its whitespace-separated words.

**Server TTFT**: where the model returns its own per-request timings (TensorRT-LLM's LLM-API model
with ``sampling_param_return_perf_metrics``: ``arrival_time_ns`` and ``first_token_time_ns`` on
its responses, the executor's steady clock), ``first_token_time_ns − arrival_time_ns`` of the last
response that carries both, per request, beside the client's TTFT: the difference is what lies
outside the engine (network, Triton's queue and frontends, the python model's hand-over).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tritonkit._values import INT64_MAX
from tritonkit.errors import PerfError
from tritonkit.perf.measure._json_dataclass import JsonDataclass
from tritonkit.perf.measure.confidence import bootstrap_interval
from tritonkit.perf.measure.parse import EXPORT_HINT, export_requests, read_export
from tritonkit.perf.measure.percentiles import percentiles
from tritonkit.perf.metric_registry import LATENCY_STATS

__all__ = ["DISTRIBUTION_PERCENTILES", "Distribution", "Drift", "DriftWindow", "GoodputSLO", "LLMMetrics",
           "RequestRecord", "TokenSource", "compute_metrics", "count_output_tokens", "drift",
           "records_from_export", "server_ttft_ms", "load_export_records"]

TokenSource = Literal["output_ids", "responses", "tokenizer", "usage", "chunks"]

#: The percentiles each LLM distribution reports.
DISTRIBUTION_PERCENTILES: tuple[float, ...] = (50.0, 90.0, 95.0, 99.0)

_ID_OUTPUTS = ("output_ids", "token_ids", "tokens")
#: Other names that say an integer output holds token ids (``generated_ids``, ``OUTPUT_IDS``…).
_IDS_NAME = re.compile(r"(?i)(^|_)(ids|tokens)$")
_TEXT_OUTPUTS = ("text_output", "output_text", "text")
# Outputs sent beside a token (TensorRT-LLM's cum_log_probs / output_log_probs / *_logits /
# sequence_length, vLLM's logprobs / cumulative_logprob / finish_reason / num_*_tokens).
_NOT_TOKEN_MARKERS = ("log_prob", "logprob", "logits", "sequence_length", "finish_reason", "num_input_tokens",
                      "num_output_tokens", "batch_index")
_INPUT_ID_FIELDS = ("input_ids",)
_INPUT_LENGTH_FIELDS = ("input_lengths", "input_length")
_TEXT_INPUTS = ("text_input", "prompt", "text")
_ASKED_FIELDS = ("max_tokens", "request_output_len", "sampling_param_max_tokens")


@dataclass(frozen=True)
class RequestRecord:
    """One request as the export recorded it, reduced to times (ns) and token counts."""

    sent_ns: int
    response_ns: tuple[int, ...]
    tokens_per_response: tuple[int, ...]
    input_tokens: int | None = None
    #: The model's own time to first token (its ``first_token_time_ns − arrival_time_ns``), when it says.
    server_ttft_ms: float | None = None
    #: The output length the request asked for (``None``: its inputs do not say).
    asked_tokens: int | None = None

    @property
    def output_tokens(self) -> int:
        return int(sum(self.tokens_per_response))

    @property
    def answered(self) -> bool:
        return bool(self.response_ns)

    @property
    def first_token_ns(self) -> int | None:
        """Time of the first response that carried a token (an empty first response is not one)."""
        for when, count in zip(self.response_ns, self.tokens_per_response, strict=True):
            if count > 0:
                return when
        return None

    @property
    def ttft_ms(self) -> float | None:
        first = self.first_token_ns
        return None if first is None else (first - self.sent_ns) / 1e6

    @property
    def latency_ms(self) -> float | None:
        return (self.response_ns[-1] - self.sent_ns) / 1e6 if self.response_ns else None

    @property
    def itl_ms(self) -> float | None:
        """(latency − TTFT) / (tokens − 1); ``None`` below two tokens."""
        ttft, latency, tokens = self.ttft_ms, self.latency_ms, self.output_tokens
        if ttft is None or latency is None or tokens < 2:
            return None
        return (latency - ttft) / (tokens - 1)


@dataclass(frozen=True)
class GoodputSLO(JsonDataclass):
    """Per-request objectives for goodput: a request is good when it meets every one given."""

    ttft_ms: float | None = None
    itl_ms: float | None = None
    latency_ms: float | None = None

    @property
    def empty(self) -> bool:
        return self.ttft_ms is None and self.itl_ms is None and self.latency_ms is None

    def met_by(self, record: RequestRecord) -> bool:
        """Whether ``record`` meets every objective. An unanswered request meets none.

        A one-token request has no inter-token latency: an ITL objective does not apply to it.
        """
        if not record.answered:
            return False
        checks = (
            (self.ttft_ms, record.ttft_ms),
            (self.latency_ms, record.latency_ms),
        )
        for limit, value in checks:
            if limit is not None and (value is None or value > limit):
                return False
        if self.itl_ms is not None:
            itl = record.itl_ms
            if itl is not None and itl > self.itl_ms:
                return False
        return True

    def describe(self) -> str:
        parts = [
            f"{name} <= {value:g} ms"
            for name, value in (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("latency", self.latency_ms))
            if value is not None
        ]
        return ", ".join(parts) or "none"


@dataclass(frozen=True)
class Distribution(JsonDataclass):
    """Percentiles (50/90/95/99), mean, min, max and count of one per-request quantity."""

    p50: float
    p90: float
    p95: float
    p99: float
    mean: float
    min: float
    max: float
    count: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Distribution | None:
        array = np.asarray(list(values), dtype=np.float64)
        if array.size == 0:
            return None
        pct = percentiles(array, DISTRIBUTION_PERCENTILES)
        return cls(
            p50=pct[50.0], p90=pct[90.0], p95=pct[95.0], p99=pct[99.0],
            mean=float(array.mean()), min=float(array.min()), max=float(array.max()), count=int(array.size),
        )

    def get(self, stat: str) -> float:
        """``"p99"``, ``"mean"``, … by name."""
        return float(getattr(self, stat))


@dataclass(frozen=True)
class LLMMetrics(JsonDataclass):
    """The LLM metrics of one set of requests (a load step or a whole traffic shape).

    Times in ms, throughputs per second; ``per_user_tokens_per_s`` is the distribution of 1/ITL.
    """

    request_count: int
    answered_count: int
    duration_s: float
    ttft_ms: Distribution | None
    itl_ms: Distribution | None
    latency_ms: Distribution | None
    per_user_tokens_per_s: Distribution | None
    input_tokens: Distribution | None
    output_tokens: Distribution | None
    output_tokens_total: int
    output_token_throughput_per_s: float | None
    request_throughput_per_s: float | None
    token_source: TokenSource
    goodput_slo: GoodputSLO | None = None
    good_count: int | None = None
    goodput_per_s: float | None = None
    notes: tuple[str, ...] = ()
    #: The model's own TTFT (see the module docstring), over the requests that carried it.
    server_ttft_ms: Distribution | None = None
    #: 95 % bootstrap interval ``[low, high]`` of each headline figure, by SLA name (``ttft_p99``,
    #: ``itl_p99``, ``tokens_per_s``, ``requests_per_s``, ``goodput``): its spread over the requests.
    intervals: dict[str, list[float]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (read back by ``from_dict``)."""
        data = asdict(self)
        data["notes"] = list(self.notes)
        return data

    def sla_intervals(self) -> dict[str, tuple[float, float]]:
        """The bootstrap interval of each headline figure, by SLA name."""
        return {name: (pair[0], pair[1]) for name, pair in self.intervals.items() if len(pair) == 2}

    def sla_values(self) -> dict[str, float | None]:
        """Canonical SLA metric names → values (``ttft_p99``, ``itl_mean``, ``tokens_per_s``, …)."""
        values: dict[str, float | None] = {}
        for prefix, dist in (("ttft", self.ttft_ms), ("itl", self.itl_ms), ("latency", self.latency_ms)):
            for stat in LATENCY_STATS:
                values[f"{prefix}_{stat}"] = None if dist is None else dist.get(stat)
        values["tokens_per_s"] = self.output_token_throughput_per_s
        values["requests_per_s"] = self.request_throughput_per_s
        values["goodput"] = self.goodput_per_s
        values["user_tokens_per_s"] = None if self.per_user_tokens_per_s is None else self.per_user_tokens_per_s.p50
        return values


def _count_value(value: Any) -> int:
    """Elements in one exported output value: a list's length, one for a scalar, zero for ''."""
    if value is None or value == "" or value == []:
        return 0
    if isinstance(value, list):
        return len(value)
    return 1


def _not_a_token(name: str) -> bool:
    """Outputs that describe tokens (their log-probs, logits, lengths, finish reason) without carrying one."""
    lowered = name.lower()
    return any(marker in lowered for marker in _NOT_TOKEN_MARKERS)


def count_output_tokens(
    outputs: Sequence[Mapping[str, Any]], *, token_output: str | None = None
) -> tuple[tuple[int, ...], TokenSource]:
    """Tokens carried by each response, and where the count came from (see the module docstring).

    ``token_output`` names the output whose elements are the tokens (the model's own word for it);
    otherwise, with token ids (``output_ids``…), their count. Otherwise a response is one token when it carries
    new text (``text_output``…) — or, for a model of unknown outputs, any non-empty output that is
    not only a log-prob / logits / length / finish-reason output; the final empty response that
    closes a stream is never one.
    """
    ids = token_output if token_output is not None else _id_output(outputs)
    if ids is not None:
        return tuple(_count_value(out.get(ids)) for out in outputs), "output_ids"
    text = next((n for n in _TEXT_OUTPUTS if any(n in out for out in outputs)), None)
    if text is not None:
        return _new_text_counts([_text(out.get(text)) for out in outputs]), "responses"
    counts = tuple(int(any(_count_value(v) > 0 for k, v in out.items() if not _not_a_token(k))) for out in outputs)
    return counts, "responses"


def _first_int(value: Any) -> int | None:
    # One INT64 element, as declared. A model that sends the timing as a string in a tensor declared
    # INT64 (TensorRT-LLM 1.2.0rc2's LLM-API model.py) is exported by perf_analyzer as its bytes read
    # as integers (a length prefix and digits, several elements): no timing can be read from that.
    if isinstance(value, list):
        if len(value) != 1:
            return None
        value = value[0]
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        number = int(value)
    except ValueError:
        return None
    return number if 0 <= number <= INT64_MAX else None


def server_ttft_ms(outputs: Sequence[Mapping[str, Any]]) -> float | None:
    """The model's own TTFT from its responses' ``arrival_time_ns`` / ``first_token_time_ns`` (the last
    response carrying both, after a first token); ``None`` when it sends no such timings."""
    for out in reversed(outputs):
        arrival, first = _first_int(out.get("arrival_time_ns")), _first_int(out.get("first_token_time_ns"))
        if arrival is not None and first is not None and first > 0 and first >= arrival:
            return (first - arrival) / 1e6
    return None


def _id_output(outputs: Sequence[Mapping[str, Any]]) -> str | None:
    """The output carrying token ids: a known name, else one named like ids (``generated_ids``,
    ``OUTPUT_IDS``…) whose values are integers; ``None`` when the responses carry none."""
    names = {name for out in outputs for name in out}
    known = next((n for n in _ID_OUTPUTS if n in names), None)
    if known is not None:
        return known
    for name in sorted(names):
        values = [v for out in outputs for v in (out[name] if isinstance(out.get(name), list) else [out.get(name)])
                  if v not in (None, "")]  # perf_analyzer exports an empty final response's output as ""
        if _IDS_NAME.search(name) and values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return name
    return None


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "".join(_text(v) for v in value)
    return "" if value is None else str(value)


def _new_text_counts(texts: Sequence[str]) -> tuple[int, ...]:
    """One token per response with new text. A stream whose every text extends the one before (the
    whole text so far, not the new piece) is cumulative: there a response that only repeats the text
    so far (a closing response carrying the full text) carries nothing new. Deltas that repeat a
    piece are new tokens each time: a stream is cumulative only if some response extends the last."""
    seen = [t for t in texts if t]
    cumulative = (len(seen) >= 2 and all(b.startswith(a) for a, b in zip(seen, seen[1:], strict=False))
                  and any(len(b) > len(a) for a, b in zip(seen, seen[1:], strict=False)))
    if not cumulative:
        return tuple(int(bool(t)) for t in texts)
    counts, before = [], ""
    for text in texts:
        counts.append(int(len(text) > len(before)))
        before = max(before, text, key=len)
    return tuple(counts)


def _input_tokens(inputs: Mapping[str, Any], count_text: Callable[[str], int] | None = None) -> int | None:
    for name in _INPUT_ID_FIELDS:
        if name in inputs:
            return _count_value(inputs[name])
    for name in (n for n in _INPUT_LENGTH_FIELDS if n in inputs):
        return _first_int(inputs[name])
    for name in _TEXT_INPUTS:
        if name in inputs:
            value = inputs[name]
            text = " ".join(str(v) for v in value) if isinstance(value, list) else str(value)
            return count_text(text) if count_text is not None else len(text.split())
    return None


def records_from_export(
    data: Mapping[str, Any],
    *,
    where: str = "profile export",
    count_text: Callable[[str], int] | None = None,
    token_output: str | None = None,
) -> tuple[list[RequestRecord], TokenSource]:
    """Every request of every experiment in a parsed ``--profile-export-file``, in send order.

    A text prompt's input length is ``count_text(text)`` (the model's tokenizer) when given, else
    its whitespace-separated words. ``token_output``: the output whose elements are the tokens.
    """
    records: list[RequestRecord] = []
    sources: set[TokenSource] = set()
    for request, sent, responses, outputs, at in export_requests(data, where):
        outputs = outputs or [{} for _ in responses]
        counts, source = count_output_tokens(outputs, token_output=token_output)
        if len(counts) != len(responses):
            counts = tuple(1 for _ in responses)
            source = "responses"
        if responses:
            sources.add(source)
        inputs = request.get("request_inputs") or {}
        if not isinstance(inputs, Mapping):
            raise PerfError(f"{at}: 'request_inputs' is {type(inputs).__name__}, not an object", hint=EXPORT_HINT)
        records.append(RequestRecord(
            sent_ns=sent, response_ns=responses, tokens_per_response=counts,
            input_tokens=_input_tokens(inputs, count_text), server_ttft_ms=server_ttft_ms(outputs),
            asked_tokens=_first_int(next((v for k, v in inputs.items() if k in _ASKED_FIELDS), None))))
    records.sort(key=lambda r: r.sent_ns)
    return records, ("output_ids" if sources == {"output_ids"} else "responses" if sources else "output_ids")


def load_export_records(
    path: str | Path, *, count_text: Callable[[str], int] | None = None, token_output: str | None = None
) -> tuple[list[RequestRecord], TokenSource]:
    """Read and reduce a profile export file (``count_text``: the model's tokenizer, for text prompts;
    ``token_output``: the output whose elements are the tokens)."""
    return records_from_export(read_export(path), where=str(path), count_text=count_text, token_output=token_output)


#: How an OpenAI endpoint's output lengths were counted (:mod:`tritonkit.perf.llm.openai`), in words.
_OPENAI_TOKEN_NOTES = {
    "tokenizer": "output lengths counted by the model's tokenizer over each answer's text",
    "usage": "output lengths from the server's usage (completion_tokens)",
    "chunks": "the server sent no usage and no tokenizer was given: each streamed chunk with text counted as one token",
}


def compute_metrics(records: Sequence[RequestRecord], *, goodput_slo: GoodputSLO | None = None,
                    token_source: TokenSource = "output_ids") -> LLMMetrics:
    """The run's metrics over ``records`` (see the module docstring for each definition)."""
    answered = [r for r in records if r.answered]
    notes: list[str] = []
    if token_source == "responses":
        notes.append("the model returns no token ids: each non-empty streamed response counted as one token")
    elif token_source in _OPENAI_TOKEN_NOTES:
        notes.append(_OPENAI_TOKEN_NOTES[token_source])
    duration_s = 0.0
    if answered:
        duration_s = (max(r.response_ns[-1] for r in answered) - min(r.sent_ns for r in answered)) / 1e9
    rate = (lambda n: n / duration_s) if duration_s > 0 else (lambda n: None)  # noqa: E731 - tiny helper
    itls = [v for r in answered if (v := r.itl_ms) is not None]
    total_tokens = sum(r.output_tokens for r in answered)
    good = None
    goodput = None
    if goodput_slo is not None and not goodput_slo.empty:
        good = sum(1 for r in answered if goodput_slo.met_by(r))
        goodput = rate(good)
    return LLMMetrics(
        request_count=len(records), answered_count=len(answered), duration_s=duration_s,
        ttft_ms=Distribution.of(v for r in answered if (v := r.ttft_ms) is not None),
        server_ttft_ms=Distribution.of(v for r in answered if (v := r.server_ttft_ms) is not None),
        itl_ms=Distribution.of(itls), latency_ms=Distribution.of(v for r in answered if (v := r.latency_ms) is not None),
        per_user_tokens_per_s=Distribution.of(1000.0 / v for v in itls if v > 0),
        input_tokens=Distribution.of(r.input_tokens for r in answered if r.input_tokens is not None),
        output_tokens=Distribution.of(r.output_tokens for r in answered), output_tokens_total=total_tokens,
        output_token_throughput_per_s=rate(total_tokens), request_throughput_per_s=rate(len(answered)),
        token_source=token_source, goodput_slo=goodput_slo if goodput_slo is not None and not goodput_slo.empty else None,
        good_count=good, goodput_per_s=goodput, notes=tuple(notes), intervals=_intervals(answered, duration_s, goodput_slo))


def _p99(values: np.ndarray) -> float:
    return percentiles(values, (99.0,))[99.0]


def _intervals(answered: Sequence[RequestRecord], duration_s: float, slo: GoodputSLO | None) -> dict[str, list[float]]:
    """Bootstrap intervals of the headline figures, resampling the step's requests.

    The percentiles are those of the resampled requests. A rate (output tokens/s, goodput) is the
    figure measured scaled by the resample's ratio of what it counts to the time its requests
    took (``Σ tokens / Σ latency``: the ratio estimator): a step's requests keep its streams busy,
    so its rate moves with how long they took, not only with how many tokens they brought — with
    every output the same length, resampling the counts alone over a fixed span would show no
    spread at all."""
    found: dict[str, tuple[float, float] | None] = {
        "ttft_p99": bootstrap_interval([v for r in answered if (v := r.ttft_ms) is not None], _p99),
        "itl_p99": bootstrap_interval([v for r in answered if (v := r.itl_ms) is not None], _p99),
    }
    if duration_s > 0 and answered:
        count = len(answered)
        good = [1.0 if slo is not None and not slo.empty and slo.met_by(r) else 0.0 for r in answered]
        rows = np.array([(r.output_tokens, g, r.latency_ms or 0.0) for r, g in zip(answered, good, strict=True)],
                        dtype=np.float64)
        found["tokens_per_s"] = _rate_interval(rows, 0, duration_s)
        found["requests_per_s"] = (count / duration_s, count / duration_s)  # every request answered: no spread
        if slo is not None and not slo.empty:
            found["goodput"] = _rate_interval(rows, 1, duration_s)
    return {name: [low, high] for name, pair in found.items() if pair is not None for low, high in [pair]}


def _rate_interval(rows: np.ndarray, column: int, duration_s: float) -> tuple[float, float] | None:
    """The interval of ``Σ rows[:, column] / duration_s`` by the ratio estimator (see :func:`_intervals`)."""
    counted, took = float(rows[:, column].sum()), float(rows[:, 2].sum())
    measured = counted / duration_s
    if counted <= 0 or took <= 0:
        return (measured, measured)  # nothing counted (no good request): nothing to spread
    ratio = counted / took
    return bootstrap_interval(rows, lambda d: measured * (float(d[:, column].sum()) / max(float(d[:, 2].sum()), 1e-12))
                              / ratio)


@dataclass(frozen=True)
class DriftWindow(JsonDataclass):
    """One slice of a long run: requests *sent* within ``[start_s, end_s)`` of the first request."""

    start_s: float
    end_s: float
    request_count: int
    latency_p50_ms: float | None
    latency_p99_ms: float | None
    ttft_p99_ms: float | None


@dataclass(frozen=True)
class Drift(JsonDataclass):
    """How latency moved over a long run: per-window percentiles and the first→last change."""

    windows: tuple[DriftWindow, ...] = field(default_factory=tuple)
    p99_change_pct: float | None = None
    ttft_p99_change_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _pct(values: list[float], q: float) -> float | None:
    return percentiles(values, (q,))[q] if values else None


def drift(records: Sequence[RequestRecord], *, windows: int = 5) -> Drift:
    """Split the run into ``windows`` equal time slices by send time; compare first and last."""
    answered = [r for r in records if r.answered]
    if len(answered) < 2 or windows < 1:
        return Drift()
    t0 = min(r.sent_ns for r in answered)
    span_ns = max(r.sent_ns for r in answered) - t0
    width = span_ns / windows if span_ns > 0 else 1.0
    buckets: list[list[RequestRecord]] = [[] for _ in range(windows)]
    for record in answered:
        buckets[min(windows - 1, int((record.sent_ns - t0) / width))].append(record)
    out = []
    for index, bucket in enumerate(buckets):
        lat = [v for r in bucket if (v := r.latency_ms) is not None]
        ttft = [v for r in bucket if (v := r.ttft_ms) is not None]
        out.append(DriftWindow(start_s=index * width / 1e9, end_s=(index + 1) * width / 1e9, request_count=len(bucket),
                               latency_p50_ms=_pct(lat, 50.0), latency_p99_ms=_pct(lat, 99.0), ttft_p99_ms=_pct(ttft, 99.0)))
    filled = [w for w in out if w.request_count]

    def change(first: float | None, last: float | None) -> float | None:
        if first is None or last is None or first <= 0 or not math.isfinite(first):
            return None
        return 100.0 * (last - first) / first

    return Drift(windows=tuple(out),
                 p99_change_pct=change(filled[0].latency_p99_ms, filled[-1].latency_p99_ms) if filled else None,
                 ttft_p99_change_pct=change(filled[0].ttft_p99_ms, filled[-1].ttft_p99_ms) if filled else None)
