"""Field-by-field differences between configs and between repositories."""

from __future__ import annotations

from pathlib import Path

from tritonkit.repository import (
    DynamicBatching,
    InstanceGroup,
    ModelRepository,
    ModelSpec,
    TensorSpec,
    diff_configs,
    diff_repositories,
    flatten_config,
)

X = TensorSpec(name="x", dtype="FP32", dims=[4])
Z = TensorSpec(name="z", dtype="INT64", dims=[1])


def _spec(**kwargs: object) -> ModelSpec:
    base: dict[str, object] = {"name": "m", "backend": "python", "max_batch_size": 8, "inputs": [X], "outputs": [Z]}
    base.update(kwargs)
    return ModelSpec(**base)  # type: ignore[arg-type]


def test_identical_configs_have_no_differences() -> None:
    assert diff_configs(_spec().to_proto(), _spec().to_proto()) == []


def test_changed_added_and_removed_fields_are_reported_by_path() -> None:
    old = _spec(dynamic_batching=DynamicBatching(window="5ms"), parameters={"a": "1"}).to_proto()
    new = _spec(dynamic_batching=DynamicBatching(window="10ms"), instance_groups=[InstanceGroup(count=2)]).to_proto()
    changes = {c.path: c for c in diff_configs(old, new)}
    window = changes["dynamic_batching.max_queue_delay_microseconds"]
    assert (window.kind, window.old, window.new) == ("changed", 5000, 10000)
    assert changes['parameters["a"].string_value'].kind == "removed"
    assert changes["instance_group[0].count"].new == 2 and changes["instance_group[0].kind"].new == "KIND_CPU"


def test_tensors_are_compared_by_name_not_position() -> None:
    y = TensorSpec(name="y", dtype="FP32", dims=[2])
    assert diff_configs(_spec(inputs=[X, y]).to_proto(), _spec(inputs=[y, X]).to_proto()) == []
    changes = diff_configs(_spec(inputs=[X]).to_proto(), _spec(inputs=[TensorSpec(name="x", dtype="FP16", dims=[4])]).to_proto())
    assert [(c.path, c.old, c.new) for c in changes] == [('input["x"].data_type', "TYPE_FP32", "TYPE_FP16")]


def test_flatten_uses_enum_names_and_keeps_empty_messages() -> None:
    flat = flatten_config(_spec(response_cache=False, dynamic_batching=DynamicBatching(window_us=0)).to_proto())
    assert flat["dynamic_batching"] == {}  # present though empty: the batcher is on
    assert flat['output["z"].data_type'] == "TYPE_INT64"


def test_repository_diff_reports_added_removed_and_changed_models(tmp_path: Path) -> None:
    a, b = ModelRepository.init(tmp_path / "a"), ModelRepository.init(tmp_path / "b")
    a.add_model(_spec(name="same"))
    b.add_model(_spec(name="same"))
    a.add_model(_spec(name="gone"))
    b.add_model(_spec(name="new"))
    a.add_model(_spec(name="tuned", dynamic_batching=DynamicBatching(window="5ms")))
    b.add_model(_spec(name="tuned", dynamic_batching=DynamicBatching(window="20ms")))
    result = {d.model: d for d in diff_repositories(a.root, b.root)}
    assert {k: v.status for k, v in result.items()} == {"gone": "removed", "new": "added", "same": "same",
                                                        "tuned": "changed"}
    assert [c.path for c in result["tuned"].changes] == ["dynamic_batching.max_queue_delay_microseconds"]
