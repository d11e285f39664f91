"""``tritonkit plan`` through click's CliRunner: tables, JSON, files written, clean errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.paths import DATA as TEST_DATA
from tests.support.paths import ROOT
from tests.support.planner_runs import known_cost_run, result_file
from tritonkit.cli import main
from tritonkit.perf import PerfResult

DATA = TEST_DATA / "planner"
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


def test_weights_too_big_for_the_gpu_at_the_given_tp_exit_2_with_a_tp_hint() -> None:
    code, out = _run("--hf-config", str(DATA / "mixtral-8x7b.json"), "--gpu", "L40S", "--tp", "1")
    assert code == 2 and "do not fit" in out and "--tp" in out


def test_llama_3_70b_on_a100_chooses_tensor_parallel_2_and_says_so() -> None:
    code, out = _run("--hf-config", str(DATA / "llama-3-70b.json"), "--gpu", "A100-80GB", "--qps", "2", "--no-search")
    assert code == 0, out
    assert "× TP 2" in out and "chosen: the smallest tensor-parallel size" in out
    assert "(bf16: the model's own dtype" in out and "(fp16" not in out


def test_no_wording_points_at_documents_the_user_cannot_read() -> None:
    _, out = _run("--hf-config", LLAMA3, "--gpu", "A100-80GB", "--qps", "20", "--p99-ms", "9000")
    _, helptext = _run("--help")
    for text in (out, helptext):
        assert "brief" not in text.lower() and "issue" not in text.lower()
    assert "rule of thumb" in out


def test_from_result_sizes_a_non_llm_model(tmp_path: Path) -> None:
    result = result_file(tmp_path / "result.json", ((1, 25.0, 40.0, 45.0), (4, 80.0, 50.0, 90.0),
                                                     (8, 100.0, 80.0, 200.0)))
    code, out = _run("--from-result", str(result), "--qps", "200", "--p99-ms", "100", "--efficiency", "0.6",
                     "--json")
    assert code == 0, out
    data = json.loads(out)
    assert data["kind"] == "measured"
    assert data["measurement"]["qps_per_unit"] == 80.0
    assert data["fleet"]["gpus_needed"] == 5
    assert data["explain"]["gpus_needed"]["basis"] == "measured"
    code, text = _run("--from-result", str(result), "--qps", "200")
    assert code == 0 and "serial QPS₁" in text and "2-core CPU host" in text
    assert "lower bound" in text and "extend the ladder" in text


def test_from_result_accepts_the_toolkits_own_result_with_failed_requests(tmp_path: Path) -> None:
    result = PerfResult.load(result_file(tmp_path / "r.json", ((1, 25.0, 40.0, 45.0), (8, 100.0, 80.0, 90.0))))
    result.steps[1].error_count, result.steps[1].error_note = 4, "deadline exceeded"
    result.stop_reason = "request_errors"
    code, out = _run("--from-result", str(result.save(tmp_path / "result.json")), "--qps", "100")
    assert code == 0, out
    assert "failed request" in out and "QPS per 2-core CPU host (below the knee)" in out


def test_the_measured_config_caps_the_suggested_batch_size(tmp_path: Path) -> None:
    result = result_file(tmp_path / "result.json", ((1, 900.0, 1.0, 1.5), (16, 5578.0, 2.8, 4.9)))
    demo = ROOT / "model_repository" / "demo_mlp"
    code, out = _run("--from-result", str(result), "--model-config", str(demo), "--qps", "1000", "--json")
    assert code == 0, out
    assert json.loads(out)["serving"]["max_batch_size"] == 8


def test_predict_then_check_writes_the_predictions_and_scores_a_later_run(tmp_path: Path) -> None:
    calib = known_cost_run(tmp_path / "calib.json", [1, 2, 4])
    config = tmp_path / "config.pbtxt"
    config.write_text('name: "m"\nbackend: "python"\nmax_batch_size: 8\n'
                      "dynamic_batching { max_queue_delay_microseconds: 0 }\n"
                      "instance_group { count: 1 kind: KIND_CPU }\n")
    plan_path = tmp_path / "plan.json"
    code, out = _run("--from-result", str(calib), "--model-config", str(config), "--predict-concurrency", "64",
                     "--out", str(plan_path))
    assert code == 0, out
    assert "[predictions]" in out and "closed loop" in out
    saved = json.loads(plan_path.read_text())["predictions"]["predictions"]
    assert saved[0]["throughput_per_s"] == pytest.approx(8000 / 21, rel=0.02)  # B / S(B) with S = 5 + 2·8 ms
    later = result_file(tmp_path / "later.json", ((64, 8000 / 21 * 1.05, 170.0, 180.0),))
    code, out = _run("--check", str(later), "--predictions", str(plan_path))
    assert code == 0, out
    error = saved[0]["throughput_per_s"] / (8000 / 21 * 1.05) - 1  # about −4.8 %
    assert "throughput_per_s" in out and f"{error:+.1%}" in out


def test_predictions_without_the_measured_config_say_what_to_pass(tmp_path: Path) -> None:
    calib = known_cost_run(tmp_path / "calib.json", [1])
    code, out = _run("--from-result", str(calib), "--predict-concurrency", "8")
    assert code == 2 and "--model-config" in out


def test_check_without_predictions_says_what_to_pass(tmp_path: Path) -> None:
    later = result_file(tmp_path / "later.json", ((64, 100.0, 170.0, 180.0),))
    code, out = _run("--check", str(later))
    assert code == 2 and "--predictions" in out


def test_from_result_with_a_file_that_is_not_a_perf_result_says_so(tmp_path: Path) -> None:
    bad = tmp_path / "result.json"
    bad.write_text(json.dumps({"steps": [{"concurrency": 1, "latency_ms": {"p50": 10}}]}))
    code, out = _run("--from-result", str(bad), "--qps", "10")
    assert code == 2 and "schema_version" in out


def test_plan_help_shows_an_example() -> None:
    code, out = _run("--help")
    assert code == 0 and "Example" in out and "--hf-config" in out


@pytest.mark.parametrize(("field", "value"), [("p99_ms", float("nan")), ("p99_ms", float("inf")),
                                              ("p99_ms", -3.0), ("throughput_per_s", 1e12)])
def test_from_result_refuses_a_figure_that_is_not_finite_or_in_range(tmp_path: Path, field: str,
                                                                      value: float) -> None:
    result = PerfResult.load(result_file(tmp_path / "r.json", ((1, 25.0, 40.0, 45.0), (4, 80.0, 50.0, 90.0))))
    step = result.steps[1]
    if field == "p99_ms":
        assert step.latency is not None
        step.latency.p99_ms = value
    else:
        step.throughput_per_s = value
    code, out = _run("--from-result", str(result.save(tmp_path / "result.json")), "--qps", "100")
    assert code == 2, out
    # Refused when the file is read (the one record reader), naming the file, the step and the field.
    assert "result.json" in out and "steps[1]" in out and field in out, out


def test_plan_searches_the_deployment_and_writes_the_pareto_plot_and_engine_parameters(tmp_path: Path) -> None:
    plot, out_file = tmp_path / "pareto.png", tmp_path / "plan.json"
    code, out = _run("--hf-config", str(DATA / "llama-3-70b.json"), "--gpu", "H200", "--qps", "16",
                     "--tokens-per-s", "33.3", "--kv-dtype", "bf16,fp8", "--plot", str(plot), "--out", str(out_file))
    assert code == 0, out
    assert "[search:" in out and "best" in out and "runner-up" in out and "pareto" in out
    assert "tok/s/user" in out and "tok/s/GPU" in out and "calibrated against NVIDIA's published" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(out_file.read_text())
    search = saved["search"]
    assert search["best"]["meets_sla"] and search["best"]["gpus"] == saved["fleet"]["gpus_needed"]
    assert search["best"]["gpus"] <= 16 and len(search["pareto"]) >= 3
    assert {c["kv_dtype"] for c in search["pareto"]} <= {"bf16", "fp8"}
    engines = saved["engines"]
    assert engines["trtllm_llmapi"]["tensor_parallel_size"] == saved["serving"]["tensor_parallel"]
    assert engines["trtllm_llmapi"]["max_batch_size"] == search["best"]["batch"]
    assert engines["vllm"]["max_num_seqs"] == search["best"]["batch"]
    assert engines["triton"]["instance_group"] == [{"kind": "KIND_MODEL", "count": 1}]


def test_a_kv_dtype_choice_without_a_search_and_a_plot_without_one_exit_2() -> None:
    code, out = _run("--hf-config", LLAMA3, "--gpu", "H200", "--kv-dtype", "fp16,fp8", "--no-search")
    assert code == 2 and "--no-search" in out and "fix:" in out
    code, out = _run("--hf-config", LLAMA3, "--gpu", "H200", "--no-search", "--plot", "x.png")
    assert code == 2 and "--plot" in out
    code, out = _run("--hf-config", LLAMA3, "--gpu", "H200", "--kv-dtype", "fp4")
    assert code == 2 and "fp16,fp8" in out


def test_plan_as_markdown_has_a_table_per_section_and_the_search_table() -> None:
    code, out = _run("--hf-config", LLAMA3, "--gpu", "L40S", "--qps", "10", "--tokens-per-s", "25", "--markdown")
    assert code == 0, out
    assert out.startswith("# Capacity plan: ")
    assert "## memory" in out and "| quantity | value | basis | how |" in out
    assert "## serving parameters" in out and "| max_batch_size |" in out
    assert "## search" in out and "| best | agg " in out and "| pareto |" in out
    code, out = _run("--hf-config", LLAMA3, "--gpu", "L40S", "--markdown", "--json")
    assert code == 2 and "pass one of them" in out


def test_a_gguf_model_on_jetson_is_searched_on_one_board_with_its_file_size() -> None:
    code, out = _run("--params", "7B", "--num-layers", "32", "--num-kv-heads", "32", "--head-dim", "128",
                     "--precision", "q4_k_m", "--weights-gb", "4.08", "--gpu", "JETSON-ORIN-64GB",
                     "--input-tokens", "512", "--output-tokens", "256", "--tokens-per-s", "10", "--qps", "1")
    assert code == 0, out
    assert "[search:" in out and "best       agg TP1" in out and "disagg P:" not in out
    assert "given (--weights-gb)" in out and "25% of memory" in out
