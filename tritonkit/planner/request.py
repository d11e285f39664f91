"""``tritonkit plan`` as one library call: a :class:`PlanRequest` (the command's options) → a plan.

The formulas live in the rest of the package; the choices the command makes around them live
here, once, so a library caller gets the same plan:

* the model: a Hugging Face ``config.json`` (with figures that override it), else model figures
  alone (layers, KV heads, head dim or parameters), else none: a measured model of any kind;
* the GPU: a catalogue card (figures given edit it), a card described by figures alone, or for
  a measured non-LLM model the one the run recorded; an LLM needs one;
* the precision: given, else the checkpoint's own (``quantization_config``, ``hf_quant_config.json``),
  else the config's ``torch_dtype`` (the plan says which);
* the measured run's config: a ``config.pbtxt`` or the model folder holding it, else the
  config the run recorded; predictions need one, and predict the measured loads unless given.

Example::

    from tritonkit.planner import PlanRequest, Workload, plan_capacity

    plan = plan_capacity(PlanRequest(hf_config=Path("llama/config.json"), gpu="A100-80GB",
                                     workload=Workload(target_qps=20, input_tokens=1024, output_tokens=256)))
    print(plan.render_text())
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tritonkit.errors import ConfigError, PlanError
from tritonkit.planner.capacity import PlanAssumptions, Workload
from tritonkit.planner.catalogue import GpuFigures, GpuSpec, custom_gpu, find_gpu, gpu_names, override_gpu
from tritonkit.planner.hf_config import (
    load_checkpoint_quantization,
    load_hf_config,
    model_from_hf_config,
    model_from_values,
)
from tritonkit.planner.llm import plan_llm
from tritonkit.planner.model import ModelOverrides, TransformerShape
from tritonkit.planner.precision import checkpoint_precision, find_precision, precision_from_torch_dtype
from tritonkit.planner.result import CapacityPlan
from tritonkit.planner.search import SearchSpace

if TYPE_CHECKING:
    from tritonkit.planner.external import ExternalAnswer
    from tritonkit.planner.measured import Measurement, ServedConfig
    from tritonkit.planner.predict import PredictionCheck

__all__ = ["PlanRequest", "check_saved_predictions", "plan_capacity", "read_served_config"]


@dataclass(frozen=True)
class PlanRequest:
    """What ``tritonkit plan`` is asked, one field per group of options.

    Model: ``hf_config`` (a ``config.json`` or the folder holding it) and ``model`` (figures that
    override it, or describe the model alone), ``precision`` (a name of
    :data:`~tritonkit.planner.PRECISIONS`; default the config's ``torch_dtype``), ``weights_gb``
    (decimal GB, instead of parameters × bytes). Hardware: ``gpu`` (a catalogue name) and
    ``gpu_figures``. ``workload`` and ``assumptions`` as :func:`plan_llm` takes them.
    Measurement: ``from_result`` (a perf ``result.json``), ``model_config`` (its model's
    ``config.pbtxt`` or folder), ``instances_per_gpu`` (without a config). Predictions:
    ``predict_concurrency`` / ``predict_rate`` (levels as ``'8,16'`` or ``'8:32'``),
    ``predict_instances``, ``predict_window_us``, with ``arrivals`` for request rates. ``search``:
    search the deployment of an LLM planned without a measurement (see :func:`plan_llm`).
    ``performance_model``: who answers that search — ``"own"`` (the planner's), ``"aiconfigurator"``
    (NVIDIA's, :mod:`tritonkit.planner.external`; ``ConfigError`` when not installed) or ``"auto"``
    (NVIDIA's where it is installed and covers the case, else the planner's; the plan says which).
    """

    def __post_init__(self) -> None:
        if self.performance_model not in ("own", "auto", "aiconfigurator"):
            raise ConfigError(f"unknown performance model {self.performance_model!r}",
                              hint="pass --performance-model own, auto or aiconfigurator")

    hf_config: Path | None = None
    model: ModelOverrides = field(default_factory=ModelOverrides)
    precision: str | None = None
    weights_gb: float | None = None
    gpu: str | None = None
    gpu_figures: GpuFigures = field(default_factory=GpuFigures)
    workload: Workload = field(default_factory=Workload)
    assumptions: PlanAssumptions = field(default_factory=PlanAssumptions)
    from_result: Path | None = None
    model_config: Path | None = None
    instances_per_gpu: int | None = None
    predict_concurrency: str | None = None
    predict_rate: str | None = None
    predict_instances: Sequence[int] = ()
    predict_window_us: Sequence[int] = ()
    arrivals: str = "constant"
    search: SearchSpace | None = None
    performance_model: str = "auto"

    def transformer(self) -> TransformerShape | None:
        """The LLM to plan, or ``None`` when neither a config nor model figures describe one."""
        if self.hf_config is not None:
            return model_from_hf_config(load_hf_config(self.hf_config), source=str(self.hf_config),
                                        overrides=self.model)
        given = (self.model.num_layers, self.model.num_kv_heads, self.model.head_dim, self.model.total_params)
        if any(value is not None for value in given):
            return model_from_values(self.model)
        return None

    def gpu_spec(self, *, required: bool) -> GpuSpec | None:
        """The GPU: ``gpu`` edited by ``gpu_figures``, else a card of those figures alone, else
        ``None`` (``ConfigError`` when ``required``)."""
        if self.gpu is not None:
            return override_gpu(find_gpu(self.gpu), self.gpu_figures)
        if self.gpu_figures.any_given:
            return custom_gpu(self.gpu_figures)
        if required:
            raise ConfigError(
                f"no GPU given; known: {', '.join(gpu_names())}",
                hint="pass --gpu NAME (tritonkit plan --list-gpus), or describe one with --gpu-memory-gib, "
                "--gpu-bandwidth-gb-s and --gpu-fp16-tflops",
            )
        return None

    def loads(self) -> list[tuple[str, float]]:
        """The loads to predict as ``(mode, value)``, concurrencies first (empty when none is given)."""
        from tritonkit.perf.measure.plan import parse_levels

        loads = [("concurrency", v) for v in parse_levels(self.predict_concurrency, "concurrency",
                                                           "--predict-concurrency")] if self.predict_concurrency else []
        loads += [("request_rate", v) for v in parse_levels(self.predict_rate, "request_rate", "--predict-rate")] \
            if self.predict_rate else []
        return loads


def read_served_config(path: str | Path | None) -> ServedConfig | None:
    """The serving bounds of a ``config.pbtxt`` (or the model folder holding one); ``None`` for ``None``."""
    from tritonkit.planner.measured import served_config_from_proto
    from tritonkit.repository import CONFIG_FILENAME, read_config

    if path is None:
        return None
    file = Path(path) / CONFIG_FILENAME if Path(path).is_dir() else Path(path)
    return served_config_from_proto(read_config(file), str(file))


def plan_capacity(request: PlanRequest) -> CapacityPlan:
    """The plan ``tritonkit plan`` prints for ``request`` (see the module docstring for its choices).

    An LLM (a config or model figures) is planned by :func:`plan_llm`, with a measured run's
    throughput when ``from_result`` is given; a measured model alone by
    :func:`plan_from_measurement`. Predictions are added when asked for. ``ConfigError`` names
    the option to give when the request cannot be planned.
    """
    from tritonkit.planner.measured_llm import load_measurement

    served = read_served_config(request.model_config)
    model = request.transformer()
    measurement = (load_measurement(request.from_result, config=served, gpu_name=request.gpu if model is None else None)
                   if request.from_result is not None else None)
    if model is None and measurement is None:
        raise ConfigError(
            "nothing to plan",
            hint="pass --hf-config (an LLM), model flags (--num-layers, --num-kv-heads, --head-dim, --params), "
            "or --from-result result.json (any model)",
        )
    gpu = request.gpu_spec(required=model is not None)
    if model is None:
        from tritonkit.planner.measured_plan import plan_from_measurement

        assert measurement is not None
        plan = plan_from_measurement(measurement, request.workload, request.assumptions,
                                     instances_per_unit=request.instances_per_gpu, gpu=gpu)
    else:
        assert gpu is not None
        plan = _plan_llm(request, model, gpu, measurement)
    return _with_predictions(request, plan, measurement)


def _plan_llm(request: PlanRequest, model: TransformerShape, gpu: GpuSpec,
              measurement: Measurement | None) -> CapacityPlan:
    if request.precision is not None:
        precision, precision_note = find_precision(request.precision), None
    else:
        found = checkpoint_precision(*load_checkpoint_quantization(request.hf_config)) if request.hf_config else None
        precision, precision_note = found or precision_from_torch_dtype(model.torch_dtype)
        precision_note += " (--precision to choose)"
    weights_gb = request.weights_gb
    if weights_gb is not None and not weights_gb > 0:
        raise ConfigError(f"--weights-gb must be positive, got {weights_gb}", hint="pass the weights size in GB")
    weights = int(round(weights_gb * 1e9)) if weights_gb is not None else None

    def planned(a: PlanAssumptions) -> CapacityPlan:
        return plan_llm(model, gpu, precision, request.workload, a, measurement=measurement,
                        weights_bytes_override=weights, precision_note=precision_note, search=request.search)

    plan = planned(request.assumptions)
    if plan.search is None or request.performance_model == "own":
        return plan
    from tritonkit.planner.external import answered_plan

    headroom = request.assumptions.headroom
    answer = _ask_performance_model(request, plan, gpu, precision.name,
                                    checkpoint=bool(precision_note and precision_note.startswith("the checkpoint")))
    if isinstance(answer, str):
        return answered_plan(plan, answer, headroom)
    # the plan's anatomy (memory, KV cache, roofline) at the parallelism the performance model chose
    best = answer.best
    try:
        at_its_tp = planned(replace(
            request.assumptions, tensor_parallel=best.tensor_parallel * best.attention_dp * best.pipeline_parallel,
            attention_dp=best.attention_dp > 1,
            expert_parallel=best.expert_parallel if best.expert_parallel > 1 else None))
    except PlanError as exc:
        at_its_tp = replace(plan, warnings=(*plan.warnings, (
            f"the lines above plan tritonkit's own best ({plan.value('tensor_parallel')} GPUs per replica): "
            f"{answer.tool} chose {best.label()}, which tritonkit's own model does not see meeting the SLA "
            f"({exc.message})")))
    return answered_plan(at_its_tp, answer, headroom, own_gpus=plan.value("gpus_needed"))


def _ask_performance_model(request: PlanRequest, plan: CapacityPlan, gpu: GpuSpec,
                           precision: str, *, checkpoint: bool = False) -> ExternalAnswer | str:
    """NVIDIA's performance model's answer for ``plan``'s case, or why it gave none."""
    from tritonkit.planner.external import ENV_VAR, ask_performance_model, find_tool

    tool, w = find_tool(), request.workload
    if tool is None:
        if request.performance_model == "aiconfigurator":
            raise ConfigError("--performance-model aiconfigurator: no aiconfigurator executable found",
                              hint=f"install it in a venv of its own (pip install aiconfigurator) and set {ENV_VAR} "
                                   "to that venv's bin/aiconfigurator, or put it on PATH")
        return f"not installed (set {ENV_VAR} to its aiconfigurator executable)"
    if request.hf_config is None:
        return "it reads the model's config.json (--hf-config)"
    if w.target_qps is None or w.tokens_per_s_per_user is None:
        return "it sizes a request rate under a per-token time (--qps and --tokens-per-s)"
    mean_in, mean_out = (float(plan.value(key)) for key in ("input_tokens_mean", "output_tokens_mean"))
    return ask_performance_model(
        tool, request.hf_config, gpu.name, precision, isl=int(round(mean_in)), osl=int(round(mean_out)),
        ttft_ms=w.ttft_ms if w.ttft_ms is not None else 2000.0, tpot_ms=1000.0 / w.tokens_per_s_per_user,
        request_rate=w.target_qps, checkpoint_precision=checkpoint)


def _with_predictions(request: PlanRequest, plan: CapacityPlan, measurement: Measurement | None) -> CapacityPlan:
    """``plan`` with the predictions ``request`` asks for (the measured loads unless it names some)."""
    from tritonkit.planner.predict import predict_loads

    loads = request.loads()
    if not (loads or request.predict_instances or request.predict_window_us):
        return plan
    if measurement is None or measurement.config is None:
        raise ConfigError("predictions need a measured run and the config it was measured with",
                          hint="pass --from-result result.json (a run that recorded its model config), "
                          "or add --model-config config.pbtxt")
    if not loads:
        loads = [(s.load_mode, s.load_value) for s in measurement.steps if s.measured]
    return replace(plan, predictions=predict_loads(
        measurement, config=measurement.config, loads=loads, instances=request.predict_instances,
        windows_us=request.predict_window_us, arrivals=request.arrivals))


def check_saved_predictions(result: str | Path, predictions: str | Path, *,
                            model_config: str | Path | None = None) -> PredictionCheck:
    """Score predictions a plan saved against a later perf ``result``, for the configuration that
    run served (``model_config``, else the config it recorded)."""
    from tritonkit.planner.measured_llm import load_measurement
    from tritonkit.planner.predict import check_predictions, load_predictions
    from tritonkit.planner.queueing import Scenario

    served = read_served_config(model_config)
    later = load_measurement(result, config=served)
    return check_predictions(load_predictions(predictions), later,
                             Scenario.from_served(later.config) if later.config is not None else None)
