"""The search inside an LLM plan: run it, plan the winner in detail, and write what it found.

:func:`tritonkit.planner.llm.plan_llm` with ``search=`` calls :func:`run_search` first, plans the
best configuration's anatomy (weights, KV cache, memory, roofline) with :func:`searched_assumptions`,
and writes the search's own lines (:func:`add_search_lines`) in place of the walls of a single
configuration: the chosen concurrency, what each user sees at the target load, and the fleet.
"""

from __future__ import annotations

from dataclasses import replace

from tritonkit.errors import PlanError
from tritonkit.planner.capacity import PlanAssumptions, Workload
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.costs import INTER_NODE_GB_S
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.precision import Precision
from tritonkit.planner.result import PlanDraft
from tritonkit.planner.search import (
    PREFILL_RHO_MAX,
    Candidate,
    DeploymentSearch,
    SearchSpace,
    search_deployments,
)

__all__ = ["add_search_lines", "run_search", "searched_assumptions"]


def run_search(model: TransformerShape, gpu: GpuSpec, precision: Precision, workload: Workload,
               a: PlanAssumptions, space: SearchSpace, weights_override: int | None, mean_in: float,
               mean_out: float) -> DeploymentSearch:
    """The search, with what the caller pinned (``--tp``, one ``--kv-dtype``); ``PlanError`` when no
    deployment meets the SLA (naming the closest miss)."""
    if a.tensor_parallel is not None:
        space = replace(space, tensor_parallel=(a.tensor_parallel,))
    if a.kv_dtype is not None and not space.kv_dtypes:
        space = replace(space, kv_dtypes=(a.kv_dtype,))
    if a.efficiency is not None and workload.target_qps is not None:
        # a given η still derates: each deployment is sized for target / η
        workload = replace(workload, target_qps=workload.target_qps / a.efficiency)
    found = search_deployments(model, gpu, precision, workload, a, space, weights_override=weights_override,
                               mean_in=mean_in, mean_out=mean_out)
    if found.best is None:
        if not found.candidates:
            raise PlanError(
                f"the weights and KV cache of {model.name} ({precision.name}) do not fit {gpu.name} at tensor parallel "
                f"{', '.join(map(str, space.tensor_parallel))} (with one sequence's KV cache and the reserve)",
                hint="use a larger --tp (or leave it out for the search to choose), a smaller --precision, "
                     "--kv-dtype fp8, or shorter sequences")
        closest = max(found.candidates, key=lambda c: c.tokens_per_s_per_user)
        raise PlanError(
            f"no deployment of {model.name} on {gpu.name} meets the SLA; the fastest per user "
            f"({closest.label()}) misses: {closest.why_not}",
            hint="relax the SLA (--tokens-per-s, --ttft-ms, --p99-ms), use a faster GPU, a smaller precision, "
                 "or shorter prompts")
    return found


def searched_assumptions(a: PlanAssumptions, best: Candidate) -> PlanAssumptions:
    """The assumptions that plan ``best`` in detail: its TP (× PP: the GPUs one replica's weights span),
    KV dtype, expert parallelism and chunked prefill."""
    return replace(a, tensor_parallel=best.tensor_parallel * best.pipeline_parallel, kv_dtype=best.kv_dtype,
                   expert_parallel=best.expert_parallel if best.expert_parallel > 1 else None,
                   attention_dp=best.attention_dp,
                   chunked_prefill=best.chunked_prefill)


