"""Accelerator catalog: memory, HBM bandwidth and dense peak throughput, each with its source.

Memory is the nominal HBM capacity in GiB (the driver keeps a few hundred MiB of it; the
headroom setting covers that). Peak TFLOP/s are *dense* (no 2:4 sparsity) figures from the
vendors' datasheets; fp8 is ``None`` where the chip has no fp8 tensor cores.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from planner.errors import PlannerError

GIB = 1 << 30


class Device(BaseModel):
    """One accelerator as the planner sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_gib: float = Field(gt=0, le=4096)  # nominal HBM size
    # total memory as CUDA reports it (torch.cuda.mem_get_info, vLLM's "Free memory on device (free/total GiB)"),
    # which is what vLLM multiplies by --gpu-memory-utilization; its source ends the entry's ``source``
    cuda_memory_gib: float | None = Field(default=None, gt=0, le=4096)
    bandwidth_gb_s: float = Field(gt=0, le=100_000)  # HBM bandwidth, 10^9 bytes/s
    bf16_tflops: float = Field(gt=0, le=100_000)  # dense
    fp8_tflops: float | None = Field(default=None, gt=0, le=100_000)
    source: str = ""
    link_gb_s: float = Field(default=32.0, gt=0, le=100_000)  # GPU-to-GPU bandwidth per direction, 10^9 bytes/s
    link_latency_us: float = Field(default=10.0, ge=0, le=10_000)  # per all-reduce message
    moe_efficiency: float = Field(default=1.0, gt=0, le=10)  # fused-MoE grouped GEMMs vs Hopper, fitted where measured
    link_source: str = "PCIe Gen4 x16 (32 GB/s per direction); 10 us per message (typical NCCL small-message latency over PCIe)"
    # measured per tensor-parallel size where one link figure does not describe the fabric (PCIe:
    # pairs share a switch, larger groups cross the host): (tp, link GB/s, latency us) rows; a TP
    # uses the row of the smallest listed TP at least as large (the largest beyond them)
    allreduce_by_tp: tuple[tuple[int, float, float], ...] = ()
    compute_efficiency: float = Field(default=1.0, gt=0, le=10)  # GEMM/MoE/attention compute vs the fitted MFU (1: as the NVLink parts)
    compute_source: str = ""

    def link_at(self, tp: int) -> tuple[float, float]:
        """(link GB/s per direction, per-message latency us) for an all-reduce over ``tp`` GPUs."""
        if not self.allreduce_by_tp:
            return self.link_gb_s, self.link_latency_us
        rows = sorted(self.allreduce_by_tp)
        for size, gb_s, us in rows:
            if size >= tp:
                return gb_s, us
        return rows[-1][1], rows[-1][2]

    @property
    def memory_bytes(self) -> int:
        return int(self.memory_gib * GIB)

    @property
    def bandwidth_bytes_s(self) -> float:
        return self.bandwidth_gb_s * 1e9

    @property
    def link_bytes_s(self) -> float:
        return self.link_gb_s * 1e9

    def peak_flops(self, compute_dtype: str = "bf16") -> float:
        """Dense peak FLOP/s for the compute dtype (fp8 falls back to bf16 on chips without it)."""
        if compute_dtype == "fp8" and self.fp8_tflops:
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12

    def ridge_point(self, compute_dtype: str = "bf16") -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory- to compute-bound."""
        return self.peak_flops(compute_dtype) / self.bandwidth_bytes_s


_NV = "NVIDIA datasheet"
_L40S_FIT = "fitted to AIConfigurator 0.12.0 measured L40S (vLLM) fit-split rows (docs/latency_fit.md, stage 2)"
# (tp, link GB/s, latency us): AIConfigurator's measured L40S all-reduce, fitted per TP size. Other
# PCIe parts AIConfigurator has no data for use these (x2 bandwidth for PCIe Gen5, x0.5 for Gen3, by
# lane rate), stated as estimates in each device's link_source.
L40S_ALLREDUCE: tuple[tuple[int, float, float], ...] = ((2, 27.8, 0.0), (4, 5.53, 11.5), (8, 3.17, 0.0))
_PCIE4 = "PCIe Gen4 x16; AIConfigurator has no data for this GPU: L40S's measured PCIe all-reduce figures per TP size (estimate; see L40S-48GB)"
_BRIDGE = "; beyond a bridged pair (TP above 2) PCIe Gen5 x16: L40S's measured PCIe Gen4 all-reduce figures at twice the bandwidth (estimate; AIConfigurator has no data for this GPU)"
CATALOG: dict[str, Device] = {
    d.name: d
    for d in (
        Device(name="H100-SXM-80GB", memory_gib=80, cuda_memory_gib=79.18, bandwidth_gb_s=3350, bf16_tflops=989, fp8_tflops=1979, source=f"{_NV}: H100 Tensor Core GPU (SXM5), dense = half the sparsity figures; CUDA reports 79.18 GiB total (vLLM 0.11 start-up logs: 'Free memory on device (78.57/79.18 GiB)')", link_gb_s=450, link_latency_us=4.36, link_source="NVLink 4: 900 GB/s bidirectional = 450 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md)"),
        Device(name="H100-PCIe-80GB", memory_gib=80, bandwidth_gb_s=2000, bf16_tflops=756, fp8_tflops=1513, source=f"{_NV}: H100 Tensor Core GPU (PCIe)", link_gb_s=300, link_latency_us=8.0, link_source="NVLink bridge: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency assumed 8 us (bridge pairs, between NVLink and PCIe)" + _BRIDGE, allreduce_by_tp=((2, 300.0, 8.0), *((tp, gb_s * 2, us) for tp, gb_s, us in L40S_ALLREDUCE if tp > 2))),
        Device(name="H100-NVL-94GB", memory_gib=94, bandwidth_gb_s=3900, bf16_tflops=835, fp8_tflops=1671, source=f"{_NV}: H100 NVL", link_gb_s=300, link_latency_us=8.0, link_source="NVLink bridge: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency assumed 8 us" + _BRIDGE, allreduce_by_tp=((2, 300.0, 8.0), *((tp, gb_s * 2, us) for tp, gb_s, us in L40S_ALLREDUCE if tp > 2))),
        Device(name="H200-141GB", memory_gib=141, cuda_memory_gib=139.81, bandwidth_gb_s=4800, bf16_tflops=989, fp8_tflops=1979, source=f"{_NV}: H200 Tensor Core GPU (SXM); CUDA reports 139.81 GiB total (a published vLLM start-up log: 'Free memory on device (139.21/139.81 GiB)')", link_gb_s=450, link_latency_us=4.36, link_source="NVLink 4: 900 GB/s bidirectional = 450 per direction (NVIDIA datasheet); latency as H100 SXM (same NVLink 4 / NVSwitch fabric; H200 is held out of the fit)"),
        Device(name="B200-180GB", memory_gib=180, cuda_memory_gib=178.36, bandwidth_gb_s=8000, bf16_tflops=2250, fp8_tflops=4500, source=f"{_NV}: DGX B200 / HGX B200 per-GPU figures; CUDA reports 178.36 GiB total (published vLLM start-up logs on B200)", link_gb_s=900, link_latency_us=9.93, moe_efficiency=0.665, link_source="NVLink 5: 1.8 TB/s bidirectional = 900 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md); fused-MoE efficiency 0.665 of Hopper's, fitted likewise"),
        Device(name="A100-SXM-80GB", memory_gib=80, bandwidth_gb_s=2039, bf16_tflops=312, source=f"{_NV}: A100 Tensor Core GPU (SXM4 80GB)", link_gb_s=300, link_latency_us=16.8, moe_efficiency=0.899, link_source="NVLink 3: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md); fused-MoE efficiency 0.899 of Hopper's, fitted likewise"),
        Device(name="A100-SXM-40GB", memory_gib=40, cuda_memory_gib=39.38, bandwidth_gb_s=1555, bf16_tflops=312, source=f"{_NV}: A100 Tensor Core GPU (SXM4 40GB); CUDA reports 39.38 GiB total (a published vLLM start-up log: 'Free memory on device (36.23/39.38 GiB)')", link_gb_s=300, link_latency_us=16.8, moe_efficiency=0.899, link_source="NVLink 3: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency and fused-MoE efficiency as A100 SXM 80GB (fitted, docs/latency_fit.md)"),
        Device(name="L40S-48GB", memory_gib=48, bandwidth_gb_s=864, bf16_tflops=362, fp8_tflops=733, source=f"{_NV}: L40S", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=f"PCIe Gen4 x16, no NVLink; {_L40S_FIT}: all-reduce per TP size, TP2 27.8 GB/s + 0 us, TP4 5.53 GB/s + 11.5 us, TP8 3.17 GB/s + 0 us a message (effective bus bandwidth = these x link efficiency 0.654; TP3 uses TP4's, above 8 TP8's)", compute_efficiency=0.793, moe_efficiency=1.29, compute_source=f"{_L40S_FIT}: compute 0.793 of the fitted MFU (GEMM, MoE and attention FLOPs); fused-MoE efficiency 1.29 of Hopper's"),
        Device(name="L4-24GB", memory_gib=24, bandwidth_gb_s=300, bf16_tflops=121, fp8_tflops=242, source=f"{_NV}: L4 Tensor Core GPU", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="A10-24GB", memory_gib=24, bandwidth_gb_s=600, bf16_tflops=125, source=f"{_NV}: A10 Tensor Core GPU", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="T4-16GB", memory_gib=16, bandwidth_gb_s=320, bf16_tflops=65, source=f"{_NV}: T4 (fp16 tensor, no bf16)", link_gb_s=13.9, link_latency_us=0.0, allreduce_by_tp=tuple((tp, gb_s / 2, us) for tp, gb_s, us in L40S_ALLREDUCE), link_source="PCIe Gen3 x16; AIConfigurator has no data for this GPU: L40S's measured PCIe Gen4 all-reduce figures per TP size at half the bandwidth (Gen3 lane rate; estimate)"),
        Device(name="RTX-4090-24GB", memory_gib=24, bandwidth_gb_s=1008, bf16_tflops=165, fp8_tflops=330, source=f"{_NV}: Ada Lovelace architecture whitepaper (fp16/bf16 with fp16 accumulate)", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="MI300X-192GB", memory_gib=192, bandwidth_gb_s=5300, bf16_tflops=1307, fp8_tflops=2615, source="AMD Instinct MI300X datasheet", link_gb_s=448, link_latency_us=8.0, link_source="AMD Infinity Fabric: 7 links x 128 GB/s = 896 GB/s bidirectional = 448 per direction (AMD datasheet); latency assumed 8 us"),
        Device(name="MI325X-256GB", memory_gib=256, bandwidth_gb_s=6000, bf16_tflops=1307, fp8_tflops=2615, source="AMD Instinct MI325X datasheet", link_gb_s=448, link_latency_us=8.0, link_source="AMD Infinity Fabric: 896 GB/s bidirectional = 448 per direction (AMD datasheet); latency assumed 8 us"),
    )
}
DEFAULT_GPU = "H100-SXM-80GB"


def get_device(name: str) -> Device:
    """Look a device up by catalog name (case-insensitive).

    Raises:
        PlannerError: the name is not in the catalog.
    """
    for key, device in CATALOG.items():
        if key.lower() == str(name).lower():
            return device
    raise PlannerError("gpu", name, f"unknown GPU; known: {', '.join(CATALOG)} (or give a custom device size)")


@lru_cache(maxsize=256)
def custom_device(memory_gib: float, bandwidth_gb_s: float = 1000.0, bf16_tflops: float = 100.0, fp8_tflops: float | None = None) -> Device:
    """A device not in the catalog; the compute figures are placeholders unless given (memoised)."""
    try:
        return Device(name=f"custom-{memory_gib:g}GiB", memory_gib=memory_gib, bandwidth_gb_s=bandwidth_gb_s, bf16_tflops=bf16_tflops, fp8_tflops=fp8_tflops, source="user-provided")
    except ValueError as exc:
        raise PlannerError("device", memory_gib, f"invalid custom device: {exc.errors()[0]['msg']}") from None  # type: ignore[attr-defined]
