"""Typed specs build Triton's own ModelConfig; defaults follow the rules of thumb; mistakes fail early."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest
from tritonclient.grpc import model_config_pb2 as mc

from tritonkit.errors import ConfigError
from tritonkit.repository import (
    Accelerator,
    ControlInput,
    DynamicBatching,
    EnsembleStep,
    Hardware,
    InstanceGroup,
    ModelSpec,
    Optimization,
    QueuePolicy,
    RateLimiterResource,
    SequenceBatching,
    SequenceState,
    TensorSpec,
    VersionPolicy,
    Warmup,
    WarmupInput,
    instance_groups_for,
)

X = TensorSpec(name="x", dtype=np.float32, dims=[4])
Y = TensorSpec(name="y", dtype="FP32", dims=[4])


def _spec(**kwargs: object) -> ModelSpec:
    base: dict[str, object] = {"name": "m", "backend": "python", "max_batch_size": 8, "inputs": [X], "outputs": [Y]}
    base.update(kwargs)
    return ModelSpec(**base)  # type: ignore[arg-type]


def test_spec_builds_tritons_own_model_config() -> None:
    cfg = _spec().to_proto()
    assert isinstance(cfg, mc.ModelConfig)
    assert (cfg.name, cfg.backend, cfg.max_batch_size) == ("m", "python", 8)
    assert cfg.input[0].data_type == mc.TYPE_FP32 and list(cfg.input[0].dims) == [4]


def test_batching_model_gets_dynamic_batching_with_a_5ms_window_and_no_preferred_sizes() -> None:
    cfg = _spec().to_proto()
    assert cfg.WhichOneof("scheduling_choice") == "dynamic_batching"
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 5000
    assert list(cfg.dynamic_batching.preferred_batch_size) == []


def test_non_batching_model_gets_no_dynamic_batching_by_default() -> None:
    assert not _spec(max_batch_size=0).to_proto().HasField("dynamic_batching")


def test_dynamic_batching_none_turns_the_batcher_off() -> None:
    assert not _spec(dynamic_batching=None).to_proto().HasField("dynamic_batching")


@pytest.mark.parametrize("window", ["10ms", "10000us", timedelta(milliseconds=10)])
def test_window_is_given_with_units(window: object) -> None:
    cfg = _spec(dynamic_batching=DynamicBatching(window=window)).to_proto()  # type: ignore[arg-type]
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 10000


def test_window_as_explicit_microseconds_int() -> None:
    cfg = _spec(dynamic_batching=DynamicBatching(window_us=7000)).to_proto()
    assert cfg.dynamic_batching.max_queue_delay_microseconds == 7000


def test_window_given_twice_is_refused() -> None:
    with pytest.raises(ConfigError, match="not both"):
        _spec(dynamic_batching=DynamicBatching(window="5ms", window_us=5000)).to_proto()


def test_writer_rejects_preferred_batch_above_max_batch() -> None:
    with pytest.raises(ConfigError, match=r"preferred_batch_size \[16\]"):
        _spec(dynamic_batching=DynamicBatching(preferred_batch_sizes=[4, 16])).to_proto()


def test_dynamic_batching_on_a_non_batching_model_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_batch_size > 0"):
        _spec(max_batch_size=0, dynamic_batching=DynamicBatching()).to_proto()


def test_priorities_and_queue_policies_are_written() -> None:
    db = DynamicBatching(
        window="5ms", priority_levels=2, default_priority_level=2, preserve_ordering=False,
        default_queue_policy=QueuePolicy(max_queue_size=32, timeout_action="DELAY", default_timeout="100ms",
                                         allow_timeout_override=True),
        priority_queue_policy={1: QueuePolicy(max_queue_size=4)},
    )
    cfg = _spec(dynamic_batching=db).to_proto().dynamic_batching
    assert (cfg.priority_levels, cfg.default_priority_level) == (2, 2)
    assert cfg.default_queue_policy.timeout_action == mc.ModelQueuePolicy.DELAY
    assert cfg.default_queue_policy.default_timeout_microseconds == 100_000
    assert cfg.default_queue_policy.allow_timeout_override
    assert cfg.priority_queue_policy[1].max_queue_size == 4


def test_instance_groups_with_gpus_rate_limiter_and_priority() -> None:
    group = InstanceGroup(kind="gpu", count=2, gpus=[0, 1],
                          resources=[RateLimiterResource(name="R", count=2, is_global=True)], priority=3)
    cfg = _spec(instance_groups=[group]).to_proto().instance_group[0]
    assert cfg.kind == mc.ModelInstanceGroup.KIND_GPU and list(cfg.gpus) == [0, 1] and cfg.count == 2
    assert cfg.rate_limiter.priority == 3
    assert getattr(cfg.rate_limiter.resources[0], "global") is True


def test_gpus_on_a_cpu_instance_group_are_refused() -> None:
    with pytest.raises(ConfigError, match="gpus only applies to KIND_GPU"):
        _spec(instance_groups=[InstanceGroup(kind="cpu", gpus=[0])]).to_proto()


def test_instance_groups_for_cpu_hardware_use_one_instance_per_core_budget() -> None:
    assert instance_groups_for(Hardware(cpu_cores=8), threads_per_instance=2) == [InstanceGroup(kind="KIND_CPU", count=4)]
    assert instance_groups_for(Hardware(cpu_cores=1), threads_per_instance=4)[0].count == 1
    assert instance_groups_for(Hardware(cpu_cores=64), max_cpu_instances=4)[0].count == 4


def test_instance_groups_for_gpu_hardware_place_instances_on_every_gpu() -> None:
    (group,) = instance_groups_for(Hardware(cpu_cores=16, gpus=(0, 1, 2)), instances_per_gpu=2)
    assert (group.kind, group.count, tuple(group.gpus)) == ("KIND_GPU", 2, (0, 1, 2))


def test_spec_with_hardware_sizes_its_instance_groups() -> None:
    cfg = _spec(hardware=Hardware(cpu_cores=3)).to_proto()
    assert [(g.kind, g.count) for g in cfg.instance_group] == [(mc.ModelInstanceGroup.KIND_CPU, 3)]


def test_detected_hardware_on_this_machine_has_cores() -> None:
    assert Hardware.detect().cpu_cores >= 1


def test_optimization_with_ort_accelerators_cuda_graphs_and_pinned_memory() -> None:
    opt = Optimization(gpu_accelerators=[Accelerator.tensorrt(precision_mode="FP16", max_workspace_size_bytes=1 << 30)],
                       cpu_accelerators=[Accelerator.openvino()], cuda_graphs=True, input_pinned_memory=False)
    cfg = _spec(optimization=opt).to_proto().optimization
    trt = cfg.execution_accelerators.gpu_execution_accelerator[0]
    assert trt.name == "tensorrt" and trt.parameters["precision_mode"] == "FP16"
    assert trt.parameters["max_workspace_size_bytes"] == str(1 << 30)
    assert cfg.execution_accelerators.cpu_execution_accelerator[0].name == "openvino"
    assert cfg.cuda.graphs and cfg.HasField("input_pinned_memory") and not cfg.input_pinned_memory.enable


def test_warmup_version_policy_cache_parameters_and_decoupled() -> None:
    cfg = _spec(
        warmup=[Warmup(name="w", batch_size=2, inputs={"x": WarmupInput(dtype=np.float32, dims=[4], data="random")})],
        version_policy=VersionPolicy.specific(1, 3), response_cache=True, parameters={"k": "v"}, decoupled=True,
    ).to_proto()
    assert cfg.model_warmup[0].inputs["x"].random_data and cfg.model_warmup[0].batch_size == 2
    assert list(cfg.version_policy.specific.versions) == [1, 3]
    assert cfg.response_cache.enable and cfg.parameters["k"].string_value == "v"
    assert cfg.model_transaction_policy.decoupled


def test_sequence_batching_with_controls_state_and_oldest_strategy() -> None:
    seq = SequenceBatching(
        max_sequence_idle="5s", strategy="oldest", window="5ms", max_candidate_sequences=4, preferred_batch_sizes=[4],
        control_inputs=[ControlInput(name="START", kind="CONTROL_SEQUENCE_START", int32_false_true=[0, 1])],
        states=[SequenceState(input_name="S_IN", output_name="S_OUT", dtype="FP32", dims=[1], zero_initial_state=True)],
    )
    cfg = _spec(sequence_batching=seq).to_proto()
    assert cfg.WhichOneof("scheduling_choice") == "sequence_batching"
    sb = cfg.sequence_batching
    assert sb.max_sequence_idle_microseconds == 5_000_000
    assert sb.oldest.max_queue_delay_microseconds == 5000 and list(sb.oldest.preferred_batch_size) == [4]
    assert sb.control_input[0].control[0].kind == mc.ModelSequenceBatching.Control.CONTROL_SEQUENCE_START
    assert sb.state[0].initial_state[0].zero_data


def test_ensemble_spec_sets_platform_and_steps_and_no_batcher() -> None:
    spec = ModelSpec(name="ens", max_batch_size=8, inputs=[X], outputs=[Y],
                     ensemble_steps=[EnsembleStep(model_name="a", input_map={"INPUT0": "x"}, output_map={"OUTPUT0": "y"})])
    cfg = spec.to_proto()
    assert cfg.platform == "ensemble" and not cfg.HasField("dynamic_batching")
    assert cfg.ensemble_scheduling.step[0].input_map["INPUT0"] == "x"


def test_ensemble_with_instance_groups_is_refused() -> None:
    with pytest.raises(ConfigError, match="no instance groups"):
        ModelSpec(name="e", platform="ensemble", instance_groups=[InstanceGroup()],
                  ensemble_steps=[EnsembleStep(model_name="a")]).to_proto()


def test_two_schedulers_are_refused() -> None:
    with pytest.raises(ConfigError, match="exclude each other"):
        _spec(dynamic_batching=DynamicBatching(), sequence_batching=SequenceBatching()).to_proto()


def test_duplicate_tensor_names_are_refused() -> None:
    with pytest.raises(ConfigError, match="declared twice"):
        _spec(inputs=[X, X]).to_proto()


def test_invalid_dimension_is_refused() -> None:
    with pytest.raises(ConfigError, match="dimension 0"):
        _spec(inputs=[TensorSpec(name="x", dtype="FP32", dims=[0])]).to_proto()


def test_model_without_backend_or_platform_is_refused() -> None:
    with pytest.raises(ConfigError, match="neither backend nor platform"):
        ModelSpec(name="m").to_proto()


def test_extra_merges_any_field_the_spec_does_not_model() -> None:
    extra = mc.ModelConfig()
    extra.metric_tags["team"] = "search"
    cfg = _spec(extra=extra).to_proto()
    assert cfg.metric_tags["team"] == "search"


def test_scalar_reshape_to_empty_shape_is_kept() -> None:
    cfg = _spec(inputs=[TensorSpec(name="s", dtype="FP32", dims=[1], reshape=[])]).to_proto()
    assert cfg.input[0].HasField("reshape") and list(cfg.input[0].reshape.shape) == []


@pytest.mark.parametrize(
    ("batching", "message"),
    [(DynamicBatching(priority_levels=2), "default_priority_level 0"),
     (DynamicBatching(priority_levels=2, default_priority_level=1, priority_queue_policy={3: QueuePolicy()}), r"\[3\]"),
     (DynamicBatching(priority_levels=2, default_priority_level=1, preserve_ordering=True), "only one priority level")],
)
def test_priority_settings_triton_refuses_are_refused_early(batching: DynamicBatching, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _spec(dynamic_batching=batching).to_proto()