def add_search_lines(draft: PlanDraft, found: DeploymentSearch, w: Workload, a: PlanAssumptions
                     ) -> tuple[int, dict[str, int]]:
    """The search's lines (best, runner-up, the operating point, the fleet); returns the concurrency per
    worker and the fleet (``{}`` without a target) for the serving suggestion."""
    best = found.best
    assert best is not None
    add = draft.add
    add("search", "candidates_scored", "deployments scored", len(found.candidates), "", "theory",
        f"{sum(c.meets_sla for c in found.candidates)} meet the SLA; TP, PP where needed, batch, aggregated "
        "(chunked prefill or not) or disaggregated, KV dtype, expert parallelism")
    add("search", "best", "best deployment", best.label(), "", "theory",
        f"fewest GPUs for the target: {best.fleet_text()}" if best.gpus is not None
        else "most output tokens/s per GPU under the SLA (no --qps)")
    if found.runner_up is not None:
        r = found.runner_up
        add("search", "runner_up", "runner-up (another configuration)", r.label(), "", "theory",
            f"{r.fleet_text()}; {r.tokens_per_s_per_user:.1f} tok/s per user, {r.tokens_per_s_per_gpu:,.0f} tok/s per GPU")
    add("search", "search_assumptions", "queueing and hand-over", "M/D/1", "", "assumption",
        f"TTFT waits in an M/D/1 prefill queue at the load; disaggregated prefill workers sized at ≤ "
        f"{PREFILL_RHO_MAX:.0%} utilisation and hand the KV cache over at {INTER_NODE_GB_S:g} GB/s per GPU "
        "(one 400 Gb/s port)")
    for note in found.notes:
        draft.warnings.append(note)
    add("walls", "concurrent_sequences", "concurrent sequences per worker", best.batch, "sequences", "theory",
        "chosen by the search")
    add("walls", "binding_wall", "what sets it", "search", "", "theory",
        "the batch of the deployment needing the fewest GPUs under the SLA")
    add("throughput", "tokens_per_s_per_user", "decode speed each user sees", best.tokens_per_s_per_user, "tok/s",
        "theory", "at the chosen batch" + ("" if best.mode == "disaggregated" or best.chunked_prefill
                                           else "; others' prefills stall decode"))
    add("throughput", "tokens_per_s_per_gpu", "output tokens/s per GPU", best.tokens_per_s_per_gpu, "tok/s", "theory",
        "at the chosen batch, prefill GPUs counted")
    add("throughput", "ttft_ms", "time to first token (mean)", best.ttft_ms, "ms", "theory",
        "prefill queue (M/D/1) at the target load + prefill + first step" if best.gpus is not None
        else "prefill + first step, no queue (no --qps)")
    add("throughput", "request_latency_ms", "request latency", best.request_latency_ms, "ms", "theory", "")
    add("throughput", "qps_per_replica_theory", "QPS per worker (theory)", best.qps_per_worker, "req/s", "theory",
        "decode worker" if best.mode == "disaggregated" else "replica")
    if best.gpus is None:
        return best.batch, {}
    return best.batch, _fleet_lines(draft, found, best, w, a)


def _fleet_lines(draft: PlanDraft, found: DeploymentSearch, best: Candidate, w: Workload, a: PlanAssumptions
                 ) -> dict[str, int]:
    add = draft.add
    assert best.gpus is not None and best.workers is not None and w.target_qps is not None
    if a.efficiency is not None:
        add("fleet", "efficiency", "efficiency η", a.efficiency, "", "input",
            f"given (--efficiency): each deployment sized for {w.target_qps:g} / {a.efficiency:g} req/s")
    else:
        add("fleet", "efficiency", "efficiency η", 1.0, "", "theory",
            "the search sizes each configuration at the target load with its prefill queue in the TTFT; the "
            "headroom below is kept on top; --efficiency to derate")
    add("fleet", "replicas_needed", "workers needed", best.workers + (best.prefill_workers or 0), "workers", "theory",
        best.fleet_text())
    add("fleet", "gpus_needed", "GPUs needed", best.gpus, "GPUs", "theory", best.fleet_text())
    add("fleet", "headroom_required", "headroom kept at the target", a.headroom, "", "assumption",
        "rule of thumb: keep 20–30 % spare for bursts and a lost replica; --headroom")
    spare = found.best_with_headroom
    recommended = max(spare.gpus or best.gpus, best.gpus) if spare is not None else best.gpus
    sized_for = (found.target_qps or w.target_qps) / (1 - a.headroom)
    add("fleet", "gpus_recommended", "GPUs recommended", recommended, "GPUs", "theory",
        f"the same deployment sized for {sized_for:.4g} req/s: "
        f"{spare.fleet_text() if spare is not None else best.fleet_text()}")
    workers = (spare.workers if spare is not None and spare.workers is not None else best.workers)
    return {"replicas": workers, "gpus": recommended}
