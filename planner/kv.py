"""K/V bytes from a :class:`~planner.geometry.ModelGeometry`: one frozen spec per layer kind.

Each :class:`KVSpec` describes a group of identical layers on one GPU and knows its bytes per
token, the tokens it holds at a given context length, its page size and its paged block count
(the shape of vLLM's ``kv_cache_interface``). :func:`inspect_geometry` sums them into the
numbers the CLI, the app and the reports show.

Runtime semantics:

* ``vllm`` (paged engines: vLLM, SGLang; the default): MLA layers cache one latent of
  ``kv_lora_rank + qk_rope_head_dim`` elements per token, not split by tensor parallelism.
* ``transformers`` (eager ``DynamicCache`` as transformers shipped it until 2026): MLA layers
  cache decompressed per-head K (``qk_nope + qk_rope``) and V (``v_head_dim``) for every
  attention head.
* ``transformers-latent`` (eager ``DynamicCache`` since huggingface/transformers#47761, which
  includes the pinned 5.24): MLA layers cache the compressed latent, ``kv_lora_rank`` as keys
  and ``qk_rope_head_dim`` as values, the same bytes as a paged engine.

In both transformers runtimes a chunked-attention layer (Llama 4) is cached as a sliding window
of the chunk size, so it holds ``min(T, C)`` positions rather than the current chunk; a sliding
layer holds its last ``W`` positions after a decode step (the probe measured ``W - 1`` kept plus
the new token) and, transiently, the whole prompt right after a longer prefill; the planner counts
the steady ``W`` and says so in the plan's notes.

Integer cache formats count one fp16 scale and one fp16 zero-point per group of
:data:`QUANT_GROUP` elements (the layout of transformers' quantized caches); fp8 counts no
per-element scale (per-tensor scales are negligible).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.geometry import CompressedSpec, ModelGeometry, parse_geometry
from planner.limits import ByteBudgetCache

KVDtype = Literal["fp32", "fp16", "bf16", "fp8", "int8", "int4"]
Runtime = Literal["vllm", "sglang", "transformers", "transformers-latent"]
KV_DTYPE_BITS: dict[str, int] = {"fp32": 32, "fp16": 16, "bf16": 16, "fp8": 8, "int8": 8, "int4": 4}
INTEGER_DTYPES = frozenset({"int8", "int4"})
QUANT_GROUP = 64
QUANT_GROUP_OVERHEAD_BYTES = 4  # fp16 scale + fp16 zero-point per group
RUNTIMES: dict[str, str] = {
    "vllm": "paged engine (vLLM/SGLang): MLA caches the compressed latent",
    "sglang": "SGLang's token pool (the paged layout), sized by SGLang's start-up rules: MLA caches the compressed latent",
    "transformers": "transformers eager DynamicCache (before transformers#47761): MLA caches decompressed per-head K and V",
    "transformers-latent": "transformers eager DynamicCache (since transformers#47761, e.g. 5.24): MLA caches the compressed latent",
}

_FROZEN = ConfigDict(frozen=True, extra="forbid")


def check_kv_dtype(kv_dtype: str) -> str:
    if kv_dtype not in KV_DTYPE_BITS:
        raise PlannerError("kv_dtype", kv_dtype, f"unknown KV dtype; choose one of {', '.join(KV_DTYPE_BITS)}")
    return kv_dtype


AUTO = "auto"
KV_DTYPE_CHOICES: tuple[str, ...] = (AUTO, *KV_DTYPE_BITS)
_MODEL_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "bf16", "float": "bf16"}


def _checkpoint_kv_format(quant: object, where: str) -> tuple[str, str, str] | None:
    """(KV dtype, where it was declared, vLLM's --kv-cache-dtype string) a quantization config
    declares, as vLLM 0.33 reads it, or None.

    ``utils/torch_utils.py`` ``get_kv_cache_quant_algo_string`` (ModelOpt: ``kv_cache_scheme``
    {num_bits 8, type float} or ``kv_cache_quant_algo`` "FP8" -> fp8_e4m3) and
    ``layers/attention/attention.py`` (compressed-tensors with any ``kv_cache_scheme`` -> fp8).

    Raises:
        PlannerError: the checkpoint declares a KV format the planner does not model (NVFP4).
    """
    if not isinstance(quant, dict):
        return None
    inner = quant.get("quantization") if isinstance(quant.get("quantization"), dict) else {}
    scheme = quant.get("kv_cache_scheme") or inner.get("kv_cache_scheme")
    algo = quant.get("kv_cache_quant_algo") or inner.get("kv_cache_quant_algo")
    method = str(quant.get("quant_method") or "").lower()
    modelopt = "fp8" if method.startswith("compressed") else "fp8_e4m3"  # get_kv_cache_quant_algo_string: ModelOpt's FP8 is fp8_e4m3
    if isinstance(scheme, dict):
        if scheme.get("num_bits") == 8 and scheme.get("type") == "float":
            return "fp8", f"{where}.kv_cache_scheme (8-bit float)", modelopt
        if scheme.get("num_bits") == 4 and scheme.get("type") == "float":
            raise PlannerError("kv_dtype", AUTO, f"{where}.kv_cache_scheme declares an NVFP4 KV cache, which the planner does not model; give --kv-dtype fp8 or another dtype")
        if method.startswith("compressed"):
            return "fp8", f"{where}.kv_cache_scheme (compressed-tensors: vLLM caches fp8)", "fp8"
    if isinstance(algo, str) and algo:
        if algo.upper() == "FP8":
            return "fp8", f"{where}.kv_cache_quant_algo FP8", "fp8_e4m3"
        if algo.upper() == "NVFP4":
            raise PlannerError("kv_dtype", AUTO, f"{where}.kv_cache_quant_algo declares an NVFP4 KV cache, which the planner does not model; give --kv-dtype fp8 or another dtype")
    return None


def resolve_kv_dtype(requested: str, config: dict | None, quantization: dict | None = None) -> tuple[str, str]:
    """(KV dtype, where it came from) for a requested dtype, resolving ``"auto"`` like vLLM.

    vLLM 0.33 ``--kv-cache-dtype auto`` (engine/arg_utils.py ``resolve_kv_cache_dtype_string``)
    caches what the checkpoint declares in ``config.json``'s ``quantization_config`` or, when
    config.json has none, in ``hf_quant_config.json`` (``quantization``: pass it as
    ``quantization``); otherwise the model dtype (``torch_dtype``/``dtype``; float32
    checkpoints are served in bf16), bf16 when the config names none. DeepSeek-V4
    (``compress_ratios``) always caches fp8: its layers store vLLM's fp8_ds_mla layout.

    Raises:
        PlannerError: an unknown dtype, or a checkpoint KV format the planner does not model.
    """
    if requested != AUTO:
        return check_kv_dtype(requested), "given"
    config = config if isinstance(config, dict) else {}
    if any(isinstance(c, dict) and isinstance(c.get("compress_ratios"), list) for c in (config, config.get("text_config"))):
        # DeepSeek-V4: vLLM 0.33's FlashMLA layers store every cache in the fp8_ds_mla layout and turn
        # "auto" into it (models/deepseek_v4/attention.py _resolve_dsv4_kv_cache_dtype)
        return "fp8", "auto: DeepSeek-V4 caches vLLM's fp8_ds_mla layout whatever the checkpoint"
    quant = config.get("quantization_config")
    where = "config.json quantization_config"
    if quant is None:
        for key in ("text_config", "language_config", "llm_config"):
            sub = config.get(key)
            if isinstance(sub, dict) and isinstance(sub.get("quantization_config"), dict):
                quant, where = sub["quantization_config"], f"config.json {key}.quantization_config"
                break
    if quant is None and quantization is not None:
        quant, where = quantization, "hf_quant_config.json quantization"
    found = _checkpoint_kv_format(quant, where)
    if found:
        return found[0], f"auto: {found[1]}" + (FP8_E4M3_MARK if found[2] == "fp8_e4m3" else "")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    dtype = config.get("torch_dtype") or config.get("dtype") or text.get("torch_dtype") or text.get("dtype")
    if isinstance(dtype, str) and dtype in _MODEL_DTYPES:
        return _MODEL_DTYPES[dtype], f"auto: model dtype {dtype}" + (" (served in bf16)" if dtype.startswith("float") and dtype != "float16" else "")
    return "bf16", "auto: the config names no dtype (bf16)"


FP8_E4M3_MARK = " (vLLM: fp8_e4m3)"  # the source of an "auto" that vLLM resolves to fp8_e4m3, not fp8


def vllm_kv_cache_dtype(kv_dtype: str, source: str = "given") -> str | None:
    """vLLM's ``--kv-cache-dtype`` for a resolved planner dtype and its source (:func:`resolve_kv_dtype`):
    bfloat16, float16, fp8, or fp8_e4m3 where a ModelOpt checkpoint's FP8 KV resolved "auto"; None
    for a dtype vLLM has no cache of (fp32, integer caches)."""
    if kv_dtype == "fp8" and source.endswith(FP8_E4M3_MARK):
        return "fp8_e4m3"
    return {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}.get(kv_dtype)


def vector_bytes(elements: int, kv_dtype: str) -> int:
    """Bytes of one cached vector of ``elements`` values in ``kv_dtype`` (scales included)."""
    bits = KV_DTYPE_BITS[check_kv_dtype(kv_dtype)]
    data = (elements * bits + 7) // 8
    if kv_dtype in INTEGER_DTYPES:
        data += -(-elements // QUANT_GROUP) * QUANT_GROUP_OVERHEAD_BYTES
    return data


def ds_mla_fp8_bytes(kv_lora_rank: int, rope_dim: int) -> int:
    """Bytes per token of vLLM's ``fp8_ds_mla`` sparse-MLA cache (DeepSeek-V3.2, GLM-5 DSA).

    vLLM 0.33 ``mla_attention.py`` serves any fp8 KV dtype of a FLASHMLA_SPARSE layer in this
    packed layout: the latent in fp8 with one fp32 scale per 128 values, the RoPE part in bf16
    (512 + 4 x 4 + 64 x 2 = 656 B, its ``state_content_bytes``).
    """
    return kv_lora_rank + -(-kv_lora_rank // 128) * 4 + rope_dim * 2


def check_tp(geo: ModelGeometry, tp: int) -> None:
    """Refuse a tensor-parallel size that splits heads unevenly.

    Raises:
        PlannerError: ``tp`` is below 1, does not divide the attention heads, or (non-MLA)
            neither divides nor is a multiple of the KV heads.
    """
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1 or tp > 4096:
        raise PlannerError("tp", tp, "tensor parallel size must be an integer from 1 to 4096")
    heads, kv = geo.num_attention_heads, geo.num_kv_heads
    if heads % tp:
        raise PlannerError("tp", tp, f"tensor parallel size {tp} with {heads} attention heads and {kv} KV heads: {tp} does not divide the attention heads")
    if geo.mla is None and geo.compressed is None:
        # layers may differ (Gemma 4 global layers, Nemotron-NAS blocks): every count must split
        for count in sorted({layer.kv_heads for layer in geo.layers if layer.kv_heads} or {kv}):
            if count % tp and tp % count:
                raise PlannerError("tp", tp, f"tensor parallel size {tp} with {heads} attention heads and {count} KV heads: {tp} neither divides nor is a multiple of the KV heads")


class KVSpec(BaseModel):
    """A group of identical layers on one GPU: what each caches per token."""

    model_config = _FROZEN

    kind: str  # full, sliding, chunked, cross (mla is kind "full" with latent=True)
    num_layers: int
    window: int | None = None
    latent: bool = False
    kv_heads_per_gpu: int
    k_head_dim: int
    v_head_dim: int
    kv_dtype: str
    bytes_per_token_per_layer: int
    chunk_as_window: bool = False  # transformers caches chunked layers as a sliding window
    cache: str = "kv"  # "kv" (K and V), "latent" (MLA), "indexer" (sparse-attention keys), "swa", "compressed" or "compressor" (DeepSeek-V4)
    compress_ratio: int = 1  # one cached entry per this many tokens (DeepSeek-V4 C4A/C128A layers and their indexer)
    page_alignment: int = 1  # a layer's page is padded to a multiple of this many bytes (vLLM's fp8_ds_mla pages: 576)

    @property
    def bytes_per_token(self) -> int:
        """Growth per token; for a compressed group, the entry bytes / ratio rounded up."""
        return -(-self.bytes_per_token_per_layer * self.num_layers // self.compress_ratio)

    @property
    def shape(self) -> str:
        """What one layer of this group caches per entry, in words (for tables and notes)."""
        every = f", one entry per {self.compress_ratio} tokens" if self.compress_ratio > 1 else ""
        if self.cache == "indexer":
            return f"indexer key of {self.k_head_dim:,} ({self.kv_dtype}{' + scales' if self.kv_dtype == 'fp8' else ''}){every}"
        if self.cache in ("swa", "compressed"):
            return f"latent of {self.k_head_dim:,} in vLLM's fp8 sparse layout{every}"
        if self.cache == "compressor":
            return f"compressor state of {self.k_head_dim:,} fp32 values"
        if self.latent:
            return f"latent of {self.k_head_dim:,}"
        return f"{self.kv_heads_per_gpu:,} KV heads × (K {self.k_head_dim:,} + V {self.v_head_dim:,})"

    @property
    def grows_per_token(self) -> bool:
        return self.kind == "full"

    def tokens_held(self, tokens: int) -> int:
        """Positions one sequence holds in each layer of this group at ``tokens`` tokens."""
        if self.kind == "full":
            return tokens
        if self.kind == "sliding":
            return min(tokens, self.window or tokens)
        if self.kind == "chunked":
            chunk = self.window or tokens
            if self.chunk_as_window:
                return min(tokens, chunk)
            return 0 if tokens == 0 else (tokens % chunk or chunk)
        return 0  # cross-attention holds encoder states, not text tokens

    def bytes_at(self, tokens: int) -> int:
        if self.compress_ratio > 1:  # whole groups of r tokens are compressed into one entry
            return self.bytes_per_token_per_layer * self.num_layers * (self.tokens_held(tokens) // self.compress_ratio)
        return self.bytes_per_token * self.tokens_held(tokens)

    def peak_bytes(self, tokens: int) -> int:
        """The most this group holds at any length up to ``tokens`` (what a reservation must cover):
        a chunked layer peaks at a full chunk, min(tokens, C), though it holds tokens mod C now."""
        if self.compress_ratio > 1:
            return self.bytes_at(tokens)
        held = min(tokens, self.window or tokens) if self.kind == "chunked" else self.tokens_held(tokens)
        return self.bytes_per_token * held

    def page_bytes(self, block_tokens: int) -> int:
        """Bytes of one block of ``block_tokens`` positions across this group's layers."""
        if self.compress_ratio > 1:
            return self.bytes_per_token_per_layer * self.num_layers * -(-block_tokens // self.compress_ratio)
        return self.bytes_per_token * block_tokens

    def blocks(self, tokens: int, block_tokens: int) -> int:
        """Paged blocks per layer: sliding/chunked capped at their window plus one extra block."""
        need = -(-tokens // block_tokens)
        if self.kind in ("sliding", "chunked") and self.window:
            return min(need, -(-self.window // block_tokens) + 1)
        if self.kind == "full":
            return need
        return 0

    def paged_bytes(self, tokens: int, block_tokens: int) -> int:
        return self.blocks(tokens, block_tokens) * self.page_bytes(block_tokens)

    def layer_page_bytes(self, block_tokens: int) -> int:
        """Bytes of one block of ``block_tokens`` positions in one layer of this group (a compressed
        layer stores one entry per ``compress_ratio`` tokens: vLLM's ``tokens_per_state``), padded to
        ``page_alignment`` (vLLM ``_apply_alignment_padding``)."""
        page = self.bytes_per_token_per_layer * -(-block_tokens // self.compress_ratio)
        return -(-page // self.page_alignment) * self.page_alignment

    def admission_blocks(self, max_model_len: int, block_tokens: int, in_flight_tokens: int) -> int:
        """Blocks one layer reserves for a request at ``max_model_len`` in a paged engine.

        Mirrors vLLM's ``max_memory_usage_bytes`` / ``max_admission_blocks_per_request``
        (vllm/v1/kv_cache_interface.py): full attention holds every position; a sliding layer
        holds ``window - 1`` positions plus the tokens scheduled but not yet settled, plus one
        block because the window need not start on a block boundary; a chunked layer holds one
        chunk plus the in-flight tokens.
        """
        if self.kind == "sliding" and self.window:
            return -(-min(self.window - 1 + in_flight_tokens, max_model_len) // block_tokens) + 1
        if self.kind == "chunked" and self.window:
            return -(-min(self.window + in_flight_tokens, max_model_len) // block_tokens)
        if self.kind == "cross":
            return 0
        return -(-max_model_len // block_tokens)


class InspectReport(BaseModel):
    """Everything ``inspect`` prints: K/V bytes on one GPU for one sequence."""

    model_config = _FROZEN

    model_type: str
    config_path: str
    runtime: str
    runtime_description: str
    kv_dtype: str
    tp: int
    tokens: int
    kv_bytes_per_token: int
    kv_bytes_at_tokens: int
    state_bytes_per_sequence: int
    cross_bytes_per_encoder_token: int
    mha_equivalent_bytes_per_token: int
    layers: dict[str, int]
    kv_heads_per_gpu: int
    head_dim: int
    v_head_dim: int
    mla_latent_dim: int | None
    windows: dict[str, int]
    specs: tuple[KVSpec, ...]
    notes: tuple[str, ...]
    kv_dtype_source: str = "given"  # "given", or "auto: ..." naming the checkpoint field it came from


def kv_specs(geo: ModelGeometry, kv_dtype: str = "bf16", tp: int = 1, runtime: str = "vllm", mtp: bool = False, plain_fp8_latent: bool = False) -> tuple[KVSpec, ...]:
    """Group the cached layers of ``geo`` into one :class:`KVSpec` per (kind, window, shape).

    ``mtp`` adds the layers of the model's next-token-prediction modules, which an engine
    caches when MTP speculative decoding is on. A sparse-attention indexer is one more spec
    (``cache="indexer"``) that knows its own bytes. Sparse MLA in fp8 under vllm is the
    ``fp8_ds_mla`` layout (656 B a token) unless ``plain_fp8_latent``: vLLM's ``fp8_e4m3`` (an
    explicit one, or a ModelOpt checkpoint's FP8 KV that ``auto`` resolves to) is not in
    FLASHMLA_SPARSE's dtypes, so vLLM 0.33 runs FLASHINFER_MLA_SPARSE_SM90 with plain fp8
    latent pages (576 B; :func:`vllm_kv_cache_dtype`).

    Raises:
        PlannerError: unknown ``kv_dtype`` or ``runtime``, or an invalid ``tp`` (see :func:`check_tp`).
    """
    check_kv_dtype(kv_dtype)
    if runtime not in RUNTIMES:
        raise PlannerError("runtime", runtime, f"unknown runtime; choose one of {', '.join(RUNTIMES)}")
    check_tp(geo, tp)
    if runtime == "sglang":  # SGLang's token pool is the paged layout (its own sizing is planner.engines.sglang)
        runtime = "vllm"
    if geo.compressed is not None:
        return _compressed_specs(geo.compressed, mtp)
    groups: dict[tuple[str, int | None, int, int, int], int] = {}
    for layer in geo.layers + (geo.mtp_layers if mtp else ()):
        if layer.kind in ("mamba", "linear_attention", "none"):
            continue
        key = (layer.kind, layer.window, layer.kv_heads, layer.k_head_dim, layer.v_head_dim)
        groups[key] = groups.get(key, 0) + 1
    specs = []
    as_window = runtime != "vllm"
    for (kind, window, kv_heads, k_dim, v_dim), count in groups.items():
        if geo.mla is not None and kind != "cross":
            if runtime in ("vllm", "transformers-latent"):
                latent = geo.mla.latent_dim
                per = vector_bytes(latent, kv_dtype)
                if runtime == "vllm" and geo.indexer is not None and kv_dtype == "fp8" and not plain_fp8_latent:
                    per = ds_mla_fp8_bytes(geo.mla.kv_lora_rank, geo.mla.qk_rope_head_dim)
                specs.append(KVSpec(kind=kind, num_layers=count, window=window, latent=True, kv_heads_per_gpu=1, k_head_dim=latent, v_head_dim=0, kv_dtype=kv_dtype, bytes_per_token_per_layer=per, cache="latent"))
                continue
            heads = geo.num_attention_heads // tp
            per = heads * (vector_bytes(k_dim, kv_dtype) + vector_bytes(v_dim, kv_dtype))
            specs.append(KVSpec(kind=kind, num_layers=count, window=window, kv_heads_per_gpu=heads, k_head_dim=k_dim, v_head_dim=v_dim, kv_dtype=kv_dtype, bytes_per_token_per_layer=per))
            continue
        per_gpu = max(1, kv_heads // tp)
        per = per_gpu * (vector_bytes(k_dim, kv_dtype) + vector_bytes(v_dim, kv_dtype))
        specs.append(KVSpec(kind=kind, num_layers=count, window=window, kv_heads_per_gpu=per_gpu, k_head_dim=k_dim, v_head_dim=v_dim, kv_dtype=kv_dtype, bytes_per_token_per_layer=per, chunk_as_window=as_window))
    indexer = geo.indexer
    if indexer is not None and runtime == "vllm":
        # vLLM 0.33 DeepseekV32IndexerCache: fp8 keys + fp32 scales (uint8 tensor); MiniMax-M3's
        # MiniMaxM3IndexerCache: bf16 keys; one head, not split by tensor parallelism, whatever the K/V dtype
        count = len(indexer.layers) + (geo.mtp_indexer_layers if mtp else 0)
        if count:
            specs.append(KVSpec(kind="full", num_layers=count, kv_heads_per_gpu=1, k_head_dim=indexer.head_dim, v_head_dim=0, kv_dtype=indexer.dtype, bytes_per_token_per_layer=indexer.bytes_per_token_per_layer, cache="indexer"))
    return tuple(specs)


DS_MLA_PAGE_ALIGNMENT = 576  # vLLM 0.33: DeepSeek-V4's caches pad every page to 576 B under its fp8_ds_mla layout


def _compressed_specs(comp: CompressedSpec, mtp: bool) -> tuple[KVSpec, ...]:
    """DeepSeek-V4 (see :class:`planner.geometry.CompressedSpec`): a sliding-window group over every
    layer, one compressed group per ratio, and the ratio-4 layers' indexer. vLLM keeps one latent
    head, not split by tensor parallelism, in its own FP8 layout whatever the KV dtype; every page
    is padded to 576 B (``alignment=576`` on each spec vLLM 0.33's models/deepseek_v4 builds)."""
    ratios = comp.ratios + (comp.mtp_ratios if mtp else ())
    entry = comp.entry_bytes
    aligned = {"kv_heads_per_gpu": 1, "v_head_dim": 0, "page_alignment": DS_MLA_PAGE_ALIGNMENT}
    specs = [KVSpec(kind="sliding", num_layers=len(ratios), window=comp.window, latent=True, k_head_dim=comp.head_dim, kv_dtype="fp8", bytes_per_token_per_layer=entry, cache="swa", **aligned)]
    for ratio in sorted({r for r in ratios if r > 1}):
        count = sum(1 for r in ratios if r == ratio)
        specs.append(KVSpec(kind="full", num_layers=count, latent=True, k_head_dim=comp.head_dim, kv_dtype="fp8", bytes_per_token_per_layer=entry, cache="compressed", compress_ratio=ratio, **aligned))
    indexed = sum(1 for r in ratios if r == 4)
    if indexed and comp.index_head_dim:
        specs.append(KVSpec(kind="full", num_layers=indexed, k_head_dim=comp.index_head_dim, kv_dtype="fp8", bytes_per_token_per_layer=comp.index_entry_bytes, cache="indexer", compress_ratio=4, **aligned))
    # vLLM 0.33 models/deepseek_v4/compressor.py CompressorStateCache: each compressor keeps fp32
    # kv + score states of 2 x coff x head_dim for the last coff x ratio tokens (coff 2 for ratio 4)
    for ratio in sorted({r for r in ratios if r > 1}):
        count = sum(1 for r in ratios if r == ratio)
        coff = 2 if ratio == 4 else 1
        specs.append(KVSpec(kind="sliding", num_layers=count, window=coff * ratio, k_head_dim=2 * coff * comp.head_dim, kv_dtype="fp32", bytes_per_token_per_layer=2 * coff * comp.head_dim * 4, cache="compressor", **aligned))
    if indexed and comp.index_head_dim:  # the indexer's own ratio-4 compressor
        specs.append(KVSpec(kind="sliding", num_layers=indexed, window=8, k_head_dim=4 * comp.index_head_dim, kv_dtype="fp32", bytes_per_token_per_layer=4 * comp.index_head_dim * 4, cache="compressor", **aligned))
    return tuple(specs)


def state_bytes(geo: ModelGeometry, tp: int = 1) -> int:
    """Recurrent state of Mamba and linear-attention layers per sequence on one GPU.

    Counted in 16-bit (the serving dtype of bf16/fp16 and, by vLLM's default, float32
    checkpoints), the SSM part in float32 where the config asks for it (``mamba_ssm_cache_dtype``),
    split evenly over ``tp``.
    """
    elem = 2
    total = 0
    for spec, kind in ((geo.mamba, "mamba"), (geo.linear, "linear_attention")):
        if spec is not None:
            n = sum(1 for layer in geo.layers if layer.kind == kind)
            total += n * (spec.conv_elements * elem + spec.ssm_elements * spec.ssm_element_bytes)
    return -(-total // tp)


_REPORTS = ByteBudgetCache(16 << 20)  # bounded in bytes (planner/limits.py)


def inspect_geometry(geo: ModelGeometry, kv_dtype: str = "bf16", tp: int = 1, tokens: int = 4096, runtime: str = "vllm", mtp: bool = False, kv_dtype_source: str = "given") -> InspectReport:
    """K/V bytes per token and at ``tokens`` tokens for one sequence on one GPU (memoised).

    ``mtp`` counts the next-token-prediction layers an engine caches with MTP speculative decoding;
    ``kv_dtype_source`` is what the report says ``kv_dtype`` came from (:func:`resolve_kv_dtype`).

    Raises:
        PlannerError: invalid ``kv_dtype``, ``tp``, ``runtime`` or ``tokens``.
    """
    key = (geo.config_hash, kv_dtype, tp, tokens, runtime, mtp, kv_dtype_source)
    hit = _REPORTS.get(key)
    if hit is None:
        hit = _inspect(geo, kv_dtype, tp, tokens, runtime, mtp, vllm_kv_cache_dtype(kv_dtype, kv_dtype_source) == "fp8_e4m3")
        if kv_dtype_source != "given":
            hit = hit.model_copy(update={"kv_dtype_source": kv_dtype_source})
        _REPORTS.put(key, hit)
    return hit  # type: ignore[return-value]


def _inspect(geo: ModelGeometry, kv_dtype: str, tp: int, tokens: int, runtime: str, mtp: bool = False, plain_fp8_latent: bool = False) -> InspectReport:
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0 or tokens > 1 << 31:
        raise PlannerError("tokens", tokens, "must be an integer from 0 to 2,147,483,648")
    specs = kv_specs(geo, kv_dtype, tp, runtime, mtp, plain_fp8_latent)
    per_token = sum(s.bytes_per_token for s in specs if s.grows_per_token)
    at_tokens = sum(s.bytes_at(tokens) for s in specs)
    cross = sum(s.bytes_per_token for s in specs if s.kind == "cross")
    attn_layers = sum(s.num_layers for s in specs if s.kind != "cross")
    mha_heads = max(1, geo.num_attention_heads // tp)
    mha_equiv = attn_layers * mha_heads * (vector_bytes(geo.head_dim, kv_dtype) + vector_bytes(geo.v_head_dim, kv_dtype))
    notes = list(geo.notes)
    if geo.mla is None and tp > geo.num_kv_heads:
        notes.append(f"tp {tp} > {geo.num_kv_heads} KV heads: each KV head is replicated on {tp // geo.num_kv_heads} GPUs")
    if geo.mla is not None and runtime != "transformers" and tp > 1:
        notes.append(f"MLA latent is not split by tensor parallelism: every one of the {tp} GPUs holds the whole latent")
    if kv_dtype in INTEGER_DTYPES:
        notes.append(f"{kv_dtype} cache counts an fp16 scale and fp16 zero-point per {QUANT_GROUP} elements")
    if mtp and not (geo.mtp_layers or (geo.compressed and geo.compressed.mtp_ratios)):
        notes.append("MTP speculative decoding asked for, but the config has no num_nextn_predict_layers: nothing added")
    elif geo.mtp_layers and mtp:
        notes.append(f"MTP speculative decoding: {len(geo.mtp_layers)} next-token-prediction layer(s) cached as well")
    if geo.mamba or geo.linear:
        notes.append("recurrent (Mamba/linear-attention) state is fixed per sequence, reported separately as state_bytes_per_sequence")
    lead = next((s for s in specs if s.kind != "cross"), specs[0] if specs else None)
    return InspectReport(
        model_type=geo.model_type,
        config_path=geo.config_path,
        runtime=runtime,
        runtime_description=RUNTIMES[runtime],
        kv_dtype=kv_dtype,
        tp=tp,
        tokens=tokens,
        kv_bytes_per_token=per_token,
        kv_bytes_at_tokens=at_tokens,
        state_bytes_per_sequence=state_bytes(geo, tp),
        cross_bytes_per_encoder_token=cross,
        mha_equivalent_bytes_per_token=mha_equiv,
        layers=geo.counts(),
        kv_heads_per_gpu=lead.kv_heads_per_gpu if lead else 0,
        head_dim=geo.head_dim,
        v_head_dim=geo.v_head_dim,
        mla_latent_dim=geo.mla.latent_dim if geo.mla else None,
        windows={s.kind: s.window for s in specs if s.window},
        specs=specs,
        notes=tuple(notes),
    )


def inspect_config(config: dict, kv_dtype: str = "bf16", tp: int = 1, tokens: int = 4096, runtime: str = "vllm",
                   quantization: dict | None = None, mtp: bool = False) -> InspectReport:
    """:func:`inspect_geometry` of a raw config dict (parsed and validated first).

    ``kv_dtype="auto"`` resolves from the checkpoint (:func:`resolve_kv_dtype`; ``quantization``
    is a separate ``hf_quant_config.json``) and the report says where it came from.

    Raises:
        ConfigError: the config is invalid (see :func:`planner.geometry.parse_geometry`).
        PlannerError: invalid ``kv_dtype``, ``tp``, ``runtime`` or ``tokens``.
    """
    dtype, source = resolve_kv_dtype(kv_dtype, config, quantization)
    return inspect_geometry(parse_geometry(config), kv_dtype=dtype, tp=tp, tokens=tokens, runtime=runtime, mtp=mtp, kv_dtype_source=source)
