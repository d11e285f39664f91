"""The linter held to the real server: every config in ``tests/lint_corpus/refused`` is refused by
tritonserver 2.51 **and** reported as an error; every config in ``loads`` loads **and** lints clean.

One real server (explicit model control) serves the whole corpus; each case is one
``load_model`` call. Most cases are loaded four at a time (the server loads on parallel threads;
each load is its own request, and the server names the failed model in its answer and its log);
those that share composing models (``needs``) or use the sequence batcher load one by one.

The target is the bundled install itself: its backend folder holds only the python backend, so
the onnxruntime and tensorrt cases are refused for a missing backend, which is exactly what
TK601 says (those two rules concern backends the bundled server lacks). The release is the one
the live server reports (2.51): the cases with fields or platforms of newer releases
(``model_metrics``, ``max_inflight_requests``, ``torch_aoti``) are refused by it, as lint says.
"""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper

from tests.support.paths import LINT_CORPUS, ROOT
from tests.support.served import LoadOutcome, RestartingServer
from tritonkit.errors import ModelLoadError
from tritonkit.repository.lint import LintReport, Severity, lint_repository, target_from_install
from tritonkit.triton_releases import BUNDLED_LINE, CONFIG_FIELDS, PLATFORM_ALIASES, PLATFORMS, release

pytestmark = pytest.mark.server



#: Copies its first input to every declared output (cast to the output's type); streams when decoupled.
ECHO_MODEL_PY = textwrap.dedent('''
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            config = json.loads(args["model_config"])
            self.outputs = [(o["name"], pb_utils.triton_string_to_numpy(o["data_type"])) for o in config["output"]]
            self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)

        def execute(self, requests):
            responses = []
            for request in requests:
                inputs = request.inputs()
                x = inputs[0].as_numpy() if inputs else np.zeros((1, 1), np.float32)
                tensors = [pb_utils.Tensor(name, x.astype(dtype)) for name, dtype in self.outputs]
                response = pb_utils.InferenceResponse(output_tensors=tensors)
                if self.decoupled:
                    sender = request.get_response_sender()
                    sender.send(response, flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                else:
                    responses.append(response)
            return None if self.decoupled else responses
''').lstrip()


@dataclass(frozen=True)
class Case:
    """One corpus configuration and what its header says about it."""

    kind: str
    name: str
    folder: Path
    expect: tuple[str, ...] = ()
    server_says: str = ""
    why: str = ""
    versions: tuple[str, ...] = ("1",)
    files: tuple[str, ...] | None = None
    needs: tuple[str, ...] = field(default=())


def _read_case(kind: str, folder: Path) -> Case:
    meta: dict[str, str] = {}
    for line in (folder / "config.pbtxt").read_text().splitlines():
        if not line.startswith("# "):
            break
        key, _, value = line[2:].partition(":")
        meta[key.strip()] = value.strip()
    versions = () if meta.get("versions") == "-" else tuple(meta.get("versions", "1").split())
    return Case(
        kind=kind,
        name=folder.name,
        folder=folder,
        expect=tuple(meta.get("expect", "").split()),
        server_says=meta.get("server", ""),
        why=meta.get("why", ""),
        versions=versions,
        files=tuple(meta["files"].split()) if "files" in meta else None,
        needs=tuple(meta.get("needs", "").split()),
    )


def _cases(kind: str) -> list[Case]:
    return [_read_case(kind, p) for p in sorted((LINT_CORPUS / kind).iterdir()) if (p / "config.pbtxt").is_file()]


REFUSED = _cases("refused")
LOADS = _cases("loads")
SHARED = _cases("shared")


