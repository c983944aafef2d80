"""Each GPU's total memory as the driver reports it: nvidia-smi's ``memory.total`` and CUDA's total.

Two totals differ, and each engine reads one:

* nvidia-smi / NVML ``memory.total`` (MiB): what SGLang's ``get_device_memory_capacity`` reads;
* CUDA's total (``cudaMemGetInfo`` / ``totalGlobalMem``, torch's ``mem_get_info``): what vLLM
  multiplies by ``--gpu-memory-utilization`` ("Free memory on device (78.57/79.18 GiB)"). It is the
  nvidia-smi total less what the driver reserves for itself (page tables, ECC bookkeeping,
  firmware): 479 MiB on an H100 SXM (81,559 MiB vs 79.18 GiB), 936 MiB on a B300.

:data:`GPU_MEMORY` lists both per catalog GPU, each with its source. A CUDA total is
**measured** where a published log or device query of that GPU prints it, else **derived** by
:func:`derived_reserve_mib`: the driver reserve as a straight line in the nvidia-smi total,
least-squares fitted on every measured GPU (residuals within 0.25 GiB, see ``tests/test_gpu_memory.py``).
AMD GPUs report the whole VRAM through ROCm (no reserve is subtracted: **assumed**).

This module imports nothing from the planner, so the SGLang fixture generator can load it by
path inside SGLang's own environment: both engines and their fixtures read this one table.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1 << 20

_MODAL = "nvidia-smi memory.total on Modal's fleet (github.com/modal-labs/modal-client/pull/2797; thundergolfer.com/blog/nvidia-gpu-memory-capacity)"
_MODAL_BLOG = "nvidia-smi memory.total on Modal's fleet (thundergolfer.com/blog/nvidia-gpu-memory-capacity)"
_SMI_LOGS = "nvidia-smi memory.total (public nvidia-smi logs of this GPU)"
_DEVICE_QUERY = "CUDA deviceQuery 'Total amount of global memory' {mib:,} MiB ({driver}; public deviceQuery output)"
_OPENCL = "CL_DEVICE_GLOBAL_MEM_SIZE {gib} GiB through NVIDIA's CUDA ICD (a public OpenCL benchmark's device index), the same figure CUDA reports"


@dataclass(frozen=True, slots=True)
class GpuMemory:
    """One GPU's totals: nvidia-smi's (MiB) and, where a source prints it, CUDA's (MiB)."""

    name: str  # the planner's catalog name
    smi_mib: int  # nvidia-smi memory.total (rocm-smi's VRAM total for AMD)
    smi_source: str
    cuda_mib: float | None = None  # measured CUDA total; None: derived from smi_mib
    cuda_source: str = ""
    vendor: str = "nvidia"


