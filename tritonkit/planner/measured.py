"""An honest reading of a perf run: what was measured, on what, and what it says about capacity.

A load ladder only *finds* a capacity when it climbed past it: a step broke the SLA (or had
failed requests) above the best passing step, or throughput stopped rising. A ladder that ended
while every step passed and throughput was still climbing shows only a lower bound — the
reading says "at least N" and how far to extend the ladder.

Everything is read through the typed :class:`tritonkit.perf.PerfResult` (the same objects
``tritonkit perf run`` wrote); the SLA verdict stored with the run is read back through the judge's
own :class:`~tritonkit.perf.Verdict` (``stored_verdict``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonclient.grpc import model_config_pb2

from tritonkit.errors import ConfigError, PlanError
from tritonkit.perf import PerfResult, StepResult
from tritonkit.perf.judge import stored_verdict
from tritonkit.perf.measure.metrics import is_loopback
from tritonkit.perf.measure.result import ServedModelConfig, ServerHardware
from tritonkit.repository.serving import serving_of
from tritonkit.triton_metrics import EXEC_COUNT, INFERENCE_COUNT

__all__ = [
    "LLMStepFigures",
    "PLATEAU_GAIN",
    "CapacityReading",
    "MeasuredHardware",
    "MeasuredStep",
    "Measurement",
    "check_figures",
    "ServedConfig",
    "served_config_from_proto",
    "served_config_from_run",
]

#: A step that raises throughput by less than this over the best earlier step means throughput
#: has flattened: the ladder reached the knee. The same 5 % the ladder uses to stop early.
PLATEAU_GAIN = 0.05

# Runs that ended for these reasons ended on the tool, not on the system under test: the last
# step is not evidence of a limit.
_STOPPED_BY_TOOL = {"perf_error", "interrupted", "timeout"}


@dataclass(frozen=True)
class ServedConfig:
    """What the measured model's config allowed: the ceiling for suggested parameters.

    ``max_queue_delay_us`` is ``None`` when the model has no dynamic batcher (each request
    executes alone); ``max_batch_size`` 0 (no batching dimension) is reported as 1.
    ``basis`` is ``"measured"`` when the run recorded the config the server loaded, ``"input"``
    when it came from a ``config.pbtxt`` given with the run.
    """

    max_batch_size: int
    instance_count: int
    max_queue_delay_us: int | None
    source: str
    preferred_batch_sizes: tuple[int, ...] = ()
    basis: str = "input"

    @property
    def batching(self) -> bool:
        return self.max_queue_delay_us is not None and self.max_batch_size > 1

    def describe(self) -> str:
        window = (f"dynamic batching window {self.max_queue_delay_us} µs" if self.max_queue_delay_us is not None
                  else "no dynamic batching")
        preferred = (f" (preferred batch sizes {', '.join(map(str, self.preferred_batch_sizes))})"
                     if self.preferred_batch_sizes else "")
        return f"max_batch_size {self.max_batch_size}, {self.instance_count} instance(s), {window}{preferred}"


def served_config_from_proto(config: model_config_pb2.ModelConfig, source: str) -> ServedConfig:
    """Read the batching and instance settings that bound a plan from a ``ModelConfig``."""
    serving = serving_of(config)
    return ServedConfig(max(1, serving.max_batch_size), max(1, serving.instances), serving.window_us, source,
                        serving.preferred_batch_sizes)


def served_config_from_run(config: ServedModelConfig) -> ServedConfig:
    """The bounds of a plan from the config a perf run recorded (as the server loaded it)."""
    return ServedConfig(
        max_batch_size=max(1, config.max_batch_size),
        instance_count=config.instance_count,
        max_queue_delay_us=config.max_queue_delay_us if config.dynamic_batching else None,
        source=f"recorded by the run from {config.source}",
        preferred_batch_sizes=tuple(config.preferred_batch_sizes),
        basis="measured",
    )


@dataclass(frozen=True)
class MeasuredHardware:
    """What the measured deployment ran on, and therefore what one "unit" of the plan is.

    ``kind`` is ``"gpu"`` or ``"cpu"`` (or ``"unknown"``); ``unit`` is how the plan names one
    measured deployment ("GPU", "2-core CPU host").
    """

    kind: str
    count: int | None
    model: str | None
    unit: str
    source: str

    def describe(self) -> str:
        # A CPU host's and a multi-GPU server's unit already names its size ("2-core CPU host").
        what = self.unit if self.count is None or self.kind == "cpu" or self.count > 1 else f"1 × {self.unit}"
        return f"{what}" + (f" ({self.model})" if self.model else "")


def _recorded_hardware(hw: ServerHardware) -> MeasuredHardware | None:
    """The unit a run's recorded server hardware names (``None``: it does not say enough)."""
    source = f"recorded by the run: {hw.source}"
    if hw.gpu_count:
        names = ", ".join(hw.gpu_names) or None
        unit = "GPU" if hw.gpu_count == 1 else f"{hw.gpu_count}-GPU server"
        return MeasuredHardware("gpu", hw.gpu_count, names, unit,
                                source if names else f"{source}: pass --gpu to name the model")
    if hw.gpu_count == 0 and hw.cpu_cores:
        return MeasuredHardware("cpu", hw.cpu_cores, hw.cpu_model, f"{hw.cpu_cores}-core CPU host", source)
    return None


