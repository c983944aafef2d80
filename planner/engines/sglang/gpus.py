"""The GPUs SGLang's start-up sizing is predicted for: what SGLang itself reads from each one.

SGLang sizes its defaults from ``get_device_memory_capacity`` (srt/utils/common.py: the total
memory NVML reports, in MiB, i.e. nvidia-smi's ``memory.total``) and picks kernels and page sizes
by compute capability. Names follow the planner's device catalog (``planner.hardware``) where the
GPU is in it. The MiB figures are the planner's one table of driver totals
(:mod:`planner.gpu_memory`, which vLLM's CUDA totals are derived from too), each with its source.

This module imports nothing else from the planner, so ``scripts/gen_sglang_engine_cases.py`` loads
it (and that table) by path inside the SGLang venv: the fixture and the engine read one table.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.gpu_memory import GPU_MEMORY


@dataclass(frozen=True, slots=True)
class SglangGpu:
    """One GPU as SGLang sees it at start-up."""

    name: str
    memory_mib: int  # nvidia-smi memory.total per GPU (what get_device_memory_capacity returns)
    capability: tuple[int, int]  # torch.cuda.get_device_capability
    device_name: str  # torch.cuda.get_device_name
    source: str  # where the MiB figure was read

    @property
    def sm(self) -> int:
        return self.capability[0] * 10 + self.capability[1]

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib << 20


GPUS: dict[str, SglangGpu] = {
    name: SglangGpu(name, GPU_MEMORY[name].smi_mib, capability, device_name, GPU_MEMORY[name].smi_source)
    for name, capability, device_name in (
        ("H100-SXM-80GB", (9, 0), "NVIDIA H100 80GB HBM3"),
        ("H200-141GB", (9, 0), "NVIDIA H200"),
        ("B200-180GB", (10, 0), "NVIDIA B200"),
        ("A100-SXM-80GB", (8, 0), "NVIDIA A100-SXM4-80GB"),
        ("A100-SXM-40GB", (8, 0), "NVIDIA A100-SXM4-40GB"),
        ("L40S-48GB", (8, 9), "NVIDIA L40S"),
        ("L4-24GB", (8, 9), "NVIDIA L4"),
        ("A10-24GB", (8, 6), "NVIDIA A10"),
        ("T4-16GB", (7, 5), "Tesla T4"),
        ("RTX-4090-24GB", (8, 9), "NVIDIA GeForce RTX 4090"),
        ("RTX-5090-32GB", (12, 0), "NVIDIA GeForce RTX 5090"),
    )
}
