"""The GPUs SGLang's start-up sizing is predicted for: what SGLang itself reads from each one.

SGLang sizes its defaults from ``get_device_memory_capacity`` (srt/utils/common.py: the total
memory NVML reports, in MiB, i.e. nvidia-smi's ``memory.total``) and picks kernels and page sizes
by compute capability. Names follow the planner's device catalog (``planner.hardware``) where the
GPU is in it. Each MiB figure names the nvidia-smi output it comes from.

This module imports nothing from the planner, so ``scripts/gen_sglang_engine_cases.py`` loads it
by path inside the SGLang venv: the fixture and the engine read one table.
"""

from __future__ import annotations

from dataclasses import dataclass


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


_MODAL = "nvidia-smi memory.total on Modal's fleet (github.com/modal-labs/modal-client/pull/2797; thundergolfer.com/blog/nvidia-gpu-memory-capacity)"
_MODAL_BLOG = "nvidia-smi memory.total on Modal's fleet (thundergolfer.com/blog/nvidia-gpu-memory-capacity)"
GPUS: dict[str, SglangGpu] = {
    g.name: g
    for g in (
        SglangGpu("H100-SXM-80GB", 81559, (9, 0), "NVIDIA H100 80GB HBM3", _MODAL),
        SglangGpu("H200-141GB", 143771, (9, 0), "NVIDIA H200", _MODAL_BLOG),
        SglangGpu(
            "B200-180GB", 183359, (10, 0), "NVIDIA B200",
            "nvidia-smi of 8x B200 nodes, driver 570.172.08 (public logs on GitHub); CUDA's totalGlobalMem reads 178.35 GiB (github.com/pytorch/ao/pull/4002)",
        ),
        SglangGpu("A100-SXM-80GB", 81920, (8, 0), "NVIDIA A100-SXM4-80GB", _MODAL),
        SglangGpu("A100-SXM-40GB", 40960, (8, 0), "NVIDIA A100-SXM4-40GB", _MODAL),
        SglangGpu("L40S-48GB", 46068, (8, 9), "NVIDIA L40S", _MODAL),
        SglangGpu("L4-24GB", 23034, (8, 9), "NVIDIA L4", _MODAL),
        SglangGpu("A10-24GB", 23028, (8, 6), "NVIDIA A10", _MODAL),
        SglangGpu("T4-16GB", 15360, (7, 5), "Tesla T4", _MODAL),
        SglangGpu("RTX-4090-24GB", 24564, (8, 9), "NVIDIA GeForce RTX 4090", "nvidia-smi in github.com/vllm-project/vllm/issues/7553 and github.com/RLinf/RLinf/issues/255"),
        SglangGpu("RTX-5090-32GB", 32607, (12, 0), "NVIDIA GeForce RTX 5090", "nvidia-smi in github.com/noonghunna/club-3090/issues/1261"),
    )
}
