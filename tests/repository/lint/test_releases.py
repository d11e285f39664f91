"""Lint per Triton release (``--server-version``): what 2.52–2.72 read and check, held to upstream.

The bundled server is 2.51, so newer releases cannot be loaded here. Their truth is upstream's
own: the expected messages of the server's ``qa/L0_model_config`` cases at r26.08 (model_metrics:
six refused, one warned about, one valid), and core/common sources at each release branch (the
facts in ``tritonkit.triton_releases`` name file and branch). The configs below are written for
these tests from those facts; every 2.51 claim is proven on the live server by the lint corpus
(``test_corpus.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.repository.lint import RULES, LintReport, Severity, lint_repository
from tritonkit.triton_releases import KNOWN_LINES, NEWEST_LINE

IO = ('max_batch_size: 8\n'
      'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]')


def _model(repo: Path, name: str, body: str, *, files: tuple[str, ...] = ("model.py",)) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True, exist_ok=True)
    (folder / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n')
    for filename in files:
        (folder / "1" / filename).write_bytes(b"model\n")
    return folder


def _python(repo: Path, name: str, extra: str = "", *, io: str = IO) -> Path:
    return _model(repo, name, f'backend: "python"\n{io}\n{extra}')


def _errors(report: LintReport, model: str) -> set[str]:
    return report.rule_ids(model, severity=Severity.ERROR)


def _messages(report: LintReport, model: str, rule_id: str) -> list[str]:
    return [f.message for f in report.for_model(model) if f.rule_id == rule_id]


# The server's qa/L0_model_config/model_metrics cases at r26.08: each metric_control below and the
# first words of the message the server refuses it with (expected files of invalid_config/*).
METRICS_REFUSED = {
    "no_metric_identifier": ("{ histogram_options { buckets: [ 1, 2, 4, 8 ] } }",
                             "metric control must specify 'metric_identifier'"),
    "empty_metric_family": ('{ metric_identifier { family: "" } histogram_options { buckets: [ 1, 2, 4, 8 ] } }',
                            "metric identifier must specify non-empty 'family'"),
    "no_metric_family": ("{ metric_identifier { } histogram_options { buckets: [ 1, 2, 4, 8 ] } }",
                         "metric identifier must specify non-empty 'family'"),
    "no_histogram_options": ('{ metric_identifier { family: "nv_inference_first_response_histogram_ms" } }',
                             "metric control must specify 'histogram_options'"),
    "no_buckets": ('{ metric_identifier { family: "nv_inference_first_response_histogram_ms" } '
                   "histogram_options { } }", "histogram options must specify non-empty 'buckets'"),
    "empty_buckets": ('{ metric_identifier { family: "nv_inference_first_response_histogram_ms" } '
                      "histogram_options { buckets: [ ] } }", "histogram options must specify non-empty 'buckets'"),
}
METRICS_VALID = ('{ metric_identifier { family: "nv_inference_first_response_histogram_ms" } '
                 "histogram_options { buckets: [ 1, 2, 4, 8 ] } }")
METRICS_UNKNOWN_FAMILY = ('{ metric_identifier { family: "nv_inference_request_success" } '
                          "histogram_options { buckets: [ 1, 2, 4, 8 ] } }")


def _metrics(control: str) -> str:
    return f"model_metrics {{ metric_control [ {control} ] }}"


@pytest.fixture(scope="module")
def metrics_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("metrics")
    for name, (control, _) in METRICS_REFUSED.items():
        _python(repo, name, _metrics(control))
    _python(repo, "valid_model_metrics", _metrics(METRICS_VALID))
    _python(repo, "unknown_metric_family", _metrics(METRICS_UNKNOWN_FAMILY))
    return repo


@pytest.mark.parametrize("version", ["2.52", "2.60", NEWEST_LINE])
def test_the_six_model_metrics_configs_the_server_refuses_are_errors_with_its_words(
        metrics_repo: Path, version: str) -> None:
    report = lint_repository(metrics_repo, server_version=version)
    for name, (_, server_says) in METRICS_REFUSED.items():
        assert _errors(report, name) == {"TK802"}, (name, [str(f) for f in report.for_model(name)])
        assert any(server_says in message for message in _messages(report, name, "TK802")), name


def test_a_valid_model_metrics_config_is_clean_from_2_52(metrics_repo: Path) -> None:
    for version in ("2.52", NEWEST_LINE):
        report = lint_repository(metrics_repo, server_version=version)
        said = [str(f) for f in report.for_model("valid_model_metrics") if f.severity is not Severity.INFO]
        assert not said, said


def test_an_unknown_metric_family_is_a_warning_as_the_server_warns(metrics_repo: Path) -> None:
    report = lint_repository(metrics_repo, server_version=NEWEST_LINE)
    findings = [f for f in report.for_model("unknown_metric_family") if f.severity is not Severity.INFO]
    assert [(f.rule_id, f.severity) for f in findings] == [("TK803", Severity.WARNING)]
    # The server's words (qa valid_config_with_warn/unknown_metric_family/expected at r26.08).
    assert "'nv_inference_request_success'" in findings[0].message
    assert "is not a customizable metric in Triton core" in findings[0].message


def test_on_2_51_every_model_metrics_config_is_unreadable_and_nothing_else_is_said(metrics_repo: Path) -> None:
    report = lint_repository(metrics_repo, server_version="2.51")
    for name in [*METRICS_REFUSED, "valid_model_metrics", "unknown_metric_family"]:
        assert _errors(report, name) == {"TK801"}, name
        assert not report.rule_ids(name) & {"TK802", "TK803"}, name
        (message,) = _messages(report, name, "TK801")
        assert "new in Triton 2.52 (NGC 24.11)" in message and "failed to read text proto" in message


def test_ensemble_max_inflight_requests_is_unreadable_before_2_63_and_names_it(tmp_path: Path) -> None:
    _python(tmp_path, "step")
    _model(tmp_path, "ens", 'platform: "ensemble"\n' + IO + """
