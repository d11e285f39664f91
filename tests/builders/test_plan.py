"""The build plan: one pure decision of batching, window and instances for every builder (no server, no files)."""

from __future__ import annotations

import pytest

from tritonkit.builders import (
    DEFAULT_INSTANCES,
    DEFAULT_MAX_BATCH_SIZE,
    WINDOW_RANGE_US,
    BatchAxis,
    BuildOptions,
    TensorInfo,
    find_batch_axis,
    plan_build,
)
from tritonkit.errors import BuildError, ConfigError
from tritonkit.repository import DEFAULT_WINDOW, to_microseconds

F32 = 1
DYNAMIC = BatchAxis("dynamic", reason="every input's first axis is variable")


def _t(name: str, *shape: int | str | None) -> TensorInfo:
    return TensorInfo(name=name, elem_type=F32, shape=tuple(shape))


def test_defaults_batch_with_the_named_default_window_and_one_cpu_instance() -> None:
    plan = plan_build(DYNAMIC, BuildOptions())
    assert plan.max_batch_size == DEFAULT_MAX_BATCH_SIZE and plan.batched and not plan.make_dynamic
    assert plan.window_us == to_microseconds(DEFAULT_WINDOW)
    assert WINDOW_RANGE_US[0] <= plan.window_us <= WINDOW_RANGE_US[1]
    assert plan.instances == DEFAULT_INSTANCES and plan.instance_kind == "cpu"
    assert plan.warnings == () and plan.preferred_batch_sizes == ()


def test_auto_kind_follows_the_gpu_count_given() -> None:
    assert plan_build(DYNAMIC, BuildOptions(kind="auto"), gpu_count=2).instance_kind == "gpu"
    assert plan_build(DYNAMIC, BuildOptions(kind="cpu"), gpu_count=2).instance_kind == "cpu"
    with pytest.raises(ConfigError, match="unknown instance kind"):
        plan_build(DYNAMIC, BuildOptions(kind="tpu"))


def test_a_fixed_first_axis_is_made_dynamic_and_remembers_its_size() -> None:
    plan = plan_build(BatchAxis("fixed", fixed_size=3), BuildOptions(max_batch_size=16))
    assert plan.make_dynamic and plan.fixed_batch_size == 3 and plan.max_batch_size == 16
    assert "fixed to 3; made dynamic" in plan.batch_note


def test_a_model_that_cannot_batch_gets_zero_or_refuses_an_explicit_size() -> None:
    axis = BatchAxis("none", reason="input 'x' is a scalar")
    plan = plan_build(axis, BuildOptions())
    assert plan.max_batch_size == 0 and "input 'x' is a scalar" in plan.batch_note
    with pytest.raises(BuildError, match="--max-batch-size 4 is impossible") as info:
        plan_build(axis, BuildOptions(max_batch_size=4), where="m.onnx")
    assert "m.onnx" in info.value.message and info.value.hint and "--max-batch-size 0" in info.value.hint


def test_zero_turns_batching_off_even_when_the_model_could_batch() -> None:
    plan = plan_build(DYNAMIC, BuildOptions(max_batch_size=0))
    assert plan.max_batch_size == 0 and plan.batch_note == "batching off as requested"


def test_a_window_outside_the_range_warns_unless_forced() -> None:
    assert "outside" in plan_build(DYNAMIC, BuildOptions(batch_window="50ms")).warnings[0]
    assert plan_build(DYNAMIC, BuildOptions(batch_window="50ms", force=True)).warnings == ()
    assert plan_build(DYNAMIC, BuildOptions(batch_window_us=7000)).window_us == 7000
    with pytest.raises(ConfigError, match="not both"):
        plan_build(DYNAMIC, BuildOptions(batch_window="5ms", batch_window_us=5000))


def test_bad_counts_are_refused_with_the_option_named() -> None:
    for fields, expect in (({"max_batch_size": -1}, "BuildOptions.max_batch_size -1: too small"),
                           ({"instances": 0}, "BuildOptions.instances 0: too small"),
                           ({"max_queue_size": -2}, "BuildOptions.max_queue_size -2: too small"),
                           ({"max_batch_size": 2**31}, "BuildOptions.max_batch_size 2147483648: too large"),
                           ({"max_batch_size": 4, "preferred_batch_sizes": (8,)}, "preferred batch sizes"),
                           ({"max_batch_size": 0, "batch_axis": True}, "--batch-axis")):
        with pytest.raises(ConfigError, match=expect):
            plan_build(DYNAMIC, BuildOptions(**fields))  # type: ignore[arg-type]


