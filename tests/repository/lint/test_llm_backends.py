"""Lint of the LLM backends' own repositories: TensorRT-LLM's LLM-API model (TK911–TK916) and Triton's
vLLM backend (TK951–TK954), on repositories ``build trtllm --engine llmapi`` / ``build vllm`` write,
then broken one way each. The backends' load checks they follow are named in docs/lint-coverage.md
(tensorrtllm_backend v0.19.0 / TensorRT-LLM 1.2.0rc2 llmapi model.py, docs/llmapi.md at 9b25ef9;
vllm_backend r26.01 src/model.py). No GPU: the files are checked, nothing is served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.trtllm import write_hf_model
from tritonkit.builders.trtllm import EngineTarget, LlmApiSettings, build_trtllm
from tritonkit.builders.vllm import build_vllm
from tritonkit.repository import lint_repository
from tritonkit.repository.lint import Target


@pytest.fixture
def hf(tmp_path: Path) -> Path:
    return write_hf_model(tmp_path / "hf")


def _ids(repo: Path, target: Target | None = None) -> dict[str, str]:
    report = lint_repository(repo, target=target) if target is not None else lint_repository(repo)
    return {f.rule_id: f.severity.name for f in report.findings if f.rule_id.startswith(("TK91", "TK95"))}


def _yaml(repo: Path) -> tuple[Path, dict]:
    path = repo / "tensorrt_llm" / "1" / "model.yaml"
    return path, yaml.safe_load(path.read_text())


def test_a_written_llm_api_repository_passes(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="1.2", target=EngineTarget(tp=2),
                 llmapi=LlmApiSettings(instances=2))
    assert _ids(tmp_path / "r", Target.gpu(4)) == {}


def test_batch_and_decoupled_written_in_the_config_are_errors(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi")
    config = tmp_path / "r" / "tensorrt_llm" / "config.pbtxt"
    config.write_text(config.read_text() + "max_batch_size: 8\nmodel_transaction_policy { decoupled: true }\n")
    findings = [f for f in lint_repository(tmp_path / "r").findings if f.rule_id == "TK911"]
    assert sorted(f.field for f in findings) == ["max_batch_size", "model_transaction_policy"]
    assert all(f.severity.name == "ERROR" and "model.yaml" in f.hint for f in findings)


def test_an_incomplete_triton_config_and_an_unknown_llm_argument(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="1.2")
    path, doc = _yaml(tmp_path / "r")
    del doc["triton_config"]["decoupled"]
    doc["max_num_token"] = 4096  # misspelled
    path.write_text(yaml.safe_dump(doc))
    report = lint_repository(tmp_path / "r")
    by_rule = {f.rule_id: f for f in report.findings}
    assert "lacks decoupled" in by_rule["TK912"].message and by_rule["TK912"].severity.name == "ERROR"
    assert "'max_num_token'" in by_rule["TK913"].message and "TensorRT-LLM 1.2" in by_rule["TK913"].message
    assert by_rule["TK913"].hint == "did you mean 'max_num_tokens'?"


def test_gpu_sets_must_match_instances_and_tp_times_pp(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="main", target=EngineTarget(tp=2),
                 llmapi=LlmApiSettings(instances=2))
    path, doc = _yaml(tmp_path / "r")
    doc["tensor_parallel_size"] = 4
    path.write_text(yaml.safe_dump(doc))
    messages = [f.message for f in lint_repository(tmp_path / "r").findings if f.rule_id == "TK914"]
    assert len(messages) == 2 and all("tensor × pipeline parallel size is 4" in m for m in messages)
    doc["tensor_parallel_size"] = 2
    path.write_text(yaml.safe_dump(doc))
    assert _ids(tmp_path / "r", Target.gpu(4)) == {}


def test_streaming_without_decoupled_warns_and_a_missing_local_model_is_an_error(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", streaming=False, model_path=str(tmp_path / "gone"))
    found = _ids(tmp_path / "r")
    assert found == {"TK915": "WARNING", "TK916": "ERROR"}
    path, doc = _yaml(tmp_path / "r")
    doc["model"] = "/nowhere/at/all/llama"
    path.write_text(yaml.safe_dump(doc))
    assert _ids(tmp_path / "r")["TK916"] == "INFO"  # a container path: not checkable here
    doc["model"] = "meta-llama/Llama-3.1-8B"
    path.write_text(yaml.safe_dump(doc))
    assert "TK916" not in _ids(tmp_path / "r")
    doc["model"] = "~no_such_user_here/llama"  # a user this machine lacks: reported as written, no crash
    path.write_text(yaml.safe_dump(doc))
    found916 = [f.message for f in lint_repository(tmp_path / "r").findings if f.rule_id == "TK916"]
    assert len(found916) == 1 and "internal error" not in found916[0] and "~no_such_user_here" in found916[0]


def test_a_written_vllm_model_passes_and_its_backend_refusals_are_errors(hf: Path, tmp_path: Path) -> None:
    build_vllm(hf, repo=tmp_path / "v", target=EngineTarget(tp=2))
    assert _ids(tmp_path / "v") == {}
    config = tmp_path / "v" / "vllm_model" / "config.pbtxt"
    config.write_text(config.read_text().replace("KIND_MODEL", "KIND_GPU")
                      + "model_transaction_policy { decoupled: false }\n")
    engine = tmp_path / "v" / "vllm_model" / "1" / "model.json"
    engine.write_text(json.dumps({**json.loads(engine.read_text()), "gpu_memory_utilization": 1.5}))
    assert _ids(tmp_path / "v") == {"TK952": "ERROR", "TK953": "ERROR", "TK954": "WARNING"}
    engine.write_text("{not json")
    assert _ids(tmp_path / "v")["TK951"] == "ERROR"
