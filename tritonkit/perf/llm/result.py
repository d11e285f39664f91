"""The typed result of an LLM load test: what ``llm_result.json`` holds.

One ``LLMStep`` per load level (a closed-loop concurrency) or one for a whole traffic shape.
Times are ms, throughputs per second, time-line positions seconds from the step's first request.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_json
from tritonkit.errors import ConfigError
from tritonkit.perf.llm.metrics import Drift, DriftWindow, LLMMetrics
from tritonkit.perf.llm.timeline import FAILURE_CLASSES, FailureReport, Recovery, ServerPoint

__all__ = ["LLM_SCHEMA_VERSION", "LLMResult", "LLMStep", "TimelinePoint"]

LLM_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class TimelinePoint:
    """Server pending / queue time and client in-flight count at ``t_s``."""

    t_s: float
    pending: float | None
    queue_ms: float | None
    in_flight: int


@dataclass
class LLMStep:
    """One perf_analyzer invocation of an LLM run: its load, metrics, time line and failures."""

    load_mode: str  # "concurrency" or a traffic shape's kind ("ramp", "spike", "soak", "replay")
    load_value: float  # concurrency, or the shape's scheduled request count
    metrics: LLMMetrics | None
    failures: FailureReport
    timeline: list[TimelinePoint] = field(default_factory=list)
    requests: list[tuple[float, float | None, float | None]] = field(default_factory=list)
    recovery: Recovery | None = None
    drift: Drift | None = None
    phases: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0
    generator_cpu_pct: float | None = None
    argv: list[str] = field(default_factory=list)
    raw_files: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def measured(self) -> bool:
        return self.metrics is not None and self.metrics.answered_count > 0 and self.failures.total == 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "load_mode": self.load_mode,
            "load_value": self.load_value,
            "metrics": None if self.metrics is None else self.metrics.to_dict(),
            "failures": self.failures.to_dict(),
            "timeline": [asdict(p) for p in self.timeline],
            "requests": [list(r) for r in self.requests],
            "recovery": None if self.recovery is None else self.recovery.to_dict(),
            "drift": None if self.drift is None else self.drift.to_dict(),
            "phases": self.phases,
            "wall_s": self.wall_s,
            "generator_cpu_pct": self.generator_cpu_pct,
            "argv": self.argv,
            "raw_files": self.raw_files,
            "warnings": self.warnings,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMStep:
        failures = data.get("failures") or {}
        drift = data.get("drift")
        recovery = data.get("recovery")
        return cls(
            load_mode=str(data["load_mode"]),
            load_value=float(data["load_value"]),
            metrics=None if data.get("metrics") is None else LLMMetrics.from_dict(data["metrics"]),
            failures=FailureReport(
                counts={c: int((failures.get("counts") or {}).get(c, 0)) for c in FAILURE_CLASSES},
                hit=failures.get("hit"),
                evidence=tuple(failures.get("evidence") or ()),
            ),
            timeline=[TimelinePoint(**p) for p in data.get("timeline") or []],
            requests=[(float(a), b, c) for a, b, c in data.get("requests") or []],
            recovery=None if recovery is None else Recovery(**recovery),
            drift=None
            if drift is None
            else Drift(
                windows=tuple(DriftWindow(**w) for w in drift.get("windows") or ()),
                p99_change_pct=drift.get("p99_change_pct"),
                ttft_p99_change_pct=drift.get("ttft_p99_change_pct"),
            ),
            phases=list(data.get("phases") or []),
            wall_s=float(data.get("wall_s") or 0.0),
            generator_cpu_pct=data.get("generator_cpu_pct"),
            argv=list(data.get("argv") or []),
            raw_files=list(data.get("raw_files") or []),
            warnings=list(data.get("warnings") or []),
        )


@dataclass
class LLMResult:
    """An LLM load test: the model, how it was driven, and its steps."""

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

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": LLM_SCHEMA_VERSION,
            "kind": "llm",
            "model": self.model,
            "url": self.url,
            "streaming": self.streaming,
            "layout": self.layout,
            "prompt_source": self.prompt_source,
            "started_utc": self.started_utc,
            "finished_utc": self.finished_utc,
            "client_deadline_ms": self.client_deadline_ms,
            "notes": self.notes,
            "steps": [s.to_dict() for s in self.steps],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMResult:
        version = int(data.get("schema_version", 1))
        if version > LLM_SCHEMA_VERSION:
            raise ConfigError(
                f"LLM result schema {version} is newer than this tritonkit reads ({LLM_SCHEMA_VERSION})",
                hint="upgrade tritonkit",
            )
        return cls(
            model=str(data["model"]),
            url=str(data["url"]),
            streaming=bool(data["streaming"]),
            layout=str(data.get("layout", "")),
            prompt_source=str(data.get("prompt_source", "")),
            steps=[LLMStep.from_dict(s) for s in data.get("steps") or []],
            started_utc=str(data.get("started_utc", "")),
            finished_utc=str(data.get("finished_utc", "")),
            client_deadline_ms=data.get("client_deadline_ms"),
            notes=list(data.get("notes") or []),
        )

    def save(self, path: str | os.PathLike[str]) -> Path:
        return atomic_write(Path(path), json.dumps(self.to_dict(), indent=1) + "\n")

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> LLMResult:
        return cls.from_dict(read_json(path, what="LLM result", hint="pass the llm_result.json an LLM run wrote"))


def timeline_points(points: list[ServerPoint], in_flight_counts: list[int]) -> list[TimelinePoint]:
    """Zip the server's points with the client's in-flight counts at the same times."""
    return [
        TimelinePoint(p.t_s, p.pending, p.queue_ms, n) for p, n in zip(points, in_flight_counts, strict=True)
    ]
