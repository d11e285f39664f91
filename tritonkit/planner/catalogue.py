"""The GPU catalogue: memory, memory bandwidth and dense tensor throughput, each with its source.

Units, exactly:

* ``memory_gib`` — the capacity the datasheet prints as "80GB". DRAM capacities follow the
  JEDEC binary convention, so that label means 80 GiB (80 × 2**30 bytes); ``nvidia-smi`` shows a
  little less (ECC, firmware), which the planner's memory reserve absorbs.
* ``bandwidth_gb_s`` — decimal gigabytes per second (10**9 bytes/s), as datasheets print it.
* ``fp16_tflops`` / ``fp8_tflops`` / ``int8_tops`` — **dense** tensor-core throughput in 10**12
  operations per second. Datasheets since Ampere print the 2:4 structured-sparsity figure first
  (marked with an asterisk); the dense figure is half of it, and each figure's ``source`` says
  which was printed and whether it was halved. Inference engines do not use 2:4 sparsity on
  ordinary checkpoints, so the planner only ever uses dense figures.

Names are matched case-insensitively, ignoring spaces, ``-`` and ``_``: ``A100-80GB``,
``a100_80gb``, ``H100`` (= ``H100-SXM``), ``JETSON-ORIN-64GB``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, TypedDict

from tritonkit.errors import ConfigError

__all__ = [
    "GPUS",
    "Figure",
    "Link",
    "GpuFigures",
    "GpuSpec",
    "custom_gpu",
    "find_gpu",
    "gpu_names",
    "override_gpu",
]


@dataclass(frozen=True)
class Figure:
    """One catalogue number with its unit and where it comes from.

    ``value`` is ``None`` when the hardware has no such unit (no FP8 tensor cores before
    Ada/Hopper). ``dense`` is True for a dense tensor figure, None where the notion does not apply
    (memory, bandwidth).
    """

    value: float | None
    unit: str
    source: str
    dense: bool | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "unit": self.unit, "dense": self.dense, "source": self.source}

    @property
    def known(self) -> float:
        """The value, for a figure every accelerator has (memory, bandwidth, FP16, INT8)."""
        assert self.value is not None
        return self.value


@dataclass(frozen=True)
class Link:
    """The link tensor-parallel GPUs of one node talk over: NVLink (through NVSwitch or a bridge) or PCIe.

    ``bandwidth`` is GB/s **per direction** per GPU (datasheets print NVLink as the bidirectional
    total, e.g. H100 SXM "900GB/s" = 450 GB/s each way; the source says so); ``latency`` is the
    fixed cost of one all-reduce in µs (kernel launch and the synchronisation hops), which
    dominates the small all-reduces of a decode step; ``max_gpus`` is how many GPUs share the
    link at full speed (8 on an HGX board's NVSwitch, 2 across an NVLink bridge, a server's
    slots on PCIe).
    """

    name: str
    bandwidth: Figure  # GB/s per direction per GPU
    latency: Figure  # µs per all-reduce
    max_gpus: int
    #: Measured all-reduces, by GPU count: (GPUs, bus bandwidth GB/s, latency µs), where they are known;
    #: they replace the datasheet's figures at that count (``measured_source`` says where from).
    measured: tuple[tuple[int, float, float], ...] = ()
    measured_source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "bandwidth_gb_s_per_direction": self.bandwidth.to_dict(),
                "allreduce_latency_us": self.latency.to_dict(), "max_gpus": self.max_gpus,
                "measured_allreduce": [{"gpus": n, "bus_gb_s": bw, "latency_us": us} for n, bw, us in self.measured],
                "measured_source": self.measured_source}

    def allreduce(self, gpus: int) -> tuple[float, float]:
        """(GB/s, µs) of an all-reduce over ``gpus`` GPUs: measured where known, else the datasheet's."""
        return next(((bw, us) for n, bw, us in self.measured if n == gpus), (self.bandwidth_gb_s, self.latency_us))

    @property
    def bandwidth_gb_s(self) -> float:
        return self.bandwidth.known

    @property
    def latency_us(self) -> float:
        return self.latency.known


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator as the planner sees it (per GPU, not per board or node)."""

    name: str
    memory: Figure  # GiB
    bandwidth: Figure  # GB/s (decimal)
    fp16: Figure  # dense TFLOPS (FP16/BF16 tensor, FP32 accumulate where the two differ)
    fp8: Figure  # dense TFLOPS, value None without FP8 tensor cores
    int8: Figure  # dense TOPS
    kind: str = "datacenter"  # "datacenter" | "consumer" | "edge" | "custom"
    ecc: bool = True
    aliases: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    #: Fraction of memory the planner keeps back by default (CUDA context, activations, runtime
    #: buffers; on unified-memory boards also the OS and the CPU side).
    default_reserve_fraction: float = 0.10
    #: The link between GPUs of one node; ``None``: a single accelerator (no tensor parallelism).
    link: Link | None = None

    @property
    def memory_gib(self) -> float:
        return self.memory.known

    @property
    def memory_bytes(self) -> int:
        return int(round(self.memory_gib * 2**30))

    @property
    def bandwidth_gb_s(self) -> float:
        return self.bandwidth.known

    @property
    def fp16_tflops(self) -> float:
        return self.fp16.known

    @property
    def fp8_tflops(self) -> float | None:
        return self.fp8.value

    @property
    def int8_tops(self) -> float:
        return self.int8.known

    def to_dict(self) -> dict[str, Any]:
        """JSON-able view; every figure keeps its unit and source."""
        return {
            "name": self.name,
            "kind": self.kind,
            "ecc": self.ecc,
            "memory_gib": self.memory.to_dict(),
            "bandwidth_gb_s": self.bandwidth.to_dict(),
            "fp16_dense_tflops": self.fp16.to_dict(),
            "fp8_dense_tflops": self.fp8.to_dict(),
            "int8_dense_tops": self.int8.to_dict(),
            "default_reserve_fraction": self.default_reserve_fraction,
            "link": self.link.to_dict() if self.link is not None else None,
            "aliases": list(self.aliases),
            "notes": list(self.notes),
        }


def _mem(gib: float, source: str) -> Figure:
    return Figure(gib, "GiB", source)


def _bw(gb_s: float, source: str) -> Figure:
    return Figure(gb_s, "GB/s", source)


def _dense(value: float | None, unit: str, source: str) -> Figure:
    return Figure(value, unit, source, dense=True if value is not None else None)


class _TensorFigures(TypedDict):
    """The three tensor figures of one GPU, for GPUs that share their tensor cores."""

    fp16: Figure
    fp8: Figure
    int8: Figure


# Each figure below was read from the vendor's datasheet named in its source string. "sparse X
# halved" means the datasheet prints X with 2:4 sparsity and X/2 is the dense rate.
_T4 = "NVIDIA T4 Tensor Core GPU datasheet"
_L4 = "NVIDIA L4 Tensor Core GPU datasheet"
_A10 = "NVIDIA A10 Tensor Core GPU datasheet"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet"
_H100 = "NVIDIA H100 Tensor Core GPU datasheet"
_H200 = "NVIDIA H200 Tensor Core GPU datasheet"
_L40S = "NVIDIA L40S datasheet"
_ADA = "NVIDIA Ada Lovelace GPU architecture whitepaper (GeForce RTX 4090 column)"
_ORIN = "NVIDIA Jetson AGX Orin Series technical brief / module datasheet (Jetson AGX Orin 64GB)"
_JEDEC = "label as printed; DRAM 'GB' is binary (JEDEC), i.e. GiB"
_NO_FP8_AMPERE = (None, "Ampere has no FP8 tensor cores")


def _tensor(fp16: tuple[float, str], fp8: tuple[float | None, str], int8: tuple[float, str]) -> _TensorFigures:
    """The three dense tensor figures, each ``(value, source)``: FP16 and FP8 in TFLOPS, INT8 in TOPS."""
    return {"fp16": _dense(fp16[0], "TFLOPS", fp16[1]), "fp8": _dense(fp8[0], "TFLOPS", fp8[1]),
            "int8": _dense(int8[0], "TOPS", int8[1])}


def _halved(source: str, sparse_fp16: float, sparse_fp8: float, sparse_int8: float) -> _TensorFigures:
    """Tensor figures from a datasheet that prints them with sparsity only: halved to dense.

    ``source`` names the datasheet and the card (e.g. ``"NVIDIA H100 datasheet: H100 SXM"``).
    """

    def half(value: float) -> float:
        return value // 2 if value % 2 == 0 else value / 2

    return _tensor((half(sparse_fp16), f"{source} FP16 tensor {sparse_fp16:,g} TFLOPS with sparsity, halved"),
                   (half(sparse_fp8), f"{source} FP8 tensor {sparse_fp8:,g} TFLOPS with sparsity, halved"),
                   (half(sparse_int8), f"{source} INT8 tensor {sparse_int8:,g} TOPS with sparsity, halved"))


#: The fixed cost of one all-reduce is not a datasheet figure: these are assumptions of the order
#: NCCL's small-message all-reduce takes inside one node (launch and synchronisation hops), a few µs
#: over NVSwitch and more over PCIe through the host bridge; the plan marks them as assumptions.
_NVLINK_LATENCY = Figure(8.0, "µs", "assumption: order of an NCCL small-message all-reduce over NVLink/NVSwitch "
                                     "inside one node (not a datasheet figure)")
_PCIE_LATENCY = Figure(25.0, "µs", "assumption: order of an NCCL small-message all-reduce over PCIe through the "
                                    "host bridge (not a datasheet figure)")
_PCIE_GEN = {3: 16.0, 4: 32.0, 5: 64.0}  # GB/s per direction for an x16 slot (PCI-SIG: 1, 2, 4 GB/s per lane)


def _nvlink(total_gb_s: float, source: str, max_gpus: int = 8) -> Link:
    """NVLink whose datasheet prints the bidirectional total per GPU (halved to per direction)."""
    return Link(f"NVLink {total_gb_s:g} GB/s", Figure(total_gb_s / 2, "GB/s", f"{source} (bidirectional total "
                                                       "per GPU, halved to per direction)"),
                _NVLINK_LATENCY, max_gpus)


def _pcie(gen: int, source: str) -> Link:
    """A PCIe x16 slot of generation ``gen`` (per direction: the datasheet's total, or PCI-SIG's per-lane rate)."""
    return Link(f"PCIe Gen{gen} x16", Figure(_PCIE_GEN[gen], "GB/s", f"{source}: PCIe Gen{gen} x16 "
                                              f"({_PCIE_GEN[gen]:g} GB/s per direction)"), _PCIE_LATENCY, 8)


def _sparse_card(name: str, source: str, memory: tuple[float, str], bandwidth: tuple[float, str],
                 sparse: tuple[float, float, float], aliases: tuple[str, ...] = (), link: Link | None = None) -> GpuSpec:
    """A card from a datasheet that prints memory as ``"<GB> GB <kind>"``, its bandwidth, and its FP16,
    FP8 and INT8 tensor figures with sparsity only (halved to dense); ``source`` names the datasheet
    and the card (e.g. ``"NVIDIA H100 datasheet: H100 SXM"``)."""
    return GpuSpec(name=name, memory=_mem(memory[0], f"{source} {memory[1]} ({_JEDEC})"),
                   bandwidth=_bw(bandwidth[0], f"{source} {bandwidth[1]}"), **_halved(source, *sparse), aliases=aliases,
                   link=link)


# Every A100 (40 GB, 80 GB, SXM or PCIe) has the same tensor cores at the same clocks.
_A100_TENSOR = _tensor((312, f"{_A100}: FP16 tensor 312 TFLOPS dense (624 with sparsity)"), _NO_FP8_AMPERE,
                       (624, f"{_A100}: INT8 tensor 624 TOPS dense (1,248 with sparsity)"))

_DATASHEET_GPUS: tuple[GpuSpec, ...] = (
    GpuSpec(
        name="T4",
        memory=_mem(16, f"{_T4}: 16 GB GDDR6 ({_JEDEC})"),
        bandwidth=_bw(320, f"{_T4}: 320+ GB/s"),
        **_tensor((65, f"{_T4}: mixed-precision FP16/FP32 65 TFLOPS (Turing: no sparsity)"),
                  (None, "Turing has no FP8 tensor cores"), (130, f"{_T4}: INT8 130 TOPS (Turing: no sparsity)")),
        aliases=("TESLA-T4",),
        link=_pcie(3, _T4),
    ),
    _sparse_card("L4", f"{_L4}:", (24, "24 GB GDDR6"), (300, "300 GB/s"), (242, 485, 485),
                 link=_pcie(4, _L4)),
    GpuSpec(
        name="A10",
        memory=_mem(24, f"{_A10}: 24 GB GDDR6 ({_JEDEC})"),
        bandwidth=_bw(600, f"{_A10}: 600 GB/s"),
        **_tensor((125, f"{_A10}: FP16 tensor 125 TFLOPS dense (250 with sparsity)"), _NO_FP8_AMPERE,
                  (250, f"{_A10}: INT8 tensor 250 TOPS dense (500 with sparsity)")),
        link=_pcie(4, _A10),
    ),
    GpuSpec(
        name="A100-40GB",
        memory=_mem(40, f"{_A100}: 40 GB HBM2 ({_JEDEC})"),
        bandwidth=_bw(1555, f"{_A100}: A100 40GB SXM/PCIe 1,555 GB/s"),
        **_A100_TENSOR,
        aliases=("A100-40GB-SXM", "A100-SXM4-40GB", "A100-40G"),
        link=_nvlink(600, f"{_A100}: A100 SXM NVLink 600GB/s"),
    ),
    GpuSpec(
        name="A100-80GB",
        memory=_mem(80, f"{_A100}: 80 GB HBM2e ({_JEDEC})"),
        bandwidth=_bw(2039, f"{_A100}: A100 80GB SXM 2,039 GB/s"),
        **_A100_TENSOR,
        aliases=("A100", "A100-80GB-SXM", "A100-SXM4-80GB", "A100-80G"),
        link=_nvlink(600, f"{_A100}: A100 SXM NVLink 600GB/s"),
        notes=("SXM figures; the A100 80GB PCIe has 1,935 GB/s (use A100-80GB-PCIE).",),
    ),
    GpuSpec(
        name="A100-80GB-PCIE",
        memory=_mem(80, f"{_A100}: 80 GB HBM2e ({_JEDEC})"),
        bandwidth=_bw(1935, f"{_A100}: A100 80GB PCIe 1,935 GB/s"),
        **_A100_TENSOR,
        aliases=("A100-PCIE-80GB",),
        link=_pcie(4, f"{_A100}: A100 PCIe (an NVLink bridge joins only pairs)"),
    ),
    _sparse_card("H100-SXM", f"{_H100}: H100 SXM", (80, "80 GB HBM3"), (3350, "3.35 TB/s"), (1979, 3958, 3958),
                 ("H100", "H100-80GB", "H100-SXM5", "H100-SXM-80GB"),
                 link=_nvlink(900, f"{_H100}: H100 SXM NVLink 900GB/s")),
    _sparse_card("H100-PCIE", f"{_H100}: H100 PCIe", (80, "80 GB HBM2e"), (2000, "2 TB/s"), (1513, 3026, 3026),
                 ("H100-PCIE-80GB",), link=_pcie(5, f"{_H100}: H100 PCIe (an NVLink bridge joins only pairs)")),
    _sparse_card("H200", f"{_H200}: H200 SXM", (141, "141 GB HBM3e"), (4800, "4.8 TB/s"), (1979, 3958, 3958),
                 ("H200-SXM", "H200-141GB"), link=_nvlink(900, f"{_H200}: H200 SXM NVLink 900GB/s")),
    GpuSpec(
        name="L40S",
        # usable, not printed: ECC on GDDR6 keeps part of the 48 GB; 46,068 MiB is what the card reports and
        # what NVIDIA's AIConfigurator 0.12.0 database plans with (systems/l40s.yaml, mem_capacity 48,305,799,168 B)
        memory=_mem(46068 / 1024, f"{_L40S}: 48 GB GDDR6 with ECC, of which 46,068 MiB (44.99 GiB) usable: the "
                    "figure NVIDIA's AIConfigurator 0.12.0 performance database uses (systems/l40s.yaml mem_capacity)"),
        bandwidth=_bw(864, f"{_L40S}: 864 GB/s"),
        **_tensor((362.05, f"{_L40S}: FP16 tensor 362.05 TFLOPS dense (733 with sparsity)"),
                  (733, f"{_L40S}: FP8 tensor 733 TFLOPS dense (1,466 with sparsity)"),
                  (733, f"{_L40S}: INT8 tensor 733 TOPS dense (1,466 with sparsity)")),
        link=_pcie(4, f"{_L40S} (no NVLink)"),
    ),
    GpuSpec(
        name="RTX-4090",
        memory=_mem(24, f"{_ADA}: 24 GB GDDR6X ({_JEDEC})"),
        bandwidth=_bw(1008, f"{_ADA}: 1,008 GB/s"),
        **_tensor((165.2, f"{_ADA}: FP16 tensor with FP32 accumulate 165.2 TFLOPS dense (330.3 with FP16 "
                          "accumulate; GeForce halves the FP32-accumulate rate)"),
                  (330.3, f"{_ADA}: FP8 tensor with FP32 accumulate 330.3 TFLOPS dense"),
                  (660.6, f"{_ADA}: INT8 tensor 660.6 TOPS dense (1,321.2 with sparsity)")),
        kind="consumer",
        ecc=False,
        aliases=("4090", "RTX4090", "GEFORCE-RTX-4090"),
        link=_pcie(4, f"{_ADA}: no NVLink on GeForce Ada; PCIe Gen 4"),
        notes=("Consumer card: no ECC, not licensed for data-centre deployment by the GeForce EULA.",),
    ),
    GpuSpec(
        name="JETSON-ORIN-64GB",
        memory=_mem(64, f"{_ORIN}: 64 GB 256-bit LPDDR5, shared by CPU and GPU ({_JEDEC})"),
        bandwidth=_bw(204.8, f"{_ORIN}: 204.8 GB/s"),
        **_tensor((42.5, f"{_ORIN}: GPU INT8 170 sparse TOPS → 85 dense; Ampere FP16 tensor rate is half the "
                         "INT8 rate → 42.5 (derived, not printed)"),
                  (None, "Orin's Ampere GPU has no FP8 tensor cores"),
                  (85, f"{_ORIN}: GPU 170 INT8 TOPS with sparsity, halved (the 275 TOPS headline adds the two "
                       "DLAs)")),
        kind="edge",
        aliases=("JETSON-AGX-ORIN-64GB", "AGX-ORIN-64GB", "ORIN-64GB", "JETSON-AGX-ORIN"),
        notes=("Unified memory: the OS and CPU processes share the 64 GB with the GPU.",),
        default_reserve_fraction=0.25,
    ),
)

#: NCCL all-reduces measured on each card, from NVIDIA's AIConfigurator 0.12.0 performance database
#: (``systems/data/<system>/comm/nccl/<version>/nccl_perf.parquet``, op all_reduce, half): the bus bandwidth
#: 2 (n − 1) / n × bytes / time at 16 M elements, the latency at 8 K. Over PCIe the L40S falls from 19.9 GB/s
#: at 2 GPUs to 1.5 at 8 (the slots share the host's root complexes), far below the slot's 32 GB/s.
_MEASURED_ALLREDUCE = {
    "H100-SXM": ("h100_sxm", "2.29.2", ((2, 233.7, 7.0), (4, 286.5, 12.0), (8, 293.9, 19.0))),
    "H200": ("h200_sxm", "2.26.2", ((2, 247.8, 7.0), (4, 294.6, 11.0), (8, 299.9, 17.0))),
    "A100-80GB": ("a100_sxm", "2.27.3", ((2, 149.7, 13.0), (4, 174.8, 16.0), (8, 160.0, 23.0))),
    "L40S": ("l40s", "2.27.3", ((2, 19.9, 8.0), (4, 5.1, 16.0), (8, 1.5, 42.0))),
}


def _measured(gpu: GpuSpec) -> GpuSpec:
    if gpu.name not in _MEASURED_ALLREDUCE or gpu.link is None:
        return gpu
    system, nccl, rows = _MEASURED_ALLREDUCE[gpu.name]
    source = (f"NCCL {nccl} all-reduce measured on {system} (NVIDIA AIConfigurator 0.12.0 performance database, "
              "comm/nccl nccl_perf: bus bandwidth at 16 M half elements, latency at 8 K)")
    return replace(gpu, link=replace(gpu.link, measured=rows, measured_source=source))


GPUS: tuple[GpuSpec, ...] = tuple(_measured(g) for g in _DATASHEET_GPUS)


def _normalise(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).upper()


_INDEX: dict[str, GpuSpec] = {_normalise(key): gpu for gpu in GPUS for key in (gpu.name, *gpu.aliases)}


def gpu_names() -> list[str]:
    """Canonical catalogue names, in catalogue order."""
    return [g.name for g in GPUS]


#: Words in the names drivers report (``nvidia-smi --query-gpu=name``) that say nothing about which
#: card it is: the vendor and product line, and the memory technology ("NVIDIA H100 80GB HBM3").
_NOISE_WORDS = frozenset({"NVIDIA", "TESLA", "GEFORCE", "HBM2", "HBM2E", "HBM3", "HBM3E"})


def _without_noise(name: str) -> str:
    words = [w for w in re.split(r"[\s_\-]+", name.upper()) if w and w not in _NOISE_WORDS]
    return "".join(words)


def find_gpu(name: str) -> GpuSpec:
    """Look ``name`` up in the catalogue (case-insensitive, ignoring ``-``, ``_`` and spaces).

    Names as ``nvidia-smi`` prints them are accepted too ("NVIDIA H200", "NVIDIA H100 80GB HBM3",
    "NVIDIA A100-SXM4-80GB", "Tesla T4"). An unknown name raises ``ConfigError`` listing the known ones.
    """
    gpu = _INDEX.get(_normalise(name)) or _INDEX.get(_without_noise(name))
    if gpu is None:
        raise ConfigError(
            f"unknown GPU '{name}'; known: {', '.join(gpu_names())}",
            hint="pick one of the known names (tritonkit plan --list-gpus), or describe the card with "
            "--gpu-memory-gib, --gpu-bandwidth-gb-s and --gpu-fp16-tflops",
        )
    return gpu


def _positive(value: float, what: str, flag: str) -> float:
    if not value > 0:
        raise ConfigError(f"{what} must be positive, got {value}", hint=f"pass a positive {flag}")
    return float(value)


#: The figures a caller may give, in :class:`GpuFigures`' order: its field → (the :class:`GpuSpec`
#: field it sets, what it is, the CLI flag that gives it, its unit, whether it is a dense tensor figure).
_GIVEN: dict[str, tuple[str, str, str, str, bool | None]] = {
    "memory_gib": ("memory", "GPU memory", "--gpu-memory-gib", "GiB", None),
    "bandwidth_gb_s": ("bandwidth", "GPU memory bandwidth", "--gpu-bandwidth-gb-s", "GB/s", None),
    "fp16_tflops": ("fp16", "FP16 TFLOPS", "--gpu-fp16-tflops", "TFLOPS", True),
    "fp8_tflops": ("fp8", "FP8 TFLOPS", "--gpu-fp8-tflops", "TFLOPS", True),
    "int8_tops": ("int8", "INT8 TOPS", "--gpu-int8-tops", "TOPS", True),
}
#: What :func:`custom_gpu` cannot do without (FP8 may be absent, INT8 is assumed from FP16).
_REQUIRED = ("memory_gib", "bandwidth_gb_s", "fp16_tflops")


@dataclass(frozen=True)
class GpuFigures:
    """Figures a caller gives for a GPU (the CLI's ``--gpu-*`` flags), in the module's units;
    ``None``: not given. :func:`override_gpu` puts them into a catalogue card,
    :func:`custom_gpu` describes a whole card by them."""

    memory_gib: float | None = None
    bandwidth_gb_s: float | None = None
    fp16_tflops: float | None = None
    fp8_tflops: float | None = None
    int8_tops: float | None = None

    @property
    def any_given(self) -> bool:
        """Whether any figure is given (the CLI then describes a custom card, or edits ``--gpu``'s)."""
        return any(getattr(self, name) is not None for name in _GIVEN)

    def given(self) -> dict[str, Figure]:
        """A ``"given"`` :class:`Figure` per figure given, by :class:`GpuSpec` field; each must be
        positive (``ConfigError`` naming its flag)."""
        figures: dict[str, Figure] = {}
        for name, (spec_field, what, flag, unit, dense) in _GIVEN.items():
            value = getattr(self, name)
            if value is not None:
                figures[spec_field] = Figure(_positive(value, what, flag), unit, "given", dense)
        return figures


def override_gpu(gpu: GpuSpec, figures: GpuFigures) -> GpuSpec:
    """``gpu`` with the given figures replaced; each replaced figure's source says "given"."""
    changes: dict[str, Any] = figures.given()  # GpuSpec field → Figure (replace() is typed per field)
    if not changes:
        return gpu
    return replace(gpu, name=f"{gpu.name} (edited)", **changes)


def custom_gpu(figures: GpuFigures, *, name: str = "custom") -> GpuSpec:
    """A GPU described entirely by the caller: memory, bandwidth and FP16 must be given (figures
    are dense; INT8 defaults to 2 × FP16, FP8 to none)."""
    missing = [_GIVEN[field][2] for field in _REQUIRED if getattr(figures, field) is None]
    if missing:
        raise ConfigError(
            f"a custom GPU needs {', '.join(missing)} as well",
            hint="pass all of --gpu-memory-gib, --gpu-bandwidth-gb-s and --gpu-fp16-tflops, or --gpu NAME",
        )
    given = figures.given()
    fp16 = given["fp16"]
    assert fp16.value is not None
    return GpuSpec(
        name=name,
        memory=given["memory"],
        bandwidth=given["bandwidth"],
        fp16=fp16,
        fp8=given.get("fp8", Figure(None, "TFLOPS", "not given")),
        int8=given.get("int8", Figure(2 * fp16.value, "TOPS", "assumed 2 × FP16 (not given)", True)),
        kind="custom",
    )
