"""The sizing arithmetic: each formula a small pure function, plus the inputs they share.

Units are in every name. Bytes are exact integers; ``GiB``/``MiB``/``KiB`` are binary
(2**30, 2**20, 2**10 bytes); ``GB`` and ``GB/s`` are decimal (10**9 bytes). Worked examples the
tests check:

* KV per token, 32 layers × 8 KV heads × head_dim 128, FP16: 2 × 32 × 8 × 128 × 2 B = 131,072 B
  = **128 KiB**; a 2048-token sequence = **256 MiB** (not 64 MB); 100 sequences = 25 GiB;
  40 GiB of free KV space holds **160** such sequences (not 600).
* GPUs = ceil(200 QPS / (25 QPS₁ × 0.6)) = ceil(13.3) = **14**.
* Little's law: 50 QPS × 0.2 s = **10** requests in flight.
* Decode on the edge: 204.8 GB/s / 4 GB of weights = **51.2** tokens/s per stream, ideal.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tritonkit._values import (
    FRACTION,
    NON_NEGATIVE,
    PARALLEL,
    POSITIVE,
    TOKENS,
    TOLERANCE,
    bounded,
    check_fields,
)
from tritonkit.errors import ConfigError
from tritonkit.planner.costs import DEFAULT_BANDWIDTH_EFFICIENCY, DEFAULT_COMPUTE_EFFICIENCY
from tritonkit.planner.result import PlanLine

__all__ = [
    "FleetSize",
    "GIB",
    "KIB",
    "MIB",
    "PlanAssumptions",
    "Workload",
    "choose_efficiency",
    "decode_tokens_per_s_bound",
    "gpus_needed",
    "kv_bytes_per_sequence",
    "kv_bytes_per_token",
    "littles_law_in_flight",
    "max_sequences_by_memory",
    "plan_fleet",
    "serial_qps",
    "size_fleet",
    "weights_bytes",
]

KIB = 2**10
MIB = 2**20
GIB = 2**30
GB = 10**9


def _require(ok: bool, message: str, hint: str) -> None:
    if not ok:
        raise ConfigError(message, hint=hint)


def _finite(value: float) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


# --- formulas ---------------------------------------------------------------------------------


def weights_bytes(params: int | float, bytes_per_param: float) -> int:
    """Weight memory: parameters × bytes per parameter (7e9 × 2 B = 14e9 B ≈ 13.04 GiB)."""
    _require(_finite(params) and params > 0, f"parameter count must be positive, got {params}", "pass --params")
    _require(bytes_per_param > 0, f"bytes per parameter must be positive, got {bytes_per_param}", "check --precision")
    return int(round(params * bytes_per_param))


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_element: float) -> int:
    """KV cache per token = 2 (K and V) × layers × KV heads × head_dim × bytes per element."""
    for name, value in (("layers", num_layers), ("KV heads", num_kv_heads), ("head_dim", head_dim)):
        _require(value > 0, f"{name} must be positive, got {value}", "check the model config")
    _require(bytes_per_element > 0, "KV element size must be positive", "check --kv-dtype")
    return int(2 * num_layers * num_kv_heads * head_dim * bytes_per_element)


def kv_bytes_per_sequence(bytes_per_token: int, tokens: float, sliding_window: int | None = None) -> int:
    """KV cache one sequence holds: per-token bytes × tokens kept (capped by a sliding window)."""
    _require(tokens > 0, f"sequence length must be positive, got {tokens}", "check --input-tokens/--output-tokens")
    kept = min(tokens, sliding_window) if sliding_window else tokens
    return int(math.ceil(bytes_per_token * kept))


def max_sequences_by_memory(
    memory_bytes: int, weights: int, reserve_bytes: int, bytes_per_sequence: int
) -> int:
    """(memory − weights − reserve) / KV bytes per sequence, rounded down (0 if nothing is left)."""
    _require(bytes_per_sequence > 0, "KV bytes per sequence must be positive", "check the model and lengths")
    free = memory_bytes - weights - reserve_bytes
    return max(0, free // bytes_per_sequence)


def decode_tokens_per_s_bound(bandwidth_gb_s: float, bytes_read_per_token: float) -> float:
    """Memory-bound decode ceiling for one stream: bandwidth / bytes read per token (GB/s decimal).

    204.8 GB/s over 4 GB of weights = 51.2 tokens/s, ideal; real kernels reach 50–80 % of it.
    """
    _require(bandwidth_gb_s > 0, f"bandwidth must be positive, got {bandwidth_gb_s}", "check --gpu-bandwidth-gb-s")
    _require(bytes_read_per_token > 0, "bytes per token must be positive", "check the weights size")
    return bandwidth_gb_s * GB / bytes_read_per_token


def littles_law_in_flight(qps: float, latency_ms: float) -> float:
    """Requests in flight ≈ arrival rate × mean latency (50 QPS × 200 ms = 10)."""
    _require(_finite(qps) and qps >= 0, f"QPS must be ≥ 0, got {qps}", "pass a non-negative --qps")
    _require(_finite(latency_ms) and latency_ms >= 0, f"latency must be ≥ 0 ms, got {latency_ms}", "check the latency")
    return qps * latency_ms / 1000.0


def serial_qps(latency_ms: float) -> float:
    """Serial QPS₁ = 1000 / batch-1 latency in ms: what one replica does with no concurrency."""
    _require(_finite(latency_ms) and latency_ms > 0, f"latency must be > 0 ms, got {latency_ms}", "check the latency")
    return 1000.0 / latency_ms


def _check_efficiency(efficiency: float) -> None:
    _require(
        _finite(efficiency) and 0 < efficiency <= 1,
        f"efficiency η must be in (0, 1], got {efficiency}",
        "pass --efficiency between 0 and 1 (rule of thumb: 0.5–0.8, as queueing and batching gaps keep a replica below its peak; 0.4–0.5 for a strict P99)",
    )


def gpus_needed(target_qps: float, qps_per_gpu: float, efficiency: float) -> int:
    """ceil(target QPS / (QPS₁ × η)): ceil(200 / (25 × 0.6)) = 14."""
    _require(_finite(target_qps) and target_qps > 0, f"target QPS must be positive, got {target_qps}",
             "pass a positive --qps")
    _require(_finite(qps_per_gpu) and qps_per_gpu > 0, f"single-GPU QPS must be positive, got {qps_per_gpu}",
             "check the measured or computed throughput")
    _check_efficiency(efficiency)
    # Round away float noise first: 200 / (25 × 0.6) must be 13.33 → 14, and 15 / (25 × 0.6) exactly 1.
    return max(1, math.ceil(round(target_qps / (qps_per_gpu * efficiency), 9)))


def choose_efficiency(mode: str, p99_ms: float | None, given: float | None = None) -> tuple[float, str]:
    """η by SLA strictness, and why: given > strict P99 (0.45) > batch (0.8) > interactive (0.6)."""
    if given is not None:
        _check_efficiency(given)
        return given, "given (--efficiency)"
    if p99_ms is not None:
        return 0.45, "strict P99 target: rule of thumb 0.4–0.5, because queueing delay, which drives P99, grows fast above half load; override with --efficiency"
    if mode == "batch":
        return 0.8, "batch workload: top of the 0.5–0.8 rule of thumb, since no one waits on a single request; override with --efficiency"
    return 0.6, "interactive workload: 0.6, inside the 0.5–0.8 rule of thumb (real traffic is bursty and batches are rarely full); override with --efficiency"


@dataclass(frozen=True)
class FleetSize:
    """GPUs for a target QPS, with headroom and the scale-out threshold.

    Utilisation is load / capacity, capacity being ``qps_per_replica`` (QPS₁) per replica.
    ``gpus_needed`` is ceil(target / (QPS₁ × η)); ``gpus_recommended`` adds replicas until at least
    ``headroom`` of capacity is spare at the target; ``scale_out_at_qps`` is the fleet load at
    which utilisation reaches ``scale_out_utilisation`` (add a replica there, not at 100 %).
    """

    target_qps: float
    qps_per_replica: float
    efficiency: float
    gpus_per_replica: int
    replicas_needed_exact: float
    replicas_needed: int
    gpus_needed: int
    headroom: float
    replicas_recommended: int
    gpus_recommended: int
    utilisation_at_target: float
    headroom_at_target: float
    scale_out_utilisation: float
    scale_out_at_qps: float
    scale_out_per_replica_qps: float


def size_fleet(
    target_qps: float,
    qps_per_replica: float,
    efficiency: float,
    *,
    gpus_per_replica: int = 1,
    headroom: float = 0.25,
    scale_out_utilisation: float = 0.65,
) -> FleetSize:
    """Replicas and GPUs for ``target_qps`` at ``qps_per_replica`` each (see :class:`FleetSize`)."""
    replicas = gpus_needed(target_qps, qps_per_replica, efficiency)
    _require(0 <= headroom < 1, f"headroom must be in [0, 1), got {headroom}", "pass --headroom like 0.25")
    _require(0 < scale_out_utilisation <= 1, f"scale-out utilisation must be in (0, 1], got {scale_out_utilisation}",
             "pass --scale-out-at like 0.65")
    _require(gpus_per_replica >= 1, "GPUs per replica must be ≥ 1", "check --tp")
    by_headroom = math.ceil(round(target_qps / (qps_per_replica * (1 - headroom)), 9))
    recommended = max(replicas, by_headroom)
    capacity = recommended * qps_per_replica
    utilisation = target_qps / capacity
    return FleetSize(
        target_qps=target_qps,
        qps_per_replica=qps_per_replica,
        efficiency=efficiency,
        gpus_per_replica=gpus_per_replica,
        replicas_needed_exact=target_qps / (qps_per_replica * efficiency),
        replicas_needed=replicas,
        gpus_needed=replicas * gpus_per_replica,
        headroom=headroom,
        replicas_recommended=recommended,
        gpus_recommended=recommended * gpus_per_replica,
        utilisation_at_target=utilisation,
        headroom_at_target=1 - utilisation,
        scale_out_utilisation=scale_out_utilisation,
        scale_out_at_qps=scale_out_utilisation * capacity,
        scale_out_per_replica_qps=scale_out_utilisation * qps_per_replica,
    )


def plan_fleet(
    workload: Workload,
    assumptions: PlanAssumptions,
    qps_per_replica: float,
    latency_ms: float,
    basis: str,
    gpus_per_replica: int = 1,
) -> tuple[list[PlanLine], list[str], FleetSize]:
    """The fleet section both planners share: η, Little's law, GPUs, headroom, scale-out.

    ``basis`` (``"theory"`` or ``"measured"``) labels the lines computed from ``qps_per_replica``
    and ``latency_ms`` (mean request latency, for Little's law).
    """
    w, a = workload, assumptions
    if w.target_qps is None:
        raise ConfigError("no target QPS to size the fleet for", hint="pass --qps")
    eta, eta_note = choose_efficiency(w.mode, w.p99_ms, a.efficiency)
    fleet = size_fleet(w.target_qps, qps_per_replica, eta, gpus_per_replica=gpus_per_replica,
                       headroom=a.headroom, scale_out_utilisation=a.scale_out_utilisation)
    lines: list[PlanLine] = []
    warnings: list[str] = []

    def add(key: str, label: str, value: float | int, unit: str, line_basis: str, note: str) -> None:
        lines.append(PlanLine("fleet", key, label, value, unit, line_basis, note))

    add("efficiency", "efficiency η", eta, "", "input" if a.efficiency is not None else "assumption", eta_note)
    add("in_flight_requests", "requests in flight (Little's law)", littles_law_in_flight(w.target_qps, latency_ms),
        "requests", basis, f"{w.target_qps:g} req/s × {latency_ms:,.1f} ms")
    add("replicas_needed", "replicas needed", fleet.replicas_needed, "replicas", basis,
        f"ceil({w.target_qps:g} / ({qps_per_replica:.4g} × {eta:g})) = ceil({fleet.replicas_needed_exact:.2f})")
    add("gpus_needed", "GPUs needed", fleet.gpus_needed, "GPUs", basis,
        f"{fleet.replicas_needed} replicas × {gpus_per_replica} GPU(s) each")
    add("headroom_required", "headroom kept at the target", a.headroom, "", "assumption",
        "rule of thumb: keep 20–30 % spare for bursts and a lost replica; --headroom")
    add("gpus_recommended", "GPUs recommended", fleet.gpus_recommended, "GPUs", basis,
        "GPUs needed, raised until the headroom is spare" if fleet.gpus_recommended > fleet.gpus_needed
        else "= GPUs needed (η already leaves the headroom)")
    add("utilisation_at_target", "utilisation at the target", fleet.utilisation_at_target, "", basis,
        "target / (recommended replicas × QPS per replica)")
    add("scale_out_at_qps", "scale out above", fleet.scale_out_at_qps, "req/s", basis,
        f"{a.scale_out_utilisation:.0%} utilisation of the recommended fleet (rule of thumb 60–70 %: a new replica takes minutes to start), i.e. "
        f"{fleet.scale_out_per_replica_qps:.4g} req/s per replica; --scale-out-at")
    if fleet.utilisation_at_target > a.scale_out_utilisation:
        warnings.append(
            f"at the target the fleet already runs at {fleet.utilisation_at_target:.0%} utilisation, above the "
            f"{a.scale_out_utilisation:.0%} scale-out threshold: lower --efficiency or raise --headroom"
        )
    return lines, warnings, fleet


# --- inputs shared by the planners ------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    """What the service must do. Token counts are per request; ``None`` means "not given".

    ``mode`` is ``"interactive"`` (people waiting: lower η, short batching window) or
    ``"batch"`` (throughput first). SLA: ``p99_ms`` end-to-end, ``ttft_ms`` time to first token,
    ``tokens_per_s_per_user`` the decode speed each stream must keep.
    """

    target_qps: float | None = bounded(None, POSITIVE)
    input_tokens: float | None = bounded(None, TOKENS)
    output_tokens: float | None = bounded(None, TOKENS)
    input_tokens_p95: float | None = bounded(None, TOKENS)
    output_tokens_p95: float | None = bounded(None, TOKENS)
    mode: str = "interactive"
    p99_ms: float | None = bounded(None, POSITIVE)
    ttft_ms: float | None = bounded(None, POSITIVE)
    tokens_per_s_per_user: float | None = bounded(None, POSITIVE)

    def __post_init__(self) -> None:
        _require(self.mode in ("interactive", "batch"), f"mode must be interactive or batch, got {self.mode!r}",
                 "pass --mode interactive or --mode batch")
        check_fields(self)
        for mean, p95, flag in (
            (self.input_tokens, self.input_tokens_p95, "--input-tokens-p95"),
            (self.output_tokens, self.output_tokens_p95, "--output-tokens-p95"),
        ):
            if mean is not None and p95 is not None:
                _require(p95 >= mean, f"{flag} ({p95:g}) is below the mean ({mean:g})",
                         f"a p95 cannot be below the mean: check {flag}")


@dataclass(frozen=True)
class PlanAssumptions:
    """The knobs of the model, each printed beside the numbers it shapes.

    ``efficiency`` None → chosen by :func:`choose_efficiency`. ``bandwidth_efficiency`` is the
    achievable share of datasheet memory bandwidth, ``compute_efficiency`` the achievable share of
    dense tensor throughput (model FLOPs utilisation); their defaults are calibrated against
    published measurements (:data:`tritonkit.planner.costs.CALIBRATION_SOURCE`).
    ``expert_parallel`` (MoE) spreads the experts over that many of the replica's GPUs (None: 1);
    ``chunked_prefill`` lets prompts ride in decode steps; ``attention_dp`` runs the attention
    data-parallel over the replica's GPUs (each its own sequences and their KV cache, the
    non-expert weights on every GPU) beside the experts split over them (MoE). ``reserve_gib`` (per GPU) overrides the GPU's default reserve fraction.
    ``tensor_parallel`` None → the smallest size whose GPUs hold the model; ``kv_dtype`` None → the
    model's own dtype (bf16 for a bf16 model, fp16 otherwise).
    """

    efficiency: float | None = bounded(None, FRACTION)
    headroom: float = bounded(0.25, TOLERANCE)
    scale_out_utilisation: float = bounded(0.65, FRACTION)
    bandwidth_efficiency: float = bounded(DEFAULT_BANDWIDTH_EFFICIENCY, FRACTION)
    compute_efficiency: float = bounded(DEFAULT_COMPUTE_EFFICIENCY, FRACTION)
    reserve_gib: float | None = bounded(None, NON_NEGATIVE)
    reserve_fraction: float | None = bounded(None, TOLERANCE)
    tensor_parallel: int | None = bounded(None, PARALLEL)
    kv_dtype: str | None = None
    expert_parallel: int | None = bounded(None, PARALLEL)
    chunked_prefill: bool = False
    attention_dp: bool = False

    def __post_init__(self) -> None:
        check_fields(self)