GPU_MEMORY: dict[str, GpuMemory] = {
    g.name: g
    for g in (
        GpuMemory("H100-SXM-80GB", 81559, _MODAL, 79.18 * 1024, "vLLM 0.11 start-up logs: 'Free memory on device (78.57/79.18 GiB)'; deviceQuery prints 81,079-81,106 MiB by driver"),
        GpuMemory("H100-PCIe-80GB", 81559, _SMI_LOGS + ": 81,559 MiB as the SXM part (same 80 GB stack)"),
        GpuMemory("H100-NVL-94GB", 95830, _SMI_LOGS, 93.09 * 1024, _OPENCL.format(gib="93.09")),
        GpuMemory("H200-141GB", 143771, _MODAL_BLOG, 139.81 * 1024, "a published vLLM start-up log: 'Free memory on device (139.21/139.81 GiB)'; H200 NVL reads 139.80 through OpenCL"),
        GpuMemory(
            "B200-180GB", 183359, "nvidia-smi of 8x B200 nodes, driver 570.172.08 (public logs on GitHub); CUDA's totalGlobalMem reads 178.35 GiB (github.com/pytorch/ao/pull/4002)",
            178.36 * 1024, "published vLLM start-up logs on B200 (178.36 GiB); 178.34 through OpenCL",
        ),
        GpuMemory("A100-SXM-80GB", 81920, _MODAL, 81158, _DEVICE_QUERY.format(mib=81158, driver="driver for CUDA 12.5; 81,051 MiB under CUDA 12.2")),
        GpuMemory("A100-SXM-40GB", 40960, _MODAL, 39.38 * 1024, "a published vLLM start-up log: 'Free memory on device (36.23/39.38 GiB)'; deviceQuery 40,339 MiB under CUDA 12.2"),
        GpuMemory("L40S-48GB", 46068, _MODAL, 44.52 * 1024, "a published vLLM start-up log: 'total_gpu_memory: 44.52 GiB' (github.com/vllm-project/vllm/issues/14011); deviceQuery 45,373 MiB under CUDA 12.4"),
        GpuMemory("L4-24GB", 23034, _MODAL, 22518, _DEVICE_QUERY.format(mib=22518, driver="driver for CUDA 12.0")),
        GpuMemory("A10-24GB", 23028, _MODAL, 22599, _DEVICE_QUERY.format(mib=22599, driver="driver for CUDA 12.8; 22,516 MiB under CUDA 12.2")),
        GpuMemory("T4-16GB", 15360, _MODAL, 14918, _DEVICE_QUERY.format(mib=14918, driver="driver for CUDA 12.5; 15,110 MiB under CUDA 11.2")),
        GpuMemory("RTX-4090-24GB", 24564, "nvidia-smi in github.com/vllm-project/vllm/issues/7553 and github.com/RLinf/RLinf/issues/255", 24081, _DEVICE_QUERY.format(mib=24081, driver="driver for CUDA 13.0")),
        GpuMemory("RTX-5090-32GB", 32607, "nvidia-smi in github.com/noonghunna/club-3090/issues/1261"),
        GpuMemory("B300-SXM-288GB", 275040, _SMI_LOGS, 267.68 * 1024, _OPENCL.format(gib="267.68")),
        GpuMemory("GB200-NVL72-186GB", 189471, _SMI_LOGS),
        GpuMemory("GB300-NVL72-288GB", 284208, _SMI_LOGS),
        GpuMemory("RTX-PRO-6000-96GB", 97887, _SMI_LOGS),
        GpuMemory("H20-96GB", 97871, _SMI_LOGS),
        GpuMemory("L40-48GB", 46068, _SMI_LOGS + ": 46,068 MiB as L40S (same board and memory)"),
        GpuMemory("A10G-24GB", 23028, _SMI_LOGS),
        GpuMemory("MI300X-192GB", 192 * 1024, "AMD Instinct MI300X datasheet: 192 GB HBM3 (rocm-smi VRAM total)", vendor="amd"),
        GpuMemory("MI325X-256GB", 256 * 1024, "AMD Instinct MI325X datasheet: 256 GB HBM3E (rocm-smi VRAM total)", vendor="amd"),
        GpuMemory("MI355X-288GB", 288 * 1024, "AMD Instinct MI355X datasheet: 288 GB HBM3E (8 x 36.0 GiB partitions in CPX mode)", vendor="amd"),
    )
}


def _fit() -> tuple[float, float]:
    """(intercept MiB, MiB per GiB of nvidia-smi total): least squares over the measured NVIDIA GPUs."""
    pts = [(g.smi_mib / 1024, g.smi_mib - g.cuda_mib) for g in GPU_MEMORY.values() if g.cuda_mib is not None and g.vendor == "nvidia"]
    n = len(pts)
    mx, my = sum(x for x, _ in pts) / n, sum(y for _, y in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    return my - slope * mx, slope


RESERVE_FIT = _fit()
MEASURED = tuple(name for name, g in GPU_MEMORY.items() if g.cuda_mib is not None)


def derived_reserve_mib(smi_mib: int) -> float:
    """MiB the driver keeps from an NVIDIA GPU of ``smi_mib`` (nvidia-smi total): the fitted line."""
    a, b = RESERVE_FIT
    return a + b * smi_mib / 1024


def cuda_total_mib(name: str) -> tuple[float, str, str]:
    """(CUDA's total in MiB, "measured" / "derived" / "assumed", its source) for a catalog GPU.

    Raises:
        KeyError: a GPU not in :data:`GPU_MEMORY`.
    """
    g = GPU_MEMORY[name]
    if g.cuda_mib is not None:
        return g.cuda_mib, "measured", g.cuda_source
    if g.vendor != "nvidia":
        return float(g.smi_mib), "assumed", "assumed: ROCm reports the whole VRAM as the device total (no driver reserve subtracted)"
    a, b = RESERVE_FIT
    reserve = derived_reserve_mib(g.smi_mib)
    return g.smi_mib - reserve, "derived", (
        f"derived: nvidia-smi {g.smi_mib:,} MiB less the driver reserve {reserve:,.0f} MiB "
        f"({a:,.0f} MiB + {b:.2f} MiB per GiB, least squares on the {len(MEASURED)} GPUs whose CUDA total is published)"
    )
