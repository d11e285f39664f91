"""The ``runtime`` field against the folders the server searches (TK012, TK606).

What the bundled 2.51 shows is proven live by the corpus (``runtime_escapes_model_folder``,
``runtime_library_not_found``, ``runtime_names_backend_library``, ``runtime_absolute_joined_onto_folder``:
``tests/repository/lint/test_corpus.py``). The cases here need a backends folder the bundled server
does not have (an identity backend, a library reached through a symbolic link, the 2.70 change of
the path test), so they are held to core's source: ``TritonModel::GetBackendLibraryProperties`` in
``src/backend_model.cc`` and ``IsChildPathEscapingParentPath`` in ``src/filesystem/api.cc`` at r24.10
(prefix test) and r26.06 (path-boundary test, commit dcb315d). The "libraries" here are text files:
the linter only looks at names and links, and one test makes the library a FIFO to prove it never
opens it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.repository.lint import Severity, Target, lint_repository

IO = ('max_batch_size: 8\ninput [ { name: "x" data_type: TYPE_FP32 dims: [ 4 ] } ]\n'
      'output [ { name: "y" data_type: TYPE_FP32 dims: [ 4 ] } ]')


def _model(repo: Path, name: str, body: str) -> Path:
    folder = repo / name
    (folder / "1").mkdir(parents=True)
    (folder / "config.pbtxt").write_text(f'name: "{name}"\n{body}\n{IO}\n')
    return folder


def _edit(repo: Path, old: str, new: str) -> None:
    """Rewrite model ``m``'s config, ``old`` replaced by ``new``."""
    config = repo / "m" / "config.pbtxt"
    config.write_text(config.read_text().replace(old, new))


