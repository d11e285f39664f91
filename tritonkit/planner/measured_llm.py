"""An LLM load test (``perf run --llm``, Triton's stream or an OpenAI endpoint) read as the planner
reads a classic ladder.

Each concurrency step of ``llm_result.json`` becomes a :class:`~tritonkit.planner.measured.MeasuredStep`:
its throughput is the requests answered per second, its latencies the **whole request's** (first
token to last: what ``--p99-ms`` bounds), its verdict the one stored with the run (TTFT / ITL /
tokens/s bounds included). The LLM figures of each step — TTFT and ITL p99, output tokens/s —
ride along (:class:`LLMStepFigures`) for the plan to show at the step it reads its capacity from,
and :attr:`~tritonkit.planner.measured.Measurement.kind` says what kind of run it was. A traffic
shape (ramp, spike, soak, replay) is no ladder: it is left out, and a run of nothing else is refused.

An LLM run records no server hardware: the unit is what ``--gpu`` names, else "measured deployment".
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tritonkit._fs import read_json
from tritonkit.errors import ConfigError, PlanError
from tritonkit.perf.judge.verdict import Verdict
from tritonkit.perf.llm.result import LLMResult, LLMStep
from tritonkit.perf.measure.result import PerfResult
from tritonkit.planner.measured import (
    LLMStepFigures,
    MeasuredHardware,
    MeasuredStep,
    Measurement,
    ServedConfig,
    check_figures,
)

__all__ = ["LLMStepFigures", "is_llm_result", "load_measurement", "measurement_from_llm", "peek_kind"]


def is_llm_result(data: Any) -> bool:
    """Whether a result file's JSON is an LLM load test's (its ``kind`` says so)."""
    return isinstance(data, dict) and data.get("kind") == "llm"


def peek_kind(path: Path) -> str | None:
    """The ``kind`` a result file declares (``"llm"``), ``None`` when it declares none or is no JSON object."""
    try:  # the one reader of a user's file: a FIFO or a device is refused before it is opened
        data = read_json(path, what="perf result", hint="pass a result.json or llm_result.json that perf run wrote")
    except ConfigError:
        return None  # the classic reader names what is wrong with it
    return "llm" if is_llm_result(data) else None


def _kind(result: LLMResult) -> str:
    where = "an OpenAI-compatible endpoint" if result.over_openai else "Triton's gRPC stream"
    runs = f", {result.repeats} runs combined" if result.repeats > 1 else ""
    return f"LLM load test over {where} ({result.layout}{runs})"


def _step(index: int, step: LLMStep, status: str | None) -> MeasuredStep:
    m = step.metrics
    lat = m.latency_ms if m is not None else None
    measured = step.measured and lat is not None
    ok: bool | None
    if step.failures.total:
        ok = False
    elif not measured:
        ok = None
    else:
        ok = None if status == "unmeasured" else status not in ("fail", "noise")
    return MeasuredStep(index=index, load_mode="concurrency", load_value=float(step.load_value),
                        throughput_per_s=m.request_throughput_per_s if m is not None else None,
                        p50_ms=lat.p50 if lat is not None else None, p99_ms=lat.p99 if lat is not None else None,
                        mean_ms=lat.mean if lat is not None else None, error_count=step.failures.total,
                        stable=step.failure is None, sla_ok=ok, inside_noise=status == "noise")


def _figures(step: LLMStep) -> LLMStepFigures:
    values = step.metrics.sla_values() if step.metrics is not None else {}
    return LLMStepFigures(float(step.load_value), values.get("ttft_p99"), values.get("itl_p99"),
                          values.get("tokens_per_s"))


def measurement_from_llm(result: LLMResult, *, source: str, gpu_name: str | None = None) -> Measurement:
    """``result``'s concurrency steps as a :class:`Measurement` (see the module docstring)."""
    ladder = [s for s in result.steps if s.load_mode == "concurrency"]
    if not ladder:
        shapes = ", ".join(sorted({s.load_mode for s in result.steps})) or "no steps"
        raise PlanError(f"LLM result {source} holds no concurrency step ({shapes}): a traffic shape is no ladder "
                        "to read a capacity from",
                        hint="plan from an LLM run over concurrency levels, e.g. tritonkit perf run MODEL --llm "
                             "--concurrency 1:16")
    verdict = Verdict.from_dict(result.verdict) if result.verdict is not None else None
    status = {s.load: s.status for s in verdict.steps} if verdict is not None else {}
    steps = tuple(_step(i, s, status.get(float(s.load_value))) for i, s in enumerate(ladder))
    for step in steps:
        check_figures(step, source)
    hardware = (MeasuredHardware("gpu", 1, gpu_name, "GPU", "given (--gpu)") if gpu_name is not None else
                MeasuredHardware("unknown", None, None, "measured deployment",
                                 "an LLM run records no server hardware: pass --gpu to name it"))
    stop = "interrupted" if any(s.failure == "interrupted" for s in ladder) else "completed"
    return Measurement(source=source, steps=steps, batch_size=1, model=result.model, hardware=hardware,
                       stop_reason=stop, sla=str(verdict.sla) if verdict is not None else None, kind=_kind(result),
                       llm_figures=tuple(_figures(s) for s in ladder))


def load_measurement(path: str | os.PathLike[str], *, config: ServedConfig | None = None,
                     gpu_name: str | None = None) -> Measurement:
    """Read a ``result.json`` written by ``tritonkit perf run``, or an ``llm_result.json`` written by
    ``perf run --llm`` (:func:`~tritonkit.planner.measured_llm.measurement_from_llm`; ``config`` does
    not apply to it); ``ConfigError`` if it is neither."""
    source = Path(path)
    if peek_kind(source) == "llm":
        from tritonkit.perf.llm.result import LLMResult

        if config is not None:
            raise ConfigError(f"{source} is an LLM load test: a model config does not bound its plan",
                              hint="drop --model-config (and --instances-per-gpu applies as given)")

        return measurement_from_llm(LLMResult.load(source), source=str(source), gpu_name=gpu_name)
    return Measurement.from_result(PerfResult.load(source), source=str(source), config=config, gpu_name=gpu_name)
