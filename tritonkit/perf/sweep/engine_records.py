"""What an engine sweep is asked to do (:class:`EngineSweepSettings`) and what it keeps of each
variant beside its outcome (:class:`EngineRecord`): the values :mod:`~tritonkit.perf.sweep.engine`
runs with and :mod:`~tritonkit.perf.sweep.engine_report` prints, in a room of their own so that
neither of those two imports the other."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tritonkit.errors import ConfigError, StoredResultError
from tritonkit.perf import load_sla
from tritonkit.perf.llm.settings import LLMSettings
from tritonkit.perf.sweep.engine_template import EngineKnob, EngineTemplate, EngineVariant, engine_grid
from tritonkit.perf.sweep.outcome import TIE_TOLERANCE, VariantOutcome

__all__ = ["EngineRecord", "EngineSweepSettings"]

@dataclass(frozen=True)
class EngineSweepSettings:
    """What an engine sweep is asked to do. ``template`` places every knob of ``knobs``; ``sla`` is
    the SLA's text (``ttft_p99<=500ms,itl_p99<=50ms``); ``llm`` the load every variant gets (its
    concurrency ladder, requests per step, prompt lengths; the OpenAI protocol); ``env`` is added
    to the engine's environment; ``default_only`` measures the default variant alone (a baseline)."""

    template: EngineTemplate
    knobs: tuple[EngineKnob, ...]
    sla: str
    out: Path
    llm: LLMSettings = field(default_factory=lambda: LLMSettings(protocol="openai", concurrency="1:8"))
    env: Mapping[str, str] = field(default_factory=dict)
    ready_timeout_s: float = 300.0
    tie_tolerance: float = TIE_TOLERANCE
    default_only: bool = False

    def __post_init__(self) -> None:
        if self.llm.protocol != "openai":
            raise ConfigError("an engine sweep load-tests the engine's OpenAI endpoint", hint="protocol='openai'")
        if self.llm.traffic:
            raise ConfigError("an engine sweep climbs a concurrency ladder, not a traffic shape",
                              hint="leave the traffic shape out")
        if not 0 <= self.tie_tolerance < 1:
            raise ConfigError(f"tie tolerance {self.tie_tolerance!r} is outside [0, 1)", hint="e.g. 0.05")
        load_sla(self.sla)

    def grid(self) -> list[EngineVariant]:
        grid = engine_grid(self.knobs)
        return grid[:1] if self.default_only else grid

    def fingerprint(self) -> dict[str, Any]:
        """What a stored result must have been measured under to be reused."""
        llm = self.llm
        return {"template": self.template.text, "sla": self.sla, "concurrency": llm.concurrency,
                "requests": llm.requests, "input_tokens": llm.input_tokens, "output_tokens": llm.output_tokens,
                "endpoint": llm.endpoint, "env": dict(sorted(self.env.items()))}


@dataclass
class EngineRecord:
    """One variant's engine facts beside its outcome: the ``argv`` it ran (with its port), how long
    it took to answer (``start_s``), each step's LLM figures by load, where its log is."""

    outcome: VariantOutcome
    argv: list[str] = field(default_factory=list)
    start_s: float | None = None
    figures: dict[str, dict[str, float | None]] = field(default_factory=dict)
    log: str = ""
    resumed: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"outcome": self.outcome.to_dict(), "argv": self.argv, "engine_start_s": self.start_s,
                "figures": self.figures, "log": self.log}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> EngineRecord:
        if not isinstance(data, dict) or not isinstance(data.get("outcome"), dict):
            raise StoredResultError(f"{where}: no outcome", field_name="outcome")
        stored = dict(data["outcome"])
        try:
            variant = EngineVariant.from_dict(stored.get("variant") or {})
        except ValueError as exc:
            raise StoredResultError(f"{where}: field 'variant' is malformed ({exc})", field_name="variant") from exc
        outcome = VariantOutcome.from_dict({**stored, "variant": {"instances": 1, "max_batch_size": 0}}, where)
        start = data.get("engine_start_s")
        return cls(replace(outcome, variant=variant), [str(a) for a in data.get("argv") or []],
                   float(start) if isinstance(start, (int, float)) else None,
                   dict(data.get("figures") or {}), str(data.get("log", "")))
