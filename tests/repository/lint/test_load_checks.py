"""Checks the server makes while it loads a model, outside ``model_config_utils.cc``: warmup data
(TK316), decoupled streams in ensembles (TK409), the python backend's parameter and
``auto_complete_config`` (TK703, TK704), rate-limiter resources (TK206: the one proven here on a
server started with ``--rate-limit=execution_count``, which the corpus server does not run).

Each is proven live on the bundled 2.51 by the corpus (``tests/lint_corpus``, cases named in
``docs/lint-coverage.md``); the cases here pin the edges read in the upstream sources that a
corpus case does not show: a batch-0 warmup sample is never read, string data files are taken
whole, an ensemble over a decoupled ensemble, literal arguments only, nothing imported.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.repository.lint.test_corpus import ECHO_MODEL_PY
from tritonkit.errors import ModelLoadError
from tritonkit.repository.lint import Severity, lint_repository
from tritonkit.server import TritonServer

IO = ('max_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n')


def _model(repo: Path, name: str, body: str, *, model_py: str | None = None) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n')
    if model_py is not None:
        (folder / "1" / "model.py").write_text(textwrap.dedent(model_py))
    return folder


def _errors(repo: Path, name: str) -> set[str]:
    return lint_repository(repo).rule_ids(name, severity=Severity.ERROR)


def test_a_warmup_sample_of_batch_zero_is_skipped_unread(tmp_path: Path) -> None:
    warmup = ('model_warmup [ { name: "w" batch_size: 0 inputs { key: "INPUT0" value { data_type: TYPE_FP32 '
              'dims: [ -1 ] } } } ]')
    _model(tmp_path, "m", f'backend: "python"\n{IO}{warmup}')
    assert "TK316" not in _errors(tmp_path, "m")
    (tmp_path / "m" / "config.pbtxt").write_text((tmp_path / "m" / "config.pbtxt").read_text().replace(
        "batch_size: 0", "batch_size: 1"))
    assert "TK316" in _errors(tmp_path, "m")


def test_warmup_file_sizes_count_the_dims_of_the_sample_and_take_strings_whole(tmp_path: Path) -> None:
    body = ('backend: "python"\nmax_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_FP16 dims: [ 2, 3 ] },'
            ' { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_FP16 '
            'dims: [ 2, 3 ] } ]\nmodel_warmup [ { name: "w" batch_size: 2 inputs { key: "INPUT0" value { data_type: '
            'TYPE_FP16 dims: [ 2, 3 ] input_data_file: "/x.bin" } } inputs { key: "TEXT" value { data_type: TYPE_STRING '
            'dims: [ 1 ] input_data_file: "t.bin" } } } ]')
    folder = _model(tmp_path, "m", body)
    (folder / "warmup").mkdir()
    (folder / "warmup" / "x.bin").write_bytes(b"\0" * 11)  # 2 x 3 FP16 = 12 bytes; "/x.bin" is joined on
    (folder / "warmup" / "t.bin").write_bytes(b"\0")
    report = lint_repository(tmp_path)
    found = [f for f in report.for_model("m") if f.rule_id == "TK316"]
    assert len(found) == 1 and "holds 11 bytes" in found[0].message and "need 12" in found[0].message
    assert not [f for f in report.for_model("m") if f.rule_id == "TK311"]  # the absolute name is found there
    (folder / "warmup" / "x.bin").write_bytes(b"\0" * 12)
    assert "TK316" not in _errors(tmp_path, "m")


def _step(name: str, reads: dict[str, str], writes: dict[str, str]) -> str:
    ins = " ".join(f'input_map {{ key: "{k}" value: "{v}" }}' for k, v in reads.items())
    outs = " ".join(f'output_map {{ key: "{k}" value: "{v}" }}' for k, v in writes.items())
    return f'{{ model_name: "{name}" model_version: -1 {ins} {outs} }}'


def _ensemble(repo: Path, name: str, steps: list[str], inputs: tuple[str, ...] = ("INPUT0",)) -> None:
    ins = ", ".join(f'{{ name: "{n}" data_type: TYPE_FP32 dims: [ 4 ] }}' for n in inputs)
    _model(repo, name, f'platform: "ensemble"\nmax_batch_size: 8\ninput [ {ins} ]\n'
           'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
           f'ensemble_scheduling {{ step [ {", ".join(steps)} ] }}')


def _composing(repo: Path) -> None:
    two = ('backend: "python"\nmax_batch_size: 8\ninput [ { name: "A" data_type: TYPE_FP32 dims: [ 4 ] }, '
           '{ name: "B" data_type: TYPE_FP32 dims: [ 4 ] } ]\noutput [ { name: "OUTPUT0" data_type: TYPE_FP32 '
           'dims: [ 4 ] } ]')
    _model(repo, "two", two, model_py="")
    _model(repo, "plain", f'backend: "python"\n{IO}', model_py="")
    _model(repo, "stream", f'backend: "python"\n{IO}model_transaction_policy {{ decoupled: true }}', model_py="")


def test_two_decoupled_streams_meeting_in_one_step_are_refused_and_one_stream_passes(tmp_path: Path) -> None:
    _composing(tmp_path)
    # The request and a stream: refused. Two streams: refused. A stream through a plain step: one stream.
    _ensemble(tmp_path, "request_and_stream", [_step("stream", {"INPUT0": "INPUT0"}, {"OUTPUT0": "s"}),
                                               _step("two", {"A": "INPUT0", "B": "s"}, {"OUTPUT0": "OUTPUT0"})])
    _ensemble(tmp_path, "two_streams", [_step("stream", {"INPUT0": "INPUT0"}, {"OUTPUT0": "s1"}),
                                        _step("stream", {"INPUT0": "INPUT0"}, {"OUTPUT0": "s2"}),
                                        _step("two", {"A": "s1", "B": "s2"}, {"OUTPUT0": "OUTPUT0"})])
    _ensemble(tmp_path, "one_stream", [_step("stream", {"INPUT0": "INPUT0"}, {"OUTPUT0": "s"}),
                                       _step("plain", {"INPUT0": "s"}, {"OUTPUT0": "p"}),
                                       _step("two", {"A": "s", "B": "p"}, {"OUTPUT0": "OUTPUT0"})])
    report = lint_repository(tmp_path)
    assert "TK409" in report.rule_ids("request_and_stream") and "TK409" in report.rule_ids("two_streams")
    assert "TK409" not in report.rule_ids("one_stream")
    two = next(f for f in report.for_model("two_streams") if f.rule_id == "TK409")
    assert "decoupled stream 1" in two.message and "decoupled stream 2" in two.message


def test_an_ensemble_over_a_decoupled_ensemble_counts_as_decoupled(tmp_path: Path) -> None:
    _composing(tmp_path)
    _ensemble(tmp_path, "inner", [_step("stream", {"INPUT0": "INPUT0"}, {"OUTPUT0": "OUTPUT0"})])
    _ensemble(tmp_path, "outer", [_step("inner", {"INPUT0": "INPUT0"}, {"OUTPUT0": "s"}),
                                  _step("two", {"A": "INPUT0", "B": "s"}, {"OUTPUT0": "OUTPUT0"})])
    assert "TK409" in lint_repository(tmp_path).rule_ids("outer")


def test_force_cpu_only_input_tensors_takes_yes_or_no_and_only_python_models_read_it(tmp_path: Path) -> None:
    for value, refused in (("yes", False), ("no", False), ("YES", True), ("", True)):
        param = f'parameters {{ key: "FORCE_CPU_ONLY_INPUT_TENSORS" value {{ string_value: "{value}" }} }}'
        _model(tmp_path / value, "m", f'backend: "python"\n{IO}{param}')
        _model(tmp_path / value, "onnx", f'backend: "onnxruntime"\n{IO}{param}')
        assert ("TK703" in _errors(tmp_path / value, "m")) is refused, value
        assert "TK703" not in _errors(tmp_path / value, "onnx")


AUTO = '''
import numpy as np

SIZE = compute()


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(config):
        {body}
'''


def _auto(repo: Path, body: str, config: str = IO, *, returns: bool = True) -> set[str]:
    """TK704's findings on model ``m``, each as ``location message``."""
    if returns:
        body += "\n        return config"
    _model(repo, "m", f'backend: "python"\n{config}', model_py=AUTO.replace("{body}", body))
    return {f"{f.location} {f.message}" for f in lint_repository(repo).for_model("m") if f.rule_id == "TK704"}


