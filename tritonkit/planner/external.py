"""NVIDIA's GPU-free performance model as an optional extra: ask it, and say that it answered.

NVIDIA's AIConfigurator (PyPI ``aiconfigurator``; its successor AISimulate keeps the same
``aiconfigurator cli`` command and arguments) models TensorRT-LLM, vLLM and SGLang serving from
kernel timings measured on each GPU, and its ``cli recommend`` finds the fewest GPUs for a request
rate under TTFT and TPOT targets, aggregated and disaggregated. It is large (its venv is ~850 MB,
with numpy 2, pandas and its perf database), so it is never a dependency: it is found in its own
environment — the ``TRITONKIT_AICONFIGURATOR`` environment variable naming its ``aiconfigurator``
executable, else ``aiconfigurator`` on ``PATH`` — run as a child process in its own session,
bounded in time, and its saved ``best_config_topn.csv`` read back. Where it is absent, does not
cover the GPU (:data:`SYSTEMS`) or the precision (it models BF16/FP16 weights through
``recommend``), or fails, the planner's own search answers, and the plan says why.

Facts followed (aiconfigurator 0.12.0 from PyPI, run here): ``aiconfigurator cli recommend
--model-path DIR --system S --backend trtllm --isl N --osl N --ttft MS --tpot MS
--target-request-rate R --save-dir D``; results under ``D/<run>/{agg,disagg}/best_config_topn.csv``
with columns ``tp``, ``pp``, ``bs``, ``replicas_needed``, ``total_gpus_needed``, ``tokens/s/user``,
``tokens/s/gpu``, ``ttft``, ``gemm``, ``version``, ``system`` (disaggregated: ``(p)``/``(d)``
prefixed per worker kind); ``aiconfigurator version`` prints ``aiconfigurator 0.12.0``.
"""

from __future__ import annotations

import csv
import math
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tritonkit._records import record_dict
from tritonkit.planner.result import CapacityPlan, PlanLine
from tritonkit.planner.serving_plan import engine_parameters

__all__ = ["ENV_VAR", "SYSTEMS", "ExternalAnswer", "ExternalDeployment", "answered_plan", "ask_performance_model",
           "find_tool", "parse_results", "recommend_argv"]

#: Names the executable of NVIDIA's performance model (in its own environment).
ENV_VAR = "TRITONKIT_AICONFIGURATOR"
#: Catalogue GPU → the model's system name (its ``systems/*.yaml`` at 0.12.0).
SYSTEMS = {"H100-SXM": "h100_sxm", "H100-PCIE": "h100_pcie", "H200": "h200_sxm", "A100-80GB": "a100_sxm",
           "A100-80GB-PCIE": "a100_pcie", "L40S": "l40s", "L4": "l4"}
#: Weight precisions ``recommend`` models (it takes the dtype from the checkpoint's config).
_PRECISIONS = ("bf16", "fp16")


@dataclass(frozen=True)
class ExternalDeployment:
    """One deployment the performance model ranked, in the planner's terms."""

    mode: str  # "aggregated" | "disaggregated"
    gpus: int
    replicas: int
    tensor_parallel: int
    pipeline_parallel: int
    batch: int
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    ttft_ms: float
    weights_dtype: str
    perf_db: str
    prefill_workers: int | None = None
    prefill_tensor_parallel: int | None = None
    decode_workers: int | None = None
    #: NVIDIA's terms: the attention data parallel and the experts' parallelism (``ep``, ``etp``) of a
    #: (decode) worker; ``batch`` is per attention-DP rank, as the model counts it.
    attention_dp: int = 1
    expert_parallel: int = 1
    expert_tensor_parallel: int = 1

    def _worker(self) -> str:
        text = f"TP{self.tensor_parallel}" + (f"·PP{self.pipeline_parallel}" if self.pipeline_parallel > 1 else "")
        text += f"·DP{self.attention_dp}" if self.attention_dp > 1 else ""
        text += (f"·EP{self.expert_parallel}" + (f"·ETP{self.expert_tensor_parallel}"
                                                  if self.expert_tensor_parallel > 1 else "")
                 if self.expert_parallel > 1 else "")
        return text + f" B{self.batch}" + (" per DP rank" if self.attention_dp > 1 else "")

    def label(self) -> str:
        if self.mode == "disaggregated":
            return (f"disagg {self.replicas} × ({self.prefill_workers} prefill TP{self.prefill_tensor_parallel} + "
                    f"{self.decode_workers} decode {self._worker()})")
        return f"agg {self.replicas} × {self._worker()}"


