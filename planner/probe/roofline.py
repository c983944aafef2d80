"""The roofline latency the planner predicts for the probe's run, on the catalog GPU it ran on."""

from __future__ import annotations

from planner.geometry import ModelGeometry
from planner.kv import kv_specs
from planner.probe.options import INSTALLED_TRANSFORMERS_RUNTIME, ProbeOptions
from planner.units import GIB


def match_catalog_device(name: str, total_bytes: int | None = None) -> str | None:
    """The catalog GPU a CUDA device name denotes ("NVIDIA H200" -> "H200-141GB"), or None."""
    import re

    n = name.upper()
    gib = (total_bytes or 0) / GIB
    if "MI325X" in n:
        return "MI325X-256GB"
    if "MI300X" in n:
        return "MI300X-192GB"
    if "B200" in n:
        return "B200-180GB"
    if "H200" in n:
        return "H200-141GB"
    if "H100" in n:
        if "NVL" in n:
            return "H100-NVL-94GB"
        return "H100-PCIe-80GB" if "PCIE" in n else "H100-SXM-80GB"
    if "A100" in n:
        return "A100-SXM-40GB" if ("40GB" in n or 0 < gib < 60) else "A100-SXM-80GB"
    if "L40S" in n:
        return "L40S-48GB"
    if re.search(r"\bL4\b", n):
        return "L4-24GB"
    if re.search(r"\bA10G?\b", n):
        return "A10-24GB"
    if re.search(r"\bT4\b", n):
        return "T4-16GB"
    if "4090" in n:
        return "RTX-4090-24GB"
    return None


def predict_roofline(cfg: dict, geo: ModelGeometry, opts: ProbeOptions, device_name: str) -> dict:
    from planner import latency
    from planner.hardware import get_device
    from planner.weights import estimate_weights

    dev = get_device(device_name)
    weights = estimate_weights(cfg, geo, opts.kv_dtype)
    specs = kv_specs(geo, opts.kv_dtype, 1, INSTALLED_TRANSFORMERS_RUNTIME)
    attn_layers = sum(s.num_layers for s in specs if s.kind != "cross")
    peak = dev.peak_flops("bf16")
    roof = latency.Roofline(
        weights_bytes=weights.bytes,
        active_params=weights.active_params,
        attn_layers=attn_layers,
        q_heads=geo.num_attention_heads,
        head_dim=geo.head_dim,
        peak_flops=peak,
        bandwidth_bytes_s=dev.bandwidth_bytes_s,
        mfu=latency.DEFAULT_MFU,
        mbu=latency.DEFAULT_MBU,
    )
    B, T, N = opts.batch, opts.tokens, opts.decode_steps

    def kv_at(n: int) -> int:
        return sum(s.bytes_at(n) for s in specs)

    prefill_compute = B * roof.prefill_flops(T) / (peak * roof.mfu)
    prefill = max(prefill_compute, weights.bytes / (dev.bandwidth_bytes_s * roof.mbu))
    first = roof.decode_step_s(B, kv_at(T + 1), T + 1)
    mid = T + max(N, 1) // 2
    step = roof.decode_step_s(B, kv_at(mid), mid)
    step_memory = (weights.bytes + B * kv_at(mid)) / (dev.bandwidth_bytes_s * roof.mbu)
    return {
        "roofline_device": dev.name,
        "assumed_mfu": roof.mfu,
        "assumed_mbu": roof.mbu,
        "predicted_weights_bytes": weights.bytes,
        "predicted_prefill_ms": prefill * 1e3,
        "predicted_prefill_compute_ms": prefill_compute * 1e3,
        "predicted_first_decode_ms": first * 1e3,
        "predicted_ttft_ms": (prefill + first) * 1e3,
        "predicted_decode_step_ms": step * 1e3,
        "predicted_decode_memory_ms": step_memory * 1e3,
    }
