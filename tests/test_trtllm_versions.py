"""The declared TensorRT-LLM version matrix, and the configs, plan and commands that follow it (no server).

Facts checked against upstream: the renamed inputs (tensorrtllm_backend v0.19.0
inflight_batcher_llm/src/utils.h reads ``min_length`` / ``random_seed``; commit c2e65b88 renamed
them ``min_tokens`` / ``seed``); the 1.x engine names read at NVIDIA/TensorRT-LLM 0c8de69a, whose
tensorrt_llm/version.py says 1.2.0rc8; the engine backend removed on TensorRT-LLM main (#15907,
tensorrtllm_backend f526fc5); the LLM-API backend from 0.19 (tensorrtllm_backend v0.19.0
all_models/llmapi, absent at v0.18.2); the template's 0 µs queue delay in front of tensorrt_llm
(v0.19.0 README); postprocessing's ``dynamic_batching {}`` (v0.19.0 postprocessing/config.pbtxt).
"""

from __future__ import annotations

import json
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.trtllm import LLAMA2_7B, LLAMA3_8B, write_engine, write_hf_model
from tritonkit.builders.trtllm import (
    SUPPORTED_TRTLLM_VERSIONS,
    TRTLLM_INTERFACES,
    EngineOverrides,
    EngineTarget,
    TrtllmRepoOptions,
    build_trtllm,
    derive_engine_params,
    derive_tokenizer_instances,
    find_interface,
    resolve_trtllm_version,
    trtllm_model_specs,
)
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.planner import find_gpu
from tritonkit.repository import lint_repository, read_config
from tritonkit.trtllm_versions import ENGINE_LINES, FACTS, LLMAPI_LINES, resolve_trtllm_line


def test_the_matrix_covers_0_17_to_1_2_and_main_each_with_its_upstream_source() -> None:
    assert SUPPORTED_TRTLLM_VERSIONS == ("0.17", "0.18", "0.19", "1.0", "1.1", "1.2", "main")
    for interface in TRTLLM_INTERFACES.values():
        if interface.has_engine:
            assert "config.pbtxt" in interface.source and interface.reads("input_ids")
    assert [(v.min_tokens_input, v.seed_input) for v in TRTLLM_INTERFACES.values()] == \
        [("min_length", "random_seed")] * 3 + [("min_tokens", "seed")] * 4
    assert TRTLLM_INTERFACES["0.17"].reads("return_kv_cache_reuse_stats")
    assert not TRTLLM_INTERFACES["0.19"].reads("return_kv_cache_reuse_stats")
    assert TRTLLM_INTERFACES["0.19"].reads("return_perf_metrics")
    assert TRTLLM_INTERFACES["1.2"].reads("return_num_output_tokens")


def test_the_1_x_engine_names_are_labelled_with_the_release_they_were_read_at() -> None:
    """0c8de69a is 1.2.0rc8 (its tensorrt_llm/version.py), not 1.0.0rc4: the 1.2 line says so, and
    1.0 / 1.1 say their names are carried over from it."""
    assert "0c8de69a (version.py 1.2.0rc8)" in TRTLLM_INTERFACES["1.2"].source
    assert "1.0.0rc4 (commit 0c8de69a)" not in " ".join(v.source for v in TRTLLM_INTERFACES.values())
    for line in ("1.0", "1.1"):
        assert TRTLLM_INTERFACES[line].source.startswith("carried over from")
    assert {row[0] for row in FACTS} == set(SUPPORTED_TRTLLM_VERSIONS)


def test_the_1_2_line_is_the_released_1_2_1_and_says_its_templates_are_1_2_0rc8s() -> None:
    """tensorrtllm_backend builds release/1.2.1 from 8addf2f on; 1.2.1's own templates were not readable,
    so the line's label says what stands for them, and the reads are listed in FACTS."""
    line = TRTLLM_INTERFACES["1.2"]
    assert line.released == "1.2.1" and line.label.startswith("1.2 (1.2.1; its templates carried over from 1.2.0rc8")
    assert line.source.startswith("1.2.1, its templates carried over from 1.2.0rc8") and "0c8de69a" in line.source
    assert find_interface("1.2.1") is line and find_interface("1.2.0rc8") is line
    reads = [row for row in FACTS if row[0] == "1.2" and row[1] == "1.2.1"]
    assert any("release/1.2.1" in row[3] for row in reads) and any("docs/llmapi.md" in row[3] for row in reads)
    # main stays apart: no engine, its own LLM-API tensors, no release label.
    main_line = TRTLLM_INTERFACES["main"]
    assert main_line.label == "main" and not main_line.released
    assert main_line.llmapi is not None and line.llmapi is not None
    assert set(main_line.llmapi.input_names) != set(line.llmapi.input_names)