def test_auto_complete_calls_are_judged_from_literal_arguments_only(tmp_path: Path) -> None:
    assert _auto(tmp_path / "computed", "config.set_max_batch_size(SIZE)") == set()
    assert _auto(tmp_path / "branch", "if SIZE:\n            config.set_max_batch_size(1)") == set()
    found = _auto(tmp_path / "literal", "config.set_max_batch_size(1)")
    assert len(found) == 1 and "set_max_batch_size(1) is below the config's max_batch_size 8" in next(iter(found))
    assert next(iter(found)).startswith("m/1/model.py:10 ")
    assert _auto(tmp_path / "equal", "config.set_max_batch_size(8)") == set()


def test_auto_complete_tensor_properties_and_transaction_policy_follow_the_backend_utils(tmp_path: Path) -> None:
    extra = _auto(tmp_path / "a", 'config.add_output({"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [4], '
                                  '"optional": True})')
    assert any("only name, data_type, dims are taken" in m for m in extra)
    missing = _auto(tmp_path / "b", 'config.add_input({"name": "NEW", "dims": [4]})')
    assert any("missing 'data_type'" in m for m in missing)
    dims = _auto(tmp_path / "c", 'config.add_input({"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [8]})')
    assert any("dims [8], the config declares [4]" in m for m in dims)
    assert _auto(tmp_path / "d", 'config.add_input({"name": "NEW", "data_type": "TYPE_INT8", "dims": [2]})') == set()
    policy = _auto(tmp_path / "e", 'config.set_model_transaction_policy(dict(decoupled=SIZE))')
    assert policy == set()  # a computed value is left alone
    decoupled = _auto(tmp_path / "f", 'config.set_model_transaction_policy({"decoupled": True})',
                      IO + "model_transaction_policy { decoupled: false }")
    assert any("decoupled=True against the config's decoupled: false" in m for m in decoupled)
    assert _auto(tmp_path / "g", 'config.set_model_transaction_policy({"decoupled": True})') == set()
    sequence = _auto(tmp_path / "h", "config.set_dynamic_batching()", IO + "sequence_batching { }")
    assert any("set_dynamic_batching() on a model whose config uses sequence_batching" in m for m in sequence)


