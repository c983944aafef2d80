"""vLLM's start-up memory budget, term by term, per release: "Available KV cache memory" predicted
without a GPU.

vLLM sizes the KV cache in ``Worker.determine_available_memory`` (vllm/v1/worker/gpu_worker.py):
it runs one profiling step (``GPUModelRunner.profile_run``: a dummy forward pass of
``max_num_batched_tokens`` tokens, then ``_dummy_sampler_run`` on ``min(max_num_seqs,
max_num_batched_tokens)`` dummy requests) inside ``memory_profiling`` (vllm/utils/mem_utils.py)
and keeps::

    available = total memory (as CUDA reports it) x gpu_memory_utilization
                - weights ("Model loading took")
                - peak activations (torch peak allocation of the profiling step over its start)
                - non-torch memory (device memory outside torch's pool that start-up added)
                - CUDA graphs (from 0.21, VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1 by default;
                  before, graphs are captured after the cache is sized, outside the budget)

:func:`predict_memory` gives each of those terms with its source ("derived from vLLM 0.11
``apply_top_k_top_p``", "fitted on N logs", "assumed"), the defaults vLLM picks for
``max_num_batched_tokens`` / ``max_num_seqs`` (:func:`batch_defaults`), and vLLM's refusal when
nothing is left ("No available memory for the cache blocks") or when the requested share is more
than is free at start-up. The fitted constants and their residuals are in :data:`FITS`.
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.vllm.messages import NO_MEMORY  # vLLM's wording per release (kv_cache_utils.py)
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, text_config
from planner.hardware import Device
from planner.results import Result
from planner.units import GIB
from planner.weights import WeightsEstimate, estimate_weights, linear_shapes

RELEASES = ("0.10", "0.11", "0.19", "0.24", "0.33")
ENTRY_POINTS = ("vllm serve", "LLM class")
SAMPLERS = ("auto", "torch", "flashinfer")
LOG_SOURCE = "llm-d-benchmark's extracts of vLLM 0.11.0 start-up logs on H100 (10 runs)"


@dataclass(frozen=True, slots=True)
class Fit:
    """A constant fitted on published start-up logs (case names as scripts/fit_vllm_memory.py
    prints them, which also recomputes the value and the residuals on the fitted and held-out logs)."""

    value: float
    unit: str
    fitted_on: tuple[str, ...]
    held_out: tuple[str, ...] = ()
    note: str = ""

    def source(self) -> str:
        held = f", {len(self.held_out)} held out" if self.held_out else ""
        return f"fitted on {len(self.fitted_on)} logs ({LOG_SOURCE}{held})" + (f": {self.note}" if self.note else "")


_TP1 = ("gpt-oss-20b TP1", "gpt-oss-120b TP1", "Qwen3-0.6B TP1 len 16000", "Qwen3-0.6B TP1 len 32000", "Qwen3-32B TP1", "Llama-3.3-70B-Instruct-FP8-dynamic TP1")
# Fitted by scripts/fit_vllm_memory.py on ../shared/reference/vllm_startup_logs.json (it prints these).
FITS: dict[str, Fit] = {
    # non-torch increase since start-up ("non-torch forward increase"): CUDA context growth, cuBLAS
    # workspaces, and from TP 2 the NCCL / custom all-reduce buffers (not derivable from vLLM's code)
    "non_torch_tp1": Fit(0.133, "GiB", _TP1, ("Llama-3.1-8B-Instruct TP1", "Mistral-Small-3.2-24B-Instruct-2506 TP1")),
    "non_torch_tp2": Fit(0.55, "GiB", ("Llama-3.3-70B-Instruct-FP8-dynamic TP2",), ("Qwen3-32B TP2",), "one TP-2 log to fit; larger TP sizes are assumed to hold the same"),
    # the profiling step's torch peak beyond the tensors counted (derived) in _activation_terms: the
    # caching allocator's rounding and the dummy run's small buffers
    "activation_rest": Fit(0.036, "GiB", ("Qwen3-0.6B TP1 len 16000", "Qwen3-32B TP1", "gpt-oss-20b TP1", "Llama-3.3-70B-Instruct-FP8-dynamic TP2"), ("Llama-3.1-8B-Instruct TP1", "Qwen3-32B TP2", "Qwen3-0.6B TP1 len 32000", "Llama-3.3-70B-Instruct-FP8-dynamic TP1", "gpt-oss-120b TP1", "Mistral-Small-3.2-24B-Instruct-2506 TP1")),
    # device memory in use before vLLM's start-up snapshot: 'Free memory on device (78.57/79.18 GiB)' at TP 1, (77.64/79.18) at TP 2
    "startup_used_tp1": Fit(0.61, "GiB", _TP1),
    "startup_used_tp2": Fit(1.54, "GiB", ("Llama-3.3-70B-Instruct-FP8-dynamic TP2", "Qwen3-32B TP2")),
}


# --------------------------------------------------------------------------- releases and defaults


@dataclass(frozen=True, slots=True)
class ReleaseMemory:
    """What one vLLM release does differently in its memory budget (each field cites the code)."""

    release: str
    # EngineArgs.get_batch_defaults (0.19+) / _set_default_args(_v1) (0.10, 0.11): (minimum GiB, A100
    # excluded, {entry point: (max_num_batched_tokens, max_num_seqs)}), largest tier first
    tiers: tuple[tuple[float, bool, dict[str, tuple[int, int]]], ...]
    sampler: str  # the dummy sampler's default path: "torch" (sort-based top-k/top-p), "triton"
    sampler_source: str
    graphs_in_budget: bool
    graphs_source: str


_SMALL = {"vllm serve": (2048, 256), "LLM class": (8192, 256)}
_LARGE = {"vllm serve": (8192, 1024), "LLM class": (16384, 1024)}
_TIERS = ((70.0, True, _LARGE), (0.0, False, _SMALL))
_PRE_021 = "graphs are captured in compile_or_warm_up_model, after the KV cache is sized: outside the budget"
_FROM_021 = "profile_cudagraph_memory's estimate is subtracted (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS=1, the default since 0.21)"
_TORCH_SAMPLER = (
    "apply_top_k_top_p sorts the fp32 logits; TopKTopPSampler takes FlashInfer's path instead whenever flashinfer.sampling "
    "imports (the vllm-openai image ships it, the pip wheel only as the [flashinfer] extra: --sampler flashinfer)"
)
RELEASE_MEMORY = {
    "0.10": ReleaseMemory("0.10", _TIERS, "torch", _TORCH_SAMPLER, False, _PRE_021),
    "0.11": ReleaseMemory("0.11", _TIERS, "torch", _TORCH_SAMPLER, False, _PRE_021),
    "0.19": ReleaseMemory("0.19", _TIERS, "triton", "apply_top_k_top_p_triton masks in place (FlashInfer's sampler is opt-in)", False, _PRE_021 + " (VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS defaults to 0)"),
    "0.24": ReleaseMemory("0.24", _TIERS, "triton", "FlashInfer's top-k/top-p sampler, or apply_top_k_top_p_triton: both in place", True, _FROM_021),
    # 0.33 adds a >= 160 GiB tier (B200 / B300) and warms FlashInfer's and the native sampler one after the other
    "0.33": ReleaseMemory("0.33", ((160.0, False, {"vllm serve": (16384, 1024), "LLM class": (16384, 1024)}), *_TIERS), "triton", "FlashInfer's sampler, then forward_native's apply_top_k_top_p_triton (both warmed, one after the other)", True, _FROM_021),
}
DEFAULT_RELEASE = RELEASES[-1]


def _release(release: str) -> ReleaseMemory:
    if release not in RELEASE_MEMORY:
        raise PlannerError("vllm_version", release, f"no memory model for this vLLM release; choose one of {', '.join(RELEASES)}")
    return RELEASE_MEMORY[release]


def cuda_total_bytes(device: Device) -> tuple[int, str]:
    """(total device memory as CUDA reports it, its source): the catalog's CUDA figure, else the nominal size."""
    if device.cuda_memory_gib:
        kind = device.cuda_memory_kind or "measured"
        return int(device.cuda_memory_gib * GIB), f"{device.name}: {device.cuda_memory_gib:g} GiB as CUDA reports it, {kind} (nominal {device.memory_gib:g} GiB; {device.cuda_memory_source or device.source})"
    return device.memory_bytes, f"{device.name}: {device.memory_gib:g} GiB as given (a custom device: the total CUDA reports)"


