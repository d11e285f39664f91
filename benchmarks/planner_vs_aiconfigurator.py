"""The planner's picks held to NVIDIA's performance model (AIConfigurator), case by case.

For each case of ``benchmarks/data/planner_vs_aiconfigurator.json`` (a model folder under
tests/data/planner, a GPU both cover, a request rate, a TTFT and a time per output token):

1. NVIDIA's answer: ``aiconfigurator cli default --target-request-rate R`` (TensorRT-LLM) finds the
   fewest GPUs for the rate under the SLA, aggregated or disaggregated;
2. the planner's answer for the same rate and SLA (``plan_capacity``, its own search; the
   checkpoint's own precision);
3. the planner's pick scored by NVIDIA's model: ``aiconfigurator cli estimate`` of that deployment
   (its parallelism, attention data parallel and expert parallel, and batch) gives the TTFT and
   time per output token NVIDIA's model expects of it.

It prints both GPU counts, their ratio, the pick, and whether the pick meets the TTFT and TPOT as
NVIDIA's model estimates them. AIConfigurator is large (~850 MB) and never a dependency: install it
in a venv of its own and name its executable with ``--aiconfigurator`` or ``TRITONKIT_AICONFIGURATOR``::

    python3 -m venv /tmp/aic && /tmp/aic/bin/pip install aiconfigurator==0.12.0
    .venv/bin/python benchmarks/planner_vs_aiconfigurator.py --aiconfigurator /tmp/aic/bin/aiconfigurator

Each case takes 20–90 s of AIConfigurator on 2 cores (its estimates are model outputs, not timings:
nothing here is timed). ``--case N`` runs one case, ``--json`` prints the rows as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tritonkit.planner import PlanRequest, Workload, plan_capacity
from tritonkit.planner.external import ENV_VAR, find_tool, parse_results
from tritonkit.planner.search import Candidate, SearchSpace

ROOT = Path(__file__).resolve().parent.parent
CASES = ROOT / "benchmarks" / "data" / "planner_vs_aiconfigurator.json"
MODELS = ROOT / "tests" / "data" / "planner"
TIMEOUT_S = 600


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
                          env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:3])} exited {done.returncode}: {(done.stdout + done.stderr)[-600:]}")
    return done.stdout + done.stderr


def _model_dir(case: dict[str, Any], tmp: Path) -> Path:
    """The case's model as a folder AIConfigurator reads (config.json, hf_quant_config.json beside it)."""
    source, folder = MODELS / case["model"], tmp / "model"
    folder.mkdir()
    if source.is_dir():
        for file in source.iterdir():
            shutil.copyfile(file, folder / file.name)
    else:
        shutil.copyfile(source, folder / "config.json")
    return folder


def nvidia_answer(tool: Path, case: dict[str, Any], model: Path, tmp: Path) -> dict[str, Any]:
    """AIConfigurator's fewest GPUs for the case's request rate under its SLA."""
    save = tmp / "default"
    _run([str(tool), "cli", "default", "--model-path", str(model), "--system", case["system"], "--backend", "trtllm",
          "--isl", str(case["isl"]), "--osl", str(case["osl"]), "--ttft", f"{case['ttft_ms']:g}",
          "--tpot", f"{case['tpot_ms']:g}", "--target-request-rate", f"{case['request_rate']:g}",
          "--save-dir", str(save), "--no-color"])
    best = parse_results(save)[0]
    return {"gpus": best.gpus, "deployment": best.label(), "ttft_ms": best.ttft_ms,
            "tpot_ms": round(1000 / best.tokens_per_s_per_user, 1)}


def planner_pick(case: dict[str, Any]) -> tuple[int, Candidate]:
    plan = plan_capacity(PlanRequest(
        hf_config=MODELS / case["model"], gpu=case["gpu"], search=SearchSpace(kv_dtypes=("bf16", "fp8")),
        performance_model="own",
        workload=Workload(target_qps=case["request_rate"], input_tokens=case["isl"], output_tokens=case["osl"],
                          tokens_per_s_per_user=1000 / case["tpot_ms"], ttft_ms=case["ttft_ms"])))
    assert plan.search is not None and plan.search.best is not None
    best = plan.search.best
    assert isinstance(best, Candidate)
    return int(plan.value("gpus_needed")), best