def _library(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a library: never opened\n")
    return path


def _backends(root: Path, *names: str) -> Path:
    """A backends folder with ``<name>/libtriton_<name>.so`` for each name."""
    for name in names:
        _library(root / name / f"libtriton_{name}.so")
    return root


def _target(backends: Path, release: str = "2.73") -> Target:
    names = {p.name for p in backends.iterdir() if p.is_dir()}
    target = Target(kind="cpu", gpu_count=0).with_backends(names, complete=True, source=f"--backend-dir {backends}")
    return target.with_backend_folders({}, backends)


def _findings(repo: Path, target: Target | None = None, version: str | None = None) -> dict[str, Severity]:
    report = lint_repository(repo, target=target, server_version=version)
    return {f.rule_id: f.severity for f in report.for_model("m") if f.rule_id in ("TK012", "TK606", "TK601")}


@pytest.mark.parametrize("version", ["2.51", "2.69", "2.70", "2.72", "2.73"])
def test_a_runtime_that_climbs_out_of_the_backend_folder_is_an_error_without_any_target(tmp_path: Path,
                                                                                      version: str) -> None:
    """The example a Triton engineer tries first: every release since r24.01 refuses it."""
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "../other_dir/libtriton_identity.so"')
    report = lint_repository(tmp_path / "repo", server_version=version)
    found = [f for f in report.for_model("m") if f.rule_id == "TK012"]
    assert len(found) == 1 and found[0].severity is Severity.ERROR and found[0].field == "runtime"
    assert "escapes backend directory" in found[0].message and "src/backend_model.cc" in found[0].message
    assert 'runtime: "libtriton_identity.so"' in found[0].hint


def test_a_runtime_found_through_dot_dot_in_the_backends_folder_escapes_it(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "identity")
    _library(backends / "other_dir" / "libtriton_identity.so")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "../other_dir/libtriton_identity.so"')
    assert _findings(tmp_path / "repo", _target(backends)) == {"TK012": Severity.ERROR}
    # Named plainly, the library is found in identity/ and stays there.
    _edit(tmp_path / "repo", "../other_dir/", "")
    assert _findings(tmp_path / "repo", _target(backends)) == {}


def test_a_sibling_folder_sharing_the_backend_name_passes_the_prefix_test_only_before_2_70(tmp_path: Path) -> None:
    """``identity_v2`` starts with ``identity``: up to 2.69 the test is a string prefix (r24.10
    ``IsChildPathEscapingParentPath``), from 2.70 it stops at the separator (r26.06)."""
    backends = _backends(tmp_path / "backends", "identity")
    _library(backends / "identity_v2" / "libtriton_identity.so")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "../identity_v2/libtriton_identity.so"')
    # 2.69 loads it: a warning that 2.70 will not.
    assert _findings(tmp_path / "repo", _target(backends), "2.69") == {"TK012": Severity.WARNING}
    assert _findings(tmp_path / "repo", _target(backends), "2.70") == {"TK012": Severity.ERROR}
    # Read from the text alone (no backends folder known), the same line is drawn.
    assert _findings(tmp_path / "repo", None, "2.69")["TK012"] is Severity.WARNING
    assert _findings(tmp_path / "repo", None, "2.70")["TK012"] is Severity.ERROR


def test_a_library_linked_from_outside_the_backend_folder_escapes_it(tmp_path: Path) -> None:
    backends = tmp_path / "backends"
    (backends / "identity").mkdir(parents=True)
    os.symlink(_library(tmp_path / "elsewhere" / "libtriton_identity.so"), backends / "identity" / "libtriton_identity.so")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "libtriton_identity.so"')
    assert _findings(tmp_path / "repo", _target(backends)) == {"TK012": Severity.ERROR}
    # Without runtime the server takes libtriton_identity.so without the test (C++ backends return early).
    _edit(tmp_path / "repo", 'runtime: "libtriton_identity.so"\n', "")
    assert _findings(tmp_path / "repo", _target(backends)) == {}


def test_a_runtime_library_the_backends_folder_does_not_hold_is_an_error_with_it_and_info_without(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "identity")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "libtriton_identity_custom.so"')
    report = lint_repository(tmp_path / "repo", target=_target(backends))
    found = [f for f in report.for_model("m") if f.rule_id == "TK606"]
    assert len(found) == 1 and found[0].severity is Severity.ERROR
    assert "unable to find backend library" in found[0].message and f"{backends}/identity/" in found[0].message
    unknown = [f for f in lint_repository(tmp_path / "repo").for_model("m") if f.rule_id == "TK606"]
    assert len(unknown) == 1 and unknown[0].severity is Severity.INFO and "--backend-dir" in unknown[0].hint
    # The model may bring the library itself: the server looks in its folders first.
    _library(tmp_path / "repo" / "m" / "libtriton_identity_custom.so")
    assert _findings(tmp_path / "repo", _target(backends)) == {}
    assert _findings(tmp_path / "repo") == {}


def test_an_absolute_runtime_is_joined_onto_each_folder_not_taken_as_is(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "identity")
    elsewhere = _library(tmp_path / "opt" / "libtriton_identity.so")
    _model(tmp_path / "repo", "m", f'backend: "identity"\nruntime: "{elsewhere}"')
    report = lint_repository(tmp_path / "repo", target=_target(backends))
    found = [f for f in report.for_model("m") if f.rule_id == "TK606"]
    assert len(found) == 1 and "a leading '/' is joined too" in found[0].message
    _edit(tmp_path / "repo", str(elsewhere), "/libtriton_identity.so")
    assert _findings(tmp_path / "repo", _target(backends)) == {}


def test_a_python_based_backend_needs_its_model_py_and_the_python_backend(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "python")
    _model(tmp_path / "repo", "m", 'backend: "vllm"\nruntime: "model.py"')
    found = _findings(tmp_path / "repo", _target(backends))
    assert found.get("TK606") is Severity.ERROR  # no vllm/model.py
    _library(backends / "vllm" / "model.py")
    assert _findings(tmp_path / "repo", _target(backends)) == {}
    unknown = [f for f in lint_repository(tmp_path / "repo").for_model("m") if f.rule_id == "TK606"]
    assert len(unknown) == 1 and unknown[0].severity is Severity.INFO and "vllm/model.py" in unknown[0].message


def test_a_backend_library_the_model_brings_is_not_a_missing_backend(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "python")
    folder = _model(tmp_path / "repo", "m", 'backend: "identity"')
    assert _findings(tmp_path / "repo", _target(backends)) == {"TK601": Severity.ERROR}
    _library(folder / "1" / "libtriton_identity.so")
    assert _findings(tmp_path / "repo", _target(backends)) == {}


def test_the_linter_never_opens_the_library_it_judges(tmp_path: Path) -> None:
    """A FIFO blocks whoever opens it for reading: lint returning proves it only looked."""
    backends = tmp_path / "backends"
    (backends / "identity").mkdir(parents=True)
    os.mkfifo(backends / "identity" / "libtriton_identity.so")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "libtriton_identity.so"')
    assert _findings(tmp_path / "repo", _target(backends)) == {}


def test_repo_lint_backend_dir_reports_a_runtime_its_backends_lack(tmp_path: Path) -> None:
    backends = _backends(tmp_path / "backends", "identity")
    _model(tmp_path / "repo", "m", 'backend: "identity"\nruntime: "libtriton_missing.so"')
    result = CliRunner().invoke(main, ["repo", "lint", str(tmp_path / "repo"), "--backend-dir", str(backends),
                                       "--server-version", "2.73", "--format", "json"])
    assert result.exit_code == 1, result.output
    data = json.loads(result.output)
    assert [f["rule"] for f in data["findings"] if f["severity"] == "error"] == ["TK606"]
    assert data["target"]["backends_dir"] == str(backends)


@pytest.mark.parametrize("release", ["2.51", "2.72"])
def test_the_servers_own_special_cases_for_runtime_are_refused_as_upstream_expects(tmp_path: Path, release: str) -> None:
    """The server's qa/L0_model_config/special_cases at r24.10 and r26.08, mirrored: ``runtime_escape``
    (``runtime: "../dummy_runtime/libtriton_identity.so"`` with ``dummy_runtime/libtriton_identity.so``
    made inside the model folder by qa's test.sh; expected "escapes backend directory") and
    ``invalid_runtime`` (``runtime: "__invalid_runtime__"`` on a server that has the identity backend;
    expected "unable to find backend library '__invalid_runtime__'")."""
    backends = _backends(tmp_path / "backends", "identity")
    escape = _model(tmp_path / "repo", "runtime_escape", 'backend: "identity"\n'
                    'runtime: "../dummy_runtime/libtriton_identity.so"\ninstance_group [ { kind: KIND_CPU } ]')
    _library(escape / "dummy_runtime" / "libtriton_identity.so")
    _model(tmp_path / "repo", "invalid_runtime", 'backend: "identity"\nruntime: "__invalid_runtime__"\n'
           "instance_group [ { kind: KIND_CPU } ]")
    report = lint_repository(tmp_path / "repo", target=_target(backends), server_version=release)
    assert report.rule_ids("runtime_escape", severity=Severity.ERROR) == {"TK012"}
    assert "escapes backend directory" in next(f.message for f in report.for_model("runtime_escape") if f.rule_id == "TK012")
    assert report.rule_ids("invalid_runtime", severity=Severity.ERROR) == {"TK606"}
    # Without the backends folder the escape is still an error; the missing library is what lint cannot see.
    bare = lint_repository(tmp_path / "repo", server_version=release)
    assert bare.rule_ids("runtime_escape", severity=Severity.ERROR) == {"TK012"}
    assert bare.rule_ids("invalid_runtime", severity=Severity.INFO) >= {"TK606"}
