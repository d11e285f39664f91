"""The sizing arithmetic, with the source notes' wrong figures corrected."""

from __future__ import annotations

import pytest

from tritonkit.errors import ConfigError
from tritonkit.planner import (
    GIB,
    KIB,
    MIB,
    PlanAssumptions,
    Workload,
    choose_efficiency,
    decode_tokens_per_s_bound,
    find_precision,
    gpus_needed,
    kv_bytes_per_sequence,
    kv_bytes_per_token,
    littles_law_in_flight,
    max_sequences_by_memory,
    serial_qps,
    size_fleet,
    weights_bytes,
)


def test_kv_cache_of_32_layers_8_kv_heads_128_dims_fp16_is_128_kib_per_token() -> None:
    per_token = kv_bytes_per_token(num_layers=32, num_kv_heads=8, head_dim=128, bytes_per_element=2)
    assert per_token == 2 * 32 * 8 * 128 * 2 == 131_072
    assert per_token == 128 * KIB


def test_a_2048_token_sequence_holds_256_mib_not_the_notes_64_mb() -> None:
    per_sequence = kv_bytes_per_sequence(128 * KIB, 2048)
    assert per_sequence == 256 * MIB
    assert per_sequence != 64 * MIB


def test_100_sequences_need_25_gib_and_40_gib_holds_160_not_600() -> None:
    per_sequence = kv_bytes_per_sequence(kv_bytes_per_token(32, 8, 128, 2), 2048)
    assert 100 * per_sequence == 25 * GIB
    # memory − weights − reserve = 40 GiB of free KV space
    assert max_sequences_by_memory(54 * GIB, 13 * GIB, 1 * GIB, per_sequence) == 160


def test_memory_wall_rounds_down_and_never_goes_negative() -> None:
    assert max_sequences_by_memory(10 * GIB, 9 * GIB, 0, 300 * MIB) == 3  # 1024 MiB / 300 MiB = 3.41
    assert max_sequences_by_memory(10 * GIB, 11 * GIB, 0, 300 * MIB) == 0


def test_a_sliding_window_caps_the_kv_a_sequence_keeps() -> None:
    assert kv_bytes_per_sequence(128 * KIB, 10_000, sliding_window=4096) == 4096 * 128 * KIB == 512 * MIB


def test_7b_in_fp16_is_about_13_gib_int8_half_and_int4_a_quarter() -> None:
    fp16 = weights_bytes(7e9, find_precision("fp16").bytes_per_weight)
    assert fp16 == 14_000_000_000
    assert fp16 / GIB == pytest.approx(13.04, abs=0.01)
    assert weights_bytes(7e9, find_precision("int8").bytes_per_weight) == fp16 // 2
    assert weights_bytes(7e9, find_precision("int4").bytes_per_weight) == fp16 // 4


def test_gguf_block_formats_count_their_scales() -> None:
    assert find_precision("Q8_0").bits_per_weight == 8.5  # 32 × 8 bits + a 16-bit scale, per 32 weights
    assert find_precision("q4_0").bits_per_weight == 4.5
    assert find_precision("Q6_K").bits_per_weight == 6.5625
    assert 4.5 < find_precision("q4-k-m").bits_per_weight < 5.0


def test_200_qps_at_qps1_25_and_eta_06_needs_14_gpus() -> None:
    assert round(200 / (25 * 0.6), 2) == 13.33
    assert gpus_needed(200, 25, 0.6) == 14


def test_an_exact_multiple_is_not_rounded_up_by_float_noise() -> None:
    # 15 / (25 × 0.6) is 1.0000000000000002 in floating point
    assert gpus_needed(15, 25, 0.6) == 1
    assert gpus_needed(30, 25, 0.6) == 2


def test_serial_qps1_is_1000_over_the_batch_1_latency() -> None:
    assert serial_qps(40.0) == 25.0


def test_50_qps_at_200_ms_is_10_requests_in_flight() -> None:
    assert littles_law_in_flight(50, 200) == pytest.approx(10.0)


def test_edge_decode_of_a_4_gb_model_at_204_8_gb_s_is_at_most_51_tokens_per_s() -> None:
    ideal = decode_tokens_per_s_bound(204.8, 4e9)
    assert ideal == pytest.approx(51.2)
    assert ideal <= 51.2 + 1e-9
    # the notes' 25 tok/s is what about half of the bandwidth gives
    assert 0.5 * ideal == pytest.approx(25.6)


def test_efficiency_follows_sla_strictness() -> None:
    assert choose_efficiency("interactive", None)[0] == 0.6
    assert choose_efficiency("batch", None)[0] == 0.8
    strict, why = choose_efficiency("interactive", 300.0)
    assert 0.4 <= strict <= 0.5 and "P99" in why
    assert choose_efficiency("batch", 300.0, given=0.7) == (0.7, "given (--efficiency)")


def test_fleet_keeps_the_headroom_and_names_a_scale_out_point_below_full_load() -> None:
    fleet = size_fleet(200, 25, 0.6, headroom=0.25, scale_out_utilisation=0.65)
    assert fleet.gpus_needed == 14
    # 14 GPUs at the target run at 200 / 350 = 57 %: 43 % spare already covers 25 % headroom
    assert fleet.gpus_recommended == 14
    assert fleet.utilisation_at_target == pytest.approx(200 / 350)
    assert fleet.scale_out_at_qps == pytest.approx(0.65 * 14 * 25)
    # η 0.8 leaves only 20 % spare: a 30 % headroom raises the count to ceil(200 / 17.5) = 12
    tight = size_fleet(200, 25, 0.8, headroom=0.3)
    assert tight.gpus_needed == 10 and tight.gpus_recommended == 12


def test_tensor_parallel_replicas_multiply_the_gpu_count() -> None:
    fleet = size_fleet(200, 25, 0.6, gpus_per_replica=4)
    assert fleet.replicas_needed == 14 and fleet.gpus_needed == 56


@pytest.mark.parametrize("eta", [0.0, -0.1, 1.2, float("nan")])
def test_efficiency_outside_zero_to_one_is_refused(eta: float) -> None:
    with pytest.raises(ConfigError, match="efficiency"):
        gpus_needed(200, 25, eta)
    with pytest.raises(ConfigError, match=r"PlanAssumptions\.efficiency .*: (too|not a finite)") as info:
        PlanAssumptions(efficiency=eta)
    assert "fraction > 0 and ≤ 1" in str(info.value.hint)


def test_negative_or_zero_qps_is_refused_with_the_flag_to_fix() -> None:
    with pytest.raises(ConfigError) as info:
        Workload(target_qps=-5)
    assert "Workload.target_qps -5: too small" in str(info.value)
    with pytest.raises(ConfigError):
        gpus_needed(0, 25, 0.6)
    with pytest.raises(ConfigError):
        littles_law_in_flight(-1, 200)


def test_nonsense_workload_and_assumptions_are_refused() -> None:
    with pytest.raises(ConfigError, match="--input-tokens-p95"):
        Workload(input_tokens=1000, input_tokens_p95=500)
    with pytest.raises(ConfigError, match="mode"):
        Workload(mode="realtime")
    with pytest.raises(ConfigError, match="headroom"):
        PlanAssumptions(headroom=1.5)
    with pytest.raises(ConfigError, match="tensor_parallel"):
        PlanAssumptions(tensor_parallel=0)
    with pytest.raises(ConfigError, match="bandwidth"):
        PlanAssumptions(bandwidth_efficiency=0)
