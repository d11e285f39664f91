"""The in-flight-batching repository as typed configs: Triton's protobuf, TensorRT-LLM's interface,
no placeholder anywhere, lint clean, and ``tritonkit build trtllm`` writing it.

The GPU engines (C++ ``tensorrtllm`` backend, TensorRT-LLM's python model) cannot be built or served
here: their repositories are checked as written, with an engine config.json made in the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from tritonclient.grpc import model_config_pb2 as mc

from tests.support.trtllm import LLAMA3_8B, write_engine, write_hf_model
from tritonkit.builders.trtllm import (
    MODEL_NAMES,
    EngineTarget,
    TrtllmRepoOptions,
    build_reference_repository,
    build_trtllm,
    trtllm_model_specs,
    write_trtllm_repository,
)
from tritonkit.builders.trtllm.interface import KNOB_TO_ENGINE
from tritonkit.builders.trtllm.repository import PYMODELS
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.repository import LintReport, lint_repository, read_config


@pytest.fixture()
def hf_model(tmp_path: Path) -> Path:
    return write_hf_model(tmp_path / "hf")


def _tensors(cfg: mc.ModelConfig) -> dict[str, tuple[str, list[int], bool]]:
    out = {t.name: (mc.DataType.Name(t.data_type), list(t.dims), t.optional) for t in cfg.input}
    out.update({t.name: (mc.DataType.Name(t.data_type), list(t.dims), False) for t in cfg.output})
    return out


def test_written_configs_parse_back_into_the_same_protobuf(tmp_path: Path, hf_model: Path) -> None:
    result = build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path / "repo", run_build=False)
    for spec in trtllm_model_specs(result.options):
        assert read_config(tmp_path / "repo" / spec.name / "config.pbtxt") == spec.to_proto()
    assert sorted(p.name for p in (tmp_path / "repo").iterdir() if p.is_dir()) == sorted(MODEL_NAMES)


@pytest.mark.parametrize("engine", ["tensorrtllm", "python", "reference"])
def test_no_placeholder_is_left_anywhere_in_the_repository(tmp_path: Path, hf_model: Path, engine: str) -> None:
    model_py = tmp_path / "trtllm_model.py"
    model_py.write_text("# TensorRT-LLM's python-backend model stands here\n")
    build_trtllm(hf_model, repo=tmp_path / "repo", engine=engine,  # type: ignore[arg-type]
                 python_model_file=model_py if engine == "python" else None, run_build=False)
    files = [p for p in (tmp_path / "repo").rglob("*") if p.is_file()]
    assert any(p.name == "config.pbtxt" for p in files)
    for path in files:
        assert "${" not in path.read_text(encoding="utf-8", errors="replace"), path


def test_ensemble_keeps_tensorrt_llms_request_interface(tmp_path: Path, hf_model: Path) -> None:
    """Names, dtypes and dims as in TensorRT-LLM's inflight_batcher_llm/ensemble/config.pbtxt."""
    build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path, run_build=False)
    ensemble = read_config(tmp_path / "ensemble" / "config.pbtxt")
    t = _tensors(ensemble)
    assert ensemble.platform == "ensemble"
    assert t["text_input"] == ("TYPE_STRING", [1], False)
    assert t["max_tokens"] == ("TYPE_INT32", [1], False)
    assert t["stream"] == ("TYPE_BOOL", [1], True)
    assert t["end_id"] == ("TYPE_INT32", [1], True) and t["seed"] == ("TYPE_UINT64", [1], True)
    assert t["bad_words"] == ("TYPE_STRING", [-1], True)
    assert t["text_output"] == ("TYPE_STRING", [-1], False)
    assert t["output_log_probs"] == ("TYPE_FP32", [-1, -1], False)
    assert [s.model_name for s in ensemble.ensemble_scheduling.step] == ["preprocessing", "tensorrt_llm",
                                                                         "postprocessing"]
    engine = read_config(tmp_path / "tensorrt_llm" / "config.pbtxt")
    e = _tensors(engine)
    assert e["input_ids"] == ("TYPE_INT32", [-1], True)
    assert e["request_output_len"] == ("TYPE_INT32", [1], False)
    assert e["streaming"] == ("TYPE_BOOL", [1], True)
    assert e["output_ids"] == ("TYPE_INT32", [-1, -1], False)
    lengths = next(i for i in engine.input if i.name == "input_lengths")
    assert lengths.HasField("reshape") and list(lengths.reshape.shape) == []


