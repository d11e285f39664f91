"""NVIDIA's performance model (AIConfigurator) as an optional extra: the command, its results, the plan.

The CSVs under tests/data/planner/aiconfigurator/ are what ``aiconfigurator 0.12.0`` (PyPI, in a venv
of its own) wrote for Llama 3 70B on H200 SXM at 16 req/s, 1024/256 tokens, TPOT 30 ms (its model
path replaced by ``model``). The last test runs the real tool when ``TRITONKIT_AICONFIGURATOR`` names
it, and is skipped, saying so, where it is not installed (it is ~850 MB, never a dependency).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.planner.test_plan import _model
from tests.support.paths import DATA
from tritonkit.cli import main
from tritonkit.planner import Workload, find_gpu, find_precision, plan_llm
from tritonkit.planner.external import (
    ENV_VAR,
    ExternalAnswer,
    answered_plan,
    ask_performance_model,
    parse_results,
    recommend_argv,
)
from tritonkit.planner.search import SearchSpace

RUN = DATA / "planner" / "aiconfigurator" / "llama-3-70b-h200"
LLAMA70 = DATA / "planner" / "llama-3-70b.json"
SLA = Workload(target_qps=16, input_tokens=1024, output_tokens=256, tokens_per_s_per_user=33.3)


def test_the_recommend_command_is_built_exactly() -> None:
    argv = recommend_argv(Path("/v/bin/aiconfigurator"), Path("/m"), "h200_sxm", isl=1024, osl=256, ttft_ms=2000,
                          tpot_ms=30.03, request_rate=16, save_dir=Path("/out"))
    assert argv == ["/v/bin/aiconfigurator", "cli", "recommend", "--model-path", "/m", "--system", "h200_sxm",
                    "--backend", "trtllm", "--isl", "1024", "--osl", "256", "--ttft", "2000", "--tpot", "30.03",
                    "--target-request-rate", "16", "--save-dir", "/out", "--no-color"]


def test_its_results_are_read_for_both_modes_fewest_gpus_first() -> None:
    ranked = parse_results(RUN)
    assert [d.gpus for d in ranked] == sorted(d.gpus for d in ranked)
    best = ranked[0]
    assert (best.mode, best.gpus, best.replicas, best.tensor_parallel, best.batch) == ("aggregated", 10, 5, 2, 32)
    assert best.perf_db == "trtllm 1.3.0rc20 on h200_sxm" and best.weights_dtype == "bfloat16"
    disagg = [d for d in ranked if d.mode == "disaggregated"]
    assert disagg and disagg[0].prefill_workers == 2 and disagg[0].decode_workers == 1
    assert disagg[0].gpus == disagg[0].replicas * (disagg[0].prefill_workers * disagg[0].prefill_tensor_parallel
                                                   + disagg[0].decode_workers * disagg[0].tensor_parallel)


def test_an_answer_sizes_the_fleet_and_serving_and_the_plan_says_who_answered() -> None:
    plan = plan_llm(_model("llama-3-70b"), find_gpu("H200"), find_precision("bf16"), SLA, search=SearchSpace())
    ranked = parse_results(RUN)
    answer = ExternalAnswer("aiconfigurator 0.12.0", ("aiconfigurator",), 24.0, ranked[0], tuple(ranked))
    answered = answered_plan(plan, answer, 0.25, own_gpus=plan.value("gpus_needed"))
    assert answered.value("performance_model") == "aiconfigurator 0.12.0"
    assert answered.value("gpus_needed") == 10 and "tritonkit's own search: 8" in answered.line("gpus_needed").note
    assert answered.value("gpus_recommended") == 14  # 5 replicas / 0.75 → 7 replicas × 2 GPUs
    assert answered.suggestion.tensor_parallel == 2 and answered.suggestion.max_batch_size == 32
    assert answered.engines is not None and answered.engines["vllm"]["tensor_parallel_size"] == 2
    assert answered.to_dict()["performance_model"]["best"]["label"] == "agg 5 × TP2 B32"
    own = answered_plan(plan, "not installed", 0.25)
    assert own.value("performance_model") == "tritonkit search" and "not installed" in own.line("performance_model").note
    assert own.value("gpus_needed") == plan.value("gpus_needed")


def test_a_gpu_or_precision_it_does_not_cover_is_said_without_running_it(tmp_path: Path) -> None:
    tool = tmp_path / "aiconfigurator"  # never run: the case is refused first
    assert "no data for RTX-4090" in str(ask_performance_model(tool, LLAMA70, "RTX-4090", "bf16", isl=1, osl=1,
                                                               ttft_ms=1, tpot_ms=1, request_rate=1))
    assert "not fp8" in str(ask_performance_model(tool, LLAMA70, "H200", "fp8", isl=1, osl=1, ttft_ms=1, tpot_ms=1,
                                                  request_rate=1))


def test_asking_for_it_when_it_is_not_installed_exits_2_and_auto_says_who_answered(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(ENV_VAR, str(tmp_path / "missing"))
    args = ["plan", "--hf-config", str(LLAMA70), "--gpu", "H200", "--qps", "16", "--tokens-per-s", "33.3"]
    run = CliRunner().invoke(main, [*args, "--performance-model", "aiconfigurator"])
    assert run.exit_code == 2 and ENV_VAR in run.output and "fix:" in run.output
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0 and "tritonkit search" in run.output and "not installed" in run.output


def test_the_real_tool_answers_when_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs ``aiconfigurator cli recommend`` (~25–45 s on 2 cores) where TRITONKIT_AICONFIGURATOR names it."""
    tool = os.environ.get(ENV_VAR)
    if not tool or not Path(tool).is_file():
        pytest.skip(f"{ENV_VAR} does not name an installed aiconfigurator (pip install aiconfigurator in a venv "
                    "of its own)")
    run = CliRunner().invoke(main, ["plan", "--hf-config", str(LLAMA70), "--gpu", "H200", "--qps", "16",
                                    "--tokens-per-s", "33.3", "--performance-model", "aiconfigurator"])
    assert run.exit_code == 0, run.output
    assert "answered by" in run.output and "aiconfigurator 0." in run.output and "perf DB trtllm" in run.output