def test_a_model_py_that_is_not_python_is_left_to_the_server(tmp_path: Path) -> None:
    _model(tmp_path, "m", f'backend: "python"\n{IO}', model_py="class TritonPythonModel(:\n")
    assert "TK704" not in _errors(tmp_path, "m")


def _limited(repo: Path, name: str, *scopes: bool) -> None:
    groups = ", ".join(f'{{ kind: KIND_CPU count: 1 rate_limiter {{ resources [ {{ name: "R" global: {str(g).lower()} '
                       'count: 1 } ] } }' for g in scopes)
    _model(repo, name, f'backend: "python"\n{IO}instance_group [ {groups} ]', model_py=ECHO_MODEL_PY)


def test_a_resource_declared_global_and_per_device_is_a_warning_naming_the_other_model(tmp_path: Path) -> None:
    _limited(tmp_path, "per_device", False)
    _limited(tmp_path, "global_r", True)
    _limited(tmp_path, "alone", False)
    report = lint_repository(tmp_path)
    found = [f for f in report.findings if f.rule_id == "TK206"]
    assert {f.model for f in found} == {"per_device", "global_r", "alone"}
    assert all(f.severity is Severity.WARNING and "--rate-limit=execution_count" in f.message for f in found)
    assert "in model 'global_r' global" in next(f.message for f in found if f.model == "per_device")
    (tmp_path / "global_r" / "config.pbtxt").unlink()
    (tmp_path / "global_r" / "1" / "model.py").unlink()
    (tmp_path / "global_r" / "1").rmdir()
    (tmp_path / "global_r").rmdir()
    assert "TK206" not in lint_repository(tmp_path).rule_ids()


@pytest.mark.server
def test_a_rate_limited_server_refuses_what_tk206_warns_about(tmp_path: Path) -> None:
    """The bundled 2.51 started with --rate-limit=execution_count: one model whose groups declare R
    both ways is refused, as is a global R beside a loaded per-device R; a per-device R alone loads."""
    repo = tmp_path / "repo"
    _limited(repo, "mixed", True, False)
    _limited(repo, "per_device", False)
    _limited(repo, "global_r", True)
    warned = {f.model for f in lint_repository(repo).findings if f.rule_id == "TK206"}
    assert warned == {"mixed", "per_device", "global_r"}
    with TritonServer(repo, model_control="explicit", extra_args=["--rate-limit=execution_count"]) as server:
        with pytest.raises(ModelLoadError, match="is present as both global and device-specific resource"):
            server.load_model("mixed", timeout_s=60.0)
        server.load_model("per_device", timeout_s=60.0)
        with pytest.raises(ModelLoadError, match="is present as both global and device-specific resource"):
            server.load_model("global_r", timeout_s=60.0)


def _growable(repo: Path, name: str, *, same_buffer: bool, kind: str = "KIND_CPU") -> None:
    state = ('sequence_batching { state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_FP32 '
             f'dims: [ 1 ] use_same_buffer_for_input_output: {str(same_buffer).lower()} use_growable_memory: true }} ] }}')
    _model(repo, name, f'backend: "python"\n{IO}{state}\ninstance_group [ {{ kind: {kind} count: 1 }} ]',
           model_py=ECHO_MODEL_PY)


