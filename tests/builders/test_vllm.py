"""``build vllm``: Triton's vLLM backend model, its engine arguments from the planner.

Facts followed: triton-inference-server/vllm_backend r26.01 (c70d6547) samples/model_repository/vllm_model
(config.pbtxt: backend "vllm", one KIND_MODEL instance; 1/model.json: AsyncEngineArgs) and src/model.py
(auto_complete_config declares the inputs and outputs and sets decoupled / max_batch_size 0 itself;
KIND_GPU refused above one GPU). No vLLM here: the files are compared with those facts.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support.trtllm import LLAMA3_8B, write_hf_model
from tritonkit.builders.trtllm import EngineTarget, derive_engine_params
from tritonkit.builders.vllm import build_vllm
from tritonkit.cli import main
from tritonkit.planner import Workload
from tritonkit.repository import read_config


def test_model_json_holds_the_planners_figures_each_with_its_reason(tmp_path: Path) -> None:
    hf = write_hf_model(tmp_path / "hf")
    target = EngineTarget(gpu="H100-80GB", tp=2, workload=Workload(input_tokens=512, output_tokens=128))
    result = build_vllm(hf, repo=tmp_path / "r", target=target)
    planned = derive_engine_params(LLAMA3_8B, target).params
    doc = json.loads((tmp_path / "r" / "vllm_model" / "1" / "model.json").read_text())
    assert doc == {"model": str(hf), "gpu_memory_utilization": 0.9, "max_num_seqs": planned.max_batch_size,
                   "max_model_len": planned.max_seq_len, "tensor_parallel_size": 2}
    cfg = read_config(tmp_path / "r" / "vllm_model" / "config.pbtxt")
    assert cfg.backend == "vllm" and [(g.kind, g.count) for g in cfg.instance_group] == [(3, 1)]  # KIND_MODEL
    assert not cfg.input and not cfg.output  # the backend's auto-complete declares them
    text = result.summary()
    assert "vLLM's default" in text and "planner:" in text and "KIND_MODEL" in text


def test_the_cli_refuses_tp_that_does_not_divide_the_heads_and_writes_nothing(tmp_path: Path) -> None:
    hf = write_hf_model(tmp_path / "hf")
    run = CliRunner().invoke(main, ["build", "vllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"), "--tp", "3"])
    assert run.exit_code == 2 and "do not split over tp 3" in run.output and "fix:" in run.output
    assert not (tmp_path / "r").exists()
    ok = CliRunner().invoke(main, ["build", "vllm", "--hf-model", str(hf), "--repo", str(tmp_path / "r"),
                                   "--max-num-seqs", "64", "--json"])
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.output)["model_json"]["max_num_seqs"] == 64
    bad = CliRunner().invoke(main, ["build", "vllm", "--hf-model", str(hf), "--repo", str(tmp_path / "s"),
                                    "--gpu-memory-utilization", "1.5"])
    assert bad.exit_code == 2 and "--gpu-memory-utilization '1.5': too large" in bad.output
    assert not (tmp_path / "s").exists()
