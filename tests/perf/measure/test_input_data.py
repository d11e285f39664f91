"""Load-test data derived from the model file, the checks of served outputs, and the failure paths of
the measurement they feed — all without a server.

Models are small ONNX graphs made here with the shapes exporters write: token ids that reach an
embedding ``Gather`` through a ``Cast``, a mask, a float feature, a string input, shared symbolic
sequence dims.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.support.paths import DATA as TEST_DATA
from tests.support.shm_refusal import refusing_server
from tritonkit.client import TensorMetadata
from tritonkit.errors import ConfigError
from tritonkit.perf.measure.analyzer import PerfAnalyzer
from tritonkit.perf.measure.input_data import (
    DEFAULT_SEQ_LEN,
    UNBOUNDED_OUTPUT_BYTES,
    SeqLen,
    derive_samples,
    find_model_file,
    missing_data_error,
    prepare_spec,
    region_for_server,
)
from tritonkit.perf.measure.ladder import request_error, unmeasured_error
from tritonkit.perf.measure.output_check import check_declared
from tritonkit.perf.measure.result import StepResult
from tritonkit.perf.measure.spec import PerfSpec, to_argv
from tritonkit.triton_releases import CLIENT_SHM_FLAG

DATA = TEST_DATA / "perf"
VOCAB = 37


def _text_model(path: Path) -> Path:
    """input_ids INT64 [batch, seq] → Cast → Gather(emb [37, 4]); mask INT64 [batch, seq]; scale FP32 [batch, 1]
    → hidden FP32 [batch, seq, 4]."""
    rng = np.random.default_rng(0)
    emb = numpy_helper.from_array(rng.standard_normal((VOCAB, 4)).astype(np.float32), "emb")
    nodes = [
        helper.make_node("Cast", ["input_ids"], ["ids32"], to=TensorProto.INT32),
        helper.make_node("Gather", ["emb", "ids32"], ["vectors"]),
        helper.make_node("Cast", ["attention_mask"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["maskf", "axis"], ["mask3"]),
        helper.make_node("Mul", ["vectors", "mask3"], ["masked"]),
        helper.make_node("Unsqueeze", ["scale", "axis1"], ["scale3"]),
        helper.make_node("Mul", ["masked", "scale3"], ["hidden"]),
    ]
    axis = numpy_helper.from_array(np.array([2], dtype=np.int64), "axis")
    axis1 = numpy_helper.from_array(np.array([2], dtype=np.int64), "axis1")
    graph = helper.make_graph(
        nodes, "text",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"]),
         helper.make_tensor_value_info("scale", TensorProto.FLOAT, ["batch", 1])],
        [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "sequence", 4])],
        [emb, axis, axis1])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return path


def _string_model(path: Path) -> Path:
    graph = helper.make_graph([helper.make_node("Identity", ["text"], ["same"])], "strings",
                              [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch", 1])],
                              [helper.make_tensor_value_info("same", TensorProto.STRING, ["batch", 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))
    return path


def test_token_ids_stay_within_the_embedding_table_they_index_through_a_cast(tmp_path: Path) -> None:
    samples, notes = derive_samples(_text_model(tmp_path / "m.onnx"), batched=True, count=4)
    ids = np.concatenate([s["input_ids"].ravel() for s in samples])
    assert ids.dtype == np.int64 and ids.min() >= 0 and ids.max() < VOCAB
    assert len(set(ids.tolist())) > 5  # really random, not a constant
    assert any(f"ids in [0, {VOCAB}) (rows of 'emb')" in n for n in notes)


def test_masks_are_ones_floats_finite_and_shared_sequence_dims_agree(tmp_path: Path) -> None:
    samples, notes = derive_samples(_text_model(tmp_path / "m.onnx"), batched=True, seq_len=SeqLen.parse("5:9"),
                                    count=3)
    assert [s["input_ids"].shape for s in samples] == [(5,), (7,), (9,)]
    for sample in samples:
        assert sample["attention_mask"].shape == sample["input_ids"].shape
        assert np.all(sample["attention_mask"] == 1)
        assert sample["scale"].shape == (1,) and np.all(np.isfinite(sample["scale"]))
    assert "variable dims sequence: length 5 to 9 (--seq-len)" in notes


def test_the_default_sequence_length_is_documented_and_used(tmp_path: Path) -> None:
    samples, _ = derive_samples(_text_model(tmp_path / "m.onnx"), batched=True, count=2)
    assert all(s["input_ids"].shape == (DEFAULT_SEQ_LEN,) for s in samples)


def test_a_model_without_batching_sends_one_item_on_its_named_batch_axis(tmp_path: Path) -> None:
    samples, _ = derive_samples(_text_model(tmp_path / "m.onnx"), batched=False, seq_len=SeqLen(6, 6), count=1)
    assert samples[0]["input_ids"].shape == (1, 6)
    assert samples[0]["scale"].shape == (1, 1)


def test_string_inputs_get_text(tmp_path: Path) -> None:
    samples, notes = derive_samples(_string_model(tmp_path / "s.onnx"), batched=True, count=1)
    assert samples[0]["text"].dtype == object and samples[0]["text"].shape == (1,)
    assert samples[0]["text"][0].startswith("tritonkit sample text")
    assert "text: short ASCII texts" in notes


@pytest.mark.parametrize("text", ["0", "9:3", "a", "4:b", "-1"])
def test_bad_seq_len_is_refused_with_the_form_it_takes(text: str) -> None:
    with pytest.raises(ConfigError) as caught:
        SeqLen.parse(text)
    assert f"--seq-len {text!r}" in caught.value.message and "16:128" in (caught.value.hint or "")


def test_prepare_writes_perf_analyzer_json_and_outputs_in_shared_memory_for_a_local_server(tmp_path: Path) -> None:
    model = _text_model(tmp_path / "repo" / "text" / "1" / "model.onnx")
    assert find_model_file(tmp_path / "repo", "text") == model
    spec = PerfSpec(model="text", url="127.0.0.1:8001")
    prepared = prepare_spec(spec, model, tmp_path / "run", batched=True, seq_len=SeqLen(3, 3))
    data = json.loads((tmp_path / "run" / "input_data.json").read_text())
    assert len(data["data"]) == 8
    first = data["data"][0]
    assert first["attention_mask"] == {"content": [1, 1, 1], "shape": [3]}
    assert all(0 <= v < VOCAB for v in first["input_ids"]["content"])
    argv = to_argv(prepared.spec)
    assert argv[argv.index("--input-data") + 1] == str(tmp_path / "run" / "input_data.json")
    assert argv[argv.index("--shared-memory") + 1] == "system"
    # hidden: [1, 3, 4] FP32 = 48 bytes, one page.
    assert argv[argv.index("--output-shared-memory-size") + 1] == "4096"


def test_prepare_keeps_the_users_data_and_a_remote_servers_outputs(tmp_path: Path) -> None:
    model = _text_model(tmp_path / "m.onnx")
    spec = PerfSpec(model="text", url="10.0.0.5:8001", input_data="mine.json")
    prepared = prepare_spec(spec, model, tmp_path / "run", batched=True, write=False)
    assert prepared.spec.input_data == "mine.json" and prepared.spec.shared_memory is None
    assert not (tmp_path / "run").exists()
    local = prepare_spec(PerfSpec(model="text", url="127.0.0.1:8001", input_data="mine.json"), model,
                         tmp_path / "run", batched=True, write=False)
    assert local.spec.shared_memory is None and "your --input-data" in local.notes[-1]


def test_variable_dims_without_data_name_every_option_that_supplies_it() -> None:
    error = missing_data_error("bert", [("input_ids", [-1]), ("pixel", [3, -1])], {})
    assert error is not None
    assert "model 'bert'" in error.message and "'input_ids' [-1]" in error.message
    assert "--shape input_ids:128 --shape pixel:3,128" in (error.hint or "")
    assert "--repo DIR" in (error.hint or "") and "--input-data FILE.json" in (error.hint or "")
    assert missing_data_error("bert", [("input_ids", [-1])], {"input_ids": [8]}) is None


def test_declared_dtype_and_shape_problems_are_named_per_output() -> None:
    declared = [TensorMetadata("y", "FP32", (4,)), TensorMetadata("label", "INT64", (1,)),
                TensorMetadata("gone", "FP32", (-1,))]
    problems = check_declared({"y": np.zeros((1, 3), np.float32), "label": np.zeros((1, 1), np.int32)}, declared,
                              max_batch_size=8)
    assert problems == [
        "output 'y' has shape [1, 3] but the model declares [1, 4]",
        "output 'label' is int32 but the model declares INT64",
        "output 'gone' is missing from the response",
    ]
    assert check_declared({"y": np.zeros((1, 4), np.float32)}, declared[:1], max_batch_size=8) == []


def test_a_failed_request_step_becomes_an_error_with_the_servers_message() -> None:
    step = StepResult(load_mode="concurrency", load_value=1.0, throughput_per_s=None, latency=None, error_count=2,
                      error_note="Thread [0] had error: index 50300 is out of bounds")
    error = request_error(PerfSpec(model="gpt2", url="127.0.0.1:8001"), "concurrency", step)
    assert str(error).startswith("requests to model 'gpt2' failed at concurrency 1 (2 failed): "
                                 "Thread [0] had error: index 50300 is out of bounds")
    assert "--repo" in (error.hint or "")


def test_a_profile_export_cut_short_by_nan_falls_back_to_the_csv(tmp_path: Path) -> None:
    """perf_analyzer's JSON writer stops at a NaN output value; the CSV still holds the step."""
    csv_path, export_path = tmp_path / "s.csv", tmp_path / "s.json"
    shutil.copyfile(DATA / "concurrency_verbose.csv", csv_path)
    text = (DATA / "concurrency_verbose.json").read_text()
    export_path.write_text(text[: len(text) // 2])
    steps = PerfAnalyzer._steps(csv_path, export_path, PerfSpec(model="m", url="127.0.0.1:8001"))
    assert steps and all(s.throughput_per_s for s in steps)
    assert all(s.latency is not None and s.latency.source == "csv" for s in steps)
    assert any("not valid JSON" in w and "NaN/inf" in w for w in steps[0].warnings)


def test_a_sweep_of_a_built_model_gets_derived_data_unless_its_grid_mixes_batching(tmp_path: Path) -> None:
    from tritonkit.builders import build_onnx, make_demo_model
    from tritonkit.perf.measure.input_data import sweep_spec

    build_onnx(make_demo_model(tmp_path / "demo.onnx"), name="demo", repo=tmp_path / "repo", runtime="python",
               kind="cpu")
    spec = PerfSpec(model="demo", url="127.0.0.1:8001")
    prepared = sweep_spec(spec, tmp_path / "repo", "demo", tmp_path / "sweep", max_batch_sizes=[1, 4])
    assert prepared.spec.input_data == str(tmp_path / "sweep" / "input_data.json")
    assert json.loads((tmp_path / "sweep" / "input_data.json").read_text())["data"][0]["x"]["shape"] == [16]
    mixed = sweep_spec(spec, tmp_path / "repo", "demo", tmp_path / "mixed", max_batch_sizes=[0, 4])
    assert mixed.spec is spec and "mix 0 and others" in mixed.notes[0]


def test_failures_are_could_not_measure_only_when_no_step_was_measured() -> None:
    from tritonkit.perf.measure.result import LatencyStats

    spec = PerfSpec(model="m", url="127.0.0.1:8001")
    failed = StepResult(load_mode="concurrency", load_value=2.0, throughput_per_s=None, latency=None, error_count=1,
                        error_note="Thread [1] had error: busy")
    measured = StepResult(load_mode="concurrency", load_value=1.0, throughput_per_s=90.0,
                          latency=LatencyStats(p50_ms=1.0, p90_ms=1.0, p95_ms=1.0, p99_ms=1.0))
    assert unmeasured_error(spec, "concurrency", [measured, failed]) is None  # the knee, not an error
    error = unmeasured_error(spec, "concurrency", [failed])
    assert error is not None and "failed at concurrency 2" in str(error) and "busy" in str(error)


def test_the_shared_memory_region_comes_from_declared_shapes_and_matches_onnx_runtime(tmp_path: Path) -> None:
    from tritonkit.builders import ort_runner
    from tritonkit.perf.measure.input_data import output_region_bytes

    model = _text_model(tmp_path / "m.onnx")
    samples, _ = derive_samples(model, batched=True, seq_len=SeqLen(2000, 2000), count=1)
    feeds = {k: v[np.newaxis] for k, v in samples[0].items()}
    actual = ort_runner(model)(feeds)["hidden"].nbytes  # [1, 2000, 4] FP32 = 32000 bytes
    assert actual == 32000
    assert output_region_bytes(model, samples[0], batched=True) == 32768  # rounded up to pages


def test_a_server_refusing_client_shared_memory_is_measured_without_the_region_saying_what_it_costs() -> None:
    """Against the refusal a Triton 2.68+ server gives (tests/support/shm_refusal.py)."""
    with refusing_server() as url:
        spec = PerfSpec(model="m", url=url, shared_memory="system", output_shared_memory_size_bytes=4096)
        plain, said = region_for_server(spec)
        assert plain.shared_memory is None and plain.output_shared_memory_size_bytes is None
        assert "--shared-memory" not in " ".join(to_argv(plain))
        assert said is not None and CLIENT_SHM_FLAG in said and "4096 B per output and request" in said
        with pytest.raises(ConfigError, match="grow without bound") as caught:
            region_for_server(replace(spec, output_shared_memory_size_bytes=UNBOUNDED_OUTPUT_BYTES))
        assert caught.value.hint is not None and "--keep-outputs" in caught.value.hint
        assert CLIENT_SHM_FLAG in caught.value.hint


def test_a_spec_without_the_output_region_asks_the_server_nothing() -> None:
    spec = PerfSpec(model="m", url="127.0.0.1:1")  # nothing listens there: a probe would fail
    assert region_for_server(spec) == (spec, None)