def _hardware(result: PerfResult, gpu_name: str | None) -> MeasuredHardware:
    meta = result.metadata
    recorded = _recorded_hardware(meta.server_hardware) if meta.server_hardware is not None else None
    if gpu_name is not None:
        # The name is given; how many the run used is still what it recorded.
        count = recorded.count if recorded is not None and recorded.kind == "gpu" and recorded.count else 1
        return MeasuredHardware("gpu", count, gpu_name, "GPU" if count == 1 else f"{count}-GPU server",
                                "given (--gpu)" + (f"; {count} GPUs recorded by the run" if count > 1 else ""))
    if recorded is not None:
        return recorded
    saw_gpu = any(
        s.metrics is not None and (s.metrics.gpu_utilization_max is not None
                                   or s.metrics.gpu_memory_used_bytes_max is not None)
        for s in result.steps
    )
    if saw_gpu:
        return MeasuredHardware("gpu", None, None, "GPU", "the server exported GPU metrics during the run; "
                                "model and count not recorded: pass --gpu to name it")
    if is_loopback(meta.url) and meta.generator_cpu_count:
        cores = meta.generator_cpu_count
        return MeasuredHardware(
            "cpu", cores, meta.generator_cpu_model, f"{cores}-core CPU host",
            "no GPU metrics; the server ran on the load generator's host (loopback URL), which has "
            f"{cores} cores shared by the server and perf_analyzer",
        )
    return MeasuredHardware("unknown", None, None, "measured deployment",
                            "the run records no GPU metrics and the server was not on the generator's host")


#: What a step's figures may be: (lowest, highest, unit). Beyond them a result is corrupt or absurd
#: (a NaN p99, 1e12 req/s), and a plan sized from it would be wrong without saying so.
_FIGURE_RANGES: dict[str, tuple[float, float, str]] = {
    "load_value": (0.0, 1e7, ""),
    "throughput_per_s": (0.0, 1e8, "req/s"),
    "p50_ms": (0.0, 1e7, "ms"),
    "p99_ms": (0.0, 1e7, "ms"),
    "mean_ms": (0.0, 1e7, "ms"),
    "service_ms": (0.0, 1e7, "ms"),
    "queue_ms": (0.0, 1e7, "ms"),
    "items_per_exec": (0.0, 1e6, "items"),
}


def check_figures(step: MeasuredStep, source: str) -> None:
    """Refuse a step whose figures are not finite or out of range, naming the file, step and field."""
    for name, (low, high, unit) in _FIGURE_RANGES.items():
        value = getattr(step, name)
        if value is None:
            continue
        if not math.isfinite(value) or not low <= value <= high:
            raise ConfigError(
                f"perf result {source}: step {step.index} ({step.load_mode} {step.load_value:g}) has "
                f"{name} = {value!r}{' ' + unit if unit else ''}, not a finite figure from {low:g} to {high:g}",
                hint="the file is corrupt or was edited; re-run the perf ladder (tritonkit perf run) and plan from "
                     "its result.json",
            )


