"""Rules that need no server: ONNX files against the config, GPU targets, placeholders, selection.

The bundled server has no onnxruntime backend and no GPU, so these are checked against real ONNX
files made here and stated targets (``gpu:2``), not against a server refusing to load.
"""

from __future__ import annotations

import json
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tritonkit.errors import ConfigError, LintError
from tritonkit.repository.lint import RULES, Severity, Target, lint_repository, resolve_target


def _model(repo: Path, name: str, body: str, *, files: dict[str, bytes | str] | None = None, version: str = "1") -> Path:
    folder = repo / name
    (folder / version).mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n')
    for filename, content in (files or {}).items():
        path = folder / version / filename
        path.write_bytes(content.encode() if isinstance(content, str) else content)
    return folder


def _onnx(path: Path, *, input_dims: list[int | str], output_dims: list[int | str],
          input_type: int = TensorProto.FLOAT) -> None:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", input_type, input_dims)],
        [helper.make_tensor_value_info("y", input_type, output_dims)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))


def _onnx_model(repo: Path, name: str, tensors: str, *, mbs: int = 8, input_dims: list[int | str] | None = None,
                output_dims: list[int | str] | None = None, input_type: int = TensorProto.FLOAT) -> None:
    folder = _model(repo, name, f'backend: "onnxruntime"\nmax_batch_size: {mbs}\n{tensors}\n'
                    "dynamic_batching { max_queue_delay_microseconds: 5000 }")
    _onnx(folder / "1" / "model.onnx", input_dims=input_dims or ["N", 4], output_dims=output_dims or ["N", 4],
          input_type=input_type)


GOOD_IO = ('input [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
           'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]')


def test_onnx_file_matching_the_config_passes(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "good", GOOD_IO)
    assert "TK701" not in lint_repository(tmp_path).rule_ids("good")


def test_onnx_batch_dimension_written_into_dims_is_an_error(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "m", GOOD_IO.replace("dims: [ 4 ]", "dims: [ -1, 4 ]"))
    findings = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK701"]
    assert findings and all(f.severity is Severity.ERROR for f in findings)
    assert "batch dimension is written into dims" in findings[0].message
    assert findings[0].hint == "write dims: [4] (without the batch dimension)"


def test_onnx_data_type_mismatch_is_an_error(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "m", GOOD_IO, input_type=TensorProto.INT64)
    messages = [f.message for f in lint_repository(tmp_path).findings if f.rule_id == "TK701"]
    assert any("TYPE_FP32 in the config but TYPE_INT64" in m for m in messages)


def test_onnx_fixed_dimension_mismatch_is_an_error(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "m", GOOD_IO, input_dims=["N", 5], output_dims=["N", 5])
    findings = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK701"]
    assert {f.field for f in findings} == {"input[0].dims[0]", "output[0].dims[0]"}


def test_onnx_unknown_and_undeclared_tensor_names_are_errors(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "m", GOOD_IO.replace('name: "x"', 'name: "image"'))
    messages = [f.message for f in lint_repository(tmp_path).findings if f.rule_id == "TK701"]
    assert any("'image' is not an input" in m for m in messages)
    assert any("has input(s) ['x'] that the config does not declare" in m for m in messages)


def test_onnx_fixed_batch_of_one_with_batching_config_is_an_error(tmp_path: Path) -> None:
    _onnx_model(tmp_path, "m", GOOD_IO, input_dims=[1, 4], output_dims=[1, 4])
    messages = [f.message for f in lint_repository(tmp_path).findings if f.rule_id == "TK701"]
    assert any("fixed first dimension 1" in m for m in messages)


def test_unreadable_onnx_file_is_reported_not_raised(tmp_path: Path) -> None:
    _model(tmp_path, "m", f'backend: "onnxruntime"\nmax_batch_size: 8\n{GOOD_IO}', files={"model.onnx": "junk"})
    assert "cannot be read as ONNX" in lint_repository(tmp_path).for_model("m")[0].message


PY = 'backend: "python"\nmax_batch_size: 8\n' + GOOD_IO + "\ndynamic_batching { max_queue_delay_microseconds: 5000 }"


def test_gpu_rules_stay_silent_without_a_target(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY + '\ninstance_group [ { kind: KIND_GPU gpus: [ 3 ] } ]', files={"model.py": ""})
    ids = lint_repository(tmp_path).rule_ids("m")
    assert not ids & {"TK601", "TK602", "TK603", "TK604"}


def test_gpu_id_beyond_the_targets_gpus_is_an_error(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY + '\ninstance_group [ { kind: KIND_GPU gpus: [ 0, 3 ] } ]', files={"model.py": ""})
    report = lint_repository(tmp_path, target="gpu:2")
    (finding,) = [f for f in report.findings if f.rule_id == "TK603"]
    assert "[3]" in finding.message and finding.severity is Severity.ERROR
    assert "TK603" not in lint_repository(tmp_path, target="gpu:4").rule_ids("m")


