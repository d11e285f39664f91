"""``tritonkit plan`` through click's CliRunner: tables, JSON, files written, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tritonkit.cli import main
from tritonkit.perf.result import LatencyStats, RunMetadata, RunResult, StepResult

DATA = Path(__file__).parent / "data" / "planner"
LLAMA3 = str(DATA / "llama-3-8b.json")


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["plan", *args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, result.output


def test_list_gpus_prints_the_catalogue_with_units() -> None:
    code, out = _run("--list-gpus")
    assert code == 0
    for name in ("T4", "L4", "A10", "A100-40GB", "A100-80GB", "H100-SXM", "H200", "L40S", "RTX-4090",
                 "JETSON-ORIN-64GB"):
        assert name in out
    assert "GiB" in out and "GB/s" in out and "dense" in out and "204.8" in out


def test_list_gpus_as_json_carries_every_figures_source() -> None:
    code, out = _run("--list-gpus", "--json")
    assert code == 0
    gpus = {g["name"]: g for g in json.loads(out)}
    orin = gpus["JETSON-ORIN-64GB"]
    assert orin["bandwidth_gb_s"]["value"] == 204.8 and orin["bandwidth_gb_s"]["source"]
    assert gpus["H100-SXM"]["fp16_dense_tflops"]["dense"] is True


def test_plan_prints_a_table_with_every_assumption_beside_the_number() -> None:
    code, out = _run("--hf-config", LLAMA3, "--gpu", "a100-80gb", "--input-tokens", "1024", "--output-tokens",
                     "1024", "--qps", "20", "--tokens-per-s", "20")
    assert code == 0, out
    assert "128 KiB" in out and "256 MiB" in out
    assert "from config torch_dtype bfloat16" in out  # precision chosen from the config, said so
    assert "assumption" in out and "--bandwidth-efficiency" in out
    assert "GPUs needed" in out and "[serving parameters]" in out


def test_plan_json_has_unit_suffixed_keys_and_serving_parameters(tmp_path: Path) -> None:
    out_file = tmp_path / "plans" / "llama3.json"
    code, out = _run("--hf-config", LLAMA3, "--gpu", "H100", "--precision", "fp8", "--qps", "50",
                     "--input-tokens", "512", "--output-tokens", "256", "--ttft-ms", "500", "--json",
                     "--out", str(out_file))
    assert code == 0, out
    data = json.loads(out)
    assert data["memory"]["kv_bytes_per_token"] == 131_072
    assert data["memory"]["weights_bytes"] == 8_030_261_248
    assert data["fleet"]["gpus_needed"] >= 1
    assert data["serving"]["max_batch_size"] == data["walls"]["concurrent_sequences"]
    assert data["explain"]["gpus_needed"]["basis"] == "theory"
    assert json.loads(out_file.read_text()) == data  # the file holds the same plan


def test_explicit_flags_plan_the_edge_example_without_a_config() -> None:
    code, out = _run("--params", "7B", "--num-layers", "32", "--num-kv-heads", "32", "--head-dim", "128",
                     "--precision", "q4_k_m", "--weights-gb", "4", "--gpu", "JETSON-ORIN-64GB",
                     "--input-tokens", "512", "--output-tokens", "256", "--json")
    assert code == 0, out
    assert json.loads(out)["throughput"]["decode_tokens_per_s_per_stream_ideal"] == 51.2


def test_a_config_missing_a_field_names_it_and_the_flag_that_supplies_it() -> None:
    code, out = _run("--hf-config", str(DATA / "missing-layers.json"), "--gpu", "A100-80GB")
    assert code == 2
    assert "num_hidden_layers" in out and "--num-layers" in out
    code, out = _run("--hf-config", str(DATA / "missing-layers.json"), "--gpu", "A100-80GB", "--num-layers", "32")
    assert code == 0, out


def test_an_unknown_gpu_lists_the_known_ones() -> None:
    code, out = _run("--hf-config", LLAMA3, "--gpu", "V100")
    assert code == 2
    assert "unknown GPU 'V100'" in out and "A100-80GB" in out and "JETSON-ORIN-64GB" in out


def test_a_custom_gpu_by_flags_works_and_half_a_description_is_refused() -> None:
    code, out = _run("--hf-config", LLAMA3, "--gpu-memory-gib", "32", "--gpu-bandwidth-gb-s", "1000",
                     "--gpu-fp16-tflops", "200", "--json")
    assert code == 0, out
    assert json.loads(out)["hardware"]["gpu_memory_gib"] == 32
    code, out = _run("--hf-config", LLAMA3, "--gpu-memory-gib", "32")
    assert code == 2 and "--gpu-bandwidth-gb-s" in out


def test_nonsense_numbers_are_clean_errors() -> None:
    for args, needle in (
        (("--qps", "-5"), "--qps"),
        (("--efficiency", "1.5"), "efficiency"),
        (("--efficiency", "0"), "efficiency"),
        (("--input-tokens", "0"), "--input-tokens"),
        (("--params", "lots"), "--params"),
    ):
        code, out = _run("--hf-config", LLAMA3, "--gpu", "L4", *args)
        assert code == 2, (args, out)
        assert needle in out, (args, out)


def test_nothing_to_plan_says_what_to_pass() -> None:
    code, out = _run("--gpu", "L4")
    assert code == 2 and "--hf-config" in out and "--from-result" in out


def test_weights_too_big_for_the_gpu_exit_2_with_a_tp_hint() -> None:
    code, out = _run("--hf-config", str(DATA / "mixtral-8x7b.json"), "--gpu", "L40S")
    assert code == 2 and "do not fit" in out and "--tp" in out


def test_from_result_sizes_a_non_llm_model(tmp_path: Path) -> None:
    result = RunResult(
        metadata=RunMetadata(model="resnet50", url="127.0.0.1:8001", protocol="grpc", started_utc="2026-11-29T10:00:00Z"),
        steps=[
            StepResult(load_mode="concurrency", load_value=c, throughput_per_s=thr,
                       latency=LatencyStats(p50_ms=p50, p90_ms=p50, p95_ms=p99, p99_ms=p99))
            for c, thr, p50, p99 in ((1, 25.0, 40.0, 45.0), (4, 80.0, 50.0, 90.0), (8, 100.0, 80.0, 200.0))
        ],
    ).save(tmp_path / "result.json")
    code, out = _run("--from-result", str(result), "--qps", "200", "--p99-ms", "100", "--efficiency", "0.6",
                     "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["kind"] == "measured"
    assert data["measurement"]["qps_per_gpu_measured"] == 80.0
    assert data["fleet"]["gpus_needed"] == 5
    assert data["explain"]["gpus_needed"]["basis"] == "measured"
    code, text = _run("--from-result", str(result), "--qps", "200")
    assert code == 0 and "measured" in text and "serial QPS₁" in text


def test_from_result_with_a_broken_file_names_the_missing_field(tmp_path: Path) -> None:
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps({"steps": [{"concurrency": 1, "latency_ms": {"p50": 10}}]}))
    code, out = _run("--from-result", str(bad), "--qps", "10")
    assert code == 2 and "throughput_per_s" in out


def test_plan_help_shows_an_example() -> None:
    code, out = _run("--help")
    assert code == 0 and "Example" in out and "--hf-config" in out