@dataclass(frozen=True)
class MeasuredStep:
    """One load step reduced to what planning and prediction need (times in ms).

    ``sla_ok`` is the step's verdict: ``False`` for failed requests, a broken SLA, or an SLA
    bound inside the step's noise (``inside_noise``: the planner plans only from loads that
    clearly meet the SLA), ``None`` when the step has no trustworthy numbers (unstable, no
    figures). ``noisy``: perf_analyzer could not call the step stable and it was measured over
    fixed windows whose figures disagreed; the planner uses it like any measured step (its
    figures are the medians of its windows) and says so. ``service_ms`` is the server's
    compute time per request (input + infer + output), ``queue_ms`` its queue time,
    ``items_per_exec`` the mean batch the model executed (from the server's execution count).
    """

    index: int
    load_mode: str
    load_value: float
    throughput_per_s: float | None
    p50_ms: float | None
    p99_ms: float | None
    mean_ms: float | None
    error_count: int
    stable: bool
    sla_ok: bool | None
    service_ms: float | None = None
    queue_ms: float | None = None
    items_per_exec: float | None = None
    noisy: bool = False
    inside_noise: bool = False

    @property
    def measured(self) -> bool:
        return ((self.stable or self.noisy) and self.error_count == 0 and self.throughput_per_s is not None
                and self.p50_ms is not None)

    def describe(self) -> str:
        load = f"{'concurrency' if self.load_mode == 'concurrency' else 'rate'} {self.load_value:g}"
        if self.error_count:
            return f"{load}: {self.error_count} failed request(s)"
        if not self.measured:
            return f"{load}: no stable measurement"
        p99 = f", p99 {self.p99_ms:.1f} ms" if self.p99_ms is not None else ""
        noisy = " (noisy: medians of its windows)" if self.noisy else ""
        return f"{load}: {self.throughput_per_s:,.1f} infer/s, p50 {self.p50_ms:.1f} ms{p99}{noisy}"


def _server_ms(step: StepResult) -> tuple[float | None, float | None]:
    s = step.server
    if s.compute_infer_us is None:
        return None, None
    service = (s.compute_input_us or 0.0) + s.compute_infer_us + (s.compute_output_us or 0.0)
    return service / 1000.0, (s.queue_us / 1000.0 if s.queue_us is not None else None)


def _items_per_exec(step: StepResult) -> float | None:
    if step.metrics is None:
        return None
    count = step.metrics.raw.get(INFERENCE_COUNT.name)
    execs = step.metrics.raw.get(EXEC_COUNT.name)
    if not count or not execs:
        return None
    return count / execs


@dataclass(frozen=True)
class LLMStepFigures:
    """An LLM step's own figures, by the concurrency it ran at (times in ms)."""

    concurrency: float
    ttft_p99_ms: float | None
    itl_p99_ms: float | None
    tokens_per_s: float | None

    def describe(self) -> str:
        def f(value: float | None, unit: str) -> str:
            return "–" if value is None else f"{value:,.1f} {unit}"

        return (f"TTFT p99 {f(self.ttft_p99_ms, 'ms')}, ITL p99 {f(self.itl_p99_ms, 'ms')}, "
                f"{f(self.tokens_per_s, 'output tokens/s')}")


@dataclass(frozen=True)
class CapacityReading:
    """What a run says about one deployment's capacity.

    ``bound`` is ``"knee"`` when the ladder found a limit (``knee_step`` is where) and
    ``"lower_bound"`` when it did not: then the deployment does *at least* ``requests_per_s``
    and ``extend`` says how to climb further.
    """

    step: MeasuredStep
    requests_per_s: float
    bound: str
    why: str
    knee_step: MeasuredStep | None = None
    extend: str | None = None

    @property
    def is_lower_bound(self) -> bool:
        return self.bound == "lower_bound"


