"""The documentation's commands that run cheaply here, run as written.

Each test runs every ``$ tritonkit`` line of the console blocks marked
``<!-- run-by: tests/docs/test_examples.py::<that test> -->``, in order, in a folder holding what the pages
assume: ``model.onnx`` (an MLP, x FP32 [N, 8] → y FP32 [N, 4]) and ``hf_model/`` (a Llama-shaped Hugging Face
folder with its tokenizer). Pure: nothing here starts a server or perf_analyzer.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.docs.doc_commands import commands_run_by
from tests.support.trtllm import write_hf_model
from tests.test_readme_library import _mlp
from tritonkit.cli import main


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _mlp(tmp_path / "model.onnx")
    write_hf_model(tmp_path / "hf_model")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run_all(test: str, *, before: tuple[tuple[str, ...], ...] = ()) -> list[str]:
    """Run ``before`` (what a page assumes was done on another page), then the blocks naming ``test``."""
    outputs = []
    for argv in (*before, *commands_run_by(test)):
        result = CliRunner().invoke(main, list(argv))
        assert result.exit_code == 0, f"`tritonkit {' '.join(argv)}` exited {result.exit_code}:\n{result.output}"
        outputs.append(result.output)
    return outputs


BUILD = ("build", "onnx", "model.onnx", "--name", "mlp", "--repo", "model_repository")


def test_the_build_page_commands_run(workdir: Path) -> None:
    _run_all("test_the_build_page_commands_run")
    assert (workdir / "model_repository" / "mlp" / "config.pbtxt").is_file()
    assert (workdir / "ref_repo" / "ensemble" / "config.pbtxt").is_file()
    assert (workdir / "vllm_repo" / "vllm_model" / "1" / "model.json").is_file()


def test_the_lint_page_commands_run(workdir: Path) -> None:
    outputs = _run_all("test_the_lint_page_commands_run")
    assert "0 error(s)" in outputs[2] and '"findings"' in outputs[3]


def test_the_perf_run_page_commands_run(workdir: Path) -> None:
    (dry_run,) = _run_all("test_the_perf_run_page_commands_run", before=(BUILD,))[1:]
    assert "perf_analyzer -m mlp -u 127.0.0.1:8001" in dry_run
    assert not (workdir / "results").exists(), "a dry run writes nothing"


def test_the_planner_page_commands_run(workdir: Path) -> None:
    outputs = _run_all("test_the_planner_page_commands_run")
    assert "A100-80GB" in outputs[0] and "gpus" in outputs[1]


def test_the_deploy_page_commands_run(workdir: Path) -> None:
    _run_all("test_the_deploy_page_commands_run", before=(BUILD,))
    for written in ("k8s/deployment.yaml", "triton-rules.yml", "triton-dashboard.json", "ray/rayjob.yaml"):
        assert (workdir / written).is_file(), written