@dataclass(frozen=True, slots=True)
class BatchDefaults(Result):
    """``max_num_batched_tokens`` / ``max_num_seqs`` vLLM uses when the user sets neither."""

    max_num_batched_tokens: int
    max_num_seqs: int
    source: str


def batch_defaults(device: Device, release: str = DEFAULT_RELEASE, entry_point: str = "vllm serve") -> BatchDefaults:
    """vLLM's defaults by GPU memory, GPU name and entry point (``vllm serve`` is
    UsageContext.OPENAI_API_SERVER, the ``LLM`` class LLM_CLASS), as
    tests/data/vllm_batch_defaults.json records them from each release's own code.

    Raises:
        PlannerError: unknown release or entry point.
    """
    rules = _release(release)
    if entry_point not in ENTRY_POINTS:
        raise PlannerError("entry_point", entry_point, f"choose one of {', '.join(ENTRY_POINTS)}")
    total, _ = cuda_total_bytes(device)
    a100 = "a100" in device.name.lower()
    for min_gib, skip_a100, table in rules.tiers:
        if total >= min_gib * GIB and not (skip_a100 and a100):
            tokens, seqs = table[entry_point]
            why = f">= {min_gib:g} GiB" + (" and not an A100" if skip_a100 else "") if min_gib else "below the larger tiers" + (" (A100s are kept here)" if a100 else "")
            fn = "EngineArgs.get_batch_defaults" if release not in ("0.10", "0.11") else "EngineArgs._set_default_args"
            return BatchDefaults(tokens, seqs, f"vLLM {release} {fn}: `{entry_point}` default for a GPU {why} ({total / GIB:.2f} GiB)")
    raise AssertionError("the last tier has no minimum")  # pragma: no cover