def test_preferred_sizes_are_kept_only_when_batching() -> None:
    assert plan_build(DYNAMIC, BuildOptions(preferred_batch_sizes=(4, 8))).preferred_batch_sizes == (4, 8)
    assert plan_build(DYNAMIC, BuildOptions(max_batch_size=0, preferred_batch_sizes=(4,))).preferred_batch_sizes == ()


def test_a_default_from_the_models_other_versions_replaces_the_global_default() -> None:
    assert plan_build(DYNAMIC, BuildOptions(), default_max_batch_size=2).max_batch_size == 2
    assert plan_build(DYNAMIC, BuildOptions(max_batch_size=4), default_max_batch_size=2).max_batch_size == 4


def test_without_batching_keeps_the_rest_and_says_why() -> None:
    plan = plan_build(BatchAxis("fixed", fixed_size=1), BuildOptions(instances=2))
    off = plan.without_batching("the graph does not run batches")
    assert off.max_batch_size == 0 and not off.make_dynamic and off.instances == 2
    assert off.batch_note == "not batchable: the graph does not run batches"
    assert off.warnings[-1] == "batching turned off: the graph does not run batches"


# ---------------------------------------------------------------------------- is the first axis a batch?


def test_a_rank_one_input_named_like_a_length_is_not_a_batch_axis() -> None:
    axis = find_batch_axis([_t("tokens", "L")], [_t("out", "L")])
    assert axis.kind == "none" and axis.overridable and "'L'" in axis.reason
    plan = plan_build(axis, BuildOptions())
    assert plan.max_batch_size == 0 and "--batch-axis" in plan.batch_note


def test_a_rank_one_input_with_a_batch_name_is_a_batch_axis() -> None:
    axis = find_batch_axis([_t("score", "batch")], [_t("out", "batch")])
    assert axis.kind == "dynamic" and "named like a batch axis" in axis.reason


def test_rank_one_inputs_with_unnamed_axes_are_read_as_one_vector_per_request() -> None:
    axis = find_batch_axis([_t("a", None), _t("b", None)], [_t("out", None)])
    assert axis.kind == "none" and "every input is rank 1" in axis.reason


def test_rank_one_beside_a_batched_input_sharing_its_symbol_is_batched() -> None:
    axis = find_batch_axis([_t("ids", "n_req", 16), _t("lengths", "n_req")], [_t("out", "n_req", 4)])
    assert axis.kind == "dynamic" and "'n_req'" in axis.reason


def test_batch_axis_option_overrides_the_name_but_not_the_shapes() -> None:
    plan = plan_build(find_batch_axis([_t("tokens", "seq")], [_t("out", "seq")]), BuildOptions(batch_axis=True))
    assert plan.max_batch_size == DEFAULT_MAX_BATCH_SIZE and "--batch-axis" in plan.axis_note
    scalar = find_batch_axis([_t("x")], [_t("y")])
    assert plan_build(scalar, BuildOptions(batch_axis=True)).max_batch_size == 0
    off = plan_build(DYNAMIC, BuildOptions(batch_axis=False))
    assert off.max_batch_size == 0 and "--no-batch-axis" in off.batch_note


def test_the_usual_batch_first_export_still_batches() -> None:
    axis = find_batch_axis([_t("img", "N", 3, 8, 8)], [_t("logits", "N", 5)])
    assert axis.kind == "dynamic" and axis.reason



def test_a_builder_takes_its_batching_as_build_options_or_as_their_fields_not_both() -> None:
    from tritonkit.builders.plan import batching_options

    asked = BuildOptions(max_batch_size=4, kind="cpu")
    assert batching_options(asked, {}, force=False, builder="build_onnx") is asked
    assert batching_options(None, {"max_batch_size": 4, "kind": "cpu"}, force=False, builder="build_onnx") == asked
    assert batching_options(None, {}, force=False, builder="build_onnx") == BuildOptions()
    # A build's --force (replace a version) also accepts any window.
    assert batching_options(asked, {}, force=True, builder="build_onnx").force
    with pytest.raises(ConfigError, match="both given"):
        batching_options(asked, {"instances": 2}, force=False, builder="build_onnx")
    with pytest.raises(TypeError, match="build_onnx.*instance_count"):
        batching_options(None, {"instance_count": 2}, force=False, builder="build_onnx")
