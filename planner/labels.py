"""What each plan input is called where people read it: the app's controls, the PDF's inputs
table, error messages and the CLI's ``--help`` all use these words, never the field names.

``INPUTS[field] = (label, unit, description)``; the label carries the unit when it has one.
"""

from __future__ import annotations

import re

INPUTS: dict[str, tuple[str, str, str]] = {
    "system_tokens": ("System prompt", "tokens", "tokens of the system prompt in every request"),
    "tool_tokens": ("Tool definitions", "tokens", "tokens of tool / function definitions in every request"),
    "retrieval_tokens": ("Retrieved context", "tokens", "tokens of retrieved documents (RAG) per request"),
    "history_tokens": ("Conversation history", "tokens", "tokens of earlier turns per request"),
    "user_tokens": ("User message", "tokens", "tokens of the user's message"),
    "input_tokens": ("Input total", "tokens", "the whole prompt; overrides the five parts above when given"),
    "output_tokens": ("Output reserve", "tokens", "tokens reserved for the answer"),
    "encoder_tokens": ("Image tokens per request", "tokens", "vision-encoder tokens each request's cross-attention layers cache"),
    "max_context": ("Maximum context", "tokens", "the model's context limit; empty: the config's max_position_embeddings"),
    "kv_dtype": ("KV cache dtype", "", "element type of cached keys and values; auto: what the checkpoint declares (vLLM's --kv-cache-dtype auto), else the model dtype"),
    "mtp": ("MTP speculative decoding", "", "also cache the model's next-token-prediction layers (num_nextn_predict_layers), as an engine does with MTP speculative decoding"),
    "weight_dtype": ("Weight dtype", "", "element type of the weights; auto: the config's torch_dtype and quantization"),
    "runtime": ("Runtime semantics", "", "whose cache layout to count: vllm (paged), sglang (SGLang's token pool and start-up sizing), transformers or transformers-latent"),
    "vllm_version": ("vLLM version", "", "vLLM release whose start-up sizing and admission runtime vllm follows"),
    "mem_fraction_static": ("SGLang memory fraction", "0-1", "SGLang --mem-fraction-static (runtime sglang): share of the free memory before the weights that weights and the KV pool take; empty: SGLang's default for the GPU and TP"),
    "chunked_prefill_size": ("SGLang chunked prefill", "tokens", "SGLang --chunked-prefill-size (runtime sglang); empty: SGLang's default for the GPU (2,048 to 16,384)"),
    "page_size": ("SGLang page size", "tokens", "SGLang --page-size (runtime sglang): tokens per KV page; empty: SGLang's default for the model (1; 64 for DSA, 256 for DeepSeek-V4)"),
    "recv_interval": ("SGLang receive interval", "decode steps", "SGLang --scheduler-recv-interval (SGLang's serving costs): the scheduler polls for new requests once every this many decode steps, so a new request waits (interval - 1) / 2 decode steps more on average before its prefill, in a closed loop and under Poisson arrivals; 1: every step (SGLang's default)"),
    "batch_wait_iters": ("TensorRT-LLM batch wait", "iterations", "TensorRT-LLM batch_wait_timeout_iters (TensorRT-LLM's serving costs): while others decode, new prompts are held up to this many iterations and then scheduled together, so a prompt waits the rest of that window; 0: off (TensorRT-LLM's default)"),
    "batch_wait_tokens_ratio": ("TensorRT-LLM batch wait tokens", "0-1", "TensorRT-LLM batch_wait_max_tokens_ratio (with a batch wait): the held prompts go early once they and the decodes fill this share of the token budget; 0: only the iterations count"),
    "entry_point": ("vLLM entry point", "", "serve: `vllm serve` (the API server); llm: the Python LLM class; their batching defaults differ"),
    "enforce_eager": ("Enforce eager", "", "vLLM --enforce-eager: no CUDA graphs (their memory leaves the budget from vLLM 0.21)"),
    "limit_mm_per_prompt": ("Images per prompt", "", "vLLM --limit-mm-per-prompt for a multimodal model: images one prompt may carry; sizes the encoder's profiling run; empty: vLLM's 999, 0: text only"),
    "enable_lora": ("Enable LoRA", "", "vLLM --enable-lora: LoRA adapter slots are allocated at start-up"),
    "max_loras": ("Max LoRAs", "", "vLLM --max-loras: adapters resident at once (with LoRA enabled)"),
    "max_lora_rank": ("Max LoRA rank", "", "vLLM --max-lora-rank: the rank every adapter slot is sized for (with LoRA enabled)"),
    "reservation": ("Reservation mode", "", "dynamic (input + output), static (maximum context) or paged (whole blocks)"),
    "block_tokens": ("Block size", "tokens", "tokens per paged block"),
    "gpu": ("GPU", "", "catalog accelerator"),
    "device_gib": ("Custom device memory", "GiB", "memory of a device not in the catalog"),
    "device_bandwidth_gb_s": ("Custom bandwidth", "GB/s", "HBM bandwidth of the custom device; empty: 1,000 GB/s"),
    "device_bf16_tflops": ("Custom bf16 peak", "TFLOP/s", "dense bf16 peak of the custom device; empty: 100 TFLOP/s"),
    "gpu_count": ("GPUs", "", "GPUs in the deployment, a multiple of TP x DP x PP"),
    "ep": ("Expert parallel (EP)", "", "GPUs a MoE model's experts spread over within a replica; divides TP, or equals DP x TP with attention data parallelism (1: experts split by tensor parallelism)"),
    "dp": ("Attention data parallel (DP)", "ranks", "attention data-parallel ranks of TP GPUs each in a replica of a MoE model, each holding its own sequences' K/V (SGLang --enable-dp-attention, vLLM --data-parallel-size with --enable-expert-parallel, TensorRT-LLM DEP); experts over EP = DP x TP GPUs"),
    "pp": ("Pipeline parallel (PP)", "stages", "pipeline stages of a replica, each holding consecutive layers (usually one per node)"),
    "serving_engine": ("Serving engine (latency)", "", "whose fitted serving costs the latency uses: vllm, sglang or trtllm; auto: the runtime's (vLLM's for transformers)"),
    "request_rate": ("Request rate", "requests/s", "Poisson arrivals to the whole deployment (open loop); empty: the requested sequences are clients in a closed loop"),
    "spec_method": ("Speculative decoding", "", "none, mtp (the model's next-token-prediction layer), eagle3 (a one-layer draft head) or draft (a separate draft model)"),
    "spec_tokens": ("Draft tokens per step", "tokens", "tokens drafted per sequence per step; empty: the method's default (MTP 1, EAGLE-3 3, draft model 4)"),
    "spec_acceptance": ("Acceptance length", "tokens", "measured tokens a verify step keeps per sequence (1 to drafts + 1); empty: the method's published figure"),
    "spec_draft": ("Draft model", "", "bundled preset of the draft model (speculative decoding with a draft model)"),
    "max_batched_tokens": ("Batched tokens per step", "tokens", "scheduler token budget per engine step (vLLM max_num_batched_tokens); sets the served TTFT wait, ITL prefill chunks and vLLM's profiling run; empty: the engine's default for this GPU"),
    "tp": ("Tensor parallel (TP)", "", "GPUs per replica (per attention data-parallel rank and pipeline stage); must divide the attention heads"),
    "headroom_bp": ("Headroom", "basis points", "share of device memory kept free (1,000 = 10 %); under runtime vllm vLLM's gpu_memory_utilization is 1 - headroom, of the total CUDA reports"),
    "model_resident_gib": ("Model resident per GPU", "GiB", "weight bytes per GPU; empty: the weights estimate / TP"),
    "workspace_gib": ("Workspace", "GiB", "activations, CUDA graphs and runtime buffers outside the KV pool, per GPU; empty: vLLM's predicted profiling, non-torch and graph terms (runtime vllm), else 1 GiB"),
    "sequences": ("Requested sequences", "", "concurrent sequences across all replicas: clients in a closed loop, each sending its next request when the last finishes"),
    "bench_prompts": ("Benchmark prompts", "prompts", "prompts a closed-loop benchmark sends in all (vllm bench serve / sglang.bench_serving --num-prompts, 1000 by default): it starts its clients at once, so its mean TTFT averages the first wave's queue into the steady state's"),
    "max_num_seqs": ("Runtime max sequences", "per replica", "the runtime's hard limit (vLLM max_num_seqs); empty: vLLM's default for this GPU (runtime vllm), else none"),
    "tenant_quota": ("Tenant quota", "sequences", "most sequences one tenant may hold; empty: none"),
    "itl_slo_ms": ("ITL SLO", "ms", "largest acceptable p95 inter-token latency (the 95th percentile of the gaps between tokens); empty: none"),
    "ttft_slo_ms": ("TTFT SLO", "ms", "largest acceptable p95 time to first token; empty: none"),
    "shared_prefix_tokens": ("Shared prefix", "tokens", "prompt tokens identical across one tenant's sequences"),
    "prefix_hit_rate": ("Prefix hit rate", "0-1", "share of requests that find the shared prefix cached"),
    "tenants": ("Tenants", "", "prefixes are shared within a tenant only"),
    "gpu_hour_price": ("GPU-hour price", "$", "price of one GPU for one hour, for cost figures; empty: no cost"),
    "mfu": ("MFU", "0-1", "model FLOPs utilisation: share of peak compute reached (prefill)"),
    "mbu": ("MBU", "0-1", "memory bandwidth utilisation: share of HBM bandwidth reached (decode)"),
    "queue_ms": ("Queue", "ms", "time a request waits before it runs; empty: 0"),
    "preprocessing_ms": ("Preprocessing", "ms", "tokenisation and other work before the prefill; empty: the serving engine's fitted API-server time"),
    "prefill_ms": ("Observed prefill", "ms", "measured prefill time; replaces the roofline estimate"),
    "first_decode_ms": ("Observed first decode", "ms", "measured first decode step"),
    "remaining_decode_ms": ("Observed remaining decode", "ms", "measured time of the decode steps after the first (0 only for one generated token)"),
    "generated_tokens": ("Generated tokens", "tokens", "tokens the observed request generated; empty: the output reserve"),
    "disagg": (
        "Disaggregated pools", "", "also serve this workload on separate prefill and decode pools, xP:TP[@GPU],yD:TP[@GPU] (e.g. 2P:4@H100-SXM-80GB,1D:8@H200-141GB; "
        "a pool without @GPU runs on the plan's GPU): both pools' memory and latency, the KV transfer and whether the split pays; empty: none"
    ),
    "bench_calibration": (
        "Benchmark calibration", "", "a benchmark run of this deployment, measured/predicted: src=TOOL;ttft_ms=M/P;tpot_ms=M/P;output_tokens_per_s=M/P (bench-import writes it); empty: none"
    ),
    "sessions_per_min": ("Sessions per minute", "", "new chat / agent sessions a minute across the deployment; gives the cache section (hit rate per tier); empty: no session workload"),
    "turns": ("Turns per session", "", "requests of one session, each resending the history (message and answer of every earlier turn); empty: 1"),
    "think_time_s": ("Think time", "s", "mean pause between an answer and the next turn (exponential); empty: 30 s"),
    "doc_catalog": ("Document catalog", "documents", "documents the retrieved context is drawn from, shared by one tenant's sessions (Zipf popularity); empty: each session's own"),
    "doc_zipf": ("Document popularity skew", "", "Zipf exponent of the catalog (0: uniform, 1: the usual skew); empty: 1"),
    "cpu_tier_gib": ("CPU tier", "GiB", "host DRAM per replica for offloaded K/V (vLLM --kv-offloading-size, LMCache, SGLang HiCache); empty: none"),
    "disk_tier_gib": ("Disk tier", "GiB", "local NVMe per replica for offloaded K/V (LMCache local disk); empty: none"),
    "cpu_link_gb_s": ("CPU-GPU link", "GB/s", "host-to-GPU bandwidth per direction per GPU; empty: the GPU's PCIe generation or NVLink-C2C"),
    "disk_gb_s": ("Disk read bandwidth", "GB/s", "NVMe read bandwidth per replica; empty: one data-centre SSD, 6.8 GB/s"),
}