# --------------------------------------------------------------------------- terms


@dataclass(frozen=True, slots=True)
class MemoryTerm(Result):
    name: str
    bytes: int  # what start-up takes from the budget (the first two terms: what the budget starts from)
    source: str
    in_budget: bool = True  # False: reported for information (e.g. graphs captured after the cache is sized)


@dataclass(frozen=True, slots=True)
class MemoryBudget(Result):
    """vLLM's predicted start-up budget per GPU, term by term."""

    release: str
    entry_point: str
    max_num_batched_tokens: int
    max_num_seqs: int
    batch_source: str
    total_bytes: int
    requested_bytes: int
    terms: tuple[MemoryTerm, ...]
    available_kv_bytes: int
    refusal: str | None = None  # vLLM's own message when it would not start

    def term(self, name: str) -> MemoryTerm:
        for t in self.terms:
            if t.name == name:
                return t
        raise KeyError(name)

    @property
    def available_kv_gib(self) -> float:
        return self.available_kv_bytes / GIB

    def summary(self) -> dict:
        # model_dump keeps nested results as they are: the terms as plain dicts, for JSON
        return {**self.model_dump(), "terms": [t.model_dump() for t in self.terms], "available_kv_gib": round(self.available_kv_gib, 2)}


# GPU compute capability and SM count by catalog name (NVIDIA datasheets): the mxfp4 MoE backend and
# the Triton sampler's per-SM buffer depend on them
CAPABILITY = {"H100": (9, 0), "H200": (9, 0), "B200": (10, 0), "A100": (8, 0), "A10-": (8, 6), "L40S": (8, 9), "L4-": (8, 9), "RTX-4090": (8, 9), "T4": (7, 5)}
SM_COUNT = {"H100-SXM": 132, "H100-PCIe": 114, "H100-NVL": 132, "H200": 132, "B200": 148, "A100": 108, "A10-": 72, "L40S": 142, "L4-": 58, "RTX-4090": 128, "T4": 40}


def _lookup(table: dict, device: Device, default):
    return next((v for k, v in table.items() if device.name.startswith(k)), default)


def _rotary_bytes(config: dict, geo: ModelGeometry) -> int:
    """RotaryEmbedding's cos/sin cache, a buffer the loaded model holds (rotary_embedding/base.py):
    max positions x rotary dim, in the model dtype (gpt-oss asks for float32); one per distinct RoPE."""
    cfg = text_config(config)
    positions = geo.max_position_embeddings or 4096
    rot = geo.mla.qk_rope_head_dim if geo.mla else int(geo.head_dim * float(cfg.get("partial_rotary_factor", 1.0) or 1.0))
    ropes = 2 if cfg.get("rope_local_base_freq") else 1  # Gemma 3: local and global RoPE
    return positions * rot * (4 if geo.model_type == "gpt_oss" else 2) * ropes


