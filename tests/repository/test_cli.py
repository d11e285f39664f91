"""``tritonkit repo init|add|show|lint|diff`` through click's runner, checking the files written."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.repository import read_config

ADD_ARGS = ["--name", "add_one", "--backend", "python", "--max-batch-size", "8",
            "--input", "INPUT0:FP32:4", "--output", "OUTPUT0:FP32:4"]


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def _add_one(repo: Path, tmp_path: Path, *extra: str) -> tuple[int, str]:
    model_py = tmp_path / "model.py"
    model_py.write_text("# echo model\n")
    return _run("repo", "add", str(repo), *ADD_ARGS, "--file", str(model_py), *extra)


def test_init_creates_the_repository_folder(tmp_path: Path) -> None:
    code, out = _run("repo", "init", str(tmp_path / "model_repository"))
    assert code == 0 and (tmp_path / "model_repository").is_dir() and "ready" in out


def test_add_writes_a_config_with_the_given_window_and_instances_and_copies_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    code, out = _add_one(repo, tmp_path, "--instances", "2", "--window", "10ms")
    assert code == 0, out
    cfg = read_config(repo / "add_one" / "config.pbtxt")
    assert cfg.max_batch_size == 8 and cfg.dynamic_batching.max_queue_delay_microseconds == 10000
    assert not cfg.dynamic_batching.preferred_batch_size
    assert [(g.count, g.kind) for g in cfg.instance_group] == [(2, 2)]  # KIND_CPU
    assert (repo / "add_one" / "1" / "model.py").read_text() == "# echo model\n"


def test_add_defaults_the_window_to_5ms(tmp_path: Path) -> None:
    code, _ = _add_one(tmp_path / "repo", tmp_path)
    assert code == 0
    assert read_config(tmp_path / "repo" / "add_one").dynamic_batching.max_queue_delay_microseconds == 5000


def test_add_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    assert _add_one(repo, tmp_path)[0] == 0
    code, out = _add_one(repo, tmp_path)
    assert code == 2 and "already exists" in out and "--force" in out
    assert _add_one(repo, tmp_path, "--force", "--window", "20ms")[0] == 0
    assert read_config(repo / "add_one").dynamic_batching.max_queue_delay_microseconds == 20000


def test_add_with_a_bad_tensor_or_window_is_a_clean_error(tmp_path: Path) -> None:
    code, out = _run("repo", "add", str(tmp_path), "--name", "m", "--backend", "python", "--input", "x:FP32")
    assert code == 2 and "NAME:DTYPE:DIMS" in out
    code, out = _run("repo", "add", str(tmp_path), "--name", "m", "--backend", "python", "--max-batch-size", "4",
                     "--window", "5")
    assert code == 2 and "no unit" in out


def test_show_lists_models_and_prints_one_config(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _add_one(repo, tmp_path)
    code, out = _run("repo", "show", str(repo))
    assert code == 0 and "add_one" in out and "window 5000us" in out
    code, out = _run("repo", "show", str(repo), "--format", "json")
    assert json.loads(out)["models"][0]["max_batch_size"] == 8
    code, out = _run("repo", "show", str(repo / "add_one"))
    assert code == 0 and out.startswith('name: "add_one"\n')


def test_show_names_a_model_whose_config_does_not_parse_goes_on_and_exits_2(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _add_one(repo, tmp_path)
    (repo / "broken" / "1").mkdir(parents=True)
    (repo / "broken" / "config.pbtxt").write_text("name: \"broken\"\nmax_batch_size: [\n")
    code, out = _run("repo", "show", str(repo))
    # Every model is listed, the broken one with its error; the status says the repository is broken.
    assert code == 2 and "broken" in out and "ERROR" in out and "add_one" in out
    assert "error: " in out and "1 model(s) whose config cannot be read: 'broken'" in out and "  fix: " in out
    shown = CliRunner().invoke(main, ["repo", "show", str(repo), "--format", "json"])
    assert shown.exit_code == 2
    rows = {row["name"]: row for row in json.loads(shown.stdout)["models"]}
    assert rows["broken"]["versions"] == [1] and "error" in rows["broken"] and "backend" not in rows["broken"]
    assert rows["add_one"]["instances"] == 1 and rows["add_one"]["default_instances"] is True and rows["add_one"]["window_us"] == 5000


def test_lint_clean_repository_exits_0(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _add_one(repo, tmp_path)
    code, out = _run("repo", "lint", str(repo), "--target", "cpu")
    assert code == 0, out
    assert "0 error(s)" in out


BROKEN_ENSEMBLE = """
name: "pipeline"
platform: "ensemble"
max_batch_size: 16
input [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "SCORES" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "EXTRA" data_type: TYPE_FP32 dims: [ 4 ] } ]
instance_group [ { kind: KIND_CPU } ]
ensemble_scheduling {
  step [
    { model_name: "add_one" model_version: -1
      input_map { key: "INPUT0" value: "TEXT" }
      output_map { key: "OUTPUT0" value: "mid" } },
    { model_name: "tokenizer" model_version: -1
      input_map { key: "IN" value: "mid" }
      output_map { key: "OUT" value: "SCORES" } }
  ]
}
"""


def test_lint_prints_every_problem_of_a_broken_ensemble_with_location_and_fix(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _add_one(repo, tmp_path)
    (repo / "pipeline" / "1").mkdir(parents=True)
    (repo / "pipeline" / "config.pbtxt").write_text(textwrap.dedent(BROKEN_ENSEMBLE).lstrip())
    code, out = _run("repo", "lint", str(repo), "--target", "cpu")
    assert code == 1
    expected = {
        "TK407": "pipeline/config.pbtxt:3:",     # ensemble batches 16, add_one only 8
        "TK405": "pipeline/config.pbtxt:5:",     # no step writes the EXTRA output
        "TK401": "pipeline/config.pbtxt:6:",     # instance_group on an ensemble
        "TK406": "pipeline/config.pbtxt:10:",    # STRING ensemble input into an FP32 step input
        "TK403": "pipeline/config.pbtxt:12:",    # tokenizer is not in the repository
    }
    for rule_id, location in expected.items():
        lines = [line for line in out.splitlines() if f" {rule_id} " in line]
        assert lines, f"{rule_id} missing from:\n{out}"
        assert any(line.startswith(location) for line in lines), (rule_id, lines)
    assert out.count("    fix: ") >= len(expected)


def test_lint_json_output_and_min_severity(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    _add_one(repo, tmp_path, "--window", "50ms")
    code, out = _run("repo", "lint", str(repo), "--format", "json")
    data = json.loads(out)
    assert code == 0 and {f["rule"] for f in data["findings"]} >= {"TK105"}
    code, out = _run("repo", "lint", str(repo), "--format", "json", "--min-severity", "error")
    assert code == 0 and json.loads(out)["findings"] == []


def test_lint_bundled_target_reports_a_missing_onnxruntime_backend(tmp_path: Path) -> None:
    """The bundled tritonserver ships only the python backend."""
    repo = tmp_path / "repo"
    _run("repo", "add", str(repo), "--name", "onnx_model", "--backend", "onnxruntime", "--max-batch-size", "8",
         "--input", "x:FP32:4", "--output", "y:FP32:4")
    code, out = _run("repo", "lint", str(repo), "--bundled", "--ignore", "TK009")
    assert code == 1
    assert "TK601" in out and "backend 'onnxruntime' is not installed" in out and "python" in out


def test_lint_usage_errors_exit_2(tmp_path: Path) -> None:
    assert _run("repo", "lint")[0] == 2
    assert _run("repo", "lint", str(tmp_path / "nope"))[0] == 2
    assert _run("repo", "lint", str(tmp_path), "--format", "xml")[0] == 2
    code, out = _run("repo", "lint", str(tmp_path), "--target", "tpu")
    assert code == 2 and "unknown lint target" in out


def test_lint_list_rules(tmp_path: Path) -> None:
    code, out = _run("repo", "lint", "--list-rules")
    assert code == 0 and out.splitlines()[0].startswith("TK001") and "TK601" in out


def test_diff_of_two_configs_and_two_repositories(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _add_one(a, tmp_path, "--window", "5ms")
    _add_one(b, tmp_path, "--window", "20ms")
    code, out = _run("repo", "diff", str(a / "add_one" / "config.pbtxt"), str(b / "add_one" / "config.pbtxt"))
    assert code == 1 and "~ dynamic_batching.max_queue_delay_microseconds: 5000 -> 20000" in out
    code, out = _run("repo", "diff", str(a), str(b), "--format", "json")
    assert code == 1 and json.loads(out)["models"][0]["status"] == "changed"
    assert _run("repo", "diff", str(a), str(a))[0] == 0
    assert _run("repo", "diff", str(a), str(b / "add_one"))[0] == 2


def test_add_refuses_a_name_that_leads_into_another_repository(tmp_path: Path) -> None:
    other = tmp_path / "other" / "demo"
    other.mkdir(parents=True)
    (other / "config.pbtxt").write_text('name: "demo"\n')
    repo = tmp_path / "a" / "b"
    model_py = tmp_path / "model.py"
    model_py.write_text("# echo model\n")
    args = [a if a != "add_one" else "../../other/demo" for a in ADD_ARGS]
    code, out = _run("repo", "add", str(repo), *args, "--file", str(model_py), "--force")
    assert code == 2 and "'../../other/demo' is not a plain folder name inside the repository" in out
    assert (other / "config.pbtxt").read_text() == 'name: "demo"\n'  # the other repository is untouched
    assert not (other / "1").exists() and not repo.exists()
