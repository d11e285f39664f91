"""TensorRT plans: the profile maths, flags, config and layout — everything that needs no GPU.

This machine has no GPU and no tensorrt. The real engine build is checked to stop with a clear
message here; the layout and config are checked with a fake engine builder (it returns a few
bytes instead of an engine), because TensorRT cannot run here.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from click.testing import CliRunner
from tritonclient.grpc import model_config_pb2 as mc

from tests.support import onnx_models as models
from tritonkit.builders import (
    ProfileShapes,
    TensorInfo,
    TensorRTOptions,
    build_tensorrt,
    builder_flags,
    derive_profile,
    make_demo_model,
    parse_dim_range,
    parse_size_bytes,
    tensorrt_model_spec,
)
from tritonkit.cli import main
from tritonkit.errors import BuildError, ConfigError, MissingComponentError
from tritonkit.repository import read_config

F32 = 1


def _img(shape: tuple[int | str | None, ...] = ("N", 3, "H", "W")) -> TensorInfo:
    return TensorInfo(name="img", elem_type=F32, shape=shape)


def test_batch_axis_runs_from_one_to_max_and_optimises_for_max() -> None:
    [profile] = derive_profile([_img(("N", 3, 224, 224))], max_batch_size=32)
    assert profile == ProfileShapes("img", (1, 3, 224, 224), (32, 3, 224, 224), (32, 3, 224, 224))


def test_opt_batch_size_is_honoured_and_bounded() -> None:
    [profile] = derive_profile([_img(("N", 3, 8, 8))], max_batch_size=16, opt_batch_size=4)
    assert profile.opt[0] == 4
    with pytest.raises(ConfigError, match="within 1..max_batch_size"):
        derive_profile([_img(("N", 3, 8, 8))], max_batch_size=16, opt_batch_size=17)


def test_dynamic_axes_take_their_range_by_input_axis_or_by_symbol() -> None:
    [by_axis] = derive_profile([_img()], max_batch_size=8, dim_ranges={"img:2": (32, 224, 512), "img:3": (32, 224, 512)})
    assert (by_axis.min, by_axis.opt, by_axis.max) == ((1, 3, 32, 32), (8, 3, 224, 224), (8, 3, 512, 512))
    ids = TensorInfo(name="ids", elem_type=7, shape=("batch", "seq"))
    mask = TensorInfo(name="mask", elem_type=7, shape=("batch", "seq"))
    profile = derive_profile([ids, mask], max_batch_size=4, dim_ranges={"seq": (1, 128, 512)})
    assert [p.max for p in profile] == [(4, 512), (4, 512)]


def test_dynamic_axis_without_a_range_names_the_option_to_add() -> None:
    with pytest.raises(ConfigError) as info:
        derive_profile([_img()], max_batch_size=8, dim_ranges={"img:2": (32, 224, 512)})
    assert "axis 3 ('W')" in info.value.message
    assert info.value.hint is not None and "--dim-range img:3=MIN:OPT:MAX" in info.value.hint


def test_non_batching_model_needs_a_range_for_a_dynamic_first_axis_too() -> None:
    [profile] = derive_profile([_img(("N", 4))], max_batch_size=0, dim_ranges={"N": (1, 2, 3)})
    assert (profile.min, profile.opt, profile.max) == ((1, 4), (2, 4), (3, 4))


def test_unused_or_disordered_ranges_are_refused() -> None:
    with pytest.raises(ConfigError, match="matches no dynamic input axis"):
        derive_profile([_img(("N", 3, 8, 8))], max_batch_size=8, dim_ranges={"img:5": (1, 2, 3)})
    with pytest.raises(ConfigError, match="1 <= min <= opt <= max"):
        derive_profile([_img()], max_batch_size=8, dim_ranges={"H": (64, 32, 128), "W": (1, 1, 1)})
    with pytest.raises(ConfigError, match="batch axis"):
        derive_profile([_img(("N", 3, 8, 8))], max_batch_size=8, dim_ranges={"img:0": (1, 2, 3)})


def test_cli_parsers_for_ranges_and_sizes() -> None:
    assert parse_dim_range("img:2=32:224:512") == ("img:2", (32, 224, 512))
    assert parse_dim_range("seq=1:128:512") == ("seq", (1, 128, 512))
    assert parse_size_bytes("4GiB") == 4 << 30 and parse_size_bytes("512MB") == 512_000_000
    with pytest.raises(ConfigError):
        parse_dim_range("img:2=32-224-512")
    with pytest.raises(ConfigError):
        parse_size_bytes("4 gigs")


def test_builder_flags_follow_the_options() -> None:
    assert builder_flags(TensorRTOptions()) == []
    assert builder_flags(TensorRTOptions(fp16=True, int8=True)) == ["FP16", "INT8"]


def test_config_is_a_tensorrt_plan_on_gpus() -> None:
    inputs = [_img(("N", 3, "H", "W"))]
    outputs = [TensorInfo(name="feat", elem_type=F32, shape=("N", 4))]
    config = tensorrt_model_spec(name="cnn", inputs=inputs, outputs=outputs, max_batch_size=16, window_us=10_000,
                                 instances=2, cuda_graphs=True).to_proto()
    assert config.platform == "tensorrt_plan" and config.max_batch_size == 16
    assert list(config.input[0].dims) == [3, -1, -1] and list(config.output[0].dims) == [4]
    assert config.dynamic_batching.max_queue_delay_microseconds == 10_000
    assert config.instance_group[0].kind == mc.ModelInstanceGroup.KIND_GPU and config.instance_group[0].count == 2
    assert config.optimization.cuda.graphs


def test_real_build_stops_with_a_clear_message_without_gpu_or_tensorrt(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    with pytest.raises(MissingComponentError) as info:
        build_tensorrt(model, name="demo_trt", repo=tmp_path / "repo")
    assert "tensorrt" in info.value.message.lower() or "GPU" in info.value.message
    assert info.value.hint is not None and "GPU" in info.value.hint
    assert not (tmp_path / "repo").exists()


def test_cli_tensorrt_stops_with_exit_2_and_the_fix(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    result = CliRunner().invoke(main, ["build", "tensorrt", str(model), "--name", "demo_trt",
                                       "--repo", str(tmp_path / "repo")])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and "  fix: " in result.stderr and "Traceback" not in result.output


def test_layout_and_config_with_a_fake_engine_builder(tmp_path: Path) -> None:
    """Fake: TensorRT cannot run here, so the engine builder returns marker bytes; everything around it is real."""
    seen: dict[str, object] = {}

    def fake_engine(onnx_path: Path, profile: Sequence[ProfileShapes], options: TensorRTOptions) -> bytes:
        seen.update(path=onnx_path, profile=list(profile), flags=builder_flags(options))
        return b"fake-plan"

    model = models.save(models.make_fixed_batch_linear(), tmp_path / "fixed.onnx")
    result = build_tensorrt(model, name="lin_trt", repo=tmp_path / "repo", max_batch_size=16, fp16=True,
                            engine_builder=fake_engine)
    assert (result.model_dir / "1" / "model.plan").read_bytes() == b"fake-plan"
    config = read_config(result.model_dir / "config.pbtxt")
    assert config.platform == "tensorrt_plan" and config.max_batch_size == 16 and list(config.input[0].dims) == [4]
    assert seen["flags"] == ["FP16"]
    assert seen["profile"] == [ProfileShapes("x", (1, 4), (16, 4), (16, 4))]
    # The fixed batch axis was made dynamic in the file handed to TensorRT, not in the user's file.
    assert seen["path"] != model


def test_int8_needs_an_explicitly_quantized_model(tmp_path: Path) -> None:
    model = make_demo_model(tmp_path / "demo.onnx")
    with pytest.raises(BuildError, match="explicitly quantized"):
        build_tensorrt(model, name="demo_int8", repo=tmp_path / "repo", int8=True,
                       engine_builder=lambda *_: b"never")
    assert not (tmp_path / "repo").exists()


def test_fixed_batch_that_cannot_change_is_refused_before_the_engine_build(tmp_path: Path) -> None:
    """Fake engine builder: it must never be reached, because ONNX Runtime proves first that the graph cannot batch."""
    def never(*_: object) -> bytes:
        raise AssertionError("the engine builder ran")

    model = models.save(models.make_fixed_batch_reshape(), tmp_path / "fixed.onnx")
    with pytest.raises(BuildError) as info:
        build_tensorrt(model, name="r_trt", repo=tmp_path / "repo", max_batch_size=64, engine_builder=never)
    assert "fixed to 1" in info.value.message and "Reshape" in info.value.message
    assert not (tmp_path / "repo").exists()


def _fake_engine(onnx_path: Path, profile: Sequence[ProfileShapes], options: TensorRTOptions) -> bytes:
    return b"not an engine"


def test_tensorrt_and_onnx_builds_decide_batching_with_the_same_plan(tmp_path: Path) -> None:
    """Fake engine builder (no GPU here): only the config and layout are compared."""
    from tritonkit.builders import build_onnx

    for make, name in ((models.make_fixed_batch_linear, "fixed"), (models.make_sequence_input, "seq")):
        path = models.save(make(), tmp_path / f"{name}.onnx")
        ranges = {"L": (1, 16, 64)} if name == "seq" else None
        trt = build_tensorrt(path, name=f"{name}_trt", repo=tmp_path / "repo", dim_ranges=ranges,
                             engine_builder=_fake_engine)
        ort = build_onnx(path, name=f"{name}_ort", repo=tmp_path / "repo", runtime="python", kind="gpu")
        assert trt.plan is not None
        assert (trt.plan.max_batch_size, trt.plan.window_us, trt.plan.batch_note) == \
               (ort.plan.max_batch_size, ort.plan.window_us, ort.plan.batch_note), name
        assert trt.config.dynamic_batching == ort.config.dynamic_batching


def test_a_tensorrt_version_is_added_beside_the_others(tmp_path: Path) -> None:
    path = make_demo_model(tmp_path / "demo.onnx")
    build_tensorrt(path, name="t", repo=tmp_path / "repo", engine_builder=_fake_engine)
    second = build_tensorrt(path, name="t", repo=tmp_path / "repo", version=2, engine_builder=_fake_engine)
    assert second.outcome == "added version 2 beside 1" and "added version 2 beside 1" in second.summary()
    assert sorted(p.name for p in (tmp_path / "repo" / "t").iterdir()) == ["1", "2", "config.pbtxt"]


def test_a_tensorrt_build_takes_build_options_and_honours_the_queue_bound(tmp_path: Path) -> None:
    """Fake engine builder (no GPU here): the batching options reach the config; a CPU kind is refused."""
    from tritonkit.builders import BuildOptions

    path = make_demo_model(tmp_path / "demo.onnx")
    batching = BuildOptions(max_batch_size=4, batch_window="5ms", instances=2, max_queue_size=16)
    result = build_tensorrt(path, name="q", repo=tmp_path / "repo", batching=batching, engine_builder=_fake_engine)
    config = read_config(result.model_dir / "config.pbtxt")
    assert config.max_batch_size == 4 and config.dynamic_batching.max_queue_delay_microseconds == 5000
    assert config.dynamic_batching.default_queue_policy.max_queue_size == 16
    assert [(g.count, g.kind) for g in config.instance_group] == [(2, mc.ModelInstanceGroup.KIND_GPU)]
    with pytest.raises(ConfigError, match="runs on the GPU"):
        build_tensorrt(path, name="c", repo=tmp_path / "repo", batching=BuildOptions(kind="cpu"),
                       engine_builder=_fake_engine)
    assert not (tmp_path / "repo" / "c").exists()