def test_growable_state_memory_needs_a_single_buffer_and_gpu_instances(tmp_path: Path) -> None:
    _growable(tmp_path, "no_single_buffer", same_buffer=False, kind="KIND_GPU")
    _growable(tmp_path, "on_cpu", same_buffer=True)
    _growable(tmp_path, "on_gpu", same_buffer=True, kind="KIND_GPU")
    report = lint_repository(tmp_path)
    assert "use_same_buffer_for_input_output: true" in next(
        f.message for f in report.for_model("no_single_buffer") if f.rule_id == "TK519")
    assert "KIND_CPU" in next(f.message for f in report.for_model("on_cpu") if f.rule_id == "TK519")
    assert "TK519" not in report.rule_ids("on_gpu")


@pytest.mark.server
def test_the_server_loads_a_growable_state_on_cpu_and_drops_the_state_of_every_sequence(tmp_path: Path) -> None:
    """Not a load refusal: the bundled 2.51 loads the model; at a sequence's start it logs the error TK519
    reports before deployment and runs the request without the state."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    repo = tmp_path / "repo"
    _growable(repo, "on_cpu", same_buffer=True)
    assert "TK519" in lint_repository(repo).rule_ids("on_cpu", severity=Severity.ERROR)
    with TritonServer(repo, model_control="explicit") as server:
        server.load_model("on_cpu", timeout_s=60.0)
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            tensor = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
            tensor.set_data_from_numpy(np.zeros((1, 4), np.float32))
            client.infer("on_cpu", [tensor], sequence_id=7, sequence_start=True, client_timeout=30.0)
        finally:
            client.close()
        log = Path(server.log_path).read_text(errors="replace")
    assert "Failed to initialize sequence state: 'use_growable_memory' can only work with KIND_GPU" in log


def test_an_execution_environment_in_the_model_folder_is_looked_at_and_one_elsewhere_is_not(tmp_path: Path) -> None:
    def env(value: str) -> str:
        return f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{value}" }} }}'

    archive = _model(tmp_path, "archive", f'backend: "python"\n{IO}{env("$$TRITON_MODEL_DIRECTORY/env.tar.gz")}')
    (archive / "env.tar.gz").write_bytes(b"\x1f\x8b")  # never opened: its presence is what the server checks first
    unpacked = _model(tmp_path, "unpacked", f'backend: "python"\n{IO}{env("$$TRITON_MODEL_DIRECTORY/env")}')
    (unpacked / "env" / "bin").mkdir(parents=True)
    (unpacked / "env" / "bin" / "activate").write_text("")
    _model(tmp_path, "elsewhere", f'backend: "python"\n{IO}{env("/opt/envs/py310.tar.gz")}')
    report = lint_repository(tmp_path)
    assert "TK705" not in report.rule_ids("archive") and "TK705" not in report.rule_ids("unpacked")
    elsewhere = [f for f in report.for_model("elsewhere") if f.rule_id == "TK705"]
    assert len(elsewhere) == 1 and elsewhere[0].severity is Severity.INFO
    assert "server's file system" in elsewhere[0].message



# The server's qa/L0_model_config/autofill_noplatform/python and autofill_noplatform_success/python at
# r26.08 (test.sh copies qa/python_models/auto_complete/model.py where a case has no model.py of its
# own): each case's config and auto_complete_config calls, rewritten here, and whether it loads.
_QA_TENSORS = {"INPUT0": ("TYPE_FP32", [4]), "INPUT1": ("TYPE_FP32", [4])}
_QA_OUTPUTS = {"OUTPUT0": ("TYPE_FP32", [4]), "OUTPUT1": ("TYPE_FP32", [4])}


def _qa_body(mbs: int, inputs: list[dict[str, object]] | None = None, outputs: list[dict[str, object]] | None = None,
             extra: str = "") -> str:
    tensors = inputs if inputs is not None else [{"name": n, "data_type": t, "dims": d} for n, (t, d) in _QA_TENSORS.items()]
    outs = outputs if outputs is not None else [{"name": n, "data_type": t, "dims": d} for n, (t, d) in _QA_OUTPUTS.items()]
    lines = [f"ins = {tensors!r}", f"outs = {outs!r}", f"config.set_max_batch_size({mbs})", *extra.splitlines(),
             "for tensor in ins:", "    config.add_input(tensor)", "for tensor in outs:", "    config.add_output(tensor)"]
    return "\n        ".join(lines)


def _qa_config(mbs: int = 0, *, input1: str = "TYPE_FP32", dims1: int = 4, extra: str = "") -> str:
    return (f"max_batch_size: {mbs}\ninput [ {{ name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }}, {{ name: \"INPUT1\" "
            f"data_type: {input1} dims: [ {dims1} ] }} ]\noutput [ {{ name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 4 ] }}, "
            f"{{ name: \"OUTPUT1\" data_type: TYPE_FP32 dims: [ 4 ] }} ]\n{extra}")


_QA_REFUSED = {  # case -> (config, auto_complete_config body, what the server's expected file says)
    "conflicting_max_batch_size": (_qa_config(6), _qa_body(4), "max_batch_size"),
    "conflicting_scheduler_sequence": (_qa_config(extra="sequence_batching { }"),
                                       _qa_body(4, extra="config.set_dynamic_batching()"), "set_dynamic_batching"),
    "input_mismatch_datatype": (_qa_config(input1="TYPE_INT32"), _qa_body(0), "TYPE_FP32, the config declares TYPE_INT32"),
    "input_mismatch_dims": (_qa_config(dims1=16), _qa_body(0), "dims [4], the config declares [16]"),
    "input_missing_datatype": (_qa_config(), _qa_body(0, inputs=[{"name": "INPUT0", "dims": [4]}]), "missing 'data_type'"),
    "input_missing_name": (_qa_config(), _qa_body(0, inputs=[{"data_type": "TYPE_FP32", "dims": [4]}]), "missing 'name'"),
    "input_wrong_property": (_qa_config(), _qa_body(0, inputs=[{"name": "INPUT1", "data_type": "TYPE_FP32", "dims": [4],
                                                               "is_shape_tensor:": True}]), "only name, data_type"),
    "output_missing_dims": (_qa_config(), _qa_body(0, outputs=[{"name": "OUTPUT1", "data_type": "TYPE_FP32"}]),
                            "missing 'dims'"),
    "model_transaction_policy_invalid_args": (_qa_config(), _qa_body(4, extra='config.set_model_transaction_policy('
                                                                        '{"invalid": "argument"})'), "only 'decoupled'"),
    "model_transaction_policy_mismatch": (_qa_config(extra="model_transaction_policy { decoupled: false }"),
                                          _qa_body(4, extra="config.set_model_transaction_policy(dict(decoupled=True))"),
                                          "decoupled=True against the config's decoupled: false"),
    "no_return": (_qa_config(), _qa_body(0), "returns nothing"),
}
_QA_LOADS = {
    "dynamic_batching": (_qa_config(), _qa_body(4, extra="config.set_dynamic_batching()")),
    "dynamic_batching_no_op": (_qa_config(4, extra="dynamic_batching { }"), _qa_body(4, extra="config.set_dynamic_batching()")),
    "model_transaction_policy": (_qa_config(), _qa_body(4, extra="config.set_model_transaction_policy(dict(decoupled=True))")),
    "model_transaction_policy_no_op": (_qa_config(extra="model_transaction_policy { decoupled: true }"),
                                       _qa_body(4, extra="config.set_model_transaction_policy(dict(decoupled=True))")),
    "incomplete_output": ('output [ { name: "OUTPUT0" data_type: TYPE_FP32 }, { name: "OUTPUT1" dims: [ 4 ] } ]\n',
                          _qa_body(0)),
}


@pytest.mark.parametrize("case", sorted(_QA_REFUSED))
def test_the_servers_own_python_auto_complete_cases_that_fail_are_tk704(tmp_path: Path, case: str) -> None:
    config, body, says = _QA_REFUSED[case]
    found = _auto(tmp_path, body, config, returns=case != "no_return")
    assert any(says in message for message in found), (case, found)


@pytest.mark.parametrize("case", sorted(_QA_LOADS))
def test_the_servers_own_python_auto_complete_cases_that_load_lint_clean(tmp_path: Path, case: str) -> None:
    config, body = _QA_LOADS[case]
    assert _auto(tmp_path, body, config) == set()



def test_a_configs_folder_is_not_taken_for_a_version(tmp_path: Path) -> None:
    """core ModelLifeCycle skips configs/ (--model-config-name's configs/<name>.pbtxt) as it skips warmup/."""
    folder = _model(tmp_path, "m", f'backend: "python"\n{IO}', model_py="")
    (folder / "configs").mkdir()
    (folder / "configs" / "h100.pbtxt").write_text('name: "m"\n')
    (folder / "other").mkdir()
    found = {f.message for f in lint_repository(tmp_path).for_model("m") if f.rule_id == "TK006"}
    assert len(found) == 1 and "'other'" in next(iter(found))