@dataclass(frozen=True)
class ExternalAnswer:
    """What the performance model answered: its name and version, the command, the time it took, the best."""

    tool: str
    argv: tuple[str, ...]
    seconds: float
    best: ExternalDeployment
    ranked: tuple[ExternalDeployment, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"tool": self.tool, "argv": list(self.argv), "seconds": round(self.seconds, 1),
                "best": {"label": self.best.label(), **record_dict(self.best)},
                "ranked": [{"label": d.label(), **record_dict(d)} for d in self.ranked]}


def find_tool() -> Path | None:
    """The ``aiconfigurator`` executable: ``$TRITONKIT_AICONFIGURATOR``, else on ``PATH``; ``None`` if neither."""
    given = os.environ.get(ENV_VAR)
    if given:
        path = Path(given)
        return path if path.is_file() and os.access(path, os.X_OK) else None
    found = shutil.which("aiconfigurator")
    return Path(found) if found else None


def recommend_argv(tool: Path, model_dir: Path, system: str, *, isl: int, osl: int, ttft_ms: float,
                   tpot_ms: float, request_rate: float, save_dir: Path) -> list[str]:
    """The ``cli recommend`` command (TensorRT-LLM backend) for one workload."""
    return [str(tool), "cli", "recommend", "--model-path", str(model_dir), "--system", system, "--backend", "trtllm",
            "--isl", str(isl), "--osl", str(osl), "--ttft", f"{ttft_ms:g}", "--tpot", f"{tpot_ms:g}",
            "--target-request-rate", f"{request_rate:g}", "--save-dir", str(save_dir), "--no-color"]


def _int(row: dict[str, str], key: str) -> int:
    return int(float(row[key]))


def _row_deployment(row: dict[str, str], disaggregated: bool) -> ExternalDeployment:
    d = "(d)" if disaggregated else ""
    return ExternalDeployment(
        "disaggregated" if disaggregated else "aggregated", gpus=_int(row, "total_gpus_needed"),
        replicas=_int(row, "replicas_needed"), tensor_parallel=_int(row, f"{d}tp"),
        pipeline_parallel=_int(row, f"{d}pp"), batch=_int(row, f"{d}bs"),
        tokens_per_s_per_user=float(row["tokens/s/user"]), tokens_per_s_per_gpu=float(row["tokens/s/gpu"]),
        ttft_ms=float(row["ttft"]), weights_dtype=row[f"{d}gemm"],
        perf_db=f"{row[f'{d}backend']} {row[f'{d}version']} on {row[f'{d}system']}",
        prefill_workers=_int(row, "(p)workers") if disaggregated else None,
        prefill_tensor_parallel=_int(row, "(p)tp") if disaggregated else None,
        decode_workers=_int(row, "(d)workers") if disaggregated else None,
        attention_dp=_int(row, f"{d}dp") if row.get(f"{d}dp") else 1,
        expert_parallel=_int(row, f"{d}moe_ep") if row.get(f"{d}moe_ep") else 1,
        expert_tensor_parallel=_int(row, f"{d}moe_tp") if row.get(f"{d}moe_tp") else 1)


def parse_results(save_dir: Path) -> list[ExternalDeployment]:
    """Every ranked deployment under ``save_dir`` (both modes), fewest GPUs first."""
    found: list[ExternalDeployment] = []
    for table in sorted(save_dir.rglob("best_config_topn.csv")):
        disaggregated = table.parent.name == "disagg"
        with table.open(newline="", encoding="utf-8") as handle:
            found.extend(_row_deployment(row, disaggregated) for row in csv.DictReader(handle))
    return sorted(found, key=lambda d: (d.gpus, -d.tokens_per_s_per_gpu))


def _version(tool: Path) -> str:
    try:
        done = subprocess.run([str(tool), "version"], capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return "aiconfigurator (version unknown)"
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("aiconfigurator")]
    return lines[-1].strip() if lines else "aiconfigurator (version unknown)"