def _identity_onnx(path: Path) -> None:
    """A valid ONNX model matching the corpus tensors: INPUT0 FP32 [N, 4] -> OUTPUT0 FP32 [N, 4]."""
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])], "identity",
        [helper.make_tensor_value_info("INPUT0", TensorProto.FLOAT, ["N", 4])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.FLOAT, ["N", 4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save_model(model, str(path))


#: A case's ``auto_complete_config`` body (python-backend cases): put into the echo model as its
#: ``TritonPythonModel.auto_complete_config(auto_complete_model_config)``.
AUTO_COMPLETE_FILE = "auto_complete_config.txt"


def _echo_model(case_folder: Path) -> str:
    body = case_folder / AUTO_COMPLETE_FILE
    if not body.is_file():
        return ECHO_MODEL_PY
    method = ("    @staticmethod\n    def auto_complete_config(auto_complete_model_config):\n"
              + textwrap.indent(body.read_text(), " " * 8) + "        return auto_complete_model_config\n\n")
    return ECHO_MODEL_PY.replace("class TritonPythonModel:\n", "class TritonPythonModel:\n" + method)


def _materialise(case: Case, repo: Path) -> None:
    """Copy the case into ``repo`` and make its version folders and model files."""
    target = repo / case.name
    shutil.copytree(case.folder, target, ignore=shutil.ignore_patterns(AUTO_COMPLETE_FILE))
    text = (target / "config.pbtxt").read_text()
    python = 'backend: "python"' in text
    files = case.files if case.files is not None else (("model.py",) if python else ())
    for version in case.versions:
        vdir = target / version
        vdir.mkdir()
        for name in files:
            if name == "model.py":
                (vdir / name).write_text(_echo_model(case.folder))
            elif name == "model.onnx":
                _identity_onnx(vdir / name)
            else:
                (vdir / name).write_bytes(b"not a real engine\n")


@dataclass
class Corpus:
    """The corpus laid out as one repository, served by one real server and linted once."""

    repo: Path
    server: RestartingServer
    report: LintReport

    def errors(self, model: str) -> set[str]:
        return self.report.rule_ids(model, severity=Severity.ERROR)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Corpus]:
    repo = tmp_path_factory.mktemp("lint_corpus") / "repo"
    repo.mkdir()
    for case in [*SHARED, *REFUSED, *LOADS]:
        _materialise(case, repo)
    server = RestartingServer(repo, model_control="explicit", startup_timeout_s=120.0)
    try:
        # Linted for the release the live server reports (2.51): what 2.51 refuses is what this
        # server refuses; release rules of newer lines are tested in test_releases.py.
        report = lint_repository(repo, target=target_from_install(server.server.install, kind="cpu"),
                                 server_version=server.server.version())
        yield Corpus(repo=repo, server=server, report=report)
    finally:
        server.stop()


def _loads_alone(case: Case) -> bool:
    # Cases with `needs` share composing models: one case's cleanup unloads what another loads.
    # tritonserver 2.51 was seen to die (SIGSEGV) loading initial-state configs side by side with
    # other loads (and once even alone): the sequence-batcher cases keep to one load at a time.
    return bool(case.needs) or "sequence_batching" in (case.folder / "config.pbtxt").read_text()


@pytest.fixture(scope="module")
def solo_loads(corpus: Corpus) -> dict[str, LoadOutcome]:
    """Every case that may load beside others, loaded (and unloaded again) four at a time: each one's outcome.

    The others (:func:`_loads_alone`) are loaded by their own tests, one at a time, after these.
    """
    return corpus.server.load_side_by_side([case.name for case in [*REFUSED, *LOADS] if not _loads_alone(case)])


def _outcome(case: Case, corpus: Corpus, solo_loads: dict[str, LoadOutcome]) -> LoadOutcome:
    if case.name in solo_loads:
        return solo_loads[case.name]
    return corpus.server.load_and_unload(case.name, needs=case.needs)


def test_corpus_has_at_least_25_refused_and_15_loading_configs() -> None:
    assert len(REFUSED) >= 25
    assert len(LOADS) >= 15
    assert all(c.expect and c.server_says and c.why for c in REFUSED), "every refused case names rule and reason"


def test_every_refused_case_expects_only_known_error_rules() -> None:
    from tritonkit.repository.lint import RULES

    for case in REFUSED:
        for rule_id in case.expect:
            assert rule_id in RULES, f"{case.name}: unknown rule {rule_id}"
            assert RULES[rule_id].severity is Severity.ERROR or rule_id == "TK601", case.name


def test_shared_composing_models_lint_without_errors(corpus: Corpus) -> None:
    for case in SHARED:
        assert not corpus.errors(case.name), f"{case.name}: {corpus.report.for_model(case.name)}"


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.name)
def test_server_refuses_and_linter_reports_an_error(case: Case, corpus: Corpus,
                                                    solo_loads: dict[str, LoadOutcome]) -> None:
    errors = corpus.errors(case.name)
    assert set(case.expect) <= errors, (
        f"{case.name} ({case.why}): expected {case.expect}, linter found {sorted(errors)}: "
        f"{[str(f) for f in corpus.report.for_model(case.name)]}"
    )
    refused = _outcome(case, corpus, solo_loads).error
    assert isinstance(refused, ModelLoadError), f"{case.name}: expected the server to refuse it, got {refused!r}"
    assert case.server_says in str(refused), f"{case.name}: server said {refused}"