ensemble_scheduling {
  max_inflight_requests: 0
  step [ { model_name: "step" model_version: -1 input_map { key: "INPUT0" value: "INPUT0" }
           output_map { key: "OUTPUT0" value: "OUTPUT0" } } ]
}""", files=())
    old = lint_repository(tmp_path, server_version="2.62")
    (finding,) = [f for f in old.for_model("ens") if f.rule_id == "TK801"]
    # Written with its zero value it is still a field 2.62 cannot read.
    assert finding.field == "ensemble_scheduling.max_inflight_requests" and "2.63 (NGC 25.11)" in finding.message
    assert finding.line == 7
    assert "TK801" not in lint_repository(tmp_path, server_version="2.63").rule_ids("ens")


def test_torch_aoti_is_refused_before_2_67_and_finds_model_pt2_from_2_68(tmp_path: Path) -> None:
    _model(tmp_path, "aoti", f'platform: "torch_aoti"\n{IO}', files=("model.pt2",))
    _model(tmp_path, "aoti_named", f'backend: "pytorch"\nplatform: "torch_aoti"\n{IO}\n'
                                   'default_model_filename: "model.pt2"', files=("model.pt2",))
    before = lint_repository(tmp_path, server_version="2.66")
    assert _errors(before, "aoti") == {"TK008"} and _errors(before, "aoti_named") == {"TK008"}
    assert any("new in Triton 2.67 (NGC 26.03)" in m for m in _messages(before, "aoti", "TK008"))
    # 2.67 fills in model.pt for every pytorch config without a file name (core r26.03); 2.68 model.pt2.
    first = lint_repository(tmp_path, server_version="2.67")
    assert _errors(first, "aoti") == {"TK009"} and "model.pt" in _messages(first, "aoti", "TK009")[0]
    assert not _errors(first, "aoti_named")
    for version in ("2.68", NEWEST_LINE):
        assert not _errors(lint_repository(tmp_path, server_version=version), "aoti")


def test_the_libtorch_alias_is_refused_by_every_release_with_the_reason_of_each(tmp_path: Path) -> None:
    _model(tmp_path, "alias", f'platform: "libtorch"\n{IO}', files=("model.pt",))
    old = lint_repository(tmp_path, server_version="2.67")
    new = lint_repository(tmp_path, server_version="2.68")
    assert _errors(old, "alias") == {"TK008"} == _errors(new, "alias")
    assert "does not know it" in _messages(old, "alias", "TK008")[0]
    assert "refuses the platform/backend pair" in _messages(new, "alias", "TK008")[0]
    assert all("pytorch_libtorch" in f.hint for f in new.for_model("alias") if f.rule_id == "TK008")


def test_a_model_pt2_alone_tells_the_backend_only_from_2_68(tmp_path: Path) -> None:
    _model(tmp_path, "bare", IO, files=("model.pt2",))
    assert "TK011" in _errors(lint_repository(tmp_path, server_version="2.67"), "bare")
    assert "TK011" not in _errors(lint_repository(tmp_path, server_version="2.68"), "bare")


BIG = 2**32


@pytest.mark.parametrize(("dims", "overflows"), [
    ([BIG, BIG], True),
    ([BIG, BIG, -1], True),      # counted left to right: the overflow comes before the -1
    ([-1, BIG, BIG], False),     # a -1 first makes the count variable-size
    ([2**31, 2**31, 2], True),   # 2^62 fits; times 2 is 2^63, one above INT64_MAX
    ([2**31, 2**31], False),
])
def test_an_element_count_over_int64_is_refused_from_2_67(tmp_path: Path, dims: list[int], overflows: bool) -> None:
    io = (f'max_batch_size: 8\ninput [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ {", ".join(map(str, dims))} ] }} ]\n'
          'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]')
    _python(tmp_path, "big", io=io)
    old = lint_repository(tmp_path, server_version="2.66")
    new = lint_repository(tmp_path, server_version="2.67")
    if not overflows:
        assert "TK804" not in old.rule_ids("big") | new.rule_ids("big")
        return
    assert new.rule_ids("big", severity=Severity.ERROR) >= {"TK804"}
    assert old.rule_ids("big", severity=Severity.WARNING) >= {"TK804"} and "TK804" not in _errors(old, "big")


def test_an_output_count_overflows_only_where_a_reshape_makes_the_server_count_it(tmp_path: Path) -> None:
    io = ('max_batch_size: 8\ninput [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
          f'output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ {BIG}, {BIG} ] }} ]')
    _python(tmp_path, "plain", io=io)
    _python(tmp_path, "reshaped", io=io.replace(f"{BIG} ] }} ]", f"{BIG} ] reshape {{ shape: [ {BIG}, {BIG} ] }} }} ]"))
    report = lint_repository(tmp_path, server_version=NEWEST_LINE)
    assert "TK804" not in report.rule_ids("plain")
    assert {f.field for f in report.for_model("reshaped") if f.rule_id == "TK804"} == {
        "output[0].dims", "output[0].reshape"}


def test_a_label_file_outside_the_model_folder_is_refused_from_2_66(tmp_path: Path) -> None:
    (tmp_path / "labels.txt").write_text("a\nb\nc\nd\n")
    outside = IO.replace('"OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ]',
                         '"OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] label_filename: "../labels.txt"')
    _python(tmp_path, "outside", io=outside)
    inside = _python(tmp_path, "inside", io=outside.replace("../labels.txt", "/labels.txt"))
    (inside / "labels.txt").write_text("a\nb\nc\nd\n")  # an absolute name is joined onto the model folder
    assert "TK805" not in lint_repository(tmp_path, server_version="2.65").rule_ids()
    report = lint_repository(tmp_path, server_version="2.66")
    assert _errors(report, "outside") == {"TK805"} and "TK805" not in report.rule_ids("inside")


def test_a_sibling_folder_sharing_the_model_name_passes_the_prefix_test_until_2_70(tmp_path: Path) -> None:
    sibling = tmp_path / "labelledx"
    sibling.mkdir()
    (sibling / "labels.txt").write_text("a\n")
    _python(tmp_path, "labelled", io=IO.replace('"OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ]',
                                                '"OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] '
                                                'label_filename: "../labelledx/labels.txt"'))
    # 2.66–2.69 compare string prefixes ("…/labelled" starts "…/labelledx"); 2.70 stops at a separator.
    assert "TK805" not in lint_repository(tmp_path, server_version="2.69").rule_ids("labelled")
    assert "TK805" in lint_repository(tmp_path, server_version="2.70").rule_ids("labelled")


def _strategy(path: str) -> str:
    return f'dynamic_batching {{ }}\nparameters {{ key: "TRITON_BATCH_STRATEGY_PATH" value {{ string_value: "{path}" }} }}'


def test_a_batching_strategy_library_must_lie_in_the_model_folder_from_2_70(tmp_path: Path) -> None:
    _python(tmp_path, "outside", _strategy("/opt/strategies/libbatch.so"))
    _python(tmp_path, "relative", _strategy("libbatch.so"))
    present = _python(tmp_path, "present", _strategy("/models/present/libbatch.so"))
    (present / "libbatch.so").write_bytes(b"\x7fELF")
    _python(tmp_path, "missing", _strategy("/models/missing/libbatch.so"))
    old = lint_repository(tmp_path, server_version="2.69")
    new = lint_repository(tmp_path, server_version="2.70")
    for name in ("outside", "relative"):
        assert "TK806" not in _errors(old, name) and "TK806" in old.rule_ids(name, severity=Severity.WARNING)
        assert "TK806" in _errors(new, name)
        assert "escapes model repository" in _messages(new, name, "TK806")[0]
    assert "TK806" not in old.rule_ids("present") | new.rule_ids("present")
    assert "TK806" in _errors(old, "missing") & _errors(new, "missing")


def test_a_folder_name_with_two_dots_is_a_warning_for_2_67_only(tmp_path: Path) -> None:
    _python(tmp_path, "a..b")
    assert "TK807" in lint_repository(tmp_path, server_version="2.67").rule_ids("a..b", severity=Severity.WARNING)
    for version in ("2.66", "2.68"):
        assert "TK807" not in lint_repository(tmp_path, server_version=version).rule_ids("a..b")


def test_without_a_release_lint_checks_for_the_newest_line(tmp_path: Path) -> None:
    _python(tmp_path, "m", _metrics(METRICS_REFUSED["no_buckets"][0]))
    report = lint_repository(tmp_path)
    assert str(report.target.release) == NEWEST_LINE and _errors(report, "m") == {"TK802"}
    assert f"for Triton {NEWEST_LINE}" in report.summary()


def test_an_unknown_server_version_is_refused_with_the_known_lines(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not a Triton release tritonkit knows") as caught:
        lint_repository(tmp_path, server_version="2.50")
    assert caught.value.hint is not None and all(line in caught.value.hint for line in KNOWN_LINES)
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--server-version", "3.1"])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "error: --server-version '3.1' is not a Triton release" in result.output and "2.73 (NGC 26.09)" in result.output


@pytest.mark.parametrize(("given", "says"), [("２.６０", "non-ASCII digit ('２', U+FF12)"),
                                            ("2.60.0.1", "write MAJOR.MINOR (2.60), MAJOR.MINOR.PATCH")])
def test_repo_lint_refuses_a_server_version_not_written_exactly(tmp_path: Path, given: str, says: str) -> None:
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--server-version", given])
    assert result.exit_code == 2 and "Traceback" not in result.output, result.output
    assert f"error: --server-version {given!r}" in result.output and says in result.output
    assert "fix:" in result.output and "for Triton" not in result.output  # nothing was linted


def test_a_release_is_named_by_line_version_or_ngc_tag(tmp_path: Path) -> None:
    for given in ("2.59", "2.59.1", "25.07", "r25.06"):
        assert str(lint_repository(tmp_path, server_version=given).target.release) == "2.59", given


def test_lint_help_lists_the_known_lines_and_list_rules_says_which_release_a_rule_comes_from() -> None:
    runner = CliRunner()
    help_text = " ".join(runner.invoke(main, ["repo", "lint", "--help"]).output.split())
    assert all(f"{line} (NGC" in help_text for line in KNOWN_LINES)
    listed = runner.invoke(main, ["repo", "lint", "--list-rules"]).output
    assert "TK802  error" in listed and "(Triton 2.52+)" in listed
    rules = json.loads(runner.invoke(main, ["repo", "lint", "--list-rules", "--format", "json"]).output)
    assert {r["id"]: r["releases"] for r in rules}["TK805"] == "2.66+"


def test_every_release_rule_says_which_release_it_comes_from() -> None:
    release_rules = [r for r in RULES.values() if r.family == "release"]
    assert len(release_rules) >= 7
    assert all(r.releases for r in release_rules)
    assert all(RULES[r].releases for r in ("TK008", "TK009", "TK011"))


def test_the_json_report_names_the_release_and_where_it_came_from(tmp_path: Path) -> None:
    _python(tmp_path, "m")
    data = json.loads(CliRunner().invoke(main, ["repo", "lint", str(tmp_path), "--server-version", "2.60",
                                                "--format", "json"]).output)
    assert data["target"]["server_version"] == "2.60" and data["target"]["server_version_from"] == "--server-version"


def test_tensorrt_allocation_strategy_is_checked_from_2_58_as_the_qa_cases_say(tmp_path: Path) -> None:
    """qa/L0_model_config/custom_parameters/tensorrt at r26.08: UNKNOWN refused, STATIC and
    ON_PROFILE_CHANGE accepted, no parameter accepted."""
    for name, value in (("unknown", "UNKNOWN"), ("static", "STATIC"), ("on_change", "ON_PROFILE_CHANGE")):
        _model(tmp_path, name, f'platform: "tensorrt_plan"\n{IO}\nparameters {{ key: '
                               f'"execution_context_allocation_strategy" value {{ string_value: "{value}" }} }}',
               files=("model.plan",))
    new = lint_repository(tmp_path, server_version="2.58")
    assert "TK808" in _errors(new, "unknown") and "Invalid value for" in _messages(new, "unknown", "TK808")[0]
    assert "TK808" not in new.rule_ids("static") | new.rule_ids("on_change")
    old = lint_repository(tmp_path, server_version="2.57")
    assert "TK808" in old.rule_ids("static", severity=Severity.WARNING) and "TK808" not in _errors(old, "unknown")


def test_a_report_for_2_73_says_its_facts_are_carried_over_from_2_72(tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    report = lint_repository(tmp_path, server_version="2.73")
    assert "for Triton 2.73 (" in report.summary() and "carried over from 2.72: r26.09 not read" in report.summary()
    assert report.to_dict()["target"]["server_version_facts_read_at"] == "r26.08"
    older = lint_repository(tmp_path, server_version="2.72")
    assert "carried over" not in older.summary() and older.to_dict()["target"]["server_version_facts_read_at"] == "r26.08"