def ask_performance_model(tool: Path, model_config: Path, gpu_name: str, precision: str, *, isl: int, osl: int,
                          ttft_ms: float, tpot_ms: float, request_rate: float, checkpoint_precision: bool = False,
                          timeout_s: float = 300.0) -> ExternalAnswer | str:
    """Ask the performance model about the model of ``model_config`` (a ``config.json``, or the folder holding
    one); returns its answer, or why it did not answer (a sentence for the plan). ``checkpoint_precision``: the
    precision is the checkpoint's own, which the model reads from the same files (any it models)."""
    from tritonkit.server.children import spawn, stop_group

    system = SYSTEMS.get(gpu_name)
    if system is None:
        return f"it has no data for {gpu_name} (it covers {', '.join(SYSTEMS)})"
    if precision not in _PRECISIONS and not checkpoint_precision:
        return f"its recommend models {'/'.join(_PRECISIONS)} weights, not {precision}"
    config = model_config / "config.json" if model_config.is_dir() else model_config
    with tempfile.TemporaryDirectory(prefix="tritonkit-aic-") as tmp:
        model_dir = Path(tmp) / "model"  # it reads <folder>/config.json: a copy, whatever the file's name
        model_dir.mkdir()
        shutil.copyfile(config, model_dir / "config.json")
        if (config.parent / "hf_quant_config.json").is_file():  # the checkpoint's quantization, as it reads it
            shutil.copyfile(config.parent / "hf_quant_config.json", model_dir / "hf_quant_config.json")
        save_dir = Path(tmp) / "results"
        argv = recommend_argv(tool, model_dir, system, isl=isl, osl=osl, ttft_ms=ttft_ms, tpot_ms=tpot_ms,
                              request_rate=request_rate, save_dir=save_dir)
        started = time.monotonic()
        log = Path(tmp) / "aiconfigurator.log"
        with log.open("wb") as out:
            proc = spawn(argv, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "HF_HUB_OFFLINE": "1"})
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                stop_group(proc, 5.0)
                return f"it did not answer within {timeout_s:g} s"
            stop_group(proc, 1.0)
        seconds = time.monotonic() - started
        ranked = parse_results(save_dir) if save_dir.is_dir() else []
        if proc.returncode != 0 or not ranked:
            tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-1:] or ["no output"]
            return f"it exited {proc.returncode} without a recommendation ({tail[0][:200]})"
    return ExternalAnswer(_version(tool), tuple(argv), seconds, ranked[0], tuple(ranked))


def _line(section: str, key: str, label: str, value: Any, unit: str, basis: str, note: str) -> PlanLine:
    return PlanLine(section, key, label, value, unit, basis, note)


def answered_plan(plan: CapacityPlan, answer: ExternalAnswer | str, headroom: float, *,
                  own_gpus: int | None = None) -> CapacityPlan:
    """``plan`` saying which performance model answered: with an :class:`ExternalAnswer`, its best deployment
    sizes the fleet and the serving parameters (``own_gpus``, the planner's own search's answer, stays beside
    it); with a reason, the planner's own search answered, and the plan says why the other did not."""
    if isinstance(answer, str):
        said = (*plan.lines, _line("performance model", "performance_model", "answered by", "tritonkit search",
                                    "", "theory", f"NVIDIA's performance model did not answer: {answer}"))
        return replace(plan, lines=said)
    best = answer.best
    own = own_gpus
    per_replica = best.gpus // max(best.replicas, 1)
    recommended = math.ceil(round(best.replicas / (1 - headroom), 9)) * per_replica
    replaced = {
        "gpus_needed": (best.gpus, f"{best.label()}: {best.gpus} GPUs, answered by {answer.tool}"
                        + (f" (tritonkit's own search: {own})" if own is not None else "")),
        "gpus_recommended": (recommended, f"{answer.tool}'s replicas raised until {headroom:.0%} is spare"),
    }
    lines = [replace(item, value=replaced[item.key][0], note=replaced[item.key][1]) if item.key in replaced
             else item for item in plan.lines]
    lines.extend([
        _line("performance model", "performance_model", "answered by", answer.tool, "", "theory",
              f"perf DB {best.perf_db}; weights {best.weights_dtype}; {answer.seconds:.0f} s to answer"),
        _line("performance model", "performance_model_best", "its best deployment", best.label(), "", "theory",
              f"{best.tokens_per_s_per_user:.1f} tok/s per user, {best.tokens_per_s_per_gpu:,.0f} tok/s per GPU, "
              f"TTFT {best.ttft_ms:,.0f} ms"),
    ])
    s = plan.suggestion
    suggestion = replace(
        s, tensor_parallel=best.tensor_parallel * best.attention_dp, pipeline_parallel=best.pipeline_parallel,
        max_batch_size=best.batch, attention_dp=best.attention_dp > 1, expert_parallel=best.expert_parallel,
        replicas=math.ceil(round(best.replicas / (1 - headroom), 9)), gpus=recommended,
        disaggregated=({"prefill_workers": best.prefill_workers, "prefill_tensor_parallel": best.prefill_tensor_parallel,
                        "decode_workers": best.decode_workers} if best.mode == "disaggregated" else None),
        notes={**s.notes, "max_batch_size": f"{answer.tool}'s batch" + (" per attention-DP rank" if best.attention_dp > 1
                                                                         else ""),
               "replicas": f"{answer.tool}, headroom included"})
    answered = replace(plan, lines=tuple(lines), suggestion=suggestion, external=answer)
    return replace(answered, engines=engine_parameters(answered))