# The app's help of a control, where it says more than the description above (shown on hover by
# the Plan page; a field without one shows no help there). The runtime and reservation helps are
# the library's own tables (planner.kv.RUNTIMES, the page's reservation sentences).
DETAILS: dict[str, str] = {
    "disagg": "Prefill on xP replicas of TP GPUs, decode on yD replicas (vLLM NixlConnector, SGLang PD, llm-d, Dynamo): 2P:4@H100-SXM-80GB,1D:8@H200-141GB. A pool without @GPU runs on the plan's GPU. The plan's own figures stay its aggregated replicas'; the pools' figures are shown beside them, with whether the split pays.",
    "bench_calibration": "Kept from a benchmark result uploaded under 'Measured beside predicted': the run's TTFT, TPOT and output tokens/s beside the plan's prediction for that run. It changes no figure of the plan; the plan file and the share link carry it.",
    "output_tokens": "Tokens reserved for the answer.",
    "input_tokens": "Leave empty to add up the parts above.",
    "max_context": "Leave empty to use the config's max_position_embeddings.",
    "encoder_tokens": "Vision-encoder tokens each request's cross-attention layers cache (e.g. 4 tiles x 1,601 for Llama 3.2 Vision).",
    "kv_dtype": (
        "Element type of cached keys and values. auto: what the checkpoint declares (quantization_config or hf_quant_config.json), as vLLM's "
        "--kv-cache-dtype auto, else the model dtype. int8/int4 add a scale and zero-point per 64 elements."
    ),
    "mtp": "Count the model's next-token-prediction layers (num_nextn_predict_layers): an engine caches them too when MTP speculative decoding is on.",
    "vllm_version": "Runtime vllm admits as this vLLM release does: each request reserves blocks for all its tokens in every KV-cache group.",
    "block_tokens": "Tokens per paged block (paged reservation and prefix sharing).",
    "device_gib": "Used when GPU is 'Custom'; give its bandwidth and peak below for the latency estimate.",
    "device_bandwidth_gb_s": "HBM bandwidth of the custom device (decode, ITL); empty: 1,000 GB/s.",
    "device_bf16_tflops": "Dense bf16 peak of the custom device (prefill, TTFT); empty: 100 TFLOP/s.",
    "gpu_count": "A multiple of TP x DP x PP; each replica uses TP x DP x PP GPUs.",
    "tp": "Must divide the attention heads (and divide or be a multiple of the KV heads).",
    "ep": "MoE models only: GPUs of a replica the experts spread over (inside a TP group their outputs are all-reduced as TP's; between attention data-parallel ranks, dispatch and combine by all-to-all); divides TP, or equals DP x TP with attention data parallelism. 1: experts split by TP.",
    "dp": "MoE models only: attention data-parallel ranks of TP GPUs each; every rank holds its own sequences' K/V (or MLA latents) and the experts spread over EP = DP x TP GPUs (SGLang --enable-dp-attention, vLLM --data-parallel-size with --enable-expert-parallel, TensorRT-LLM DEP).",
    "pp": "Pipeline stages of a replica, each holding consecutive layers and their K/V; a step's sequences pass through them as micro-batches, with a hand-off between stages (over the NICs when a replica spans nodes).",
    "serving_engine": "Whose fitted serving costs (host work per step and sequence, per-request overhead) the latency uses. auto: the runtime's (vLLM's for transformers).",
    "request_rate": "Requests a second to the whole deployment, arriving as a Poisson stream (open loop). Empty: the requested sequences are clients of a closed loop.",
    "spec_method": "mtp: the model's own next-token-prediction layer (DeepSeek, GLM, Qwen3-Next); eagle3: a one-layer draft head; draft: a separate draft model. Their weights and K/V join the memory budget.",
    "spec_tokens": "Tokens drafted per sequence per step; the verify step runs drafts + 1 tokens per sequence. Empty: MTP 1, EAGLE-3 3, draft model 4.",
    "spec_acceptance": "Tokens a verify step keeps per sequence on average, if you measured it (1 to drafts + 1). Empty: the method's published figure.",
    "spec_draft": "The draft model's bundled preset, e.g. llama-3.2-1b drafting for llama-3.1-8b.",
    "headroom_bp": "Share of device memory kept free (driver, CUDA context, fragmentation); stored in basis points.",
    "weight_dtype": "auto: the config's torch_dtype and quantization_config.",
    "workspace_gib": "Activations, CUDA graphs and runtime buffers outside the KV pool.",
    "model_resident_gib": "Override the per-GPU weight bytes (e.g. from nvidia-smi).",
    "sequences": "Concurrent sequences across all replicas.",
    "bench_prompts": "What a benchmark of this many prompts (its --num-prompts) from the requested clients, all started at once, will print as its mean TTFT: the first wave's prompts queue on an idle engine.",
    "itl_slo_ms": "Largest acceptable p95 inter-token latency (95 % of the gaps between tokens are shorter).",
    "max_num_seqs": "The runtime's hard limit per replica (vLLM max_num_seqs).",
    "ttft_slo_ms": "Largest acceptable p95 time to first token.",
    "max_batched_tokens": (
        "Tokens the scheduler runs per engine step (vLLM max_num_batched_tokens): a prompt waits behind the others' chunks (TTFT) and new "
        "prompts' chunks ride in decode steps (ITL)."
    ),
    "shared_prefix_tokens": "Prompt tokens identical across the sequences of one tenant (system prompt, tools).",
    "tenants": "Prefixes are shared within a tenant only.",
    "gpu_hour_price": "Price of one GPU-hour, for cost per million tokens.",
    "mfu": "Share of peak FLOP/s reached (prefill, compute-bound steps).",
    "mbu": "Share of HBM bandwidth reached (decode, memory-bound steps).",
}


def label(field: str) -> str:
    """"Observed prefill (ms)"; the field name itself when unknown."""
    hit = INPUTS.get(field)
    if hit is None:
        return field
    name, unit, _ = hit
    shown = unit and unit not in ("0-1", "per replica") and unit.lower() not in name.lower()
    return f"{name} ({unit})" if shown else name


_FIELD_RE = re.compile(r"\b(" + "|".join(sorted((f for f in INPUTS if "_" in f), key=len, reverse=True)) + r")\b")


def humanize(text: str) -> str:
    """A library message with field names replaced by what the user sees: ``prefill_ms`` -> "Observed prefill (ms)"."""
    text = _FIELD_RE.sub(lambda m: f"“{label(m.group(1))}”", text)
    return re.sub(r"\btp\b", "TP", text)
