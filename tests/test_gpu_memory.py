"""The driver totals of every catalog GPU (planner/gpu_memory.py): nvidia-smi's and CUDA's.

Expected figures are the published ones the table cites: H100 SXM nvidia-smi 81,559 MiB and CUDA
79.18 GiB (vLLM 0.11 start-up logs), B200 183,359 MiB / 178.36 GiB, the deviceQuery and OpenCL
totals of the others.
"""

from __future__ import annotations

import pytest

from planner.engines.sglang import GPUS
from planner.engines.vllm_memory import cuda_total_bytes
from planner.gpu_memory import GPU_MEMORY, MEASURED, RESERVE_FIT, cuda_total_mib, derived_reserve_mib
from planner.hardware import CATALOG, GIB, custom_device


def test_every_catalog_gpu_has_both_totals_with_a_kind_and_a_source():
    assert set(CATALOG) <= set(GPU_MEMORY)
    for name, d in CATALOG.items():
        assert d.smi_memory_mib and d.cuda_memory_gib and d.cuda_memory_kind in ("measured", "derived", "assumed"), name
        assert d.cuda_memory_source, name
        # CUDA's total is at most the driver's and (NVIDIA) 0.3-1.0 GiB below it
        gap = d.smi_memory_mib / 1024 - d.cuda_memory_gib
        assert (0.3 < gap < 1.0) if d.vendor == "nvidia" else gap == 0, (name, gap)


def test_published_totals():
    assert CATALOG["H100-SXM-80GB"].smi_memory_mib == 81559 and CATALOG["H100-SXM-80GB"].cuda_memory_gib == 79.18
    assert CATALOG["B200-180GB"].smi_memory_mib == 183359 and CATALOG["B200-180GB"].cuda_memory_gib == 178.36
    assert CATALOG["A100-SXM-40GB"].cuda_memory_gib == 39.38
    assert CATALOG["H200-141GB"].cuda_memory_kind == "measured"
    assert CATALOG["L40-48GB"].cuda_memory_kind == "derived" and "derived" in CATALOG["L40-48GB"].cuda_memory_source


def test_the_reserve_line_holds_every_measured_gpu_within_a_quarter_gib():
    a, b = RESERVE_FIT
    assert 300 < a < 600 and 0.5 < b < 3  # MiB, MiB per GiB
    assert len(MEASURED) >= 10
    for name in MEASURED:
        g = GPU_MEMORY[name]
        predicted = g.smi_mib - derived_reserve_mib(g.smi_mib)
        assert abs(predicted - g.cuda_mib) / 1024 < 0.25, name


def test_derived_total_is_smi_less_the_fitted_reserve():
    g = GPU_MEMORY["GB200-NVL72-186GB"]
    mib, kind, source = cuda_total_mib(g.name)
    assert kind == "derived" and mib == pytest.approx(g.smi_mib - RESERVE_FIT[0] - RESERVE_FIT[1] * g.smi_mib / 1024)
    assert "least squares" in source


def test_sglang_reads_the_same_nvidia_smi_table():
    for name, gpu in GPUS.items():
        assert gpu.memory_mib == GPU_MEMORY[name].smi_mib, name
    assert GPUS["H100-SXM-80GB"].memory_mib == 81559


def test_vllm_budget_starts_from_cuda_total_and_a_custom_device_from_its_size():
    total, source = cuda_total_bytes(CATALOG["H100-SXM-80GB"])
    assert total == int(79.18 * GIB) and "measured" in source
    total, source = cuda_total_bytes(custom_device(16.0))
    assert total == 16 * GIB and "given" in source