def test_kind_gpu_is_fine_on_a_gpu_target_and_an_error_on_cpu(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY + "\ninstance_group [ { kind: KIND_GPU } ]", files={"model.py": ""})
    assert "TK602" not in lint_repository(tmp_path, target="gpu").rule_ids("m")
    assert "TK602" in lint_repository(tmp_path, target="cpu").rule_ids("m", severity=Severity.ERROR)


def test_tensorrt_on_a_cpu_target_and_gpu_accelerators_are_flagged(tmp_path: Path) -> None:
    _model(tmp_path, "trt", 'platform: "tensorrt_plan"\nmax_batch_size: 8\n' + GOOD_IO, files={"model.plan": b"x"})
    _model(tmp_path, "ort", 'backend: "onnxruntime"\nmax_batch_size: 8\n' + GOOD_IO +
           '\noptimization { execution_accelerators { gpu_execution_accelerator [ { name: "tensorrt" } ] } }',
           files={"model.onnx": b""})
    report = lint_repository(tmp_path, target="cpu", ignore=["TK701"])
    assert "TK604" in report.rule_ids("trt", severity=Severity.ERROR)
    assert "TK605" in report.rule_ids("ort", severity=Severity.WARNING)


def test_backend_seen_only_on_a_server_is_a_warning_not_an_error(tmp_path: Path) -> None:
    _model(tmp_path, "m", 'backend: "onnxruntime"\nmax_batch_size: 0\n' + GOOD_IO, files={"model.onnx": b""})
    target = Target(kind="cpu", gpu_count=0).with_backends({"python"}, complete=False, source="server x")
    (finding,) = [f for f in lint_repository(tmp_path, target=target, ignore=["TK701"]).findings if f.rule_id == "TK601"]
    assert finding.severity is Severity.WARNING and "may be missing" in finding.message


def test_placeholder_in_a_string_is_an_error_with_its_column(tmp_path: Path) -> None:
    """The server loads this (a string is a string); the backend that reads it would get '${engine_dir}'."""
    _model(tmp_path, "m", PY + '\nparameters { key: "gpt_model_path" value { string_value: "${engine_dir}" } }',
           files={"model.py": ""})
    (finding,) = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK003"]
    line = (tmp_path / "m" / "config.pbtxt").read_text().splitlines()[finding.line - 1]  # type: ignore[operator]
    assert line[finding.column - 1:].startswith("${engine_dir}")  # type: ignore[operator]


def test_commented_placeholder_is_ignored(tmp_path: Path) -> None:
    _model(tmp_path, "m", "# fill ${max_batch_size} here\n" + PY, files={"model.py": ""})
    assert "TK003" not in lint_repository(tmp_path).rule_ids("m")


def test_missing_python_model_file_is_an_error_because_the_server_would_hang(tmp_path: Path) -> None:
    """Not in the refused corpus: on 2.51 loading it does not fail, it waits forever for the stub."""
    _model(tmp_path, "m", PY)
    (finding,) = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK009"]
    assert finding.file == "m/1/" and "model.py" in finding.message and "stub" in finding.message


def test_rule_selection_and_unknown_rule_ids(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY)
    assert lint_repository(tmp_path, rules=["TK009"]).rule_ids() == {"TK009"}
    assert "TK009" not in lint_repository(tmp_path, ignore=["TK009"]).rule_ids()
    with pytest.raises(ConfigError, match="TK999"):
        lint_repository(tmp_path, rules=["TK999"])


def test_every_rule_has_a_stable_id_severity_and_title() -> None:
    assert len(RULES) >= 40
    for rule_id, r in RULES.items():
        assert rule_id == r.id and len(rule_id) == 5 and rule_id.startswith("TK") and rule_id[2:].isdigit()
        assert r.title and r.family and isinstance(r.severity, Severity)
    assert list(RULES) == sorted(RULES)


def test_report_json_carries_location_message_and_fix(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY.replace("max_queue_delay_microseconds: 5000", "preferred_batch_size: [ 16 ]"),
           files={"model.py": ""})
    data = json.loads(lint_repository(tmp_path).to_json())
    (finding,) = [f for f in data["findings"] if f["rule"] == "TK101"]
    assert finding == {
        "rule": "TK101", "severity": "error", "model": "m", "file": "m/config.pbtxt",
        "field": "dynamic_batching.preferred_batch_size[0]", "line": 6, "column": None,
        "message": "preferred_batch_size 16 exceeds max_batch_size 8",
        "hint": "use sizes <= 8, or drop preferred_batch_size",
    }
    assert data["errors"] == 1 and data["models_checked"] == 1


def test_target_parse_refuses_unknown_kinds() -> None:
    assert Target.parse("gpu:3").gpu_count == 3 and Target.parse("CPU").gpu_count == 0
    with pytest.raises(ConfigError, match="unknown lint target"):
        Target.parse("tpu")


