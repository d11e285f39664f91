"""Size a fleet of any model from a perf run: capacity per measured unit, replicas, serving parameters.

The unit of the plan is what the run measured on (:class:`~tritonkit.planner.measured.MeasuredHardware`):
a GPU, or a CPU host with N cores. The capacity comes from :meth:`Measurement.read_capacity`:
below a knee the ladder found, or a lower bound — then the fleet it sizes is an upper bound and
the plan says so. Serving parameters never exceed what the measured config allowed.
"""

from __future__ import annotations

from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.capacity import PlanAssumptions, Workload, plan_fleet
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.measured import Measurement
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
    instances, or ``instances_per_unit`` when no config was given).
    """
    a = assumptions or PlanAssumptions()
    w = workload
    config = measurement.config
    if instances_per_unit is not None and (isinstance(instances_per_unit, bool) or instances_per_unit < 1):
        raise ConfigError(f"instances per unit must be an integer ≥ 1, got {instances_per_unit!r}",
                          hint="pass --instances-per-gpu 1, 2, …")
    instances = config.instance_count if config is not None else (instances_per_unit or 1)
    hw = measurement.hardware
    unit = gpu.name if gpu is not None else hw.unit
    draft = PlanDraft()
    add, lines, warnings = draft.add, draft.lines, draft.warnings

    add("measurement", "measured_source", "measurement", measurement.source, "", "measured",
        f"{len(measurement.steps)} step(s), stopped: {measurement.stop_reason}"
        + (f", model {measurement.model}" if measurement.model else ""))
    add("measurement", "measured_on", "measured on", hw.describe() if gpu is None else gpu.name, "",
        "input" if gpu is not None else "measured", hw.source)
    if hw.kind == "cpu":
        warnings.append(f"measured on a {hw.unit} without a GPU: the plan sizes hosts like it, not GPUs; measure on "
                        "the serving hardware to plan for it")
    if config is not None:
        add("measurement", "measured_config", "measured config", config.describe(), "", config.basis, config.source)
    else:
        add("measurement", "instances_per_unit", f"model instances per {unit} (as measured)", instances, "",
            "input" if instances_per_unit else "assumption", "--instances-per-gpu, or --model-config to read it")
    if measurement.batch_size > 1:
        add("measurement", "request_batch_size", "batch size per request", measurement.batch_size, "", "measured",
            "requests/s = infer/s ÷ batch size")
    serial = measurement.serial_step()
    if serial is not None and serial.p50_ms:
        add("measurement", "latency_p50_ms_serial", "P50 latency at concurrency 1", serial.p50_ms, "ms", "measured")
        add("measurement", "qps_serial", "serial QPS₁ = 1000 / P50", 1000.0 / serial.p50_ms, "req/s", "measured",
            "one request at a time; the capacity below comes from the best passing step")
    else:
        warnings.append("no error-free step at concurrency 1: serial QPS₁ not reported")
    reading = measurement.read_capacity(w.p99_ms)
    qps = reading.requests_per_s
    if qps <= 0:
        raise PlanError(f"{measurement.source}: the chosen step measured 0 requests/s", hint="re-run the perf ladder")
    if reading.is_lower_bound:
        add("measurement", "qps_per_unit_at_least", f"QPS per {unit} (lower bound: no knee found)", qps, "req/s",
            "measured", reading.why)
        warnings.append(f"the ladder found no limit: {qps:,.1f} req/s per {unit} is a lower bound, so the fleet "
                        f"below is an upper bound; {reading.extend}")
        ceiling = _predicted_ceiling(measurement) if config is not None else None
        if ceiling is not None:
            add("measurement", "qps_per_unit_predicted_ceiling", f"QPS per {unit} at saturation (predicted)",
                ceiling / measurement.batch_size, "req/s", "theory",
                "the queueing model fitted to this run, at a load that keeps every instance busy with full "
                "batches; the fleet uses the measured lower bound until a longer ladder confirms it")
    else:
        add("measurement", "qps_per_unit", f"QPS per {unit} (below the knee)", qps, "req/s", "measured", reading.why)
    step = reading.step
    assert step.p50_ms is not None
    add("measurement", "latency_p50_ms", "P50 latency at that step", step.p50_ms, "ms", "measured", "")
    if step.p99_ms is not None:
        add("measurement", "latency_p99_ms", "P99 latency at that step", step.p99_ms, "ms", "measured", "")
    if w.p99_ms is not None:
        add("workload", "sla_p99_ms", "SLA: P99 latency", w.p99_ms, "ms", "input")
    elif measurement.sla:
        add("workload", "sla_run", "SLA (stored with the run)", measurement.sla, "", "measured", "steps judged by it")
    add("workload", "mode", "mode", w.mode, "", "input")

    replicas: int | None = None
    if w.target_qps is not None:
        add("workload", "target_qps", "target QPS", w.target_qps, "req/s", "input")
        fleet_lines, fleet_warnings, fleet = plan_fleet(w, a, qps, step.p50_ms, "measured", 1)
        # The fleet section speaks of GPUs; when the run was not on one, a replica is one measured unit.
        on_gpu = hw.kind == "gpu" or gpu is not None

        def per_unit(text: str, name: str) -> str:
            return text if on_gpu else text.replace("GPU(s)", "unit").replace("GPUs", name)

        for line in fleet_lines:
            note = per_unit(line.note, "units") + (
                "; at most this many: the capacity is a lower bound"
                if reading.is_lower_bound and line.key in ("gpus_needed", "gpus_recommended") else "")
            lines.append(PlanLine(line.section, line.key, per_unit(line.label, f"{unit} units"), line.value,
                                  per_unit(line.unit, "units"), line.basis, note))
        warnings.extend(fleet_warnings)
        replicas = fleet.replicas_recommended
        add("fleet", "instances_total", "model instances in total", replicas * instances, "instances", "measured",
            f"{replicas} × {instances} instance(s)")
    else:
        warnings.append("no --qps: pass a target QPS to size the fleet")

    notes: dict[str, str] = {}
    max_batch: int | None = None
    delay_us: int | None
    if config is not None:
        max_batch = config.max_batch_size
        delay_us = config.max_queue_delay_us
        notes["max_batch_size"] = f"as measured ({config.source}): a larger batch was never measured"
        notes["max_queue_delay_us"] = ("as measured" if delay_us is not None
                                       else "the measured config had no dynamic batching")
        notes["instance_count"] = "as measured"
    else:
        delay_us = _WINDOW_US[w.mode]
        notes["max_batch_size"] = "not suggested: keep the measured config's (pass --model-config to carry it over)"
        notes["max_queue_delay_us"] = ("rule of thumb 5–20 ms: the short end for interactive traffic, where the "
                                       "window adds to every request's latency; the long end for batch work")
        notes["instance_count"] = "as measured (--instances-per-gpu)"
    notes["replicas"] = f"recommended {unit} units, one measured deployment each"
    suggestion = ServingSuggestion(
        max_batch_size=max_batch,
        instance_count=instances,
        max_queue_delay_us=delay_us,
        replicas=replicas,
        gpus=replicas if (hw.kind == "gpu" or gpu is not None) else None,
        notes=notes,
    )
    title = f"Capacity plan from measurement: {measurement.model or measurement.source} (per {unit})"
    return draft.finish("measured", title, suggestion,
                        {"measurement": measurement.source, "hardware": hw.describe(), "capacity_bound": reading.bound,
                         "workload": {"target_qps": w.target_qps, "p99_ms": w.p99_ms, "mode": w.mode}})
