"""Accelerator catalog: memory, HBM bandwidth and dense peak throughput, each with its source.

Memory is the nominal HBM capacity in GiB; beside it each entry carries the totals the driver
reports (:mod:`planner.gpu_memory`: nvidia-smi's and CUDA's, which is a few hundred MiB less). Peak TFLOP/s are *dense* (no 2:4 sparsity) figures from the
vendors' datasheets; fp8 is ``None`` where the chip has no fp8 tensor cores, fp4 where it has
no 4-bit float tensor cores (Blackwell and CDNA 4 have them).

Beyond one scale-up domain (``node_gpus`` GPUs on NVLink / NVSwitch or Infinity Fabric; 72 on
an NVL72 rack) GPUs talk over their scale-out NICs (InfiniBand or RoCE, ``scaleout_gb_s`` per
GPU per direction): :meth:`Device.link_at` then answers the effective figures of a hierarchical
all-reduce. ``generation`` names the architecture the serving model's kernel tables key on.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field

from planner import latency
from planner.errors import PlannerError
from planner.gpu_memory import GPU_MEMORY, cuda_total_mib
from planner.units import GIB

NIC_MESSAGE_US = 25.0  # a message across nodes, estimate beside NCCL's own latency model (Device.scaleout_source)


class Device(BaseModel):
    """One accelerator as the planner sees it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    memory_gib: float = Field(gt=0, le=4096)  # nominal HBM size
    # total memory as CUDA reports it (torch.cuda.mem_get_info, vLLM's "Free memory on device (free/total GiB)"),
    # which is what vLLM multiplies by --gpu-memory-utilization, and nvidia-smi's memory.total (what SGLang
    # reads); catalog entries take both from planner/gpu_memory.py: kind "measured", "derived" or "assumed"
    cuda_memory_gib: float | None = Field(default=None, gt=0, le=4096)
    smi_memory_mib: int | None = Field(default=None, gt=0)
    cuda_memory_kind: str = ""
    cuda_memory_source: str = ""
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
    fp4_tflops: float | None = Field(default=None, gt=0, le=100_000)  # dense 4-bit float tensor peak (NVFP4 / MXFP4)
    generation: str = ""  # architecture: ampere, ada, hopper, blackwell, blackwell-ultra, blackwell-rtx, turing, cdna3, cdna4
    node_gpus: int = Field(default=8, ge=1, le=4096)  # GPUs in one scale-up (NVLink / Infinity Fabric) domain
    scaleout_gb_s: float = Field(default=50.0, gt=0, le=100_000)  # inter-node NIC bandwidth per GPU per direction, 10^9 bytes/s
    scaleout_latency_us: float | None = Field(default=None, ge=0, le=10_000)  # added per message that leaves the node (None: the fitted figure, latency.SERVING_FIT)
    scaleout_source: str = "one 400 Gb/s NIC per GPU (InfiniBand NDR or 400 GbE RoCE: 50 GB/s per direction); 25 us a message across nodes (estimate, on top of the in-node latency; NCCL's own latency model, src/graph/tuning.cc, gives a small tree all-reduce over 2 x 8 GPUs 6.8 + 2 x (7 x 0.6 + 5.0) = 25.2 us in all)"
    fixed_cost_scale: float = Field(default=1.0, gt=0, le=100)  # per-layer fixed costs and per-step host overhead vs the CUDA stack's (fitted)
    fixed_cost_source: str = ""
    as_of: str = ""  # ISO date the figures were read

    @property
    def vendor(self) -> str:
        return "amd" if self.generation.startswith("cdna") else "nvidia"

    def link_at(self, tp: int) -> tuple[float, float]:
        """(link GB/s per direction, per-message latency us) for an all-reduce over ``tp`` GPUs.

        Beyond one scale-up domain of ``node_gpus`` GPUs the all-reduce is hierarchical (NCCL's
        tree / ring over nodes): a reduce-scatter and an all-gather inside each node over the
        scale-up link, and an all-reduce of each GPU's 1/g shard across the n nodes over its
        own NIC. Its bytes take 2 (g - 1) / g x M / intra + 2 (n - 1) / n x (M / g) / NIC, returned
        as the one link figure the ring formula 2 (tp - 1) / tp x M / link reproduces; the
        latency adds the scale-out message latency to the node's.
        """
        inner = min(tp, self.node_gpus)
        if not self.allreduce_by_tp:
            gb_s, us = self.link_gb_s, self.link_latency_us
        else:
            rows = sorted(self.allreduce_by_tp)
            gb_s, us = next(((g, u) for size, g, u in rows if size >= inner), (rows[-1][1], rows[-1][2]))
        if tp <= self.node_gpus:
            return gb_s, us
        g, n = self.node_gpus, -(-tp // self.node_gpus)
        seconds_per_byte = (2.0 * (g - 1) / g) / gb_s + (2.0 * (n - 1) / n) / (g * self.scaleout_gb_s)
        return (2.0 * (tp - 1) / tp) / seconds_per_byte, us + self.scaleout_us

    @property
    def nic_latency_us(self) -> float:
        """One message's latency over the NICs as the catalog states it (the disaggregated pools'
        KV transfer): the entry's, else the sourced estimate of ``scaleout_source`` (25 us). The
        plan's inter-node all-reduce uses :attr:`scaleout_us` (fitted) instead."""
        return self.scaleout_latency_us if self.scaleout_latency_us is not None else NIC_MESSAGE_US

    @property
    def scaleout_us(self) -> float:
        """Latency added per message that leaves the node: the entry's, else the inter-node message
        latency fitted to the published multi-node runs (latency.SERVING_FIT, docs/serving_fit.md)."""
        return self.scaleout_latency_us if self.scaleout_latency_us is not None else latency.SERVING_FIT["scaleout_message_s"] * 1e6

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
        """Dense peak FLOP/s for the compute dtype (fp4 falls back to fp8 and fp8 to bf16 on
        chips without them: the weights are then widened before the multiply)."""
        if compute_dtype == "fp4" and self.fp4_tflops:
            return self.fp4_tflops * 1e12
        if compute_dtype in ("fp8", "fp4") and self.fp8_tflops:
            return self.fp8_tflops * 1e12
        return self.bf16_tflops * 1e12

    def ridge_point(self, compute_dtype: str = "bf16") -> float:
        """Arithmetic intensity (FLOP/byte) where the roofline turns from memory- to compute-bound."""
        return self.peak_flops(compute_dtype) / self.bandwidth_bytes_s


_NV = "NVIDIA datasheet"
# The 2026 additions (read 2026-12-01). Dense = half the datasheets' sparsity figures; memory the
# marketed per-GPU capacity; the totals the driver reports are in planner/gpu_memory.py.
_READ = "2026-12-01"
_NVL5 = "NVLink 5: 1.8 TB/s bidirectional = 900 per direction (NVIDIA datasheet); per-message latency and fused-MoE efficiency as B200 (fitted, docs/latency_fit.md: same NVLink 5 / NVSwitch fabric and tensor cores)"
_CX7 = "one ConnectX-7 400 Gb/s NIC per GPU (InfiniBand NDR or 400 GbE RoCE: 50 GB/s per direction); 25 us a message across nodes (estimate, on top of the in-node latency; NCCL's own latency model, src/graph/tuning.cc, gives a small tree all-reduce over 2 x 8 GPUs 6.8 + 2 x (7 x 0.6 + 5.0) = 25.2 us in all)"
_CX8 = "one ConnectX-8 SuperNIC per GPU, 800 Gb/s (InfiniBand XDR or 2 x 400 GbE: 100 GB/s per direction); 25 us a message across nodes (estimate, as ConnectX-7)"
_ETH = "no RDMA NIC per GPU in a typical PCIe server: 200 GbE per 8 GPUs = 3.1 GB/s per GPU per direction, 50 us a message (estimate)"
AMD_FIXED_COST_SCALE = 6.307
# how much slower than planned the published AMD runs measure prefill (docs/serving_fresh3.md: TTFT
# planner / measured 0.13-0.44 on 8 x MI355X), which no fixed cost explains: plans and sizing say it
AMD_PREFILL_SLOWER = "2.3-7.5x"
_AMD_STACK = (
    "fitted on the SGLang cookbook's 13 published runs on 8 x MI300X (SGLang 0.5.6-0.5.7) and adopted on 9 later vLLM runs on 8 x MI355X "
    "(docs/serving_fresh3_plan.md, docs/serving_fresh3.md); one scale for every AMD GPU and engine release; import a benchmark run of your own to calibrate a plan"
)
_L40S_FIT = "fitted to AIConfigurator 0.12.0 measured L40S (vLLM) fit-split rows (docs/latency_fit.md, stage 2)"
# (tp, link GB/s, latency us): AIConfigurator's measured L40S all-reduce, fitted per TP size. Other
# PCIe parts AIConfigurator has no data for use these (x2 bandwidth for PCIe Gen5, x0.5 for Gen3, by
# lane rate), stated as estimates in each device's link_source.
L40S_ALLREDUCE: tuple[tuple[int, float, float], ...] = ((2, 27.8, 0.0), (4, 5.53, 11.5), (8, 3.17, 0.0))
_PCIE4 = "PCIe Gen4 x16; AIConfigurator has no data for this GPU: L40S's measured PCIe all-reduce figures per TP size (estimate; see L40S-48GB)"
_BRIDGE = "; beyond a bridged pair (TP above 2) PCIe Gen5 x16: L40S's measured PCIe Gen4 all-reduce figures at twice the bandwidth (estimate; AIConfigurator has no data for this GPU)"
_CATALOG: tuple[Device, ...] = (
        Device(name="H100-SXM-80GB", generation="hopper", memory_gib=80, bandwidth_gb_s=3350, bf16_tflops=989, fp8_tflops=1979, source=f"{_NV}: H100 Tensor Core GPU (SXM5), dense = half the sparsity figures", link_gb_s=450, link_latency_us=4.36, link_source="NVLink 4: 900 GB/s bidirectional = 450 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md)"),
        Device(name="H100-PCIe-80GB", generation="hopper", memory_gib=80, bandwidth_gb_s=2000, bf16_tflops=756, fp8_tflops=1513, source=f"{_NV}: H100 Tensor Core GPU (PCIe)", link_gb_s=300, link_latency_us=8.0, link_source="NVLink bridge: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency assumed 8 us (bridge pairs, between NVLink and PCIe)" + _BRIDGE, allreduce_by_tp=((2, 300.0, 8.0), *((tp, gb_s * 2, us) for tp, gb_s, us in L40S_ALLREDUCE if tp > 2))),
        Device(name="H100-NVL-94GB", generation="hopper", memory_gib=94, bandwidth_gb_s=3900, bf16_tflops=835, fp8_tflops=1671, source=f"{_NV}: H100 NVL", link_gb_s=300, link_latency_us=8.0, link_source="NVLink bridge: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency assumed 8 us" + _BRIDGE, allreduce_by_tp=((2, 300.0, 8.0), *((tp, gb_s * 2, us) for tp, gb_s, us in L40S_ALLREDUCE if tp > 2))),
        Device(name="H200-141GB", generation="hopper", memory_gib=141, bandwidth_gb_s=4800, bf16_tflops=989, fp8_tflops=1979, source=f"{_NV}: H200 Tensor Core GPU (SXM)", link_gb_s=450, link_latency_us=4.36, link_source="NVLink 4: 900 GB/s bidirectional = 450 per direction (NVIDIA datasheet); latency as H100 SXM (same NVLink 4 / NVSwitch fabric; H200 is held out of the fit)"),
        Device(name="B200-180GB", generation="blackwell", fp4_tflops=9000, memory_gib=180, bandwidth_gb_s=8000, bf16_tflops=2250, fp8_tflops=4500, source=f"{_NV}: DGX B200 / HGX B200 per-GPU figures", link_gb_s=900, link_latency_us=9.93, moe_efficiency=0.665, link_source="NVLink 5: 1.8 TB/s bidirectional = 900 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md); fused-MoE efficiency 0.665 of Hopper's, fitted likewise"),
        Device(name="A100-SXM-80GB", generation="ampere", memory_gib=80, bandwidth_gb_s=2039, bf16_tflops=312, source=f"{_NV}: A100 Tensor Core GPU (SXM4 80GB)", link_gb_s=300, link_latency_us=16.8, moe_efficiency=0.899, link_source="NVLink 3: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); per-message latency fitted to AIConfigurator 0.12.0's measured all-reduce (docs/latency_fit.md); fused-MoE efficiency 0.899 of Hopper's, fitted likewise"),
        Device(name="A100-SXM-40GB", generation="ampere", memory_gib=40, bandwidth_gb_s=1555, bf16_tflops=312, source=f"{_NV}: A100 Tensor Core GPU (SXM4 40GB)", link_gb_s=300, link_latency_us=16.8, moe_efficiency=0.899, link_source="NVLink 3: 600 GB/s bidirectional = 300 per direction (NVIDIA datasheet); latency and fused-MoE efficiency as A100 SXM 80GB (fitted, docs/latency_fit.md)"),
        Device(name="L40S-48GB", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, generation="ada", memory_gib=48, bandwidth_gb_s=864, bf16_tflops=362, fp8_tflops=733, source=f"{_NV}: L40S", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=f"PCIe Gen4 x16, no NVLink; {_L40S_FIT}: all-reduce per TP size, TP2 27.8 GB/s + 0 us, TP4 5.53 GB/s + 11.5 us, TP8 3.17 GB/s + 0 us a message (effective bus bandwidth = these x link efficiency 0.654; TP3 uses TP4's; beyond one 8-GPU server, TP8's inside each and the scale-out NIC between them)", compute_efficiency=0.793, moe_efficiency=1.29, compute_source=f"{_L40S_FIT}: compute 0.793 of the fitted MFU (GEMM, MoE and attention FLOPs); fused-MoE efficiency 1.29 of Hopper's"),
        Device(name="L4-24GB", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, generation="ada", memory_gib=24, bandwidth_gb_s=300, bf16_tflops=121, fp8_tflops=242, source=f"{_NV}: L4 Tensor Core GPU", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="A10-24GB", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, generation="ampere", memory_gib=24, bandwidth_gb_s=600, bf16_tflops=125, source=f"{_NV}: A10 Tensor Core GPU", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="T4-16GB", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, generation="turing", memory_gib=16, bandwidth_gb_s=320, bf16_tflops=65, source=f"{_NV}: T4 (fp16 tensor, no bf16)", link_gb_s=13.9, link_latency_us=0.0, allreduce_by_tp=tuple((tp, gb_s / 2, us) for tp, gb_s, us in L40S_ALLREDUCE), link_source="PCIe Gen3 x16; AIConfigurator has no data for this GPU: L40S's measured PCIe Gen4 all-reduce figures per TP size at half the bandwidth (Gen3 lane rate; estimate)"),
        Device(name="RTX-4090-24GB", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, generation="ada", memory_gib=24, bandwidth_gb_s=1008, bf16_tflops=165, fp8_tflops=330, source=f"{_NV}: Ada Lovelace architecture whitepaper (fp16/bf16 with fp16 accumulate)", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4),
        Device(name="MI300X-192GB", generation="cdna3", fixed_cost_scale=AMD_FIXED_COST_SCALE, fixed_cost_source=_AMD_STACK, memory_gib=192, bandwidth_gb_s=5300, bf16_tflops=1307, fp8_tflops=2615, source="AMD Instinct MI300X datasheet", link_gb_s=448, link_latency_us=8.0, link_source="AMD Infinity Fabric: 7 links x 128 GB/s = 896 GB/s bidirectional = 448 per direction (AMD datasheet); latency assumed 8 us"),
        Device(name="MI325X-256GB", generation="cdna3", fixed_cost_scale=AMD_FIXED_COST_SCALE, fixed_cost_source=_AMD_STACK, memory_gib=256, bandwidth_gb_s=6000, bf16_tflops=1307, fp8_tflops=2615, source="AMD Instinct MI325X datasheet", link_gb_s=448, link_latency_us=8.0, link_source="AMD Infinity Fabric: 896 GB/s bidirectional = 448 per direction (AMD datasheet); latency assumed 8 us"),
        Device(name="B300-SXM-288GB", generation="blackwell-ultra", memory_gib=288, bandwidth_gb_s=8000, bf16_tflops=2250, fp8_tflops=4500, fp4_tflops=13500, source=f"{_NV}: HGX B300 (8 GPUs: 2.3 TB HBM3e, FP4 108 PFLOPS dense, FP8 72 PFLOPS sparse, BF16 36 PFLOPS sparse) per GPU", link_gb_s=900, link_latency_us=9.93, moe_efficiency=0.665, link_source=_NVL5, scaleout_gb_s=100.0, scaleout_source=_CX8, as_of=_READ),
        Device(name="GB200-NVL72-186GB", generation="blackwell", memory_gib=186, bandwidth_gb_s=8000, bf16_tflops=2500, fp8_tflops=5000, fp4_tflops=10000, source=f"{_NV}: GB200 NVL72 (72 GPUs: 13.5 TB HBM3e, 576 TB/s, FP4 1,440 PFLOPS sparse, FP8 720, BF16 360) per GPU at its 1,200 W configuration; 186 GB per GPU as MLPerf Inference v6.1 system descriptions list it", link_gb_s=900, link_latency_us=9.93, moe_efficiency=0.665, link_source=_NVL5 + "; one NVLink domain of 72 GPUs", node_gpus=72, scaleout_source=_CX7, as_of=_READ),
        Device(name="GB300-NVL72-288GB", generation="blackwell-ultra", memory_gib=288, bandwidth_gb_s=8000, bf16_tflops=2500, fp8_tflops=5000, fp4_tflops=15000, source=f"{_NV}: GB300 NVL72 (72 GPUs: 20 TB HBM3e at 576 TB/s, FP4 1,100 PFLOPS dense, FP8 360 PFLOPS) per GPU, 288 GB HBM3e per GPU", link_gb_s=900, link_latency_us=9.93, moe_efficiency=0.665, link_source=_NVL5 + "; one NVLink domain of 72 GPUs", node_gpus=72, scaleout_gb_s=100.0, scaleout_source=_CX8, as_of=_READ),
        Device(name="MI355X-288GB", generation="cdna4", fixed_cost_scale=AMD_FIXED_COST_SCALE, fixed_cost_source=_AMD_STACK, memory_gib=288, bandwidth_gb_s=8000, bf16_tflops=2500, fp8_tflops=5000, fp4_tflops=10000, source="AMD Instinct MI355X datasheet (CDNA 4: 288 GB HBM3E, 8 TB/s; dense FP16/BF16 2.5 PFLOPS, FP8 5.0, MXFP4 10.0)", link_gb_s=537.6, link_latency_us=8.0, link_source="AMD Infinity Fabric: 7 links x 153.6 GB/s = 1,075 GB/s bidirectional = 537.6 per direction (AMD datasheet); latency assumed 8 us as MI300X", scaleout_source="one 400 Gb/s NIC per GPU (Pollara 400 / ConnectX-7 RoCE: 50 GB/s per direction); 25 us a message across nodes (estimate)", as_of=_READ),
        Device(name="RTX-PRO-6000-96GB", generation="blackwell-rtx", memory_gib=96, bandwidth_gb_s=1792, bf16_tflops=503.8, fp8_tflops=1007.6, fp4_tflops=2015, source=f"{_NV}: RTX PRO 6000 Blackwell Server Edition (GB202, 96 GB GDDR7 at 1,792 GB/s; dense BF16 503.8, FP8 1,007.6, FP4 2,015 TFLOPS with FP32 accumulate, half the 4,000 AI TOPS sparse FP4 headline)", link_gb_s=55.6, link_latency_us=0.0, allreduce_by_tp=tuple((tp, gb_s * 2, us) for tp, gb_s, us in L40S_ALLREDUCE), link_source="PCIe Gen5 x16, no NVLink: L40S's measured PCIe Gen4 all-reduce figures per TP size at twice the bandwidth (Gen5 lane rate; estimate, AIConfigurator has no data for this GPU)", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, as_of=_READ),
        Device(name="H20-96GB", generation="hopper", memory_gib=96, bandwidth_gb_s=4000, bf16_tflops=148, fp8_tflops=296, source=f"{_NV}: H20 (Hopper for the China market: 96 GB HBM3 at 4.0 TB/s, dense FP16/BF16 148, FP8/INT8 296 TFLOPS)", link_gb_s=450, link_latency_us=4.36, link_source="NVLink 4: 900 GB/s bidirectional = 450 per direction (NVIDIA datasheet); latency as H100 SXM (fitted, same NVLink 4 fabric)", scaleout_source=_CX7, as_of=_READ),
        Device(name="L40-48GB", generation="ada", memory_gib=48, bandwidth_gb_s=864, bf16_tflops=181, fp8_tflops=362, source=f"{_NV}: L40 (48 GB GDDR6 at 864 GB/s; dense BF16 181.05, FP8 362 TFLOPS)", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source="PCIe Gen4 x16, no NVLink: L40S's measured all-reduce figures per TP size (same board and bus; estimate)", compute_efficiency=0.793, moe_efficiency=1.29, compute_source="as L40S (same AD102 PCIe board; L40S's fitted compute and fused-MoE efficiency, estimate)", scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, as_of=_READ),
        Device(name="A10G-24GB", generation="ampere", memory_gib=24, bandwidth_gb_s=600, bf16_tflops=70, source="AWS g5 instances' A10G (24 GB GDDR6 at 600 GB/s, as A10); AWS publishes no tensor peak: 70 TFLOPS dense BF16 from Baseten's A10 vs A10G spec table (baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference; estimate)", link_gb_s=27.8, link_latency_us=0.0, allreduce_by_tp=L40S_ALLREDUCE, link_source=_PCIE4, scaleout_gb_s=3.1, scaleout_latency_us=50.0, scaleout_source=_ETH, as_of=_READ),
)


def _with_driver_totals(d: Device) -> Device:
    """The catalog entry with CUDA's total and its kind and source from :mod:`planner.gpu_memory`."""
    g = GPU_MEMORY[d.name]
    mib, kind, source = cuda_total_mib(d.name)
    return d.model_copy(update={"cuda_memory_gib": round(mib / 1024, 2), "smi_memory_mib": g.smi_mib, "cuda_memory_kind": kind, "cuda_memory_source": f"{source}; nvidia-smi total from {g.smi_source}" if g.vendor == "nvidia" else source})


CATALOG: dict[str, Device] = {d.name: _with_driver_totals(d) for d in _CATALOG}
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
