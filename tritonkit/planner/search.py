"""Search the deployment of an LLM under its SLA: the configuration that needs the fewest GPUs.

Enumerated, each by the replica model of :mod:`tritonkit.planner.llm_roofline` (the roofline with
its all-reduces, chunked prefill or not, MoE expert parallelism):

* **tensor parallel** 1, 2, 4, 8 (within one node's link; ``--tp`` pins one), and pipeline
  parallel 2, 4, 8 across nodes only where the weights need it;
* **concurrent sequences** per replica (the batch the engine schedules), up to what its KV
  cache holds;
* **aggregated** serving (prefill and decode on the same GPUs, with chunked prefill or without)
  and **disaggregated** serving (prefill workers hand their KV cache to decode workers; the
  ratio of the two is sized for the load; not on an edge board, which has no fabric to hand it over);
* **KV-cache dtype**, where the caller allows more than one;
* **expert parallelism** = TP for a MoE model, and **attention data parallelism** beside it (each GPU
  attends to its own sequences, the KV cache not replicated), over 16 or 32 GPUs across nodes where
  the weights need them.

Each candidate is scored by the GPUs the target load needs while every user sees the SLA's
tokens/s and TTFT (the TTFT includes the prefill queue at that load); without a target, by output
tokens/s per GPU. The best, the runner-up (the best of another configuration), and the Pareto
curve of tokens/s per GPU against tokens/s per user are kept
(:class:`DeploymentSearch`; rendered by :mod:`tritonkit.planner.pareto`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from tritonkit._records import record_dict
from tritonkit.planner.capacity import (
    PlanAssumptions,
    Workload,
    kv_bytes_per_sequence,
    max_sequences_by_memory,
)
from tritonkit.planner.catalogue import GpuSpec
from tritonkit.planner.costs import INTER_NODE_GB_S, md1_wait_s
from tritonkit.planner.llm_roofline import Replica, build_replica
from tritonkit.planner.model import TransformerShape
from tritonkit.planner.placement import kv_dtype_for, reserve_per_gpu, weights_for
from tritonkit.planner.precision import Precision, kv_dtype_bytes

__all__ = ["PREFILL_RHO_MAX", "REPORT_COLUMNS", "Candidate", "DeploymentSearch", "SearchSpace", "pareto_front", "report_rows",
           "search_deployments"]

_BATCHES = (1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024)
#: Prefill workers are sized to stay at or below this utilisation when the TTFT allows no better:
#: the M/D/1 wait grows without bound towards 1.
PREFILL_RHO_MAX = 0.9
#: How far past the throughput-minimum the search adds replicas to bring the TTFT under the SLA.
_MAX_EXTRA_FACTOR = 4


@dataclass(frozen=True)
class SearchSpace:
    """What the search may vary. ``tensor_parallel``: the TP sizes to try (``--tp`` pins one);
    ``kv_dtypes``: KV-cache element types allowed (empty: the model's own); ``batches``: concurrent
    sequences per replica to try; ``disaggregated``: also try prefill/decode disaggregation;
    ``chunked_prefill``: the aggregated variants to try; ``attention_dp``: for a MoE model, also the
    attention data parallel beside expert parallelism."""

    tensor_parallel: tuple[int, ...] = (1, 2, 4, 8)
    kv_dtypes: tuple[str, ...] = ()
    batches: tuple[int, ...] = _BATCHES
    disaggregated: bool = True
    chunked_prefill: tuple[bool, ...] = (False, True)
    attention_dp: bool = True


@dataclass(frozen=True)
class Candidate:
    """One deployment the search scored.

    ``workers``: aggregated replicas, or decode workers (each ``tensor_parallel`` × ``pipeline_parallel``
    GPUs); ``prefill_workers``: disaggregated prefill workers of ``prefill_tensor_parallel`` GPUs —
    both for the target load (``None`` without one). ``tokens_per_s_per_gpu`` is output tokens/s per
    GPU at ``batch`` running sequences per worker (the prefill GPUs counted, at their sizing
    utilisation); ``ttft_ms`` is at the target load (queue included), or with no queue.
    """

    mode: str  # "aggregated" | "disaggregated"
    tensor_parallel: int
    pipeline_parallel: int
    expert_parallel: int
    kv_dtype: str
    batch: int
    chunked_prefill: bool
    tokens_per_s_per_user: float
    tokens_per_s_per_gpu: float
    ttft_ms: float
    request_latency_ms: float
    qps_per_worker: float
    meets_sla: bool
    why_not: str = ""
    workers: int | None = None
    prefill_tensor_parallel: int | None = None
    prefill_workers: int | None = None
    gpus: int | None = None
    attention_dp: bool = False

    @property
    def gpus_per_worker(self) -> int:
        return self.tensor_parallel * self.pipeline_parallel

    def config_key(self) -> tuple[Any, ...]:
        """The shape of the deployment — serving mode, parallelism, chunked prefill — apart from the batch
        and the KV dtype (the runner-up differs from the best in it, so it is a real alternative)."""
        return (self.mode, self.tensor_parallel, self.pipeline_parallel, self.expert_parallel,
                self.chunked_prefill, self.prefill_tensor_parallel, self.attention_dp)

    def label(self) -> str:
        """Short name: ``agg TP4 B64 KV fp8 chunked``, ``disagg P:TP2 D:TP4 B64``."""
        par = (f"DP{self.tensor_parallel}" if self.attention_dp else f"TP{self.tensor_parallel}") \
            + (f"·PP{self.pipeline_parallel}" if self.pipeline_parallel > 1 else "") \
            + (f"·EP{self.expert_parallel}" if self.expert_parallel > 1 else "")
        if self.mode == "disaggregated":
            text = f"disagg P:TP{self.prefill_tensor_parallel} D:{par} B{self.batch}"
        else:
            text = f"agg {par} B{self.batch}" + (" chunked" if self.chunked_prefill else "")
        return f"{text} KV {self.kv_dtype}"

    def fleet_text(self) -> str:
        """The fleet at the target: ``3 × TP4 = 12 GPUs`` or ``2 prefill × TP2 + 3 decode × TP4 = 16 GPUs``."""
        if self.gpus is None:
            return "—"
        if self.mode == "disaggregated":
            return (f"{self.prefill_workers} prefill × TP{self.prefill_tensor_parallel} + {self.workers} decode × "
                    f"{self.gpus_per_worker} GPUs = {self.gpus} GPUs")
        return f"{self.workers} × {self.gpus_per_worker} GPUs = {self.gpus} GPUs"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label(), **record_dict(self)}


@dataclass(frozen=True)
class DeploymentSearch:
    """What the search found: every candidate, the best, the runner-up and the Pareto curve."""

    candidates: tuple[Candidate, ...]
    best: Candidate | None
    runner_up: Candidate | None
    pareto: tuple[Candidate, ...]
    target_qps: float | None
    notes: tuple[str, ...] = ()
    #: The best configuration sized for the target with the plan's headroom spare.
    best_with_headroom: Candidate | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "target_qps": self.target_qps,
            "candidates_scored": len(self.candidates),
            "candidates_meeting_sla": sum(c.meets_sla for c in self.candidates),
            "best": self.best.to_dict() if self.best else None,
            "runner_up": self.runner_up.to_dict() if self.runner_up else None,
            "pareto": [c.to_dict() for c in self.pareto],
            "notes": list(self.notes),
        }

    def render_text(self) -> str:
        """A plain-text table: the best, the runner-up, then the Pareto curve (fastest per user first)."""
        header = ("", *REPORT_COLUMNS)
        table = [header, *[(kind, *cells) for kind, cells in report_rows(self)]]
        widths = [max(len(r[i]) for r in table) for i in range(len(header))]
        out = [f"[search: {len(self.candidates)} deployments scored, "
               f"{sum(c.meets_sla for c in self.candidates)} meet the SLA]"]
        for i, r in enumerate(table):
            out.append("  " + "  ".join(cell.ljust(widths[j]) if j in (0, 1, 6) else cell.rjust(widths[j])
                                        for j, cell in enumerate(r)).rstrip())
            if i == 0:
                out.append("  " + "  ".join("-" * w for w in widths))
        return "\n".join(out) + "\n"

    def render_markdown(self) -> str:
        """The same table in Markdown."""
        lines = ["| | " + " | ".join(REPORT_COLUMNS) + " |", "|---|" + "---|" * len(REPORT_COLUMNS)]
        lines += [f"| {kind} | " + " | ".join(cells) + " |" for kind, cells in report_rows(self)]
        return "\n".join(lines) + "\n"


#: The columns of the search's report (text, Markdown).
REPORT_COLUMNS = ("deployment", "tok/s/user", "tok/s/GPU", "TTFT ms", "SLA", "fleet at target")


def _report_row(c: Candidate) -> tuple[str, ...]:
    return (c.label(), f"{c.tokens_per_s_per_user:.1f}", f"{c.tokens_per_s_per_gpu:,.0f}", f"{c.ttft_ms:,.0f}",
            "meets" if c.meets_sla else "misses", c.fleet_text())


def report_rows(search: DeploymentSearch) -> list[tuple[str, tuple[str, ...]]]:
    """The report's rows: ``("best" | "runner-up" | "pareto", cells)``."""
    rows: list[tuple[str, tuple[str, ...]]] = []
    if search.best is not None:
        rows.append(("best", _report_row(search.best)))
    if search.runner_up is not None:
        rows.append(("runner-up", _report_row(search.runner_up)))
    rows.extend(("pareto", _report_row(c)) for c in search.pareto)
    return rows


@dataclass(frozen=True)
class _Setting:
    """Everything fixed while the batch varies: the model, its hardware and the workload's lengths."""

    model: TransformerShape
    gpu: GpuSpec
    precision: Precision
    workload: Workload
    assumptions: PlanAssumptions
    weights_override: int | None
    mean_in: float
    mean_out: float

    def replica(self, tp: int, kv_dtype: str, *, ep: int = 1, chunked: bool = False, dp: bool = False) -> Replica:
        a = replace(self.assumptions, expert_parallel=ep, chunked_prefill=chunked, kv_dtype=kv_dtype, attention_dp=dp)
        kv_token = self.model.kv_bytes_per_token(kv_dtype_bytes(kv_dtype), 1 if dp else tp)
        return build_replica(self.model, self.gpu, self.precision, a, tensor_parallel=tp, kv_per_token=kv_token,
                             input_tokens=self.mean_in, output_tokens=self.mean_out,
                             weights_override=self.weights_override)

    def max_sequences(self, gpus: int, tp: int, kv_dtype: str, dp: bool = False) -> int:
        """Sequences the KV cache of ``gpus`` GPUs holds after weights and reserve (0: the weights do not fit);
        ``dp``: attention data parallel over them (KV not replicated, the non-expert weights on each)."""
        reserve, _ = reserve_per_gpu(self.assumptions, self.gpu)
        weights = weights_for(self.model, self.precision, self.weights_override, gpus if dp else 1)
        kv_token = self.model.kv_bytes_per_token(kv_dtype_bytes(kv_dtype), 1 if dp else tp)
        per_sequence = kv_bytes_per_sequence(kv_token, self.mean_in + self.mean_out, self.model.sliding_window)
        if weights / gpus + reserve >= self.gpu.memory_bytes:
            return 0
        return int(max_sequences_by_memory(gpus * self.gpu.memory_bytes, weights, gpus * reserve, per_sequence))

    def splits(self, tp: int) -> bool:
        m = self.model
        return m.num_attention_heads % tp == 0 and (m.num_kv_heads < tp or m.num_kv_heads % tp == 0)

    def sla(self, user: float, ttft_s: float, latency_s: float) -> str:
        """What the SLA misses ("" when met)."""
        w, missed = self.workload, []
        if w.tokens_per_s_per_user is not None and user < w.tokens_per_s_per_user:
            missed.append(f"{user:.1f} < {w.tokens_per_s_per_user:g} tok/s per user")
        if w.ttft_ms is not None and ttft_s * 1000 > w.ttft_ms:
            missed.append(f"TTFT {ttft_s * 1000:.0f} > {w.ttft_ms:g} ms")
        if w.p99_ms is not None and latency_s * 1000 > w.p99_ms:
            missed.append(f"latency {latency_s * 1000:.0f} > {w.p99_ms:g} ms")
        return "; ".join(missed)


def _parallel_sizes(s: _Setting, space: SearchSpace, kv_dtype: str) -> list[tuple[int, int]]:
    """(TP, PP) pairs that hold the model: TP within the node's link; PP across nodes only where no TP fits
    and TP is not pinned (a pinned TP that cannot hold the model is refused, naming ``--tp``)."""
    node = s.gpu.link.max_gpus if s.gpu.link is not None else (1 if s.gpu.kind == "edge" else 8)
    tps = [tp for tp in space.tensor_parallel if s.splits(tp) and (tp <= node or len(space.tensor_parallel) == 1)]
    fits = [(tp, 1) for tp in tps if s.max_sequences(tp, tp, kv_dtype) >= 1]
    if fits or not tps or len(space.tensor_parallel) == 1:
        return fits
    widest = max(tps)
    return [(widest, pp) for pp in (2, 4, 8, 16) if s.max_sequences(widest * pp, widest, kv_dtype) >= 1][:1]


def _aggregated(s: _Setting, tp: int, pp: int, ep: int, kv: str, chunked: bool, batch: int,
                target: float | None, dp: bool = False) -> Candidate:
    """One aggregated deployment at ``batch`` sequences per replica (per pipeline stage with PP)."""
    r = s.replica(tp, kv, ep=ep, chunked=chunked, dp=dp)
    # PP: a token crosses pp − 1 node boundaries; pp micro-batches keep every stage busy.
    hop_s = (pp - 1) * (10e-6 + batch * (s.model.hidden_size or 0) * 2 / (INTER_NODE_GB_S * 1e9))
    user = 1.0 / (1.0 / r.tokens_per_s_per_user(batch) + hop_s)
    qps = pp * r.qps(batch)
    latency = r.latency_s(batch) + s.mean_out * hop_s
    gpus_each = tp * pp
    workers = gpus = None
    ttft = r.ttft_s(batch)
    if target is not None:
        workers = max(1, math.ceil(round(target / qps, 9)))
        limit = workers * _MAX_EXTRA_FACTOR + 8
        ttft = r.ttft_at_load_s(batch, target / workers)
        while s.workload.ttft_ms is not None and ttft * 1000 > s.workload.ttft_ms and workers < limit:
            workers += 1
            ttft = r.ttft_at_load_s(batch, target / workers)
        gpus = workers * gpus_each
    why = s.sla(user, ttft, latency)
    return Candidate("aggregated", tp, pp, ep, kv, batch, chunked, user, qps * s.mean_out / gpus_each, ttft * 1000,
                     latency * 1000, qps, not why and math.isfinite(ttft), why or ("" if math.isfinite(ttft) else
                                                                                  "prefill queue saturated"),
                     workers, None, None, gpus, dp)


def _disaggregated(s: _Setting, tp: int, ep: int, kv: str, prefill_tp: int, batch: int,
                   target: float | None, dp: bool = False) -> Candidate:
    """Decode workers at ``batch`` sequences, prefill workers of ``prefill_tp`` GPUs sized for the load."""
    decode = s.replica(tp, kv, ep=ep, dp=dp)
    prefill = s.replica(prefill_tp, kv, ep=min(ep, prefill_tp))
    step = decode.decode_step_s(batch)
    user = 1.0 / step
    qps_d = batch / (s.mean_out * step)
    s_p = prefill.prefill_s()
    kv_bytes = s.model.kv_bytes_per_token(kv_dtype_bytes(kv)) * s.mean_in
    transfer = kv_bytes / (INTER_NODE_GB_S * 1e9 * prefill_tp)
    ttft = s_p + transfer + step
    prefill_gpus_per_worker = qps_d * s_p * prefill_tp / PREFILL_RHO_MAX
    per_gpu = qps_d * s.mean_out / (tp + prefill_gpus_per_worker)
    workers = p_workers = gpus = None
    if target is not None:
        workers = max(1, math.ceil(round(target / qps_d, 9)))
        p_workers = max(1, math.ceil(target * s_p / PREFILL_RHO_MAX))
        ttft = md1_wait_s(target / p_workers, s_p) + s_p + transfer + step
        limit = p_workers * _MAX_EXTRA_FACTOR + 8
        while s.workload.ttft_ms is not None and ttft * 1000 > s.workload.ttft_ms and p_workers < limit:
            p_workers += 1
            ttft = md1_wait_s(target / p_workers, s_p) + s_p + transfer + step
        gpus = workers * tp + p_workers * prefill_tp
    latency = ttft + s.mean_out * step
    why = s.sla(user, ttft, latency)
    return Candidate("disaggregated", tp, 1, ep, kv, batch, False, user, per_gpu, ttft * 1000, latency * 1000, qps_d,
                     not why, why, workers, prefill_tp, p_workers, gpus, dp)


def _best_disaggregated(s: _Setting, tp: int, ep: int, kv: str, prefill_tps: list[int], batch: int,
                        target: float | None, dp: bool = False) -> Candidate | None:
    options = [_disaggregated(s, tp, ep, kv, ptp, batch, target, dp) for ptp in prefill_tps]
    return min(options, key=_score) if options else None


def _score(c: Candidate) -> tuple[Any, ...]:
    """Meets the SLA first, then fewest GPUs for the target, then most tokens/s per GPU, then fewest GPUs each."""
    return (not c.meets_sla, c.gpus if c.gpus is not None else 0, -c.tokens_per_s_per_gpu, c.gpus_per_worker)


def pareto_front(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates no other beats on both tokens/s per user and tokens/s per GPU, fastest per user first."""
    front: list[Candidate] = []
    for c in sorted(candidates, key=lambda c: (-c.tokens_per_s_per_user, -c.tokens_per_s_per_gpu)):
        if not front or c.tokens_per_s_per_gpu > front[-1].tokens_per_s_per_gpu:
            front.append(c)
    return front


def search_deployments(model: TransformerShape, gpu: GpuSpec, precision: Precision, workload: Workload,
                       assumptions: PlanAssumptions | None = None, space: SearchSpace | None = None, *,
                       weights_override: int | None = None, mean_in: float = 1024, mean_out: float = 256,
                       ) -> DeploymentSearch:
    """Score every deployment of ``space`` (see the module docstring); the best needs the fewest GPUs."""
    a = assumptions or PlanAssumptions()
    space = space or SearchSpace()
    s = _Setting(model, gpu, precision, workload, a, weights_override, mean_in, mean_out)
    kv_dtypes = space.kv_dtypes or (kv_dtype_for(a, precision)[0],)
    target = workload.target_qps
    candidates: list[Candidate] = []
    notes: list[str] = []
    for kv in kv_dtypes:
        sizes = _parallel_sizes(s, space, kv)
        if any(pp > 1 for _, pp in sizes):
            notes.append(f"the weights need pipeline parallelism across nodes (KV {kv}): {sizes[0][1]} stages")
        prefill_tps = [tp for tp, pp in sizes if pp == 1]
        for tp, pp, ep, dp in _parallel_shapes(s, space, sizes, kv):
            limit = s.max_sequences(tp * pp, tp, kv, dp) // pp
            for batch in (b for b in space.batches if b <= limit):
                candidates.extend(_aggregated(s, tp, pp, ep, kv, chunked, batch, target, dp)
                                  for chunked in space.chunked_prefill)
                if space.disaggregated and pp == 1 and gpu.kind != "edge":
                    best_d = _best_disaggregated(s, tp, ep, kv, prefill_tps, batch, target, dp)
                    if best_d is not None:
                        candidates.append(best_d)
    ranked = sorted(candidates, key=_score)
    best = ranked[0] if ranked and ranked[0].meets_sla else None
    runner_up = next((c for c in ranked[1:] if c.meets_sla and best and c.config_key() != best.config_key()), None)
    with_headroom = None
    if best is not None and target is not None:
        with_headroom = _again(s, best, target / (1 - a.headroom))
    return DeploymentSearch(tuple(candidates), best, runner_up, tuple(pareto_front(candidates)), target, tuple(notes),
                            with_headroom)


def _parallel_shapes(s: _Setting, space: SearchSpace, sizes: list[tuple[int, int]], kv: str
                     ) -> list[tuple[int, int, int, bool]]:
    """(TP, PP, EP, attention DP) to score: each size as tensor parallel; for a MoE model also with the
    experts split over its GPUs, and with the attention data parallel beside them (each GPU its own
    sequences, KV not replicated), within a node or, where the weights need it and TP is not pinned,
    over 16 or 32 GPUs across nodes (the all-to-all over the inter-node link)."""
    m = s.model
    moe = m.is_moe and bool(m.num_experts)
    shapes = [(tp, pp, ep, False) for tp, pp in sizes for ep in ((1, tp) if moe and tp > 1 else (1,))]
    if not moe or not space.attention_dp:
        return shapes
    shapes += [(tp, 1, tp, True) for tp, pp in sizes if pp == 1 and tp > 1 and s.max_sequences(tp, tp, kv, True) >= 1]
    if not any(dp for *_, dp in shapes) and len(space.tensor_parallel) > 1:
        wide = [g for g in (16, 32) if m.num_experts is not None and m.num_experts % g == 0
                and s.max_sequences(g, g, kv, True) >= 1]
        shapes += [(g, 1, g, True) for g in wide[:1]]
    return shapes


def _again(s: _Setting, c: Candidate, target: float) -> Candidate:
    """``c``'s configuration sized for another load."""
    if c.mode == "disaggregated":
        assert c.prefill_tensor_parallel is not None
        return _disaggregated(s, c.tensor_parallel, c.expert_parallel, c.kv_dtype, c.prefill_tensor_parallel,
                              c.batch, target, c.attention_dp)
    return _aggregated(s, c.tensor_parallel, c.pipeline_parallel, c.expert_parallel, c.kv_dtype, c.chunked_prefill,
                       c.batch, target, c.attention_dp)

