"""Size a fleet of any model from a perf run: capacity per measured unit, replicas, serving parameters.

The unit of the plan is what the run measured on (:class:`~tritonkit.planner.measured.MeasuredHardware`):
a GPU, or a CPU host with N cores. The capacity comes from :meth:`Measurement.read_capacity`:
below a knee the ladder found, or a lower bound — then the fleet it sizes is an upper bound and
the plan says so. Serving parameters never exceed what the measured config allowed.
"""

from __future__ import annotations

from dataclasses import dataclass

from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.capacity import PlanAssumptions, Workload, plan_fleet
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.measured import CapacityReading, Measurement, ServedConfig
from tritonkit.planner.queueing import Scenario, fit_service_model, simulate
from tritonkit.planner.result import CapacityPlan, PlanDraft, PlanLine, ServingSuggestion

__all__ = ["plan_from_measurement"]

#: Dynamic batching windows by workload when the measured config gives none: 5 ms keeps an
#: interactive request's added wait small, 20 ms lets throughput work fill batches (5–20 ms is
#: the usual range: longer windows hurt latency at low traffic).
_WINDOW_US = {"interactive": 5_000, "batch": 20_000}


def _predicted_ceiling(measurement: Measurement) -> float | None:
    """Inferences/s the fitted queueing model gives with every instance saturated (None if unfittable)."""
    assert measurement.config is not None
    scenario = Scenario.from_served(measurement.config)
    try:
        model = fit_service_model(measurement.steps, scenario, request_items=measurement.batch_size)
    except PlanError:
        return None  # no server timings in the run: nothing to fit
    load = 4 * scenario.instances * max(1, scenario.max_batch_size // measurement.batch_size)
    return simulate(model, scenario, load_mode="concurrency", load_value=load, requests=3000).throughput_per_s


@dataclass(frozen=True)
class _Unit:
    """What one replica runs on: the measured unit (or the GPU named for it), and whether it is a GPU."""

    name: str
    on_gpu: bool

    def speak(self, text: str, units: str) -> str:
        """A fleet line's text, which speaks of GPUs, said of this unit (``units``) when it is not one."""
        return text if self.on_gpu else text.replace("GPU(s)", "unit").replace("GPUs", units)


def plan_from_measurement(
    measurement: Measurement,
    workload: Workload,
    assumptions: PlanAssumptions | None = None,
    *,
    instances_per_unit: int | None = None,
    gpu: GpuSpec | None = None,
) -> CapacityPlan:
    """Any model (not only LLMs): measured units and instances for ``workload.target_qps``.

    One replica is one measured deployment (its hardware unit, with the measured config's
    instances, or ``instances_per_unit`` when no config was given). Written in steps: the
    measurement → the capacity it reads → the SLA and mode → the fleet → the serving suggestion.
    """
    w, hw, config = workload, measurement.hardware, measurement.config
    if instances_per_unit is not None and (isinstance(instances_per_unit, bool) or instances_per_unit < 1):
        raise ConfigError(f"instances per unit must be an integer ≥ 1, got {instances_per_unit!r}",
                          hint="pass --instances-per-gpu 1, 2, …")
    instances = config.instance_count if config is not None else (instances_per_unit or 1)
    unit = _Unit(gpu.name if gpu is not None else hw.unit, hw.kind == "gpu" or gpu is not None)
    draft = PlanDraft()
    _describe_measurement(draft, measurement, unit, gpu, instances, instances_per_unit)
    reading = _capacity(draft, measurement, w, unit)
    if w.p99_ms is not None:
        draft.add("workload", "sla_p99_ms", "SLA: P99 latency", w.p99_ms, "ms", "input")
    elif measurement.sla:
        draft.add("workload", "sla_run", "SLA (stored with the run)", measurement.sla, "", "measured",
                  "steps judged by it")
    draft.add("workload", "mode", "mode", w.mode, "", "input")
    replicas = _fleet(draft, w, assumptions or PlanAssumptions(), reading, unit, instances)
    suggestion = _suggestion(config, w, unit, instances, replicas, llm=bool(measurement.llm_figures))
    title = f"Capacity plan from measurement: {measurement.model or measurement.source} (per {unit.name})"
    return draft.finish("measured", title, suggestion,
                        {"measurement": measurement.source, "measurement_kind": measurement.kind,
                         "hardware": hw.describe(), "capacity_bound": reading.bound,
                         "workload": {"target_qps": w.target_qps, "p99_ms": w.p99_ms, "mode": w.mode}})


def _describe_measurement(draft: PlanDraft, measurement: Measurement, unit: _Unit, gpu: GpuSpec | None,
                          instances: int, instances_per_unit: int | None) -> None:
    """The run's lines: its source, the hardware, the config or instances, the batch, the serial latency."""
    add, hw, config = draft.add, measurement.hardware, measurement.config
    add("measurement", "measured_source", "measurement", measurement.source, "", "measured",
        f"{len(measurement.steps)} step(s), stopped: {measurement.stop_reason}"
        + (f", model {measurement.model}" if measurement.model else ""))
    add("measurement", "measured_kind", "read from", measurement.kind, "", "measured",
        "requests/s and whole-request latency per concurrency step; TTFT, ITL and tokens/s shown at the step read"
        if measurement.llm_figures else "")
    add("measurement", "measured_on", "measured on", hw.describe() if gpu is None else gpu.name, "",
        "input" if gpu is not None else "measured", hw.source)
    if hw.kind == "cpu":
        draft.warnings.append(f"measured on a {hw.unit} without a GPU: the plan sizes hosts like it, not GPUs; "
                              "measure on the serving hardware to plan for it")
    if config is not None:
        add("measurement", "measured_config", "measured config", config.describe(), "", config.basis, config.source)
    else:
        add("measurement", "instances_per_unit", f"model instances per {unit.name} (as measured)", instances, "",
            "input" if instances_per_unit else "assumption", "--instances-per-gpu, or --model-config to read it")
    if measurement.batch_size > 1:
        add("measurement", "request_batch_size", "batch size per request", measurement.batch_size, "", "measured",
            "requests/s = infer/s ÷ batch size")
    serial = measurement.serial_step()
    if serial is not None and serial.p50_ms:
        add("measurement", "latency_p50_ms_serial", "P50 latency at concurrency 1", serial.p50_ms, "ms", "measured")
        add("measurement", "qps_serial", "serial QPS₁ = 1000 / P50", measurement.serial_qps(), "req/s", "measured",
            "one request at a time; the capacity below comes from the best passing step")
    else:
        draft.warnings.append("no error-free step at concurrency 1: serial QPS₁ not reported")


def _capacity(draft: PlanDraft, measurement: Measurement, w: Workload, unit: _Unit) -> CapacityReading:
    """The capacity per unit the run shows (below its knee, or a lower bound with the predicted
    ceiling), and the latency at that step."""
    add = draft.add
    reading = measurement.read_capacity(w.p99_ms)
    qps = reading.requests_per_s
    if qps <= 0:
        raise PlanError(f"{measurement.source}: the chosen step measured 0 requests/s", hint="re-run the perf ladder")
    if reading.is_lower_bound:
        add("measurement", "qps_per_unit_at_least", f"QPS per {unit.name} (lower bound: no knee found)", qps,
            "req/s", "measured", reading.why)
        draft.warnings.append(f"the ladder found no limit: {qps:,.1f} req/s per {unit.name} is a lower bound, so "
                              f"the fleet below is an upper bound; {reading.extend}")
        ceiling = _predicted_ceiling(measurement) if measurement.config is not None else None
        if ceiling is not None:
            add("measurement", "qps_per_unit_predicted_ceiling", f"QPS per {unit.name} at saturation (predicted)",
                ceiling / measurement.batch_size, "req/s", "theory",
                "the queueing model fitted to this run, at a load that keeps every instance busy with full "
                "batches; the fleet uses the measured lower bound until a longer ladder confirms it")
    else:
        add("measurement", "qps_per_unit", f"QPS per {unit.name} (below the knee)", qps, "req/s", "measured",
            reading.why)
    step = reading.step
    assert step.p50_ms is not None
    add("measurement", "latency_p50_ms", "P50 latency at that step", step.p50_ms, "ms", "measured", "")
    if step.p99_ms is not None:
        add("measurement", "latency_p99_ms", "P99 latency at that step", step.p99_ms, "ms", "measured", "")
    llm = measurement.llm_figures_at(step)
    if llm is not None:
        add("measurement", "llm_concurrency", "concurrent sequences at that step", llm.concurrency, "", "measured",
            "the LLM run's concurrency level")
        for key, label, value, per in (("ttft_p99_ms", "TTFT p99 at that step", llm.ttft_p99_ms, "ms"),
                                        ("itl_p99_ms", "ITL p99 at that step", llm.itl_p99_ms, "ms"),
                                        ("tokens_per_s", "output tokens/s at that step", llm.tokens_per_s, "tok/s")):
            if value is not None:
                add("measurement", key, label, value, per, "measured", "")
    return reading


def _fleet(draft: PlanDraft, w: Workload, a: PlanAssumptions, reading: CapacityReading, unit: _Unit,
           instances: int) -> int | None:
    """The replicas (measured units) a target QPS needs, the fleet's lines said of the unit; None without one."""
    if w.target_qps is None:
        draft.warnings.append("no --qps: pass a target QPS to size the fleet")
        return None
    assert reading.step.p50_ms is not None
    draft.add("workload", "target_qps", "target QPS", w.target_qps, "req/s", "input")
    fleet_lines, fleet_warnings, fleet = plan_fleet(w, a, reading.requests_per_s, reading.step.p50_ms, "measured", 1)
    for line in fleet_lines:
        note = unit.speak(line.note, "units") + (
            "; at most this many: the capacity is a lower bound"
            if reading.is_lower_bound and line.key in ("gpus_needed", "gpus_recommended") else "")
        draft.lines.append(PlanLine(line.section, line.key, unit.speak(line.label, f"{unit.name} units"), line.value,
                                    unit.speak(line.unit, "units"), line.basis, note))
    draft.warnings.extend(fleet_warnings)
    replicas = fleet.replicas_recommended
    draft.add("fleet", "instances_total", "model instances in total", replicas * instances, "instances", "measured",
              f"{replicas} × {instances} instance(s)")
    return replicas


def _suggestion(config: ServedConfig | None, w: Workload, unit: _Unit, instances: int,
                replicas: int | None, *, llm: bool = False) -> ServingSuggestion:
    """Serving parameters within what was measured: the measured config's batch and window, or a
    window by rule of thumb; the fleet in units (and GPUs when the unit is one)."""
    max_batch: int | None
    delay_us: int | None
    if config is not None:
        max_batch, delay_us = config.max_batch_size, config.max_queue_delay_us
        notes = {"max_batch_size": f"as measured ({config.source}): a larger batch was never measured",
                 "max_queue_delay_us": "as measured" if delay_us is not None
                 else "the measured config had no dynamic batching",
                 "instance_count": "as measured"}
    else:
        max_batch, delay_us = None, _WINDOW_US[w.mode]
        notes = {"max_batch_size": "not suggested: keep the measured config's (pass --model-config to carry it over)",
                 "max_queue_delay_us": "rule of thumb 5–20 ms: the short end for interactive traffic, where the "
                 "window adds to every request's latency; the long end for batch work",
                 "instance_count": "as measured (--instances-per-gpu)"}
    if llm:
        delay_us = None
        notes["max_queue_delay_us"] = ("not suggested: an LLM engine schedules its sequences itself (continuous "
                                       "batching); keep the measured engine's settings")
    notes["replicas"] = f"recommended {unit.name} units, one measured deployment each"
    return ServingSuggestion(max_batch_size=max_batch, instance_count=instances, max_queue_delay_us=delay_us,
                             replicas=replicas, gpus=replicas if unit.on_gpu else None, notes=notes)
