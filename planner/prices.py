"""GPU-hour prices for sizing: one on-demand price per catalog GPU, each with its source and date.

Prices move fast and differ several-fold between providers; these are defaults so that sizing
can rank deployments by cost, not quotes. Pass your own (``--gpu-hour-price``) for real budgets.
Rows marked "estimate" had no public listing in the sources we read: the figure is our
placement between sourced neighbours, so override it when it matters.
"""

from __future__ import annotations

from typing import NamedTuple


class GpuPrice(NamedTuple):
    usd_per_gpu_hour: float
    source: str
    as_of: str  # ISO date the figure was read or set


_AIM = "AIMultiple Cloud GPU Rental Price Index (aimultiple.com/gpu-index), on-demand cohort median"
_MERC = "Mercatus cloud GPU pricing guide (mercatus-ai.com/blog/cloud-gpu-pricing), specialty-provider on-demand range midpoint"
_EST = "estimate: no sourced listing; placed between sourced neighbours by memory and bandwidth"

PRICE_TABLE: dict[str, GpuPrice] = {
    "H100-SXM-80GB": GpuPrice(2.95, _AIM, "2026-05-20"),
    "H100-PCIe-80GB": GpuPrice(2.40, _EST, "2026-11-30"),
    "H100-NVL-94GB": GpuPrice(2.80, _EST, "2026-11-30"),
    "H200-141GB": GpuPrice(4.00, _MERC + " ($3.50-4.50)", "2026-05-01"),
    "B200-180GB": GpuPrice(5.50, _EST, "2026-11-30"),
    "A100-SXM-80GB": GpuPrice(1.30, _MERC + " ($1.10-1.50)", "2026-05-01"),
    "A100-SXM-40GB": GpuPrice(1.10, _EST, "2026-11-30"),
    "L40S-48GB": GpuPrice(0.90, _EST, "2026-11-30"),
    "L4-24GB": GpuPrice(0.45, _EST, "2026-11-30"),
    "A10-24GB": GpuPrice(0.60, _EST, "2026-11-30"),
    "T4-16GB": GpuPrice(0.30, _EST, "2026-11-30"),
    "RTX-4090-24GB": GpuPrice(0.40, _EST, "2026-11-30"),
    "MI300X-192GB": GpuPrice(2.50, _EST, "2026-11-30"),
    "MI325X-256GB": GpuPrice(3.00, _EST, "2026-11-30"),
    "B300-SXM-288GB": GpuPrice(7.00, _EST + " (above B200 by memory and FP4 peak)", "2026-12-01"),
    "GB200-NVL72-186GB": GpuPrice(6.50, _EST + " (rack-scale, priced per GPU above B200)", "2026-12-01"),
    "GB300-NVL72-288GB": GpuPrice(8.00, _EST + " (rack-scale, above B300)", "2026-12-01"),
    "MI355X-288GB": GpuPrice(4.50, _EST + " (between MI325X and B200)", "2026-12-01"),
    "RTX-PRO-6000-96GB": GpuPrice(1.60, _EST + " (between L40S and H100 by memory and bandwidth)", "2026-12-01"),
    "H20-96GB": GpuPrice(1.80, _EST + " (China-market Hopper, below H100 by compute)", "2026-12-01"),
    "L40-48GB": GpuPrice(0.80, _EST + " (below L40S)", "2026-12-01"),
    "A10G-24GB": GpuPrice(1.01, "AWS EC2 on-demand g5.xlarge (one A10G, 4 vCPU), us-east-1: $1.006/hour (factualminds.com EC2 on-demand pricing 2026, read from the AWS rate card of 2026-06-17)", "2026-12-01"),
}