def test_main_has_no_engine_backend_and_says_why() -> None:
    main_line = TRTLLM_INTERFACES["main"]
    assert not main_line.has_engine and main_line.engine_refusal is not None
    assert "#15907" in main_line.engine_refusal
    assert ENGINE_LINES == ("0.17", "0.18", "0.19", "1.0", "1.1", "1.2")
    assert LLMAPI_LINES == ("0.19", "1.0", "1.1", "1.2", "main")
    with pytest.raises(ConfigError, match="TensorRT-LLM main has no engine backend: .*#15907"):
        resolve_trtllm_version("main")


@pytest.mark.parametrize(("given", "line"), [("0.17.0.post1", "0.17"), ("0.18.2", "0.18"), ("v0.19.0", "0.19"),
                                             ("1.0.0rc4", "1.0"), ("1.1.0", "1.1"), ("1.2.1", "1.2"),
                                             ("1.2.0rc8", "1.2"), ("1.3.0rc5", "main"), ("2.0", "main"),
                                             ("main", "main"), ("0.19", "0.19")])
def test_versions_map_to_their_line(given: str, line: str) -> None:
    found = find_interface(given)
    assert found is not None and found.version == line


def test_an_unknown_installed_release_gets_the_newest_lines_llm_api_backend() -> None:
    for installed in (None, "0.16.0", "garbage"):
        line, engine, why = resolve_trtllm_line(None, installed=installed, engine=None)
        assert (line.version, engine) == ("main", "llmapi"), why
    line, engine, why = resolve_trtllm_line(None, installed="1.2.1", engine=None)
    assert (line.version, engine) == ("1.2", "llmapi") and "installed tensorrt_llm 1.2.1" in why
    assert resolve_trtllm_line(None, installed=None, engine="tensorrtllm")[0].version == "1.2"
    assert resolve_trtllm_line("0.18", installed=None, engine=None)[1] == "tensorrtllm"
    with pytest.raises(ConfigError, match="no LLM-API backend"):
        resolve_trtllm_line("0.18", installed=None, engine="llmapi")
    with pytest.raises(ConfigError, match="not in the supported matrix"):
        resolve_trtllm_line("0.16", installed=None, engine=None)


def test_the_default_is_the_installed_tensorrt_llm_else_the_newest_engine_line() -> None:
    assert resolve_trtllm_version(None, installed=None).version == "1.2"
    assert resolve_trtllm_version(None, installed=None, need_engine=False).version == "main"
    assert resolve_trtllm_version(None, installed="0.18.1").version == "0.18"
    assert resolve_trtllm_version("0.17", installed="0.18.1").version == "0.17"
    with pytest.raises(ConfigError, match=r"TensorRT-LLM 0\.16\.0 \(--trtllm-version\) is not in the supported"):
        resolve_trtllm_version("0.16.0")


@pytest.mark.parametrize("version", ENGINE_LINES)
def test_each_lines_configs_use_its_names_and_accept_both_spellings_at_the_front(version: str) -> None:
    v = TRTLLM_INTERFACES[version]
    specs = {s.name: s for s in trtllm_model_specs(TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t",
                                                                      trtllm_version=version))}
    engine = specs["tensorrt_llm"].to_proto()
    names = {t.name for t in engine.input}
    assert all(v.reads(n) for n in names), sorted(n for n in names if not v.reads(n))
    assert {v.min_tokens_input, v.seed_input} <= names and not names & set(v.renamed_inputs)
    for front in ("ensemble", "tensorrt_llm_bls"):
        front_names = {t.name for t in specs[front].to_proto().input}
        assert {"min_length", "min_tokens", "random_seed", "seed"} <= front_names
    steps = specs["ensemble"].to_proto().ensemble_scheduling.step
    assert dict(steps[1].input_map)[v.min_tokens_input] == "_MIN_TOKENS"
    assert dict(steps[1].input_map)[v.seed_input] == "_SEED"


def test_queue_delay_instances_and_batching_are_sized_like_upstream() -> None:
    specs = {s.name: s.to_proto() for s in trtllm_model_specs(TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t",
                                                                                  max_batch_size=32))}
    assert specs["tensorrt_llm"].dynamic_batching.max_queue_delay_microseconds == 0
    derived = derive_tokenizer_instances(32).count
    for name in ("preprocessing", "postprocessing"):
        assert specs[name].instance_group[0].count == derived
        assert specs[name].HasField("dynamic_batching")
        assert specs[name].dynamic_batching.max_queue_delay_microseconds == 0
    assert specs["preprocessing"].parameters["add_special_tokens"].string_value == "true"
    given = TrtllmRepoOptions(engine_dir="/e", tokenizer_dir="/t", max_batch_size=32, preprocessing_instances=2)
    assert given.tokenizer_instances == (2, derived)


def test_an_int8_kv_cache_turns_paged_context_fmha_off_with_the_reason() -> None:
    plan = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), kv_dtype="int8"))
    assert plan.params.use_paged_context_fmha is False
    reason = next(r for r in plan.reasons if r.key == "use_paged_context_fmha").why
    assert "turned off" in reason and "INT8 KV cache" in reason
    assert any("use_paged_context_fmha changed to false" in w for w in plan.warnings)


