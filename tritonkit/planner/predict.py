"""Predict, then check: what another configuration or load will do, and how far off that was.

:func:`predict_loads` fits the queueing model (:mod:`tritonkit.planner.queueing`) to a measured
run and predicts throughput and latency for other loads, instance counts and batching windows;
the :class:`PredictionSet` is saved as JSON (``tritonkit plan ... --out plan.json``). Later,
:func:`check_predictions` compares it with a new run and gives the error per figure
(``tritonkit plan --check new/result.json --predictions plan.json``).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tritonkit._fs import atomic_write, read_json
from tritonkit._records import record_dict
from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.measured import MeasuredStep, Measurement, ServedConfig
from tritonkit.planner.queueing import Scenario, ServiceModel, fit_service_model, simulate

__all__ = [
    "FIGURES",
    "CheckRow",
    "Prediction",
    "PredictionCheck",
    "PredictionSet",
    "check_predictions",
    "load_predictions",
    "predict_loads",
]

#: The figures predicted per load, and the measured field each is checked against.
FIGURES = ("throughput_per_s", "p50_ms", "p99_ms")
PREDICTIONS_SCHEMA = 1


@dataclass(frozen=True)
class Prediction:
    """What one scenario is predicted to do at one load."""

    scenario: Scenario
    load_mode: str
    load_value: float
    throughput_per_s: float
    p50_ms: float
    p99_ms: float
    items_per_exec: float

    def to_dict(self) -> dict[str, Any]:
        return record_dict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Prediction:
        return cls(Scenario.from_dict(data["scenario"]), str(data["load_mode"]), float(data["load_value"]), float(data["throughput_per_s"]),
                   float(data["p50_ms"]), float(data["p99_ms"]), float(data.get("items_per_exec", 1.0)))


@dataclass(frozen=True)
class PredictionSet:
    """Predictions from one calibration run, with the fitted model and every assumption."""

    source: str
    calibrated: Scenario
    model: ServiceModel
    predictions: tuple[Prediction, ...]
    assumptions: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"schema_version": PREDICTIONS_SCHEMA, "source": self.source, "calibrated": self.calibrated.to_dict(),
                "model": self.model.to_dict(), "assumptions": list(self.assumptions),
                "predictions": [p.to_dict() for p in self.predictions]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PredictionSet:
        return cls(str(data["source"]), Scenario.from_dict(data["calibrated"]), ServiceModel.from_dict(data["model"]),
                   tuple(Prediction.from_dict(p) for p in data["predictions"]),
                   tuple(str(a) for a in data.get("assumptions") or ()))

    def save(self, path: str | os.PathLike[str]) -> Path:
        return atomic_write(path, json.dumps(self.to_dict(), indent=2) + "\n")

    def render_text(self) -> str:
        out = [f"[predictions] (calibrated on {self.source}: {self.calibrated.label()})"]
        out.append(f"  model: {self.model.describe()}")
        out.extend(f"  assumes: {a}" for a in self.assumptions)
        out.append(f"  {'scenario':<48} {'load':>16} {'infer/s':>10} {'p50 ms':>9} {'p99 ms':>9} {'batch':>6}")
        for p in self.predictions:
            load = f"{'conc' if p.load_mode == 'concurrency' else 'rate'} {p.load_value:g}"
            out.append(f"  {p.scenario.label():<48} {load:>16} {p.throughput_per_s:>10,.1f} {p.p50_ms:>9.2f} "
                       f"{p.p99_ms:>9.2f} {p.items_per_exec:>6.2f}")
        return "\n".join(out) + "\n"


def load_predictions(path: str | os.PathLike[str]) -> PredictionSet:
    """Read predictions saved by ``tritonkit plan --out`` (a plan JSON holding ``predictions``) or directly."""
    source = Path(path)
    data = read_json(source, what="saved plan", hint="pass the JSON that 'tritonkit plan ... --out' wrote")
    if isinstance(data, Mapping) and isinstance(data.get("predictions"), Mapping):
        data = data["predictions"]
    if not isinstance(data, Mapping) or "predictions" not in data or "model" not in data:
        raise ConfigError(f"{source} holds no predictions",
                          hint="save a plan made with --predict-concurrency / --predict-rate / --predict-instances "
                          "using --out, then pass it to --predictions")
    try:
        return PredictionSet.from_dict(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{source}: the saved predictions are malformed ({exc})",
                          hint="write them again with 'tritonkit plan ... --out'") from exc


def predict_loads(
    measurement: Measurement,
    *,
    config: ServedConfig,
    loads: Sequence[tuple[str, float]],
    instances: Sequence[int] = (),
    windows_us: Sequence[int] = (),
    arrivals: str = "constant",
) -> PredictionSet:
    """Fit the model to ``measurement`` (run with ``config``) and predict every load × scenario.

    Scenarios: the measured one, then one per other instance count and per other batching
    window. ``loads`` are ``(mode, value)`` pairs (``"concurrency"`` or ``"request_rate"``).
    """
    calibrated = Scenario.from_served(config)
    model = fit_service_model(measurement.steps, calibrated, request_items=measurement.batch_size)
    scenarios = [calibrated]
    for count in instances:
        if count < 1:
            raise ConfigError(f"instance count must be ≥ 1, got {count}", hint="pass --predict-instances 2")
        scenarios.append(Scenario(count, calibrated.max_batch_size, calibrated.max_queue_delay_us))
    for window in windows_us:
        if window < 0:
            raise ConfigError(f"batching window must be ≥ 0 µs, got {window}", hint="pass --predict-window-us 2000")
        scenarios.append(Scenario(calibrated.instances, calibrated.max_batch_size, window))
    if not loads:
        raise ConfigError("no load to predict", hint="pass --predict-concurrency 32,64 or --predict-rate 100,200")
    predictions = []
    for scenario in dict.fromkeys(scenarios):
        for mode, value in loads:
            sim = simulate(model, scenario, load_mode=mode, load_value=value, arrivals=arrivals)
            predictions.append(Prediction(scenario, mode, value, sim.throughput_per_s, sim.p50_ms, sim.p99_ms,
                                          sim.items_per_exec))
    assumptions = (
        "closed loop for concurrency steps (each client sends when its last request returns, as perf_analyzer "
        f"does); open loop with {arrivals} arrivals for request-rate steps",
        "Triton's dynamic batcher: FIFO, a batch leaves when full or when its oldest request has waited the window",
        "instances are independent: adding one adds a server with the same S(b) (true while cores or the GPU "
        "are not already saturated — on a shared CPU host extra instances compete for the same cores)",
        "the overhead outside the model stays what it was at calibration (the load generator is not saturated)",
        *model.notes,
    )
    return PredictionSet(measurement.source, calibrated, model, tuple(predictions), assumptions)


@dataclass(frozen=True)
class CheckRow:
    """One predicted figure beside the measured one; ``error`` is (predicted − measured) / measured."""

    scenario: Scenario
    load_mode: str
    load_value: float
    figure: str
    predicted: float
    measured: float | None

    @property
    def error(self) -> float | None:
        if self.measured is None or self.measured == 0:
            return None
        return (self.predicted - self.measured) / self.measured


@dataclass(frozen=True)
class PredictionCheck:
    """Predictions against a later run, figure by figure."""

    rows: tuple[CheckRow, ...]
    unmatched: tuple[Prediction, ...]
    source: str

    def worst(self, figure: str) -> float | None:
        errors = [abs(r.error) for r in self.rows if r.figure == figure and r.error is not None]
        return max(errors) if errors else None

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "rows": [record_dict(r, after={"measured": {"error": r.error}}) for r in self.rows],
                "unmatched": [p.to_dict() for p in self.unmatched]}

    def render_text(self) -> str:
        out = [f"Predictions checked against {self.source}", ""]
        out.append(f"  {'load':>14}  {'figure':<16} {'predicted':>11} {'measured':>11} {'error':>8}")
        for r in self.rows:
            load = f"{'conc' if r.load_mode == 'concurrency' else 'rate'} {r.load_value:g}"
            measured = f"{r.measured:,.2f}" if r.measured is not None else "—"
            error = f"{r.error:+.1%}" if r.error is not None else "—"
            out.append(f"  {load:>14}  {r.figure:<16} {r.predicted:>11,.2f} {measured:>11} {error:>8}")
        for figure in FIGURES:
            worst = self.worst(figure)
            if worst is not None:
                out.append(f"  worst |error| {figure}: {worst:.1%}")
        if self.unmatched:
            out.append("")
            out.append(f"  {len(self.unmatched)} prediction(s) had no measured step at their load")
        return "\n".join(out) + "\n"


def check_predictions(predictions: PredictionSet, measurement: Measurement, scenario: Scenario | None) -> PredictionCheck:
    """Compare the predictions for ``scenario`` (the later run's configuration) with its steps.

    Without a scenario the predictions must hold only one; otherwise pass the later run's
    model config so the right scenario is chosen.
    """
    scenarios = list(dict.fromkeys(p.scenario for p in predictions.predictions))
    if scenario is None:
        if len(scenarios) > 1:
            raise ConfigError(
                f"the predictions cover {len(scenarios)} configurations; which one did the new run measure?",
                hint="pass --model-config with the new run's config.pbtxt (" +
                "; ".join(s.label() for s in scenarios) + ")",
            )
        scenario = scenarios[0]
    chosen = [p for p in predictions.predictions if p.scenario == scenario]
    if not chosen:
        raise PlanError(f"no prediction was made for {scenario.label()}",
                        hint="predicted: " + "; ".join(s.label() for s in scenarios))
    rows: list[CheckRow] = []
    unmatched: list[Prediction] = []
    for p in chosen:
        step = _step_at(measurement.steps, p.load_mode, p.load_value)
        if step is None:
            unmatched.append(p)
            continue
        for figure in FIGURES:
            measured = getattr(step, figure)
            rows.append(CheckRow(scenario, p.load_mode, p.load_value, figure, getattr(p, figure), measured))
    if not rows:
        raise PlanError(f"{measurement.source} has no measured step at any predicted load",
                        hint="run the new ladder at the predicted loads: "
                        + ", ".join(f"{p.load_mode} {p.load_value:g}" for p in chosen))
    return PredictionCheck(tuple(rows), tuple(unmatched), measurement.source)


def _step_at(steps: Sequence[MeasuredStep], mode: str, value: float) -> MeasuredStep | None:
    return next((s for s in steps if s.load_mode == mode and abs(s.load_value - value) < 1e-9 and s.measured), None)