def test_tensorrt_llm_model_carries_in_flight_batching_and_kv_settings(tmp_path: Path, hf_model: Path) -> None:
    result = build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path, target=EngineTarget(tp=2), run_build=False)
    cfg = read_config(tmp_path / "tensorrt_llm" / "config.pbtxt")
    params = {k: v.string_value for k, v in cfg.parameters.items()}
    assert cfg.backend == "tensorrtllm" and cfg.model_transaction_policy.decoupled
    assert params["gpt_model_type"] == "inflight_fused_batching"
    assert params["batch_scheduler_policy"] == "guaranteed_no_evict"
    assert params["gpu_device_ids"] == "0,1"
    assert params["gpt_model_path"] == str(tmp_path.resolve() / "tensorrt_llm" / "1" / "engine")
    assert params["kv_cache_free_gpu_mem_fraction"] == "0.9"
    assert params["enable_kv_cache_reuse"] == "false"
    assert result.plan is not None and cfg.max_batch_size == result.plan.params.max_batch_size
    assert cfg.dynamic_batching.default_queue_policy.max_queue_size == 2 * cfg.max_batch_size
    for name in ("preprocessing", "postprocessing"):
        other = read_config(tmp_path / name / "config.pbtxt")
        assert other.parameters["tokenizer_dir"].string_value == str(hf_model.resolve())
    bls = read_config(tmp_path / "tensorrt_llm_bls" / "config.pbtxt")
    assert bls.model_transaction_policy.decoupled and bls.parameters["tensorrt_llm_model_name"].string_value == (
        "tensorrt_llm")


def test_python_engine_uses_tensorrt_llms_model_file(tmp_path: Path, hf_model: Path) -> None:
    model_py = tmp_path / "model.py"
    model_py.write_text("# TensorRT-LLM's python-backend model\n")
    build_trtllm(hf_model, repo=tmp_path / "r", engine="python", python_model_file=model_py, run_build=False)
    cfg = read_config(tmp_path / "r" / "tensorrt_llm" / "config.pbtxt")
    assert cfg.backend == "python" and "executor_worker_path" not in cfg.parameters
    assert (tmp_path / "r" / "tensorrt_llm" / "1" / "model.py").read_text() == model_py.read_text()
    with pytest.raises(ConfigError, match="needs TensorRT-LLM's python-backend model.py"):
        build_trtllm(hf_model, repo=tmp_path / "s", engine="python", run_build=False)


def test_generated_repositories_lint_clean_against_their_engine(tmp_path: Path, hf_model: Path) -> None:
    """The engine config.json is made here (a real one needs a GPU to build)."""
    result = build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path / "gpu", target=EngineTarget(tp=2), run_build=False,
                          triton_max_batch_size=16, trtllm_version="0.17")  # the engine's line
    write_engine(Path(result.options.engine_dir), max_batch_size=16, tp=2, max_seq_len=2560)
    report = lint_repository(tmp_path / "gpu", target="gpu:2")
    assert report.errors == [] and _unexpected_warnings(report) == [], report.to_text()
    assert "TK909" not in report.rule_ids()  # the engine was found, so its checks ran
    reference = build_reference_repository(tmp_path / "ref")
    ref_report = lint_repository(reference.repo, target="cpu")
    assert ref_report.errors == [] and _unexpected_warnings(ref_report) == [], ref_report.to_text()


def _unexpected_warnings(report: LintReport) -> list[str]:
    """Every warning: the 0 µs queue delay of tensorrt_llm, pre- and postprocessing is upstream's (the
    in-flight batcher schedules per step), and TK105's 5-20 ms rule knows to leave those models alone."""
    return [f.message for f in report.warnings]


def test_the_window_rule_still_warns_about_a_zero_delay_on_an_ordinary_model(tmp_path: Path) -> None:
    model = tmp_path / "plain"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text("")
    (model / "config.pbtxt").write_text(
        'name: "plain"\nbackend: "python"\nmax_batch_size: 8\n'
        'input [{ name: "x" data_type: TYPE_FP32 dims: [4] }]\n'
        'output [{ name: "y" data_type: TYPE_FP32 dims: [4] }]\n'
        "dynamic_batching { max_queue_delay_microseconds: 0 }\n"
    )
    report = lint_repository(tmp_path, target="cpu")
    assert ("TK105", "plain") in {(f.rule_id, f.model) for f in report.warnings}, report.to_text()