def test_an_fp8_kv_cache_keeps_paged_context_fmha_only_with_fp8_quantisation() -> None:
    gpu = find_gpu("H100-80GB")
    assert derive_engine_params(LLAMA3_8B, EngineTarget(gpu=gpu, kv_dtype="fp8")).params.use_paged_context_fmha is False
    assert derive_engine_params(LLAMA3_8B, EngineTarget(gpu=gpu, kv_dtype="fp8", precision="fp8")).params.use_paged_context_fmha


def test_kv_reuse_with_an_int8_kv_cache_is_refused_before_the_build() -> None:
    with pytest.raises(ConfigError, match="KV-cache reuse needs paged context FMHA, which is off .turned off"):
        derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB"), kv_dtype="int8",
                             overrides=EngineOverrides(enable_kv_cache_reuse=True)))


def test_the_kv_cache_dtype_defaults_to_the_models_and_is_printed_so() -> None:
    bf16 = derive_engine_params(LLAMA3_8B, EngineTarget(gpu=find_gpu("H100-80GB")))
    assert "KV cache in bf16" in next(r for r in bf16.reasons if r.key == "kv_cache_quant_algo").why
    fp16 = derive_engine_params(LLAMA2_7B, EngineTarget(gpu=find_gpu("H100-80GB")))
    assert "KV cache in fp16" in next(r for r in fp16.reasons if r.key == "kv_cache_quant_algo").why


def test_the_printed_build_command_pastes_safely_into_a_shell(tmp_path: Path) -> None:
    """A repository path holding $(...) must reach the command as text, never run."""
    hf = write_hf_model(tmp_path / "hf")
    marker = tmp_path / "ran"
    repo = tmp_path / f"repo $(touch {marker})"
    result = build_trtllm(hf, engine="tensorrtllm", repo=repo, run_build=False)
    line = next(x for x in result.summary().splitlines() if "to build it on the GPU machine:" in x)
    pasted = line.split("to build it on the GPU machine: ", 1)[1]
    assert shlex.split(pasted) == result.build_argv
    echoed = subprocess.run(["sh", "-c", f'set -- {pasted}; printf "%s\\n" "$@"'], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert echoed == result.build_argv and not marker.exists()


def test_cli_writes_the_requested_lines_names(tmp_path: Path) -> None:
    run = CliRunner().invoke(main, ["build", "trtllm", "--engine", "reference", "--repo", str(tmp_path / "r"),
                                    "--trtllm-version", "0.19", "--json"])
    assert run.exit_code == 0, run.output
    assert json.loads(run.output)["trtllm_version"] == "0.19"
    names = {t.name for t in read_config(tmp_path / "r" / "tensorrt_llm" / "config.pbtxt").input}
    assert {"min_length", "random_seed"} <= names and not {"min_tokens", "seed"} & names
    bad = CliRunner().invoke(main, ["build", "trtllm", "--engine", "reference", "--repo", str(tmp_path / "s"),
                                    "--trtllm-version", "0.16"])
    assert bad.exit_code == 2 and "not in the supported matrix" in bad.output and "Traceback" not in bad.output


def test_lint_warns_about_inputs_the_engines_version_ignores(tmp_path: Path) -> None:
    """A repository written for 1.x (min_tokens, seed) in front of a 0.17 engine: both are accepted by
    Triton and dropped by the C++ backend, which reads min_length / random_seed."""
    from tritonkit.builders.trtllm import write_trtllm_repository
    from tritonkit.builders.trtllm.tokenizer import build_reference_tokenizer

    build_reference_tokenizer(tmp_path / "tok")
    write_engine(tmp_path / "engine", version="0.17.0.post1", max_batch_size=64)
    write_trtllm_repository(tmp_path / "repo", TrtllmRepoOptions(engine_dir=str(tmp_path / "engine"),
                                                                 tokenizer_dir=str(tmp_path / "tok"),
                                                                 trtllm_version="1.0"))
    findings = [f for f in lint_repository(tmp_path / "repo").findings if f.rule_id == "TK910"]
    assert sorted(f.field for f in findings) == ["input 'min_tokens'", "input 'seed'"]
    assert all(f.model == "tensorrt_llm" and f.severity.name == "WARNING" for f in findings)
    assert "reads it as 'min_length'" in next(f.hint for f in findings if "min_tokens" in f.field)


@pytest.mark.parametrize("text", ["１.２", "1.２", "1.2garbage!", "1.2.1.5"])
def test_a_trtllm_version_not_written_exactly_is_not_read_as_a_line(text: str) -> None:
    """Python's int() reads full-width digits: "１.２" must not be TensorRT-LLM 1.2."""
    assert find_interface(text) is None
    with pytest.raises(ConfigError, match="non-ASCII digit" if not text.isascii() else "not in the supported matrix"):
        resolve_trtllm_version(text)
    assert find_interface("1.2.1+cu128") is TRTLLM_INTERFACES["1.2"]