def _parallel(prefix: str, tp: int, ep: int, dp: bool, moe: bool) -> list[str]:
    """One worker's parallelism in ``cli estimate``'s flags (``prefix``: ``""``, ``prefill-`` or ``decode-``)."""
    flags = [f"--{prefix}tp-size", str(1 if dp else tp)]
    if dp:
        flags += [f"--{prefix}attention-dp-size", str(tp)]
    if moe:
        flags += [f"--{prefix}moe-ep-size", str(ep), f"--{prefix}moe-tp-size", str(max(tp // ep, 1))]
    return flags


def estimate_argv(tool: Path, case: dict[str, Any], model: Path, pick: Candidate, moe: bool) -> list[str]:
    """``cli estimate`` of the planner's pick: aggregated at its batch (per attention-DP rank), or
    disaggregated with its prefill and decode workers."""
    argv = [str(tool), "cli", "estimate", "--model-path", str(model), "--system", case["system"], "--backend",
            "trtllm", "--isl", str(case["isl"]), "--osl", str(case["osl"]), "--no-color"]
    per_rank = max(pick.batch // (pick.tensor_parallel if pick.attention_dp else 1), 1)
    if pick.mode == "disaggregated":
        assert pick.prefill_tensor_parallel is not None
        ptp = pick.prefill_tensor_parallel
        return [*argv, "--estimate-mode", "disagg",
                *_parallel("prefill-", ptp, ptp if moe and pick.expert_parallel > 1 else 1, False, moe),
                "--prefill-batch-size", "1", "--prefill-num-workers", str(pick.prefill_workers or 1),
                *_parallel("decode-", pick.tensor_parallel, pick.expert_parallel, pick.attention_dp, moe),
                "--decode-batch-size", str(per_rank), "--decode-num-workers", str(pick.workers or 1)]
    return [*argv, "--estimate-mode", "agg", "--pp-size", str(pick.pipeline_parallel), "--batch-size", str(per_rank),
            *_parallel("", pick.tensor_parallel, pick.expert_parallel, pick.attention_dp, moe)]


def _figure(text: str, name: str) -> float:
    found = re.findall(rf"^\s*{name}:\s*([0-9.,]+)\s*ms", text, flags=re.MULTILINE)
    if not found:
        raise RuntimeError(f"no {name} in cli estimate's output: {text[-400:]}")
    return float(found[-1].replace(",", ""))


def run_case(tool: Path, case: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tk-vs-aic-") as folder:
        tmp = Path(folder)
        model = _model_dir(case, tmp)
        theirs = nvidia_answer(tool, case, model, tmp)
        own_gpus, pick = planner_pick(case)
        moe = json.loads((model / "config.json").read_text()).get("num_experts_per_tok") is not None
        estimated = _run(estimate_argv(tool, case, model, pick, moe))
    ttft, tpot = _figure(estimated, "TTFT"), _figure(estimated, "TPOT")
    return {"case": case["name"], "sla": f"TTFT ≤ {case['ttft_ms']:g} ms, TPOT ≤ {case['tpot_ms']:g} ms at "
                                         f"{case['request_rate']:g} req/s, {case['isl']}/{case['osl']} tokens",
            "nvidia": theirs, "tritonkit": {"gpus": own_gpus, "deployment": pick.label(), "fleet": pick.fleet_text(),
                                            "own_tpot_ms": round(1000 / pick.tokens_per_s_per_user, 1),
                                            "own_ttft_ms": round(pick.ttft_ms)},
            "gpus_ratio": round(own_gpus / theirs["gpus"], 2),
            "pick_as_nvidia_estimates": {"ttft_ms": ttft, "tpot_ms": tpot,
                                         "meets": ttft <= case["ttft_ms"] and tpot <= case["tpot_ms"]}}


def _print(row: dict[str, Any]) -> None:
    n, t, e = row["nvidia"], row["tritonkit"], row["pick_as_nvidia_estimates"]
    print(f"{row['case']} ({row['sla']})\n"
          f"  NVIDIA:    {n['gpus']:>3} GPUs  {n['deployment']} (TTFT {n['ttft_ms']:.0f} ms, TPOT {n['tpot_ms']} ms)\n"
          f"  tritonkit: {t['gpus']:>3} GPUs  {t['deployment']}: {t['fleet']} (own TTFT {t['own_ttft_ms']} ms, "
          f"TPOT {t['own_tpot_ms']} ms)\n"
          f"  GPUs tritonkit / NVIDIA = {row['gpus_ratio']}; the pick as NVIDIA's model estimates it: TTFT "
          f"{e['ttft_ms']:.0f} ms, TPOT {e['tpot_ms']:.1f} ms: {'meets' if e['meets'] else 'MISSES'} the SLA",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--aiconfigurator", type=Path, default=None,
                        help=f"its executable (default: ${ENV_VAR}, else aiconfigurator on PATH)")
    parser.add_argument("--case", type=int, action="append", help="run only case N (from 1; repeatable)")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    tool = args.aiconfigurator or find_tool()
    if tool is None or not tool.is_file():
        sys.exit(f"AIConfigurator not found: python3 -m venv /tmp/aic && /tmp/aic/bin/pip install "
                 f"aiconfigurator==0.12.0, then pass --aiconfigurator /tmp/aic/bin/aiconfigurator (or set {ENV_VAR})")
    cases = json.loads(CASES.read_text())["cases"]
    chosen = [cases[i - 1] for i in args.case] if args.case else cases
    rows = []
    for case in chosen:
        rows.append(run_case(tool, case))
        if not args.json:
            _print(rows[-1])
    met = sum(r["pick_as_nvidia_estimates"]["meets"] for r in rows)
    within = sum(1 / 1.5 <= r["gpus_ratio"] <= 1.5 for r in rows)
    if args.json:
        print(json.dumps({"rows": rows, "picks_meeting_sla": met, "gpus_within_1_5x": within}, indent=2))
    else:
        print(f"\n{met} of {len(rows)} picks meet the TTFT and TPOT as NVIDIA's model estimates them; "
              f"{within} of {len(rows)} GPU counts within 1.5× of NVIDIA's")


if __name__ == "__main__":
    main()