@dataclass(frozen=True)
class Measurement:
    """A perf run as the planner reads it: its steps, hardware, stop reason and measured config.

    ``kind``: what kind of run it was, in words (a classic ladder's ``result.json``, or an LLM load
    test: :mod:`tritonkit.planner.measured_llm`); ``llm_figures``: an LLM run's TTFT, ITL and
    tokens/s per concurrency step (empty for a classic ladder).
    """

    source: str
    steps: tuple[MeasuredStep, ...]
    batch_size: int
    model: str | None
    hardware: MeasuredHardware
    stop_reason: str
    config: ServedConfig | None = None
    sla: str | None = None
    kind: str = "classic perf ladder"
    llm_figures: tuple[LLMStepFigures, ...] = ()

    def llm_figures_at(self, step: MeasuredStep) -> LLMStepFigures | None:
        """An LLM run's own figures at ``step``'s concurrency (``None`` for a classic ladder)."""
        return next((f for f in self.llm_figures if f.concurrency == step.load_value), None)

    @classmethod
    def from_result(
        cls,
        result: PerfResult,
        *,
        source: str = "result.json",
        config: ServedConfig | None = None,
        gpu_name: str | None = None,
    ) -> Measurement:
        """Reduce a typed perf result; steps are judged by the run's stored SLA verdict if any.

        ``config`` (a ``config.pbtxt`` given with the run) and ``gpu_name`` override what the run
        recorded (the config the server loaded, the server's hardware).
        """
        if config is None and result.metadata.model_config is not None:
            config = served_config_from_run(result.metadata.model_config)
        verdict = stored_verdict(result)
        sla_text = str(verdict.sla) if verdict is not None else None
        verdict_status = {s.load: s.status for s in verdict.steps} if verdict is not None else {}
        steps: list[MeasuredStep] = []
        for index, raw in enumerate(result.steps):
            service_ms, queue_ms = _server_ms(raw)
            lat = raw.latency
            ok: bool | None
            status = verdict_status.get(float(raw.load_value))
            if raw.error_count:
                ok = False
            elif not raw.measured or lat is None:
                ok = None
            else:
                # Inside the noise is not a pass: capacity is planned only from loads that clearly meet the SLA.
                ok = None if status == "unmeasured" else status not in ("fail", "noise")
            steps.append(MeasuredStep(
                index=index,
                load_mode=raw.load_mode,
                load_value=float(raw.load_value),
                throughput_per_s=raw.throughput_per_s,
                p50_ms=lat.p50_ms if lat else None,
                p99_ms=lat.p99_ms if lat else None,
                mean_ms=lat.mean_ms if lat else None,
                error_count=raw.error_count,
                stable=raw.stable,
                sla_ok=ok,
                service_ms=service_ms,
                queue_ms=queue_ms,
                items_per_exec=_items_per_exec(raw),
                noisy=raw.noisy,
                inside_noise=status == "noise",
            ))
        for step in steps:
            check_figures(step, source)
        if not steps:
            raise PlanError(f"perf result {source} holds no measured step", hint="re-run the perf ladder")
        batch = result.metadata.batch_size or 1
        return cls(source=source, steps=tuple(steps), batch_size=batch, model=result.metadata.model or None,
                   hardware=_hardware(result, gpu_name), stop_reason=result.stop_reason, config=config, sla=sla_text)

    # --- simple figures ---------------------------------------------------------------------

    def serial_step(self) -> MeasuredStep | None:
        """The error-free step at concurrency 1 (the batch-1 latency measurement), if any."""
        return next((s for s in self.steps if s.load_mode == "concurrency" and s.load_value == 1 and s.measured), None)

    def serial_qps(self) -> float | None:
        """Serial QPS₁ = 1000 / P50 latency at concurrency 1 (requests per second)."""
        step = self.serial_step()
        return 1000.0 / step.p50_ms if step is not None and step.p50_ms else None

    def requests_per_s(self, step: MeasuredStep) -> float:
        """Requests per second of ``step`` (inferences per second / batch size)."""
        return (step.throughput_per_s or 0.0) / self.batch_size

    # --- the reading ------------------------------------------------------------------------

    def read_capacity(self, p99_target_ms: float | None = None) -> CapacityReading:
        """Capacity below a knee the ladder found, or a lower bound (see :class:`CapacityReading`).

        A step passes when it is measured, error-free, meets ``p99_target_ms`` (when given) and
        passed the run's own SLA verdict (when one was stored). The knee is the first failing
        step above the best passing one, or the first step where throughput flattened.
        """
        ordered = sorted(self.steps, key=lambda s: s.load_value)
        if p99_target_ms is not None:
            missing = [s for s in ordered if s.measured and s.p99_ms is None]
            if missing:
                raise ConfigError(f"{self.source}: step {missing[0].index} has no P99 latency, needed for --p99-ms",
                                  hint="pass a result.json with P99 latencies, or drop --p99-ms")

        def passes(s: MeasuredStep) -> bool:
            if not s.measured or s.sla_ok is False:
                return False
            return p99_target_ms is None or (s.p99_ms is not None and s.p99_ms <= p99_target_ms)

        def fails(s: MeasuredStep) -> bool:
            return s.error_count > 0 or (s.measured and not passes(s))

        passing = [s for s in ordered if passes(s)]
        if not passing:
            if not any(s.measured for s in ordered):
                raise PlanError(f"{self.source}: no step has a valid measurement (each had failed requests or "
                                "no stable measurement)",
                                hint="re-run the perf ladder at lower load; capacity is read only from error-free steps")
            target = f"P99 ≤ {p99_target_ms:g} ms" if p99_target_ms is not None else f"the run's SLA ({self.sla})"
            best = min((s for s in ordered if s.measured), key=lambda s: s.p99_ms or math.inf)
            raise PlanError(f"{self.source}: no measured step meets {target} (best: {best.describe()})",
                            hint="relax the target, or measure at lower load / on a faster deployment")

        # Throughput flattened: a passing step gaining < PLATEAU_GAIN over the best before it.
        plateau: MeasuredStep | None = None
        best_so_far = 0.0
        for s in passing:
            tput = s.throughput_per_s or 0.0
            if best_so_far > 0 and tput < best_so_far * (1 + PLATEAU_GAIN):
                plateau = s
                break
            best_so_far = max(best_so_far, tput)
        best_pass = max(passing, key=lambda s: s.throughput_per_s or 0.0)
        above = [s for s in ordered if s.load_value > best_pass.load_value and fails(s)]
        tool_stop = self.stop_reason in _STOPPED_BY_TOOL
        last = ordered[-1]
        failure = next((s for s in above if not (tool_stop and s is last)), None)

        qps = self.requests_per_s(best_pass)
        skipped = [s for s in ordered if not s.measured]
        skipped_note = f"; {len(skipped)} step(s) with failed requests or no stable measurement judged failing" \
            if skipped else ""
        if failure is not None:
            reason = ("failed requests" if failure.error_count else
                      f"P99 {failure.p99_ms:.1f} ms > {p99_target_ms:g} ms" if p99_target_ms is not None
                      and failure.p99_ms is not None and failure.p99_ms > p99_target_ms else
                      "the SLA inside its noise: not clearly met" if failure.inside_noise else "the SLA broke")
            return CapacityReading(best_pass, qps, "knee",
                                   f"highest passing step ({best_pass.describe()}); the knee: "
                                   f"{failure.describe()} ({reason}){skipped_note}", knee_step=failure)
        if plateau is not None or self.stop_reason == "throughput_plateau":
            knee = plateau or last
            return CapacityReading(best_pass, qps, "knee",
                                   f"highest passing step ({best_pass.describe()}); throughput flattened at "
                                   f"{knee.describe()} (< {PLATEAU_GAIN:.0%} gain){skipped_note}", knee_step=knee)
        why_open = {
            "perf_error": "the run ended on a perf_analyzer failure, so nothing beyond it was measured",
            "interrupted": "the run was interrupted",
            "timeout": "the run hit its time limit",
        }.get(self.stop_reason, "every step passed and throughput was still rising")
        top = ordered[-1].load_value
        mode = "concurrency" if best_pass.load_mode == "concurrency" else "request-rate"
        extend = (f"extend the ladder past {top:g}, e.g. tritonkit perf run ... --{mode} "
                  f"{top:g}:{top * 8:g}, until a step breaks the SLA or throughput stops rising")
        return CapacityReading(best_pass, qps, "lower_bound",
                               f"at least this: {why_open} ({best_pass.describe()}){skipped_note}", extend=extend)
