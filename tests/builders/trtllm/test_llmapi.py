"""``build trtllm --engine llmapi``: the LLM-API repository for each line, checked against upstream's files.

Facts followed (see tritonkit/trtllm_versions.py FACTS): tensorrtllm_backend v0.19.0
all_models/llmapi/tensorrt_llm/{config.pbtxt,1/model.yaml} (0.19: tensors and types, the CUDA graph
switch under pytorch_backend_config, triton_config max_batch_size 0 / decoupled); NVIDIA/TensorRT-LLM
main 0a710573 triton_backend/all_models/llmapi/tensorrt_llm/config.pbtxt (main: image_url, best_of,
LoRA, perf-metric outputs; "The below config arguments are specific in model.yaml" — no
max_batch_size or decoupled in config.pbtxt); tensorrtllm_backend 9b25ef9 docs/llmapi.md
(gpu_device_ids "0,1;2,3" per instance, --no-mpi); 000a01de (1.0.0rc4)
tests/unittest/api_stability/references/llm.yaml (cuda_graph_config, backend, …). No GPU: nothing here
runs TensorRT-LLM; the files are compared with those facts.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.trtllm import LLAMA3_8B, write_hf_model
from tritonkit.builders.trtllm import (
    EngineTarget,
    LlmApiOptions,
    LlmApiSettings,
    build_trtllm,
    derive_engine_params,
    plan_llmapi,
)
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.repository import read_config
from tritonkit.trtllm_versions import LLMAPI_LINES, TRTLLM_INTERFACES

_TYPES = {"TYPE_STRING": 13, "TYPE_BOOL": 1, "TYPE_INT32": 8, "TYPE_UINT64": 5, "TYPE_INT64": 9, "TYPE_FP32": 11}


@pytest.fixture
def hf(tmp_path: Path) -> Path:
    return write_hf_model(tmp_path / "Llama-3-8B")


@pytest.mark.parametrize("line", LLMAPI_LINES)
def test_each_lines_config_declares_its_tensors_and_leaves_batch_and_decoupled_to_model_yaml(
        hf: Path, tmp_path: Path, line: str) -> None:
    result = build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version=line)
    folder = tmp_path / "r" / "tensorrt_llm"
    text = (folder / "config.pbtxt").read_text()
    assert "max_batch_size" not in text and "decoupled" not in text and "model_transaction_policy" not in text
    cfg = read_config(folder / "config.pbtxt")
    api = TRTLLM_INTERFACES[line].llmapi
    assert api is not None and cfg.backend == "python"
    assert [(t.name, t.data_type, tuple(t.dims), t.optional) for t in cfg.input] == \
        [(t.name, _TYPES[t.data_type], t.dims, t.optional) for t in api.inputs]
    assert [(t.name, t.data_type, tuple(t.dims)) for t in cfg.output] == \
        [(t.name, _TYPES[t.data_type], t.dims) for t in api.outputs]
    assert [(g.kind, g.count) for g in cfg.instance_group] == [(2, 1)]  # KIND_CPU, 1: as upstream's config
    assert result.engine == "llmapi" and sorted(p.name for p in (folder / "1").iterdir()) == ["model.py", "model.yaml"]


def test_0_19_and_main_differ_as_upstream_does() -> None:
    old, new = TRTLLM_INTERFACES["0.19"].llmapi, TRTLLM_INTERFACES["main"].llmapi
    assert old is not None and new is not None
    assert "sampling_param_beam_width" in old.input_names and "sampling_param_best_of" not in old.input_names
    assert {"sampling_param_best_of", "image_url", "lora_id", "sampling_param_return_perf_metrics", "stop"} <= \
        set(new.input_names)
    assert not old.perf_metrics and new.perf_metrics
    assert ("arrival_time_ns", "TYPE_INT64", (1,)) in [(t.name, t.data_type, t.dims) for t in new.outputs]


def test_model_yaml_holds_the_planned_llm_arguments_each_with_its_reason(hf: Path, tmp_path: Path) -> None:
    target = EngineTarget(gpu="H100-80GB")
    result = build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="1.2", target=target)
    doc = yaml.safe_load((tmp_path / "r" / "tensorrt_llm" / "1" / "model.yaml").read_text())
    planned = derive_engine_params(LLAMA3_8B, target).params
    assert doc["model"] == str(hf) and doc["backend"] == "pytorch"
    assert (doc["tensor_parallel_size"], doc["pipeline_parallel_size"]) == (1, 1)
    assert (doc["max_batch_size"], doc["max_num_tokens"], doc["max_seq_len"]) == \
        (planned.max_batch_size, planned.max_num_tokens, planned.max_seq_len)
    assert doc["kv_cache_config"] == {"enable_block_reuse": False,
                                      "free_gpu_memory_fraction": planned.kv_cache_free_gpu_mem_fraction}
    assert doc["cuda_graph_config"] == {"max_batch_size": planned.max_batch_size}
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": True}
    text = result.summary()
    assert "max_batch_size" in text and "planner:" in text and "streaming needs decoupled" in text
    assert "/app/all_models/llmapi/tensorrt_llm/1" in text


def test_decoupled_follows_streaming_and_0_19_switches_cuda_graphs_its_own_way(hf: Path, tmp_path: Path) -> None:
    build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="0.19", streaming=False)
    doc = yaml.safe_load((tmp_path / "r" / "tensorrt_llm" / "1" / "model.yaml").read_text())
    assert doc["triton_config"] == {"max_batch_size": 0, "decoupled": False}
    assert doc["pytorch_backend_config"] == {"use_cuda_graph": True} and "cuda_graph_config" not in doc


def test_several_instances_get_their_gpu_sets_and_the_launch_says_no_mpi(hf: Path, tmp_path: Path) -> None:
    result = build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="main",
                          target=EngineTarget(tp=2), llmapi=LlmApiSettings(instances=2))
    cfg = read_config(tmp_path / "r" / "tensorrt_llm" / "config.pbtxt")
    assert cfg.parameters["gpu_device_ids"].string_value == "0,1;2,3"
    assert cfg.instance_group[0].count == 2
    assert result.llmapi is not None and "--no-mpi" in result.llmapi.launch


def test_several_instances_on_a_line_without_them_are_refused_and_nothing_is_written(
        hf: Path, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="runs one instance"):
        build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="1.1",
                     llmapi=LlmApiSettings(instances=2))
    with pytest.raises(ConfigError, match=r"3 GPU id\(s\) given .* 2 instance\(s\) × tp 1 × pp 1 = 2"):
        build_trtllm(hf, repo=tmp_path / "r", engine="llmapi", trtllm_version="1.2", gpu_ids=[0, 1, 2],
                     llmapi=LlmApiSettings(instances=2))
    assert not (tmp_path / "r" / "tensorrt_llm").exists()


def test_a_key_the_lines_llm_does_not_take_is_refused_before_anything_is_written(hf: Path, tmp_path: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"),
                                    "--engine", "llmapi", "--trtllm-version", "0.19",
                                    "--llm-arg", "cuda_graph_config={max_batch_size: 8}"])
    assert run.exit_code == 2 and "error:" in run.output and "fix:" in run.output
    assert "LLM() does not accept cuda_graph_config" in run.output and "Traceback" not in run.output
    assert not (tmp_path / "r" / "tensorrt_llm").exists()
    ok = CliRunner().invoke(main, ["build", "trtllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"),
                                   "--engine", "llmapi", "--trtllm-version", "1.2",
                                   "--llm-arg", "enable_attention_dp=true", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["model_yaml"]["enable_attention_dp"] is True


def test_tp_that_does_not_divide_the_heads_and_an_unknown_line_are_refused(hf: Path, tmp_path: Path) -> None:
    for argv, message in ((["--tp", "3"], "do not split over tp 3"),
                          (["--trtllm-version", "0.16"], "not in the supported matrix")):
        run = CliRunner().invoke(main, ["build", "trtllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"),
                                        "--engine", "llmapi", *argv])
        assert run.exit_code == 2 and message in run.output and "fix:" in run.output, run.output
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_the_engine_backend_on_main_is_refused_with_the_reason(hf: Path, tmp_path: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"),
                                    "--engine", "tensorrtllm", "--trtllm-version", "main", "--no-build"])
    assert run.exit_code == 2 and "no engine backend" in run.output and "#15907" in run.output


def test_the_releases_model_py_is_placed_with_its_helpers_or_loaded_from_the_container(
        hf: Path, tmp_path: Path) -> None:
    release = tmp_path / "release"
    release.mkdir()
    (release / "model.py").write_text("# the release's model.py\n")
    with pytest.raises(ConfigError, match="helpers.py are not both there"):
        build_trtllm(hf, repo=tmp_path / "a", engine="llmapi", python_model_file=release / "model.py")
    (release / "helpers.py").write_text("# its helpers\n")
    build_trtllm(hf, repo=tmp_path / "a", engine="llmapi", python_model_file=release / "model.py", force=True)
    version = tmp_path / "a" / "tensorrt_llm" / "1"
    assert (version / "model.py").read_text() == "# the release's model.py\n"
    assert (version / "helpers.py").read_text() == "# its helpers\n"
    build_trtllm(hf, repo=tmp_path / "b", engine="llmapi")
    loader = (tmp_path / "b" / "tensorrt_llm" / "1" / "model.py").read_text()
    assert "'/app/all_models/llmapi/tensorrt_llm/1'" in loader and "TritonPythonModel" in loader
    compile(loader, "model.py", "exec")


def test_an_unset_value_is_left_to_the_llm_default_and_said_so() -> None:
    plan = plan_llmapi(LlmApiOptions(line=TRTLLM_INTERFACES["1.2"], model="meta-llama/Llama-3.1-8B"))
    assert "max_batch_size" not in plan.model_yaml and "free_gpu_memory_fraction" not in plan.model_yaml["kv_cache_config"]
    assert any(r.key == "max_batch_size" and r.value == "(LLM default)" for r in plan.reasons)
