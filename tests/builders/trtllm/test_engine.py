"""The engine build as a pure command, and engine config.json checks against the runtime and configs.

Building an engine needs an NVIDIA GPU and the tensorrt_llm wheel, which this machine cannot have:
the tests check everything up to the build exactly (plan, argv, script), and the checks run on an
engine config.json written here with the fields TensorRT-LLM writes.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.support.trtllm import LLAMA3_8B, install_fake_gpu_toolchain, write_engine, write_hf_model
from tritonkit.builders.trtllm import (
    EngineOverrides,
    EngineTarget,
    build_reference_tokenizer,
    build_trtllm,
    check_engine,
    derive_engine_params,
    engine_build_argv,
    engine_build_plan,
    read_engine_config,
    run_engine_build,
    runtime_version,
    same_release,
    write_build_files,
)
from tritonkit.errors import ConfigError, MissingComponentError
from tritonkit.planner import find_gpu
from tritonkit.repository import Hardware, lint_repository


def test_build_argv_runs_the_written_script_on_its_plan() -> None:
    assert engine_build_argv("/r") == ["python3", "/r/build_engine.py", "/r/engine_plan.json"]
    assert engine_build_argv(Path("repo"), python="/usr/bin/python3") == [
        "/usr/bin/python3", "repo/build_engine.py", "repo/engine_plan.json"]


def test_build_plan_holds_every_build_value_and_the_paths() -> None:
    params = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), tp=2)).params
    plan = engine_build_plan(params, hf_model="/models/llama", engine_dir="/engines/llama")
    assert plan == {
        "hf_model": "/models/llama",
        "engine_dir": "/engines/llama",
        "params": {
            "max_batch_size": params.max_batch_size, "max_input_len": 2048, "max_seq_len": 2560,
            "max_num_tokens": 8192, "max_beam_width": 1, "tp_size": 2, "pp_size": 1, "dtype": "bfloat16",
            "quant_algo": None, "kv_cache_quant_algo": None, "paged_kv_cache": True, "use_paged_context_fmha": True,
            "kv_cache_free_gpu_mem_fraction": 0.9, "enable_kv_cache_reuse": False, "enable_chunked_context": False,
        },
    }


def test_written_build_script_is_python_that_reads_the_plan(tmp_path: Path) -> None:
    params = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"))).params
    script, plan_path = write_build_files(tmp_path, engine_build_plan(params, hf_model="/m", engine_dir="/e"))
    source = script.read_text()
    compile(source, str(script), "exec")
    assert "BuildConfig(" in source and "llm.save(" in source and "tritonkit_build.json" in source
    assert "${" not in source and "${" not in plan_path.read_text()
    assert json.loads(plan_path.read_text())["params"]["max_batch_size"] == params.max_batch_size


@pytest.mark.skipif(runtime_version() is not None, reason="tensorrt_llm is installed here")
def test_running_the_build_without_tensorrt_llm_stops_with_the_command_to_run(tmp_path: Path) -> None:
    """GPU-only path: here tensorrt_llm is absent, so the build must stop before starting anything."""
    with pytest.raises(MissingComponentError) as info:
        run_engine_build(tmp_path)
    assert "tensorrt_llm is not installed" in info.value.message
    assert info.value.hint is not None and "build_engine.py" in info.value.hint


def test_engine_config_is_read_from_tensorrt_llms_layout(tmp_path: Path) -> None:
    write_engine(tmp_path, version="0.17.0.post1", max_batch_size=16, tp=2, max_seq_len=4096)
    info = read_engine_config(tmp_path)
    assert (info.version, info.max_batch_size, info.max_seq_len, info.world_size) == ("0.17.0.post1", 16, 4096, 2)
    assert info.paged_kv_cache and info.use_paged_context_fmha and info.tp_size == 2


def test_versions_match_by_release_ignoring_post_and_local_suffixes() -> None:
    assert same_release("0.17.0.post1", "0.17.0")
    assert same_release("0.17.0", "0.17.0+cu128")
    assert not same_release("0.17.0", "0.16.0")
    assert not same_release("1.0.0rc2", "1.0.0")


def test_a_runtime_of_another_release_is_refused(tmp_path: Path) -> None:
    write_engine(tmp_path, version="0.17.0.post1")
    with pytest.raises(ConfigError) as info:
        check_engine(tmp_path, runtime="0.16.0")
    assert "built by TensorRT-LLM 0.17.0.post1 but the runtime is 0.16.0" in info.value.message
    assert check_engine(tmp_path, runtime="0.17.0").version == "0.17.0.post1"


def test_triton_batch_above_the_engines_is_refused(tmp_path: Path) -> None:
    write_engine(tmp_path, max_batch_size=16)
    with pytest.raises(ConfigError, match="max_batch_size 32 exceeds the engine's max_batch_size 16"):
        check_engine(tmp_path, runtime=None, triton_max_batch_size=32)


def test_gpu_ids_must_match_the_engines_world_size(tmp_path: Path) -> None:
    write_engine(tmp_path, tp=2, pp=2)
    with pytest.raises(ConfigError, match="world size 4"):
        check_engine(tmp_path, runtime=None, gpu_ids=[0, 1])
    assert check_engine(tmp_path, runtime=None, gpu_ids=[0, 1, 2, 3]).world_size == 4


def test_kv_reuse_needs_an_engine_with_paged_context_fmha(tmp_path: Path) -> None:
    write_engine(tmp_path, use_paged_context_fmha=False)
    with pytest.raises(ConfigError, match="use_paged_context_fmha"):
        check_engine(tmp_path, runtime=None, enable_kv_cache_reuse=True)


def test_a_folder_without_an_engine_config_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps({"version": "0.17.0"}))
    with pytest.raises(ConfigError, match="not a TensorRT-LLM engine config"):
        read_engine_config(tmp_path)


def test_the_build_script_runs_only_with_a_plan_argument(tmp_path: Path) -> None:
    import subprocess

    params = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"))).params
    script, _ = write_build_files(tmp_path, engine_build_plan(params, hf_model="/m", engine_dir="/e"))
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "usage: build_engine.py engine_plan.json" in proc.stderr


def test_the_build_runs_the_script_records_the_version_and_checks_the_engine(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake: this machine has no GPU and no tensorrt_llm, so both are stand-ins (a fake nvidia-smi and
    a fake tensorrt_llm whose LLM.save() writes the engine config.json). Everything else is real:
    build_trtllm writes the script and plan, runs the script in a child process, and checks the
    engine it wrote against the runtime version and the Triton configs."""
    site, bin_dir = install_fake_gpu_toolchain(tmp_path / "fake")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    hf = write_hf_model(tmp_path / "hf")
    result = build_trtllm(hf, engine="tensorrtllm", repo=tmp_path / "repo", target=EngineTarget(gpu="H100-80GB", tp=2, precision="fp8"))
    assert result.engine_built and result.engine_version == "0.17.0.post1"
    assert result.engine_info is not None and result.engine_info.world_size == 2
    engine_dir = Path(result.options.engine_dir)
    record = json.loads((engine_dir / "tritonkit_build.json").read_text())
    assert record["tensorrt_llm_version"] == "0.17.0.post1"
    written = json.loads((engine_dir / "config.json").read_text())
    assert result.plan is not None
    assert written["build_config"]["max_batch_size"] == result.plan.params.max_batch_size
    assert written["build_config"]["plugin_config"]["use_paged_context_fmha"] is True
    assert written["pretrained_config"]["quantization"]["quant_algo"] == "FP8"
    assert written["llm_args"]["model"] == str(hf.resolve())
    report = lint_repository(tmp_path / "repo")
    assert not report.errors and "TK909" not in report.rule_ids(), report.to_text()
    # A second build finds the engine, does not rebuild, and refuses a runtime of another release.
    with pytest.raises(ConfigError, match="runtime is 0.18.0"):
        build_trtllm(hf, engine="tensorrtllm", repo=tmp_path / "repo", target=EngineTarget(gpu="H100-80GB", tp=2, precision="fp8"), force=True,
                     runtime="0.18.0")


@pytest.mark.skipif(runtime_version() is None, reason="GPU-only: needs tensorrt_llm and an NVIDIA GPU")
def test_a_real_engine_builds_on_a_gpu_machine(tmp_path: Path) -> None:
    """GPU-only: builds a tiny random Llama (made with transformers, no download) into a real engine."""
    transformers = pytest.importorskip("transformers")
    if not Hardware.detect().gpus:
        pytest.skip("GPU-only: no NVIDIA GPU visible")
    hf = tmp_path / "tiny-llama"
    config = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512,
                                      max_position_embeddings=256)
    transformers.LlamaForCausalLM(config).save_pretrained(hf)
    build_reference_tokenizer(hf)
    result = build_trtllm(hf, engine="tensorrtllm", repo=tmp_path / "repo", target=EngineTarget(
        gpu="H100-80GB", overrides=EngineOverrides(max_batch_size=4, max_input_len=64, max_seq_len=128)))
    assert result.engine_built and result.engine_info is not None
    assert same_release(result.engine_info.version, runtime_version() or "")
