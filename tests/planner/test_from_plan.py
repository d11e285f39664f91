"""``build trtllm`` / ``build vllm --from-plan``: the plan's deployment fills what is not given, a given flag wins.

No GPU: the LLM-API repository and the vLLM model are written (nothing runs TensorRT-LLM or vLLM),
and the files are read back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tests.support.trtllm import write_hf_model
from tritonkit.cli import main
from tritonkit.errors import ConfigError
from tritonkit.planner.serving_plan import PlanServing, merge_plan, read_plan


def _invoke(*argv: str) -> str:
    run = CliRunner().invoke(main, list(argv))
    assert run.exit_code == 0 and "Traceback" not in run.output, run.output
    return run.output


@pytest.fixture
def planned(tmp_path: Path) -> tuple[Path, Path, dict]:  # type: ignore[type-arg]
    hf = write_hf_model(tmp_path / "Llama-3-8B")
    plan = tmp_path / "plan.json"
    _invoke("plan", "--hf-config", str(hf / "config.json"), "--gpu", "H100", "--qps", "40", "--tokens-per-s", "25",
            "--input-tokens", "2000", "--output-tokens", "300", "--precision", "fp8", "--kv-dtype", "fp8",
            "--out", str(plan))
    return hf, plan, json.loads(plan.read_text())


def test_build_trtllm_llmapi_takes_the_plans_deployment_and_a_given_flag_wins(
        planned: tuple[Path, Path, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    hf, plan, saved = planned
    out = _invoke("build", "trtllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"), "--engine", "llmapi",
                  "--trtllm-version", "1.2", "--from-plan", str(plan), "--max-batch-size", "7")
    model_yaml = yaml.safe_load((tmp_path / "r" / "tensorrt_llm" / "1" / "model.yaml").read_text())
    serving = saved["serving"]
    assert model_yaml["tensor_parallel_size"] == serving["tensor_parallel"]
    assert model_yaml["max_batch_size"] == 7
    assert f"--max-batch-size 7 (given) wins over the plan's {serving['max_batch_size']}" in out
    assert f"--tp {serving['tensor_parallel']} from the plan" in out and "--gpu H100-SXM from the plan" in out
    assert "--input-tokens 2000 from the plan" in out


def test_build_vllm_takes_the_plans_batch_length_and_parallelism(
        planned: tuple[Path, Path, dict], tmp_path: Path) -> None:  # type: ignore[type-arg]
    hf, plan, saved = planned
    out = _invoke("build", "vllm", "--hf-model", str(hf), "--repo", str(tmp_path / "v"), "--from-plan", str(plan),
                  "--json")
    model_json = json.loads((tmp_path / "v" / "vllm_model" / "1" / "model.json").read_text())
    serving = saved["serving"]
    assert model_json["tensor_parallel_size"] == serving["tensor_parallel"]
    assert model_json["max_num_seqs"] == serving["max_batch_size"]
    assert model_json["max_model_len"] == serving["max_seq_len"]
    assert "--max-num-seqs" in out and "from the plan" in out


def test_a_file_that_is_not_an_llm_plan_is_refused_with_what_to_pass(tmp_path: Path) -> None:
    junk, other = tmp_path / "junk.json", tmp_path / "measured.json"
    junk.write_text("{not json")
    other.write_text(json.dumps({"kind": "measured", "serving": {}}))
    for path, message in ((junk, "plan .*junk.json is not valid JSON"), (other, "not an LLM plan")):
        with pytest.raises(ConfigError, match=message) as err:
            read_plan(path)
        assert "tritonkit plan" in (err.value.hint or "")
    run = CliRunner().invoke(main, ["build", "vllm", "--hf-model", str(write_hf_model(tmp_path / "hf")),
                                    "--repo", str(tmp_path / "v"), "--from-plan", str(other)])
    assert run.exit_code == 2 and "fix:" in run.output and not (tmp_path / "v").exists()
    # A FIFO given as the plan is refused before it is opened (reading it would wait for a writer).
    fifo = tmp_path / "plan.fifo"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match="plan.fifo"):
        read_plan(fifo)


def test_merge_keeps_given_values_fills_the_rest_and_ignores_what_the_builder_lacks() -> None:
    plan = PlanServing(source="p.json", tp=4, max_batch_size=64, chunked_context=True)
    merged, said = merge_plan(plan, {"tp": 2, "max_num_seqs": None}, {"tp"}, {"tp": "tp", "max_batch_size": "max_num_seqs"})
    assert merged == {"tp": 2, "max_num_seqs": 64}
    assert said == ["--tp 2 (given) wins over the plan's 4", "--max-num-seqs 64 from the plan"]


def test_a_disaggregated_plan_says_which_workers_the_build_is_for() -> None:
    plan = PlanServing(source="p.json", tp=4, disaggregated={"prefill_workers": 3, "prefill_tensor_parallel": 2,
                                                             "decode_workers": 1})
    _, said = merge_plan(plan, {"tp": 1}, set(), {"tp": "tp"})
    assert said[0] == "--tp 4 from the plan"
    assert "disaggregated (3 prefill workers of TP 2, 1 decode workers)" in said[1] and "--tp 2" in said[1]
