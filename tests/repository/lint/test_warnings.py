"""Things tritonserver 2.51 accepts although they are wrong: the linter warns (never errors).

Each case is loaded on one real server (explicit model control; four loads at a time) to prove
the server accepts it, and linted to prove the linter flags it with a warning and no error.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.pymodels import ADD_SUB_PY
from tests.support.served import LoadOutcome, load_side_by_side
from tritonkit.repository.lint import LintReport, Severity, lint_repository, target_from_install
from tritonkit.server import TritonServer

pytestmark = pytest.mark.server

IO = """
input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]
"""
QUEUE = "default_queue_policy { max_queue_size: 64 }"


@dataclass(frozen=True)
class WarnCase:
    name: str
    rule: str
    body: str
    severity: Severity = Severity.WARNING
    with_config: bool = True


CASES = [
    WarnCase("window_in_microseconds", "TK106",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\ndynamic_batching {{ max_queue_delay_microseconds: 5 {QUEUE} }}'),
    WarnCase("window_too_long", "TK105",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\ndynamic_batching {{ max_queue_delay_microseconds: 5000000 {QUEUE} }}'),
    WarnCase("window_zero", "TK105",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\ndynamic_batching {{ {QUEUE} }}'),
    WarnCase("batch_dimension_in_dims", "TK306",
             'backend: "python"\nmax_batch_size: 8\n'
             'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 8, 4 ] }, '
             '{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 8, 4 ] } ]\n'
             'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 8, 4 ] }, '
             '{ name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 8, 4 ] } ]\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}"),
    WarnCase("input_declared_twice", "TK305",
             'backend: "python"\nmax_batch_size: 8\n'
             'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, '
             '{ name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
             'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}"),
    WarnCase("instance_count_zero", "TK202",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}\ninstance_group [ {{ kind: KIND_CPU count: 0 }} ]"),
    WarnCase("dynamic_batching_without_batch_size", "TK103",
             f'backend: "python"\nmax_batch_size: 0\n{IO}\ndynamic_batching {{ max_queue_delay_microseconds: 5000 }}'),
    WarnCase("default_priority_without_levels", "TK104",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 default_priority_level: 1 {QUEUE} }}"),
    WarnCase("platform_and_backend_disagree", "TK008",
             f'platform: "onnxruntime_onnx"\nbackend: "python"\nmax_batch_size: 8\n{IO}\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}"),
    WarnCase("rate_limiter_resource_count_zero", "TK203",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}\n"
             'instance_group [ { kind: KIND_CPU count: 1 rate_limiter { resources [ { name: "R" count: 0 } ] } } ]'),
    WarnCase("backend_guessed_from_file", "TK007",
             f"max_batch_size: 8\n{IO}\ndynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}"),
    WarnCase("no_config_file", "TK001", "", with_config=False),
    WarnCase("stream_input_without_decoupled", "TK504",
             'backend: "python"\nmax_batch_size: 8\n'
             'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }, '
             '{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] optional: true } ]\n'
             'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "OUTPUT1" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}"),
    WarnCase("decoupled_parameter_disagrees", "TK503",
             f'backend: "python"\nmax_batch_size: 8\n{IO}\n'
             f"dynamic_batching {{ max_queue_delay_microseconds: 5000 {QUEUE} }}\n"
             'parameters { key: "decoupled_mode" value { string_value: "true" } }'),
]


@dataclass
class Served:
    repo: Path
    server: TritonServer
    report: LintReport


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    repo = tmp_path_factory.mktemp("lint_warnings") / "repo"
    for case in CASES:
        folder = repo / case.name
        (folder / "1").mkdir(parents=True)
        (folder / "1" / "model.py").write_text(textwrap.dedent(ADD_SUB_PY).lstrip())
        if case.with_config:
            (folder / "config.pbtxt").write_text(f'name: "{case.name}"\n{case.body}\n')
    with TritonServer(repo, model_control="explicit") as server:
        report = lint_repository(repo, target=target_from_install(server.install, kind="cpu"))
        yield Served(repo, server, report)


@pytest.fixture(scope="module")
def loads(served: Served) -> dict[str, LoadOutcome]:
    """Each case loaded (and unloaded again) on the server, four at a time: each one's own outcome."""
    return load_side_by_side(served.server, [case.name for case in CASES])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_server_accepts_and_linter_warns_without_error(case: WarnCase, served: Served,
                                                       loads: dict[str, LoadOutcome]) -> None:
    findings = served.report.for_model(case.name)
    assert case.rule in {f.rule_id for f in findings if f.severity is case.severity}, [str(f) for f in findings]
    assert not [f for f in findings if f.severity is Severity.ERROR], [str(f) for f in findings]
    outcome = loads[case.name]
    assert outcome.error is None, f"{case.name}: the server refused it: {outcome.error!r}"
    assert outcome.ready, f"{case.name}: loaded but not ready"
    assert outcome.unload_error is None, f"{case.name}: {outcome.unload_error!r}"


def test_window_warning_suggests_the_microsecond_value(served: Served) -> None:
    (finding,) = [f for f in served.report.for_model("window_in_microseconds") if f.rule_id == "TK106"]
    assert "5000" in finding.hint and finding.field == "dynamic_batching.max_queue_delay_microseconds"
    lines = (served.repo / finding.file).read_text().splitlines()
    assert finding.line is not None and "max_queue_delay_microseconds: 5 " in lines[finding.line - 1]