def test_an_existing_engine_of_another_release_is_refused_by_the_build(tmp_path: Path, hf_model: Path) -> None:
    write_engine(tmp_path / "engine", version="0.17.0.post1", max_batch_size=512)
    with pytest.raises(ConfigError, match="runtime is 0.18.0"):
        build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path / "r", engine_dir=str(tmp_path / "engine"), runtime="0.18.0")
    ok = build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path / "r2", engine_dir=str(tmp_path / "engine"), runtime="0.17.0",
                      triton_max_batch_size=64)
    assert ok.engine_info is not None and ok.engine_info.version == "0.17.0.post1"


def test_repository_options_refuse_spellings_the_backend_would_ignore() -> None:
    with pytest.raises(ConfigError, match="batch_scheduler_policy"):
        TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t", batch_scheduler_policy="max_utilisation")
    with pytest.raises(ConfigError, match="gpu_ids"):
        TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t", gpu_ids=())


def test_writing_over_existing_models_needs_overwrite(tmp_path: Path) -> None:
    options = TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t")
    write_trtllm_repository(tmp_path, options)
    with pytest.raises(ConfigError, match="already holds"):
        write_trtllm_repository(tmp_path, options)
    assert len(write_trtllm_repository(tmp_path, options, overwrite=True)) == 5


def test_cli_writes_the_repository_and_build_plan_and_prints_the_reasoning(tmp_path: Path, hf_model: Path) -> None:
    repo = tmp_path / "repo"
    run = CliRunner().invoke(main, ["build", "trtllm", "--engine", "tensorrtllm", "--hf-model", str(hf_model), "--repo", str(repo),
                                    "--gpu", "H100-80GB", "--tp", "2", "--input-tokens", "512",
                                    "--max-num-tokens", "4096", "--tokenizer-instances", "3", "--no-build"])
    assert run.exit_code == 0, run.output
    assert "max_batch_size" in run.output and "given (--max-num-tokens)" in run.output
    assert "engine: not built — skipped (--no-build)" in run.output
    plan = json.loads((repo / "engine_plan.json").read_text())
    assert plan["params"]["max_num_tokens"] == 4096 and plan["params"]["tp_size"] == 2
    assert plan["hf_model"] == str(hf_model.resolve())
    assert (repo / "build_engine.py").is_file()
    assert read_config(repo / "tensorrt_llm" / "config.pbtxt").parameters["gpu_device_ids"].string_value == "0,1"
    assert read_config(repo / "postprocessing" / "config.pbtxt").instance_group[0].count == 3


def test_cli_json_output_and_reference_engine(tmp_path: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--engine", "reference", "--repo", str(tmp_path), "--json"])
    assert run.exit_code == 0, run.output
    data = json.loads(run.output)
    assert data["engine"] == "reference" and data["params"] is None
    cfg = read_config(tmp_path / "tensorrt_llm" / "config.pbtxt")
    assert cfg.backend == "python" and (tmp_path / "tensorrt_llm" / "1" / "engine" / "config.json").is_file()


def test_cli_user_mistakes_print_an_error_and_a_fix(tmp_path: Path, hf_model: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--engine", "tensorrtllm", "--hf-model", str(hf_model), "--repo", str(tmp_path / "r"),
                                    "--tp", "2", "--gpu-ids", "0", "--no-build"])
    assert run.exit_code != 0
    assert "error:" in run.output and "fix:" in run.output and "Traceback" not in run.output


def test_gpu_engine_without_hf_model_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs the Hugging Face model folder"):
        build_trtllm(None, engine="tensorrtllm", repo=tmp_path)


def test_hf_folder_without_tokenizer_json_is_refused(tmp_path: Path) -> None:
    (tmp_path / "hf").mkdir()
    (tmp_path / "hf" / "config.json").write_text(json.dumps(LLAMA3_8B))
    with pytest.raises(ConfigError, match="no tokenizer.json"):
        build_trtllm(tmp_path / "hf", engine="tensorrtllm", repo=tmp_path / "r", run_build=False)


def test_bls_model_passes_through_the_same_knobs_as_the_ensemble(tmp_path: Path, hf_model: Path) -> None:
    """The BLS model.py runs inside the server without tritonkit: the builder writes the map into its
    config, and the file keeps no copy of its own that could drift."""
    build_trtllm(hf_model, engine="tensorrtllm", repo=tmp_path / "repo", run_build=False)
    bls = read_config(tmp_path / "repo" / "tensorrt_llm_bls" / "config.pbtxt")
    assert json.loads(bls.parameters["pass_through_inputs"].string_value) == KNOB_TO_ENGINE
    source = (PYMODELS / "bls.py").read_text(encoding="utf-8")
    assert not [key for key in KNOB_TO_ENGINE.values() if key != "streaming" and f'"{key}"' in source]