def _mxfp4_extra(config: dict, geo: ModelGeometry, tp: int, capability: tuple[int, int]) -> tuple[int, str]:
    """Bytes vLLM's mxfp4 MoE path adds to the routed experts per GPU (``Mxfp4MoEMethod.create_weights``
    and ``process_weights_after_loading``, vllm/model_executor/layers/quantization/mxfp4.py)."""
    experts = [lin for lin in linear_shapes(config, geo) if lin.role == "expert"]
    if not experts:
        return 0, ""
    n_exp = experts[0].count
    inter = next(lin.out_features for lin in experts if lin.name.endswith("gate_proj"))
    hidden = geo.hidden_size
    layers = len(experts) // 3
    per_part = -(-inter // tp)

    def expert_bytes(i: int, h: int) -> int:  # w13 + w2 blocks (2 values a byte) and e8m0 scales per 32
        return n_exp * (2 * i * h // 2 + 2 * i * h // 32 + h * i // 2 + h * i // 32)

    base = expert_bytes(per_part, hidden)
    if capability < (9, 0):
        # Marlin (SM < 9.0): n % 256 == 0 and k % 128 == 0, so intermediate -> multiple of 128, hidden -> 256
        padded = expert_bytes(-(-per_part // 128) * 128, -(-hidden // 256) * 256)
        return layers * (padded - base), "Marlin path (SM < 9.0): intermediate padded to 128, hidden to 256"
    # Triton path on Hopper with torch 2.8.0: _swizzle_mxfp4 keeps a strided copy of the block scales
    # beside the original parameter (the weights' originals are deleted, the scales' are not), and the
    # expert biases become float32
    scales = n_exp * (2 * per_part * hidden // 32 + hidden * per_part // 32)
    biases = n_exp * (2 * per_part + hidden) * 2
    return layers * (scales + biases), "Triton path (SM 9.0+): block scales held twice, expert biases float32"


def vllm_weights_bytes(config: dict, geo: ModelGeometry, device: Device, *, tp: int = 1, release: str = DEFAULT_RELEASE, weights: WeightsEstimate | None = None, quantization: dict | None = None) -> tuple[int, str]:
    """Per GPU, what vLLM's "Model loading took" reports: the checkpoint's tensors (decoder and
    encoders) sharded over ``tp``, the RoPE cos/sin cache, fp32 channel scales where vLLM widens
    the checkpoint's 16-bit ones, and the mxfp4 backend's extra bytes."""
    _release(release)
    w = weights or estimate_weights(config, geo, "auto", quantization)
    size = w.checkpoint_bytes
    notes = [w.source]
    q = text_config(config).get("quantization_config") or config.get("quantization_config") or {}
    capability = _lookup(CAPABILITY, device, (9, 0))
    extra = 0
    if isinstance(q, dict) and str(q.get("quant_method", "")).lower() == "mxfp4":
        extra, why = _mxfp4_extra(config, geo, tp, capability)
        notes.append(f"vLLM {release} mxfp4 {why}" + (" (derived from 0.11's code; assumed the same in later releases)" if release not in ("0.10", "0.11") else ""))
    if isinstance(q, dict) and str(q.get("quant_method", "")).lower() == "compressed-tensors":
        groups = q.get("config_groups") if isinstance(q.get("config_groups"), dict) else {}
        if any(isinstance(g, dict) and isinstance(g.get("weights"), dict) and g["weights"].get("strategy") == "channel" and g["weights"].get("type") == "float" for g in groups.values()):
            rows = sum(lin.out_features * lin.count for lin in linear_shapes(config, geo) if lin.role != "lm_head")
            size += 2 * rows  # ChannelQuantScaleParameter is float32; the checkpoint stores bf16
            notes.append("fp8 channel scales widened to float32 (ChannelQuantScaleParameter)")
    per_gpu = -(-size // tp) + extra + _rotary_bytes(config, geo)
    notes.append("RoPE cos/sin cache (RotaryEmbedding buffer)")
    return per_gpu, "; ".join(notes) + (f"; / tp {tp}" if tp > 1 else "")


def _forward_peak(config: dict, geo: ModelGeometry, tokens: int, tp: int) -> int:
    """Largest live set of one decoder layer in the dummy forward pass at ``tokens`` tokens (16-bit):
    residual and normed input, then the attention projections or the MLP's gate_up output and its
    activation; MoE: fused_moe's intermediate caches (top-k copies of gate_up and down outputs).
    An estimate: in every visible log the sampler's peak is the larger one."""
    h = geo.hidden_size
    heads, kv, hd = geo.num_attention_heads, geo.num_kv_heads, geo.head_dim
    attn = 2 * h + ((heads + 2 * kv) * hd + heads * hd) // tp
    inter = geo.intermediate_size or 4 * h
    mlp = 2 * h + 3 * inter // tp
    experts = [lin for lin in linear_shapes(config, geo) if lin.role == "expert"]
    if experts:
        top_k = experts[0].active
        moe_inter = next(lin.out_features for lin in experts if lin.name.endswith(("gate_proj", "up_proj")))
        mlp = max(mlp, 2 * h + top_k * (max(2 * moe_inter // tp, h) + moe_inter // tp))
    return 2 * tokens * max(attn, mlp)


def _activation_terms(config: dict, geo: ModelGeometry, tokens: int, seqs: int, tp: int, sampler: str, device: Device) -> tuple[int, str]:
    """The profiling step's torch peak over its start: the larger of the forward pass and the dummy
    sampler run, which holds the forward's hidden states [tokens, hidden] and two [reqs, hidden]
    copies (last_hidden_states, torch.rand_like) beside its logits of reqs x vocab:

    * "torch" (0.10 / 0.11 without FlashInfer): bf16 logits (2 B) and their fp32 copy (4), and
      ``logits.sort`` in ``apply_top_k_top_p``: values (4) and int64 indices (8) out, an int64 iota
      in (8), and cub's radix-sort double buffers (4 + 8): 38 bytes a logit;
    * "flashinfer" (0.10 / 0.11.0 where ``flashinfer.sampling`` imports, ``TopKTopPSampler.__init__``):
      2 + 4, then ``forward_cuda`` -> ``flashinfer_sample``: the dummy metadata sets both top_k
      (vocab - 1) and top_p (0.9), so ``top_k_top_p_sampling_from_logits``: ``top_k_mask_logits``
      out (4) and its softmax (4), both live until the sample is drawn: 14;
    * "triton" (0.19+): 2 + 4, softmax (4), exponential noise (4): 14, plus the kernel's
      SMs x vocab fp32 buffer.
    """
    reqs = min(seqs, tokens)
    vocab = geo.vocab_size or 32000
    per_logit = {"torch": 38.0, "flashinfer": 14.0, "triton": 14.0}[sampler]
    logits = reqs * vocab * per_logit
    if sampler == "triton":
        logits += _lookup(SM_COUNT, device, 132) * vocab * 4
    hidden = 2 * geo.hidden_size * (tokens + 2 * reqs)
    sampler_peak = int(logits + hidden)
    forward = _forward_peak(config, geo, tokens, tp) + 2 * geo.hidden_size * tokens
    rest = int(FITS["activation_rest"].value * GIB)
    what = {"torch": "apply_top_k_top_p's sort", "flashinfer": "FlashInfer's top-k/top-p", "triton": "apply_top_k_top_p_triton"}[sampler]
    if sampler_peak >= forward:
        text = f"derived: the dummy sampler run ({reqs:,} requests x {vocab:,} vocabulary, {per_logit:g} bytes a logit in {what}) + hidden states at {tokens:,} tokens"
    else:
        text = f"estimate: one decoder layer's live tensors at {tokens:,} batched tokens (larger than the dummy sampler run's {sampler_peak / GIB:.2f} GiB)"
    src = FITS["activation_rest"]
    return max(sampler_peak, forward) + rest, f"{text}; + {src.value:g} GiB rest {src.source()}"


# --------------------------------------------------------------------------- multimodal and LoRA

MM_DEFAULT_LIMIT = 999  # config/multimodal.py get_limit_per_prompt: an unset modality (V1) allows 999 items a prompt
QWEN_VL_MAX_PIXELS = {"qwen2_vl": 12845056, "qwen2_5_vl": 12845056, "qwen3_vl": 16777216, "qwen3_vl_moe": 16777216}  # the image processors' default max_pixels


def mm_tokens_per_item(config: dict) -> tuple[int, str] | None:
    """(encoder tokens of the largest image, how it was found) of a multimodal config, as vLLM's
    processor reports ``get_max_tokens_per_item`` for its image modality; None for a text-only
    config or a vision tower this function does not know."""
    vc = config.get("vision_config")
    if not isinstance(vc, dict):
        return None
    mt = str(config.get("model_type", ""))

    def num(d: dict, key: str, default: int = 0) -> int:
        v = d.get(key, default)
        return int(v) if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1 << 24 else default

    if num(config, "mm_tokens_per_image"):  # Gemma 3: a fixed 256 soft tokens an image (pan-and-scan off)
        return num(config, "mm_tokens_per_image"), "mm_tokens_per_image (Gemma 3 processor)"
    patch, size = num(vc, "patch_size", 14), num(vc, "image_size")
    if mt in QWEN_VL_MAX_PIXELS:
        merge = num(vc, "spatial_merge_size", 2)
        return QWEN_VL_MAX_PIXELS[mt] // (patch * patch * merge * merge), f"max_pixels {QWEN_VL_MAX_PIXELS[mt]:,} / (patch {patch} x merge {merge})^2 (the image processor's default)"
    if not size:
        return None
    side = size // patch
    if mt in ("mistral3", "pixtral") or vc.get("model_type") == "pixtral":  # rows of merged patches
        merge = num(config, "spatial_merge_size", num(vc, "spatial_merge_size", 1))
        return (side // merge) ** 2, f"({size} / {patch} / merge {merge})^2 patches (Pixtral, largest image)"
    if mt == "llama4":  # 16 tiles and a global view of (336 / 14)^2 x pixel_shuffle_ratio^2 tokens each
        ratio = float(vc.get("pixel_shuffle_ratio", 0.5) or 0.5)
        return 17 * int(side * side * ratio * ratio), f"17 tiles x ({size} / {patch})^2 x {ratio:g}^2 (Llama 4, max 16 tiles + 1 global)"
    return side * side, f"({size} / {patch})^2 patches (CLIP-style tower, class token dropped)"


def _mm_encoder_cache(config: dict, geo: ModelGeometry, tokens: int, seqs: int, max_model_len: int | None, limit: int | None, release: str) -> tuple[int, str] | None:
    """Bytes the dummy multimodal encoder outputs hold through the profiling step (profile_run):
    ``MultiModalBudget`` sizes the encoder budget to max(max_num_batched_tokens, tokens of one item)
    and profiles min(budget // item tokens, max_num_seqs x items a prompt) items of the largest
    size; vLLM 0.11 widens each output to (budget, hidden) before caching it. None: text-only."""
    item = mm_tokens_per_item(config)
    if item is None:
        return None
    per_item, how = item
    limit = MM_DEFAULT_LIMIT if limit is None else limit
    if limit == 0:
        return 0, "--limit-mm-per-prompt 0: every modality off, no encoder profiling"
    budget = max(tokens, per_item)
    per_prompt = max(1, min(limit, (max_model_len or 1 << 30) // per_item))
    items = max(1, min(budget // per_item, seqs * per_prompt))
    rows = budget if release == "0.11" and per_item < budget else per_item
    size = items * rows * geo.hidden_size * 2
    widened = f", each widened to the {budget:,}-token budget (0.11 gpu_model_runner.profile_run)" if rows != per_item else ""
    return size, (
        f"derived from vLLM {release} profile_run / MultiModalBudget: {items:,} images x {per_item:,} tokens ({how}){widened} x hidden {geo.hidden_size:,} in 16 bits, "
        f"held through the dummy run (limit {limit:,} a prompt); the vision tower's own forward peak is not counted (below the sampler's in the logs)"
    )


_ROW_PARALLEL = ("o_proj", "down_proj", "out_proj", "dense_4h_to_h", "c_proj", "wo", "w2", "dense")


def _lora_bytes(config: dict, geo: ModelGeometry, tp: int, max_loras: int, rank: int, release: str) -> tuple[int, str]:
    """The LoRA slots vLLM allocates at load time (lora/layers ``create_lora_weights``): per linear
    layer and slice ``lora_a`` (max_loras, rank, input per GPU) and ``lora_b`` (max_loras, output
    per GPU, rank), in the model dtype; the embedding's (vocab + extra) x rank and the LM head's
    rank x hidden and padded vocab x rank; 0.10 / 0.11 also keep 256 extra vocabulary rows per
    adapter (lora_extra_vocab_size) in both; 0.19+ wrap the routed experts (lora/layers/fused_moe.py)."""
    b = 2
    extra = 256 if release in ("0.10", "0.11") else 0
    total = 0
    for lin in linear_shapes(config, geo):
        if lin.role in ("router", "lm_head") or (lin.role == "expert" and release in ("0.10", "0.11")):
            continue
        row = lin.name.rsplit(".", 1)[-1] in _ROW_PARALLEL
        inp, out = (-(-lin.in_features // tp), lin.out_features) if row else (lin.in_features, -(-lin.out_features // tp))
        total += lin.count * max_loras * rank * (inp + out) * b
    vocab, h = geo.vocab_size or 32000, geo.hidden_size
    total += max_loras * ((vocab + extra) * rank + h * rank + extra * h) * b  # embed_tokens
    total += max_loras * (rank * h + -(-vocab // 256) * 256 * rank + extra * h) * b  # lm_head (LogitsProcessorWithLoRA)
    scope = "attention and MLP linears, routed experts" if release not in ("0.10", "0.11") else "attention and MLP linears (not the routed experts)"
    return total, f"derived from vLLM {release} lora/layers create_lora_weights: {max_loras} adapter slot(s) of rank {rank} over the {scope}, embedding and LM head" + (", + 256 extra vocabulary rows each" if extra else "") + " (counted in 'Model loading took')"


def _graph_bytes(enforce_eager: bool) -> tuple[int, str]:
    if enforce_eager:
        return 0, "--enforce-eager: no CUDA graphs"
    return int(0.39 * GIB), "assumed: 0.39 GiB, the median of the positive graph-capture figures in the 0.11 logs (no log of a release that budgets graphs to fit)"


def _check_budget_args(gpu_memory_utilization: float, tp: int, sampler: str, limit_mm_per_prompt: int | None,
                       enable_lora: bool, max_loras: int, max_lora_rank: int) -> None:
    """:func:`predict_memory`'s argument checks, each a :class:`PlannerError` naming the setting."""
    if not 0 < gpu_memory_utilization <= 1:
        raise PlannerError("gpu_memory_utilization", gpu_memory_utilization, "must be above 0 and at most 1")
    if not isinstance(tp, int) or tp < 1:
        raise PlannerError("tp", tp, "must be a whole number of GPUs, at least 1")
    if sampler not in SAMPLERS:
        raise PlannerError("sampler", sampler, f"choose one of {', '.join(SAMPLERS)}")
    if limit_mm_per_prompt is not None and limit_mm_per_prompt < 0:
        raise PlannerError("limit_mm_per_prompt", limit_mm_per_prompt, "must be 0 (text only) or more images a prompt")
    if enable_lora and (max_loras < 1 or max_lora_rank < 1):
        raise PlannerError("max_loras" if max_loras < 1 else "max_lora_rank", max_loras if max_loras < 1 else max_lora_rank, "must be at least 1 with --enable-lora")


def _profiling_terms(config: dict, geometry: ModelGeometry, device: Device, rules: ReleaseMemory, tokens: int, seqs: int, tp: int,
                     path: str, sampler_source: str, max_model_len: int | None, limit_mm_per_prompt: int | None,
                     enforce_eager: bool) -> list[MemoryTerm]:
    """The predicted terms a given workspace replaces: the profiling run's peak activations (and
    the multimodal encoder cache), non-torch memory and the CUDA graphs."""
    release = rules.release
    activations, act_source = _activation_terms(config, geometry, tokens, seqs, tp, path, device)
    terms = [MemoryTerm("profiling peak activations", activations, f"vLLM {release} profile_run / _dummy_sampler_run ({sampler_source}): {act_source}")]
    mm = _mm_encoder_cache(config, geometry, tokens, seqs, max_model_len, limit_mm_per_prompt, release)
    if mm is not None:
        terms.append(MemoryTerm("multimodal encoder cache (profiling)", *mm))
    nt = FITS["non_torch_tp1" if tp == 1 else "non_torch_tp2"]
    terms.append(MemoryTerm("non-torch memory", int(nt.value * GIB), f"TP {tp}: {nt.source()}" + (f"; {nt.note}" if nt.note else "")))
    graphs, graph_source = _graph_bytes(enforce_eager)
    terms.append(MemoryTerm("CUDA graphs", graphs, f"vLLM {release}: {rules.graphs_source}; {graph_source}", in_budget=rules.graphs_in_budget))
    return terms


def _start_refusal(total: int, requested: int, available: int, tp: int, gpu_memory_utilization: float, release: str) -> str | None:
    """vLLM's start-up refusal in its own words: less free memory than requested, or nothing left
    for the cache blocks; None when it starts."""
    used = FITS["startup_used_tp1" if tp == 1 else "startup_used_tp2"].value * GIB
    if total - used < requested:
        return (
            f"Free memory on device ({(total - used) / GIB:.2f}/{total / GIB:.2f} GiB) on startup is less than desired GPU memory utilization "
            f"({float(gpu_memory_utilization)}, {requested / GIB:.2f} GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes."
        )
    if available <= 0:
        return NO_MEMORY["0.10" if release in ("0.10", "0.11") else "0.19" if release == "0.19" else "0.24"]
    return None


def predict_memory(
    config: dict,
    geometry: ModelGeometry,
    device: Device,
    *,
    gpu_memory_utilization: float = 0.9,
    tp: int = 1,
    max_model_len: int | None = None,
    max_num_batched_tokens: int | None = None,
    max_num_seqs: int | None = None,
    release: str = DEFAULT_RELEASE,
    entry_point: str = "vllm serve",
    enforce_eager: bool = False,
    sampler: str = "auto",
    weights_bytes: int | None = None,
    weights_source: str = "",
    quantization: dict | None = None,
    limit_mm_per_prompt: int | None = None,
    enable_lora: bool = False,
    max_loras: int = 1,
    max_lora_rank: int = 16,
    workspace_bytes: int | None = None,
    measured: dict[str, int] | None = None,
) -> MemoryBudget:
    """Every term of vLLM's start-up budget on one GPU of ``device`` and "Available KV cache memory".

    ``max_num_batched_tokens`` / ``max_num_seqs`` left None take vLLM's defaults for this GPU,
    release and entry point; ``weights_bytes`` (per GPU, e.g. measured) replaces the weights
    prediction; ``sampler`` "auto" takes the release's default dummy-sampler path ("torch" or
    "flashinfer" choose one for 0.10 / 0.11, whose path depends on whether FlashInfer is installed).
    ``max_model_len`` changes the budget only through the images a prompt may hold (multimodal
    models); it is checked by the KV sizing that follows (:func:`planner.engines.vllm.vllm_capacity`).
    ``limit_mm_per_prompt`` (images a prompt, vLLM's ``--limit-mm-per-prompt``; None: 999, 0:
    text-only) sizes the multimodal encoder's profiling; ``enable_lora`` / ``max_loras`` /
    ``max_lora_rank`` the LoRA slots. ``workspace_bytes`` (given) replaces the predicted profiling,
    non-torch and graph terms with one figure; ``measured`` (term name -> bytes, a probe on this
    GPU) replaces the terms it names.

    Raises:
        PlannerError: utilization outside (0, 1], tp < 1, unknown release / entry point / sampler.
    """
    rules = _release(release)
    _check_budget_args(gpu_memory_utilization, tp, sampler, limit_mm_per_prompt, enable_lora, max_loras, max_lora_rank)
    defaults = batch_defaults(device, release, entry_point)
    tokens = max_num_batched_tokens or defaults.max_num_batched_tokens
    seqs = max_num_seqs or defaults.max_num_seqs
    batch_source = defaults.source if max_num_batched_tokens is None and max_num_seqs is None else "given" if max_num_batched_tokens and max_num_seqs else f"given, the other from {defaults.source}"
    path = rules.sampler if sampler == "auto" else sampler
    if path == "flashinfer" and release not in ("0.10", "0.11"):
        path = "triton"  # later releases warm an in-place path of the same size
    total, total_source = cuda_total_bytes(device)
    requested = int(total * gpu_memory_utilization)
    if weights_bytes is None:
        weights_bytes, weights_source = vllm_weights_bytes(config, geometry, device, tp=tp, release=release, quantization=quantization)
    terms = [
        MemoryTerm("device memory", total, total_source),
        MemoryTerm(f"x gpu_memory_utilization {gpu_memory_utilization:g}", requested - total, "vLLM --gpu-memory-utilization: requested_memory = total x utilization (gpu_worker.py)"),
        MemoryTerm("weights per GPU", weights_bytes, weights_source or "given"),
    ]
    if enable_lora:
        terms.append(MemoryTerm("LoRA adapter slots", *_lora_bytes(config, geometry, tp, max_loras, max_lora_rank, release)))
    if workspace_bytes is not None:
        terms.append(MemoryTerm("workspace (given)", workspace_bytes, "given: replaces the predicted profiling peak, non-torch memory and CUDA graphs"))
    else:
        sampler_source = rules.sampler_source if sampler == "auto" else path + " sampler, as chosen"
        terms += _profiling_terms(config, geometry, device, rules, tokens, seqs, tp, path, sampler_source, max_model_len, limit_mm_per_prompt, enforce_eager)
    for name, value in (measured or {}).items():
        terms = [MemoryTerm(t.name, int(value), "measured by the probe on this GPU", t.in_budget) if t.name == name else t for t in terms]
    terms = tuple(terms)
    taken = sum(t.bytes for t in terms[2:] if t.in_budget)
    available = requested - taken
    refusal = _start_refusal(total, requested, available, tp, gpu_memory_utilization, release)
    return MemoryBudget(release, entry_point, tokens, seqs, batch_source, total, requested, terms, available, refusal)
