"""The typed result of an LLM load test: what ``llm_result.json`` holds.

One ``LLMStep`` per load level (a closed-loop concurrency) or one for a whole traffic shape.
Times are ms, throughputs per second, time-line positions seconds from the step's first request.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Self is new in 3.11; annotations are not evaluated at run time
    from typing_extensions import Self

from tritonkit._fs import atomic_write
from tritonkit._records import record_dict
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.metrics import Drift, LLMMetrics
from tritonkit.perf.llm.timeline import FailureReport, Recovery, ServerPoint
from tritonkit.perf.measure._json_dataclass import JsonDataclass, read_record

__all__ = ["LLM_SCHEMA_VERSION", "LLMResult", "LLMRunFigures", "LLMStep", "TimelinePoint"]

LLM_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TimelinePoint(JsonDataclass):
    """Server pending / queue time and client in-flight count at ``t_s``."""

    t_s: float
    pending: float | None
    queue_ms: float | None
    in_flight: int


@dataclass(frozen=True)
class LLMRunFigures(JsonDataclass):
    """One run's headline figures at a load, kept on the combined step of a repeated LLM test
    (``perf run --llm --repeat N``): ``run`` is its number (1…N); ``failures`` its failed requests,
    ``measured`` whether the step was a measurement (see :attr:`LLMStep.measured`)."""

    run: int
    ttft_p50_ms: float | None = None
    ttft_p99_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p99_ms: float | None = None
    latency_p99_ms: float | None = None
    tokens_per_s: float | None = None
    requests_per_s: float | None = None
    goodput_per_s: float | None = None
    failures: int = 0
    measured: bool = True


@dataclass
class LLMStep(JsonDataclass):
    """One perf_analyzer invocation of an LLM run: its load, metrics, time line and failures.

    ``failure`` and ``failure_note`` say why the step could not be measured when perf_analyzer
    failed (a :class:`~tritonkit.perf.measure.failures.Failure` value and the server's or model's
    own message); ``None`` for a step that ran to its end.
    """

    load_mode: str  # "concurrency" or a traffic shape's kind ("ramp", "spike", "soak", "replay")
    load_value: float  # concurrency, or the shape's scheduled request count
    metrics: LLMMetrics | None
    failures: FailureReport
    timeline: list[TimelinePoint] = field(default_factory=list)
    requests: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    #: The model's own TTFT per request, in the order of ``requests`` (empty when the model sends no timings).
    server_ttft_ms: list[float | None] = field(default_factory=list)
    recovery: Recovery | None = None
    drift: Drift | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    generator_cpu_pct: float | None = None
    argv: list[str] = field(default_factory=list)
    raw_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    failure: str | None = None
    failure_note: str | None = None
    #: The engine's own figures from its ``/metrics`` over the step (see
    #: :func:`~tritonkit.perf.llm.engine_metrics.engine_figures`); empty when it said none.
    engine: dict[str, Any] = field(default_factory=dict)
    #: The output tokens the answered requests asked for (``None``: their inputs do not say).
    output_tokens_asked: int | None = None
    #: A repeated test's runs at this load, run 1 first (empty for a test run once; see
    #: :mod:`tritonkit.perf.llm.repeats`).
    runs: list[LLMRunFigures] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        """Answered requests, none failed, and perf_analyzer ran to its end."""
        return (self.metrics is not None and self.metrics.answered_count > 0 and self.failures.total == 0
                and self.failure is None)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (``from_dict`` reads it back); ``failures`` with its ``total`` for readers."""
        return record_dict(self)


@dataclass
class LLMResult(JsonDataclass):
    """An LLM load test: the model, how it was driven, its steps and (when judged) its verdict.

    ``verdict`` is ``Verdict.to_dict()`` of the SLA verdict, stored as the classic result stores
    it (``tritonkit.perf.judge.stored_verdict`` types it again). ``served``: which TensorRT-LLM
    line and tokenizer the requests were written for, and where each came from.
    """

    model: str
    url: str
    streaming: bool
    layout: str
    prompt_source: str
    steps: list[LLMStep]
    started_utc: str = ""
    finished_utc: str = ""
    client_deadline_ms: float | None = None
    notes: list[str] = field(default_factory=list)
    verdict: dict[str, Any] | None = None
    #: What the served model told about itself: ``trtllm_version`` / ``trtllm_version_from``,
    #: ``min_tokens_input``, ``tokenizer`` / ``tokenizer_from``, ``token_output`` (each only when known).
    served: dict[str, str] = field(default_factory=dict)
    #: How many runs were combined into these steps (``perf run --llm --repeat N``; 1: run once).
    #: With more than one, each step's figures are the medians over the runs and its intervals the
    #: spread from run to run; each run's own result is in ``run-<i>/llm_result.json``.
    repeats: int = 1

    @property
    def over_openai(self) -> bool:
        """Whether the run was on an OpenAI-compatible endpoint (``perf run --llm --protocol openai``: a
        real engine behind HTTP) rather than Triton's gRPC stream; read from the request layout it
        records (an OpenAI run's reads ``OpenAI <endpoint> over HTTP (…)``). The one place that tells."""
        return self.layout.startswith("OpenAI ")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, ``schema_version`` and ``kind`` first."""
        data = asdict(self)
        data["steps"] = [s.to_dict() for s in self.steps]
        return {"schema_version": LLM_SCHEMA_VERSION, "kind": "llm", **data}

    def to_json(self) -> str:
        """``to_dict`` as the JSON text written to disk."""
        return json.dumps(self.to_dict(), indent=1) + "\n"

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Self:
        """Read a dict written by any schema version up to ``LLM_SCHEMA_VERSION``."""
        version = data.get("schema_version", 1)
        if not isinstance(version, int) or version > LLM_SCHEMA_VERSION:
            raise ConfigError(
                f"LLM result schema {version!r} is newer than this tritonkit reads ({LLM_SCHEMA_VERSION})",
                hint="upgrade tritonkit",
            )
        return super().from_dict(data)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write JSON atomically."""
        return atomic_write(Path(path), self.to_json())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LLMResult:
        """Read an ``llm_result.json`` (or an LLM baseline), types and numbers checked first."""
        return read_record(cls, path, what="LLM result", hint="pass the llm_result.json an LLM run wrote")


def timeline_points(points: list[ServerPoint], in_flight_counts: list[int]) -> list[TimelinePoint]:
    """Zip the server's points with the client's in-flight counts at the same times."""
    return [
        TimelinePoint(p.t_s, p.pending, p.queue_ms, n) for p, n in zip(points, in_flight_counts, strict=True)
    ]
