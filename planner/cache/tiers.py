"""The tiers a replica's K/V cache can use: the GPU pool, CPU DRAM and local NVMe.

Each tier has a capacity in tokens for this model (its bytes over the bytes a token takes, in
the unit the engine stores: the GPU block, the offload connector's chunk), a unit (the
granularity of hits), a link to the GPU (seconds to load a token back) and a price.

Capacity follows the engine that owns the tier:

* GPU pool: the plan's K/V pool in whole blocks (vLLM's ``num_gpu_blocks``);
* CPU, vLLM's native offloading (``--kv-offloading-size GiB``, the ``OffloadingConnector``):
  vLLM 0.33 vllm/config/vllm.py sets ``cpu_bytes_to_use = size x 2^30`` (the total over the TP
  ranks); vllm/v1/kv_offload/cpu/spec.py ``CPUOffloadingSpec`` makes chunks of
  ``blocks_per_chunk`` GPU blocks (1 by default; ``block_size`` in the connector's extra config
  sets it in tokens, a multiple of the GPU block) of ``bytes per block x TP ranks`` bytes, each
  rounded up to the page size (4,096 B), and holds ``cpu_bytes_to_use // chunk`` of them;
* CPU and disk, LMCache (``LMCacheConnectorV1``): 256-token chunks (``chunk_size``, default 256;
  only whole chunks are stored, ``save_unfull_chunk`` False), ``max_local_cpu_size`` and
  ``max_local_disk_size`` GiB per worker process, i.e. per TP rank (lmcache/v1/config.py);
* GPU pool, SGLang: the radix cache over the token pool, in pages (``max_total_num_tokens``,
  ``--page-size``, 1 by default);
* CPU, SGLang's hierarchical cache (HiCache): a host pool per rank of ``hicache_size x 1e9 //
  bytes a token`` tokens (``--hicache-size`` GB), else ``device tokens x --hicache-ratio``, in whole
  pages plus one padding page (SGLang 0.5.23 sglang/srt/mem_cache/pool_host/base.py); it holds a
  copy of what the device pool holds (write-through), as the tier model assumes of every tier;
  disk: its ``file`` storage backend, in pages of the same bytes; with a disk tier alone SGLang
  still keeps a host pool, at its default ratio 2.0 of the device pool, and so does the model.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.errors import PlannerError
from planner.hardware import GIB

PAGE_BYTES = 4096  # vLLM 0.33 SharedOffloadRegion.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE
LMCACHE_CHUNK_TOKENS = 256  # lmcache/v1/config.py chunk_size default
HICACHE_DEFAULT_RATIO = 2.0  # SGLang 0.5.23 arg_groups/fields/memory.py: --hicache-ratio's default in cache mode
HICACHE_DEFAULT_SOURCE = "SGLang's own host pool under a disk tier alone: --hicache-ratio 2.0 (its default in cache mode), twice the device pool"

# the host link to the GPU, per direction, by catalog GPU: (GB/s, source)
_GEN5 = "PCIe Gen5 x16: 32 GT/s x 16 lanes x 128/130 = 63.0 GB/s per direction, x 0.85 for transaction-layer overhead on DMA (estimate) = 53.6 GB/s"
_GEN4 = "PCIe Gen4 x16: 16 GT/s x 16 x 128/130 = 31.5 GB/s per direction, x 0.85 (estimate) = 26.8 GB/s"
_GEN3 = "PCIe Gen3 x16: 8 GT/s x 16 x 128/130 = 15.8 GB/s per direction, x 0.85 (estimate) = 13.4 GB/s"
_C2C = "NVLink-C2C between Grace and the GPU: 900 GB/s bidirectional = 450 per direction (NVIDIA GB200 / GB300 datasheets)"
HOST_LINKS: dict[str, tuple[float, str]] = {
    **{
        name: (53.6, _GEN5)
        for name in ("H100-SXM-80GB", "H100-PCIe-80GB", "H100-NVL-94GB", "H200-141GB", "B200-180GB", "B300-SXM-288GB", "H20-96GB", "RTX-PRO-6000-96GB", "MI300X-192GB", "MI325X-256GB", "MI355X-288GB")
    },
    **{name: (26.8, _GEN4) for name in ("A100-SXM-80GB", "A100-SXM-40GB", "L40S-48GB", "L40-48GB", "L4-24GB", "A10-24GB", "A10G-24GB", "RTX-4090-24GB")},
    "T4-16GB": (13.4, _GEN3),
    "GB200-NVL72-186GB": (450.0, _C2C),
    "GB300-NVL72-288GB": (450.0, _C2C),
}
DEFAULT_HOST_LINK = (53.6, _GEN5 + " (a GPU outside the table: PCIe Gen5 assumed)")
DEFAULT_DISK_GB_S = 6.8
DISK_SOURCE = "one data-centre NVMe SSD, PCIe Gen4 x4: 6.8 GB/s sequential read (Micron 7450 PRO datasheet; Samsung PM9A3 lists 6.9)"

# prices of the tiers ($ per GiB-hour), each with its source and date
CPU_GIB_HOUR = 0.004237
CPU_PRICE_SOURCE = "Google Compute Engine N2 memory, us-central1 on-demand: $0.004237 per GiB-hour (also OpenCost's default GCP RAM rate)"
DISK_GIB_HOUR = 0.080 / 730
DISK_PRICE_SOURCE = "Google Compute Engine Local SSD, us-central1 on-demand: $0.080 per GiB-month / 730 h (estimate from the list price)"
PRICES_AS_OF = "2026-12-01"


@dataclass(frozen=True, slots=True)
class Tier:
    """One tier of one replica: its capacity and unit in tokens, and what a token costs to load
    back into the GPU (0 for the GPU pool itself)."""

    name: str  # "gpu", "cpu", "disk"
    unit_tokens: int
    capacity_tokens: int  # per replica
    load_s_per_token: float = 0.0
    bytes: int = 0  # per replica
    link_gb_s: float | None = None
    link_source: str = ""
    usd_per_hour: float = 0.0  # per replica
    price_source: str = ""

    @property
    def capacity_units(self) -> int:
        return self.capacity_tokens // self.unit_tokens


def host_link(gpu: str, given_gb_s: float | None) -> tuple[float, str]:
    """(GB/s per direction, source) of the link between CPU memory and one GPU."""
    if given_gb_s is not None:
        return given_gb_s, "given"
    return HOST_LINKS.get(gpu, DEFAULT_HOST_LINK)


def gpu_tier(pool_blocks: int, block_tokens: int) -> Tier:
    return Tier("gpu", block_tokens, pool_blocks * block_tokens)


def native_cpu_chunks(size_gib: float, bytes_per_block: int, tp: int, blocks_per_chunk: int = 1, vllm_version: str = "0.33") -> int:
    """Chunks vLLM's native CPU offloading holds in ``--kv-offloading-size size_gib``:
    ``int(size x 2^30) // round_up(bytes per GPU block x TP x blocks per chunk, alignment)``,
    the alignment 4,096 B (the page) in 0.33, none before (0.19, 0.24 cpu/spec.py)."""
    chunk = bytes_per_block * tp * blocks_per_chunk
    align = PAGE_BYTES if vllm_version == "0.33" else 1
    aligned = -(-chunk // align) * align
    return int(size_gib * GIB) // aligned if aligned else 0


def lmcache_chunks(size_gib: float, bytes_per_token: int, tp: int, chunk_tokens: int = LMCACHE_CHUNK_TOKENS) -> int:
    """Whole chunks LMCache holds in ``size_gib`` over the replica (``size / TP`` GiB a worker,
    each worker storing its shard of every chunk)."""
    per_worker = int(size_gib * GIB / tp)
    per_chunk = bytes_per_token * chunk_tokens
    return per_worker // per_chunk if per_chunk else 0


def hicache_host_tokens(size_gib: float, tp: int, bytes_per_token: int, page: int, device_tokens: int) -> int:
    """Usable tokens of SGLang's host pool on one rank (= of the replica: each rank holds its shard
    of the same tokens) for a CPU tier of ``size_gib`` over the replica, as the flags of
    :func:`planner.cache.engines.sglang_hicache_flags` size it: ``--hicache-size`` (whole GB of
    10^9 a rank) when at least 1 GB, else ``--hicache-ratio`` (two decimals) of the device pool;
    whole pages (the padding page SGLang adds is not usable)."""
    per_rank = size_gib * GIB / tp
    gb = hicache_size_gb(size_gib, tp)
    if gb >= 1:
        tokens = int(gb * 1e9 // bytes_per_token)
    elif device_tokens:
        tokens = int(device_tokens * hicache_ratio(int(per_rank // bytes_per_token), device_tokens))
    else:
        tokens = 0
    return tokens // page * page


def hicache_size_gb(size_gib: float, tp: int) -> int:
    """``--hicache-size`` for a CPU tier of ``size_gib`` over the replica: whole GB (10^9 B) a rank
    (0: under 1 GB, where the flags give a ratio instead)."""
    return int(size_gib * GIB / tp // 1e9)


def hicache_ratio(host_tokens: int, device_tokens: int) -> float:
    """``--hicache-ratio`` as the flag prints it: host over device tokens, two decimals, at least 0.01."""
    return max(round(host_tokens / device_tokens, 2), 0.01)


def hicache_tiers(*, gpu: str, tp: int, page: int, bytes_per_token: int, cpu_gib: float, disk_gib: float, device_tokens: int,
                  cpu_link_gb_s: float | None = None, disk_gb_s: float | None = None) -> tuple[str, list[Tier]]:  # fmt: skip
    """("hicache", the CPU and disk tiers of one SGLang replica): the host pool of
    :func:`hicache_host_tokens` and the file storage backend, in pages; ``bytes_per_token``: one
    rank's K/V of a token (every layer of that GPU).

    Raises:
        PlannerError: a tier too small to hold one page.
    """
    link, link_source = host_link(gpu, cpu_link_gb_s)
    per_gpu_token_s = bytes_per_token / (link * 1e9)
    tiers = []
    if cpu_gib:
        tokens = hicache_host_tokens(cpu_gib, tp, bytes_per_token, page, device_tokens)
        if tokens < page:
            raise PlannerError("cpu_tier_gib", cpu_gib, f"too small to hold one {page}-token page of this model in SGLang's host pool")
        tiers.append(Tier("cpu", page, tokens, per_gpu_token_s, int(cpu_gib * GIB), link, link_source, cpu_gib * CPU_GIB_HOUR, CPU_PRICE_SOURCE))
    if disk_gib and not cpu_gib and device_tokens:  # the file backend reads through a host pool SGLang sizes itself
        tokens = int(device_tokens * HICACHE_DEFAULT_RATIO) // page * page
        size = tokens * bytes_per_token * tp
        tiers.append(Tier("cpu", page, tokens, per_gpu_token_s, size, link, link_source, size / GIB * CPU_GIB_HOUR, f"{CPU_PRICE_SOURCE}; {HICACHE_DEFAULT_SOURCE}"))
    if disk_gib:
        tiers.append(_disk_tier(disk_gib, page, "page", bytes_per_token, tp, disk_gb_s, link, per_gpu_token_s))
    return "hicache", tiers


def offload_tiers(
    *,
    gpu: str,
    tp: int,
    block_tokens: int,
    bytes_per_block: int,
    bytes_per_token: int,
    cpu_gib: float,
    disk_gib: float,
    cpu_link_gb_s: float | None = None,
    disk_gb_s: float | None = None,
    vllm_version: str = "0.33",
) -> tuple[str, list[Tier]]:
    """(connector, the CPU and disk tiers of one replica). Without a disk tier the CPU tier is
    vLLM's native ``OffloadingConnector`` (chunk = one GPU block); with one, LMCache's
    (256-token chunks, CPU then local disk). ``bytes_per_block`` / ``bytes_per_token``: one
    GPU's K/V of a block / a token (every layer of that GPU).

    Raises:
        PlannerError: a tier too small to hold one chunk.
    """
    link, link_source = host_link(gpu, cpu_link_gb_s)
    per_gpu_token_s = bytes_per_token / (link * 1e9)
    tiers = []
    connector = "lmcache" if disk_gib or vllm_version == "0.10" else "native"  # vLLM 0.10 has no native connector
    if cpu_gib:
        if connector == "native":
            chunks, unit = native_cpu_chunks(cpu_gib, bytes_per_block, tp, vllm_version=vllm_version), block_tokens
        else:
            chunks, unit = lmcache_chunks(cpu_gib, bytes_per_token, tp), LMCACHE_CHUNK_TOKENS
        if chunks < 1:
            raise PlannerError("cpu_tier_gib", cpu_gib, f"too small to hold one {unit}-token chunk of this model")
        tiers.append(Tier("cpu", unit, chunks * unit, per_gpu_token_s, int(cpu_gib * GIB), link, link_source, cpu_gib * CPU_GIB_HOUR, CPU_PRICE_SOURCE))
    if disk_gib:
        tiers.append(_disk_tier(disk_gib, LMCACHE_CHUNK_TOKENS, "chunk", bytes_per_token, tp, disk_gb_s, link, per_gpu_token_s))
    return connector, tiers


def _disk_tier(disk_gib: float, unit: int, unit_name: str, bytes_per_token: int, tp: int, disk_gb_s: float | None, link: float, per_gpu_token_s: float) -> Tier:
    """A local-disk tier of ``disk_gib`` over the replica in whole ``unit``-token units (LMCache's
    chunks, SGLang's pages: each rank stores its shard of every unit). A load reads from the drive
    into host memory (the replica's bytes), then over each GPU's link.

    Raises:
        PlannerError: too small to hold one unit.
    """
    units = lmcache_chunks(disk_gib, bytes_per_token, tp, chunk_tokens=unit)
    if units < 1:
        raise PlannerError("disk_tier_gib", disk_gib, f"too small to hold one {unit}-token {unit_name} of this model")
    disk = disk_gb_s if disk_gb_s is not None else DEFAULT_DISK_GB_S
    disk_token_s = bytes_per_token * tp / (disk * 1e9) + per_gpu_token_s
    source = ("given" if disk_gb_s is not None else DISK_SOURCE) + f"; then the host link ({link:g} GB/s)"
    return Tier("disk", unit, units * unit, disk_token_s, int(disk_gib * GIB), disk, source, disk_gib * DISK_GIB_HOUR, DISK_PRICE_SOURCE)