@pytest.mark.parametrize("case", LOADS, ids=lambda c: c.name)
def test_server_loads_and_linter_reports_no_error(case: Case, corpus: Corpus,
                                                  solo_loads: dict[str, LoadOutcome]) -> None:
    for name in (case.name, *case.needs):
        findings = [str(f) for f in corpus.report.for_model(name) if f.severity is Severity.ERROR]
        assert not findings, f"{name} ({case.why}): {findings}"
    outcome = _outcome(case, corpus, solo_loads)
    assert outcome.error is None, f"{case.name}: the server refused it: {outcome.error!r}"
    assert outcome.ready, f"{case.name}: loaded but not ready"


def test_the_corpus_is_linted_for_the_release_the_live_server_reports(corpus: Corpus) -> None:
    assert corpus.server.server.version().startswith(f"{corpus.report.target.release}.")
    assert str(corpus.report.target.release) == BUNDLED_LINE


def test_every_field_and_platform_2_51_cannot_serve_has_a_refused_case() -> None:
    """Each fact that says 2.51 cannot read a field or serve a platform is proven by a case the
    live 2.51 refuses (the parametrised test above loads it)."""
    texts = {case.name: (case.folder / "config.pbtxt").read_text() for case in REFUSED}
    bundled = release(BUNDLED_LINE)
    top_fields = {fact.subject.split(".")[-1] for fact in CONFIG_FIELDS.values()
                  if fact.since > bundled and fact.subject.count(".") == 1}
    for name in sorted(top_fields):
        assert any(f"{name} " in text or f"{name}:" in text for text in texts.values()), f"no refused case writes {name}"
    newer_platforms = [p.name for p in PLATFORMS.values() if p.since > bundled] + list(PLATFORM_ALIASES)
    for platform in newer_platforms:
        assert any(f'platform: "{platform}"' in text for text in texts.values()), f"no refused case uses {platform}"


def test_lint_findings_carry_location_and_fix(corpus: Corpus) -> None:
    by_model = {f.model: f for f in corpus.report.findings if f.rule_id == "TK101"}
    finding = by_model["preferred_batch_above_max"]
    assert finding.file == "preferred_batch_above_max/config.pbtxt"
    assert finding.field == "dynamic_batching.preferred_batch_size[1]"
    text = (corpus.repo / finding.file).read_text().splitlines()
    assert finding.line is not None and "preferred_batch_size: [ 4, 16 ]" in text[finding.line - 1]
    assert "16" in finding.message and finding.hint


def test_coverage_table_names_every_error_rule_and_every_refused_case() -> None:
    from tritonkit.repository.lint import RULES

    doc = (ROOT / "docs" / "lint-coverage.md").read_text()
    missing_rules = [r.id for r in RULES.values()
                     if r.severity is Severity.ERROR and r.family != "trtllm" and r.id not in doc]
    missing_cases = [c.name for c in REFUSED if f"`{c.name}`" not in doc]
    assert not missing_rules, f"error rules missing from docs/lint-coverage.md: {missing_rules}"
    assert not missing_cases, f"refused cases missing from docs/lint-coverage.md: {missing_cases}"
