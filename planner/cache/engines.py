"""The engines' own flags for the tiers a plan sizes (the start-up preview shows them).

* vLLM native CPU offloading (``OffloadingConnector``): ``--kv-offloading-size GiB`` with
  ``--kv-offloading-backend native`` from vLLM 0.19 on (vllm/engine/arg_utils.py; vllm/config/
  vllm.py turns it into ``kv_connector_extra_config = {"cpu_bytes_to_use": GiB x 2^30}``, the
  total over the TP ranks); vLLM 0.11 takes ``num_cpu_blocks`` in ``--kv-transfer-config``
  (vllm/v1/kv_offload/cpu.py). Chunks are one GPU block unless ``block_size`` (tokens) is set in
  the extra config. vLLM 0.10 has no native connector.
* LMCache (``LMCacheConnectorV1`` in ``--kv-transfer-config``): ``LMCACHE_CHUNK_SIZE`` (256),
  ``LMCACHE_LOCAL_CPU`` / ``LMCACHE_MAX_LOCAL_CPU_SIZE`` and ``LMCACHE_LOCAL_DISK`` /
  ``LMCACHE_MAX_LOCAL_DISK_SIZE`` (GiB per worker; lmcache/v1/config.py).
* SGLang's hierarchical cache: ``--enable-hierarchical-cache`` with ``--hicache-size`` (whole GB
  of 10^9 bytes per rank: sglang/srt/mem_cache/pool_host/base.py sizes the host pool as
  ``hicache_size x 1e9 // bytes per token``) or ``--hicache-ratio`` (host pool / device pool, 2.0
  by default), and ``--hicache-storage-backend file`` for a disk tier (SGLang 0.5.23
  sglang/srt/arg_groups/fields/memory.py).
"""

from __future__ import annotations

import json

from planner.cache.tiers import LMCACHE_CHUNK_TOKENS, hicache_ratio, hicache_size_gb
from planner.hardware import GIB

NATIVE_FROM = ("0.19", "0.24", "0.33")  # releases with --kv-offloading-size
NATIVE_BLOCKS = ("0.11",)  # num_cpu_blocks in the connector's extra config


def vllm_offload_flags(version: str, connector: str, cpu_gib: float, disk_gib: float, *, bytes_per_block: int, tp: int) -> tuple[str, ...]:
    """What ``vllm serve`` needs for these tiers: flags, and the environment LMCache reads."""
    if not cpu_gib and not disk_gib:
        return ()
    if connector == "native" and version in NATIVE_FROM:
        return (f"--kv-offloading-size {cpu_gib:g} --kv-offloading-backend native",)
    if connector == "native" and version in NATIVE_BLOCKS:
        blocks = int(cpu_gib * GIB) // (bytes_per_block * tp)
        config = {"kv_connector": "OffloadingConnector", "kv_role": "kv_both", "kv_connector_extra_config": {"num_cpu_blocks": blocks}}
        return (f"--kv-transfer-config '{json.dumps(config, separators=(',', ':'))}'",)
    config = {"kv_connector": "LMCacheConnectorV1", "kv_role": "kv_both"}
    env = [f"LMCACHE_CHUNK_SIZE={LMCACHE_CHUNK_TOKENS}", "LMCACHE_LOCAL_CPU=True", f"LMCACHE_MAX_LOCAL_CPU_SIZE={cpu_gib / tp:g}"]
    if disk_gib:
        env += ["LMCACHE_LOCAL_DISK=file:///local/nvme/lmcache/", f"LMCACHE_MAX_LOCAL_DISK_SIZE={disk_gib / tp:g}"]
    return (f"--kv-transfer-config '{json.dumps(config, separators=(',', ':'))}'", "environment: " + " ".join(env))


def sglang_hicache_flags(cpu_gib: float, disk_gib: float, *, tp: int, device_tokens: int, host_tokens: int) -> str:
    """The ``launch_server`` flags of SGLang's hierarchical cache for the same CPU tier (and a
    file storage backend for a disk tier)."""
    if not cpu_gib and not disk_gib:
        return ""
    per_rank_gb = hicache_size_gb(cpu_gib, tp)
    parts = ["--enable-hierarchical-cache"]
    if per_rank_gb >= 1:
        parts.append(f"--hicache-size {per_rank_gb}")
    elif cpu_gib and device_tokens:  # a host-pool flag: a disk tier alone sets none (SGLang's default ratio)
        parts.append(f"--hicache-ratio {hicache_ratio(host_tokens, device_tokens):.2f}")
    if disk_gib:
        parts.append("--hicache-storage-backend file")
    return " ".join(parts)


def with_offload(command: str, plan) -> str:
    """``vllm serve ...`` with the plan's offload tiers added (the command as is without them):
    the flags appended, LMCache's environment set before the command."""
    if not (plan.inputs.cpu_tier_gib or plan.inputs.disk_tier_gib):
        return command
    from planner.cache.section import offload_flags  # the section imports this module

    found = offload_flags(plan)
    if not found:
        return command
    flags = [f for f in found if not f.startswith("environment: ")]
    env = [f.removeprefix("environment: ") for f in found if f.startswith("environment: ")]
    return " ".join([*env, command, *flags])
