"""The GPU catalogue: names people type, dense figures with their sources, custom cards."""

from __future__ import annotations

import pytest

from tritonkit.errors import ConfigError
from tritonkit.planner import GIB, GPUS, GpuFigures, custom_gpu, find_gpu, gpu_names, override_gpu

REQUIRED = ["T4", "L4", "A10", "A100-40GB", "A100-80GB", "H100-SXM", "H200", "L40S", "RTX-4090", "JETSON-ORIN-64GB"]


def test_the_catalogue_holds_every_common_serving_card() -> None:
    assert set(REQUIRED) <= set(gpu_names())


@pytest.mark.parametrize(
    ("typed", "name"),
    [("a100-80gb", "A100-80GB"), ("A100_80GB", "A100-80GB"), ("h100", "H100-SXM"), ("H100-SXM", "H100-SXM"),
     ("l4", "L4"), ("jetson-orin-64gb", "JETSON-ORIN-64GB"), ("rtx 4090", "RTX-4090"), ("a100-40gb", "A100-40GB")],
)
def test_names_match_case_insensitively_and_through_aliases(typed: str, name: str) -> None:
    assert find_gpu(typed).name == name


def test_an_unknown_gpu_lists_the_known_names() -> None:
    with pytest.raises(ConfigError) as info:
        find_gpu("V100")
    assert "V100" in info.value.message
    for name in REQUIRED:
        assert name in info.value.message
    assert info.value.hint is not None and "--list-gpus" in info.value.hint


@pytest.mark.parametrize("gpu", GPUS, ids=lambda g: g.name)
def test_every_figure_has_a_source_and_tensor_figures_are_dense(gpu: object) -> None:
    from tritonkit.planner import GpuSpec

    assert isinstance(gpu, GpuSpec)
    for figure in (gpu.memory, gpu.bandwidth, gpu.fp16, gpu.fp8, gpu.int8):
        assert figure.source.strip()
    for figure in (gpu.fp16, gpu.int8):
        assert figure.dense is True and figure.value is not None and figure.value > 0
    assert gpu.fp8.value is None or gpu.fp8.dense is True
    # INT8 tensor rate is never below the FP16 one on these parts
    assert gpu.int8_tops >= gpu.fp16_tflops


def test_key_datasheet_figures() -> None:
    orin = find_gpu("JETSON-ORIN-64GB")
    assert orin.bandwidth_gb_s == 204.8 and orin.memory_gib == 64 and orin.kind == "edge"
    a100 = find_gpu("A100-80GB")
    assert (a100.memory_gib, a100.bandwidth_gb_s, a100.fp16_tflops, a100.fp8_tflops) == (80, 2039, 312, None)
    h100 = find_gpu("H100-SXM")
    # the datasheet prints 1,979 TFLOPS FP16 *with sparsity*: dense is half
    assert h100.fp16_tflops == pytest.approx(1979 / 2, abs=0.5)
    assert "sparsity" in h100.fp16.source and "halved" in h100.fp16.source
    assert find_gpu("H200").memory_gib == 141 and find_gpu("H200").bandwidth_gb_s == 4800
    assert find_gpu("L40S").fp16_tflops == 362.05
    assert find_gpu("RTX-4090").ecc is False


def test_memory_is_the_datasheet_label_read_as_gib() -> None:
    assert find_gpu("A100-80GB").memory_bytes == 80 * GIB


def test_supported_precision_gaps_are_explicit() -> None:
    for name in ("T4", "A10", "A100-80GB", "JETSON-ORIN-64GB"):
        assert find_gpu(name).fp8_tflops is None
    for name in ("L4", "L40S", "H100-SXM", "H200", "RTX-4090"):
        assert find_gpu(name).fp8_tflops is not None


def test_a_figure_can_be_overridden_and_says_it_was_given() -> None:
    edited = override_gpu(find_gpu("L4"), GpuFigures(memory_gib=20))
    assert edited.memory_gib == 20 and edited.memory.source == "given"
    assert edited.bandwidth_gb_s == 300  # untouched figures keep their datasheet value
    assert "edited" in edited.name


def test_a_custom_gpu_needs_positive_figures() -> None:
    gpu = custom_gpu(GpuFigures(memory_gib=32, bandwidth_gb_s=900, fp16_tflops=100))
    assert gpu.int8_tops == 200 and "assumed" in gpu.int8.source
    assert gpu.fp8_tflops is None
    with pytest.raises(ConfigError, match="--gpu-bandwidth-gb-s"):
        custom_gpu(GpuFigures(memory_gib=32, bandwidth_gb_s=-1, fp16_tflops=100))


def test_a_custom_gpu_missing_a_needed_figure_is_refused_naming_its_flag() -> None:
    with pytest.raises(ConfigError, match="needs --gpu-bandwidth-gb-s, --gpu-fp16-tflops as well"):
        custom_gpu(GpuFigures(memory_gib=32, int8_tops=50))


def test_an_override_replaces_only_the_figures_given_each_checked() -> None:
    card = find_gpu("H100-SXM")
    assert override_gpu(card, GpuFigures()) is card
    edited = override_gpu(card, GpuFigures(fp8_tflops=1000, int8_tops=1500))
    assert (edited.fp8_tflops, edited.int8_tops, edited.fp16) == (1000, 1500, card.fp16)
    assert edited.fp8.dense is True and edited.fp8.unit == "TFLOPS" and edited.int8.source == "given"
    with pytest.raises(ConfigError, match="--gpu-int8-tops"):
        override_gpu(card, GpuFigures(int8_tops=0))


@pytest.mark.parametrize(
    ("reported", "expected"),
    [
        ("NVIDIA H200", "H200"),
        ("NVIDIA H100 80GB HBM3", "H100-SXM"),
        ("NVIDIA H100 PCIe", "H100-PCIE"),
        ("NVIDIA A100-SXM4-80GB", "A100-80GB"),
        ("NVIDIA A100-SXM4-40GB", "A100-40GB"),
        ("NVIDIA A100 80GB PCIe", "A100-80GB-PCIE"),
        ("Tesla T4", "T4"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA GeForce RTX 4090", "RTX-4090"),
    ],
)
def test_names_as_nvidia_smi_prints_them_find_their_card(reported: str, expected: str) -> None:
    assert find_gpu(reported).name == expected


@pytest.mark.parametrize("reported", ["NVIDIA A10G", "NVIDIA H100 NVL"])
def test_a_reported_card_the_catalogue_lacks_is_not_taken_for_a_relative(reported: str) -> None:
    with pytest.raises(ConfigError, match="unknown GPU"):
        find_gpu(reported)