def test_lint_of_a_missing_folder_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a folder"):
        lint_repository(tmp_path / "nope")


def test_warmup_batch_above_max_batch_size_is_an_error(tmp_path: Path) -> None:
    """Not in the corpus: tritonserver 2.51 sometimes crashes (SIGSEGV) instead of refusing this."""
    _model(tmp_path, "m", PY + '\nmodel_warmup [ { name: "w" batch_size: 16 inputs { key: "x" value { '
           'data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } } } ]', files={"model.py": ""})
    (finding,) = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK311"]
    assert finding.severity is Severity.ERROR and "batch_size 16 exceeds max_batch_size 8" in finding.message
    assert finding.field == "model_warmup[0].batch_size"


def test_raise_for_errors_carries_every_error_finding(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY.replace("max_queue_delay_microseconds: 5000", "preferred_batch_size: [ 0, 16 ]"),
           files={"model.py": ""})
    report = lint_repository(tmp_path)
    with pytest.raises(LintError) as info:
        report.raise_for_errors()
    assert len(info.value.findings) == 2 and "m/config.pbtxt:6: TK101" in str(info.value)
    lint_repository(tmp_path, rules=["TK009"]).raise_for_errors()  # no error: no raise


def test_variable_length_dim_after_the_batch_is_not_taken_for_a_batch_dimension(tmp_path: Path) -> None:
    """An input [N, L, 4] (batch, variable length, 4) served with batching is dims [-1, 4]."""
    io = GOOD_IO.replace("dims: [ 4 ]", "dims: [ -1, 4 ]")
    _onnx_model(tmp_path, "seq", io, input_dims=["N", "L", 4], output_dims=["N", "L", 4])
    report = lint_repository(tmp_path)
    assert not report.rule_ids("seq") & {"TK306", "TK701"}, [str(f) for f in report.findings]


def test_leading_dim_equal_to_max_batch_size_warns_with_both_readings(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY.replace("dims: [ 4 ]", "dims: [ 8, 4 ]"), files={"model.py": ""})
    findings = [f for f in lint_repository(tmp_path).findings if f.rule_id == "TK306"]
    assert len(findings) == 2 and all(f.severity is Severity.WARNING for f in findings)
    assert "dims: [4]" in findings[0].hint and "keep it" in findings[0].hint


def test_negative_gpu_id_is_an_error_whatever_the_target(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY + '\ninstance_group [ { kind: KIND_GPU gpus: [ 0, -1 ] } ]', files={"model.py": ""})
    for target in (None, "gpu", "gpu:8"):
        (finding,) = [f for f in lint_repository(tmp_path, target=target).findings if f.rule_id == "TK204"]
        assert "[-1]" in finding.message and finding.field == "instance_group[0].gpus"


def test_tensorrt_profiles_must_be_non_negative_indexes(tmp_path: Path) -> None:
    """The bundled server has no TensorRT backend, so this follows tritonserver's source (std::stoi >= 0)."""
    trt = 'platform: "tensorrt_plan"\nmax_batch_size: 8\n' + GOOD_IO
    _model(tmp_path, "good", trt + '\ninstance_group [ { kind: KIND_GPU profile: [ "0", "1" ] } ]',
           files={"model.plan": b"x"})
    _model(tmp_path, "bad", trt + '\ninstance_group [ { kind: KIND_GPU profile: [ "first", "-1", "" ] } ]',
           files={"model.plan": b"x"})
    report = lint_repository(tmp_path)
    assert "TK205" not in report.rule_ids("good")
    assert [f.message.split("profile ")[1].split(" ")[0] for f in report.findings
            if f.rule_id == "TK205"] == ["'first'", "'-1'", "''"]


def test_sequence_controls_report_every_problem_with_its_field(tmp_path: Path) -> None:
    _model(tmp_path, "m", PY.replace("dynamic_batching { max_queue_delay_microseconds: 5000 }", """
sequence_batching {
  control_input [
    { name: "S" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] },
    { name: "S" control [ { kind: CONTROL_SEQUENCE_START } ] }
  ]
}"""), files={"model.py": ""})
    report = lint_repository(tmp_path)
    fields = {f.rule_id: f.field for f in report.findings if f.rule_id.startswith("TK51")}
    assert fields == {
        "TK511": "sequence_batching.control_input[1].name",
        "TK512": "sequence_batching.control_input[1].control[0].kind",
        "TK513": "sequence_batching.control_input[1].control[0]",
    }


def test_resolve_target_prefers_a_stated_target_and_knows_the_bundled_backends() -> None:
    assert resolve_target() == Target()
    assert resolve_target("gpu:2") == Target.gpu(2)
    bundled = resolve_target(bundled=True)
    assert bundled.backends_complete and "python" in (bundled.backends or ())
    assert bundled.gpu_count == 0
    assert str(bundled.release) == "2.51", "the bundled server is checked for its own release"
