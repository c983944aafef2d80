"""Sentences that say how every difference between measured and predicted bytes arises."""

from __future__ import annotations

from planner.kv import QUANT_GROUP
from planner.probe.layouts import transformers_layers
from planner.probe.options import CUDA_ROUND, INSTALLED_TRANSFORMERS_RUNTIME
from planner.probe.prepare import Prepared
from planner.probe.protocol import AllocateMeasurement, RuntimeMeasurement
from planner.probe.results import ProbeResult
from planner.units import fmt_byte_count, fmt_ms_measured


def prediction_sentences(prep: Prepared) -> list[str]:
    """Why the probe's prediction differs from planner.kv's, per layer group."""
    o = prep.options
    out = []
    geo = prep.geo
    if o.effective_runtime == "vllm":
        out.append(f"vLLM layout: each sequence takes whole blocks of {o.block_tokens} positions per layer (sliding and chunked layers at most their window's blocks plus one), exactly as planner.kv's paged_bytes counts them, so the prediction equals the planner's ({fmt_byte_count(prep.planner)}).")
        if o.kv_dtype in ("int8", "int4"):
            out.append(f"{o.kv_dtype}: packed data plus one fp16 scale and one fp16 zero-point per {QUANT_GROUP} elements of each head vector, planner.kv's accounting (vLLM itself has no per-group int cache; real int formats may differ).")
        if o.kv_dtype == "fp8":
            out.append("fp8: float8_e4m3fn tensors, one byte per element; per-tensor scales are a few bytes per layer and not allocated.")
        if any(layer.kind == "cross" for layer in geo.layers):
            out.append("cross-attention layers hold the encoder's states, not text tokens: nothing is allocated for them.")
        return out
    sliding = [layer for layer in transformers_layers(geo) if layer.window]
    if sliding and not o.static:
        w = sliding[0].window
        if prep.cached >= w:
            out.append(
                f"transformers' DynamicSlidingWindowLayer keeps the last W-1 = {w - 1:,} positions in its view, but the view is a slice of cat(previous, new) and keeps that storage alive: "
                f"min(previous, W-1) + new positions, i.e. W = {w:,} after a decode step (what planner.kv's min(tokens, W) counts) and the whole prompt right after a prefill longer than W."
            )
    if any(layer.kind == "chunked" for layer in geo.layers):
        out.append("transformers caches chunked-attention layers as a sliding window of the chunk size (min(T, C) positions), which planner.kv's transformers runtimes count; a paged engine holds the current chunk.")
    if geo.mla is not None:
        m = geo.mla
        per = geo.num_attention_heads * (geo.head_dim + geo.v_head_dim)
        out.append(
            f"transformers {INSTALLED_TRANSFORMERS_RUNTIME!r} semantics: MLA is cached compressed, one head with K = kv_lora_rank {m.kv_lora_rank} and V = qk_rope_head_dim {m.qk_rope_head_dim} elements ({m.latent_dim} per token and layer); "
            f"transformers before #47761 (planner runtime 'transformers') cached decompressed per-head K/V ({per} per token and layer), {per / m.latent_dim:.1f}x more."
        )
    if prep.predicted != prep.planner:
        if o.static:
            out.append(f"StaticCache allocates max_cache_len = {prep.cached:,} positions per full layer and min(max_cache_len, W) per sliding layer at the first forward.")
    if any(layer.kind == "cross" for layer in geo.layers):
        out.append("cross-attention layers are not modelled by the probe (they cache encoder states).")
    return out


def explain_probe(prep: Prepared, r: ProbeResult, m: AllocateMeasurement | RuntimeMeasurement) -> list[str]:
    """How a successful probe's measured bytes (and times) compare with the predictions."""
    out = _bytes_sentences(prep, r, m)
    if prep.planner != r.predicted_kv_bytes:
        pr = "n/a" if r.planner_ratio is None else f"{r.planner_ratio:.4f}"
        out.append(f"planner.kv predicts {fmt_byte_count(prep.planner)} for these layers (measured/planner {pr}):")
    out += prediction_sentences(prep)
    for row in r.layers:
        sliding_cls = "Sliding" in row.cache_class
        if row.planner_kind in ("sliding", "chunked") and not sliding_cls or row.planner_kind == "full" and sliding_cls:
            out.append(f"layer {row.index}: transformers uses {row.cache_class} where the planner's geometry says {row.planner_kind}.")
    if r.layers_measured < r.layers_total:
        out.append(
            f"Measured the first {r.layers_measured} of {r.layers_total} layers (same layer-kind pattern); the full model is predicted at {fmt_byte_count(prep.predicted_full)} "
            f"(planner {fmt_byte_count(prep.planner_full)}), and the measurement scaled by predicted full / predicted measured gives {fmt_byte_count(r.scaled_measured_kv_bytes)}."
        )
        if isinstance(m, RuntimeMeasurement):
            out.append(f"Timings cover {r.layers_measured} layers plus the embedding and LM head: the layer part of a full-model step is roughly {r.layer_scale:.1f}x longer.")
    if isinstance(m, RuntimeMeasurement):
        out += _runtime_sentences(prep, r, m)
    if r.device == "cuda" and r.cuda_released is False:
        out.append("CUDA memory was not fully back at the baseline after release (the caching allocator may hold blocks).")
    out += list(prep.notes)
    return out


def _bytes_sentences(prep: Prepared, r: ProbeResult, m: AllocateMeasurement | RuntimeMeasurement) -> list[str]:
    """What "measured" is in this mode, and where it differs from the prediction."""
    out = []
    measured, predicted = m.kv_bytes, r.predicted_kv_bytes
    allocate = isinstance(m, AllocateMeasurement)
    if r.device == "cuda" and allocate:
        out.append(f"Measured = torch.cuda.memory_allocated after minus before allocating {m.tensors} tensors; tensor storage alone is {fmt_byte_count(m.storage_bytes)}.")
    elif allocate:
        out.append(f"Measured = the storage bytes (untyped_storage().nbytes()) of the {m.tensors} allocated tensors.")
    else:
        out.append("Measured = the storage bytes of every cache layer's keys and values tensors after the last forward (bookkeeping scalars excluded).")
    if predicted == 0:
        out.append("The measured layers hold no K/V (recurrent, MLP-only or cross-attention layers): raise --layers-limit to include attention layers.")
    if measured == predicted:
        out.append(f"Measured K/V bytes equal the prediction exactly ({fmt_byte_count(measured)}).")
        return out
    diff = measured - predicted
    if r.device == "cuda" and allocate and m.rounded_bytes == measured and m.storage_bytes == predicted:
        out.append(f"Measured exceeds the prediction by {diff:,} B: the CUDA caching allocator rounds every tensor up to a multiple of {CUDA_ROUND} bytes; the storage itself matches exactly.")
        return out
    ratio = "n/a" if r.ratio is None else f"{r.ratio:.6f}"
    out.append(f"Measured differs from the prediction by {diff:+,} B (ratio {ratio}); see the per-layer rows for where.")
    for row in r.layers:
        if row.predicted_bytes is not None and row.predicted_bytes != row.measured_bytes:
            out.append(f"layer {row.index} ({row.cache_class}, planner kind {row.planner_kind}): predicted {fmt_byte_count(row.predicted_bytes)}, measured {fmt_byte_count(row.measured_bytes)} (keys {list(row.keys_shape)}, values {list(row.values_shape)}).")
            break
    return out


def _runtime_sentences(prep: Prepared, r: ProbeResult, m: RuntimeMeasurement) -> list[str]:
    """The cache after the prefill, the timings against the roofline, and what peak memory holds."""
    o = prep.options
    out = []
    after_p, after_m = r.predicted_kv_bytes_after_prefill, r.measured_kv_bytes_after_prefill
    if after_m is not None:
        eq = "equal to" if after_p == after_m else "against"
        out.append(f"Right after the prefill the cache held {fmt_byte_count(after_m)} ({eq} the predicted {fmt_byte_count(after_p)}); the cache grows by one position per full layer per decode step.")
    out.append(f"The cache holds {prep.cached:,} positions: the {o.tokens:,}-token prefill plus {o.decode_steps} decode steps, each writing one position (generate() would write one fewer: the last token's K/V is never stored).")
    if r.prefill_ms is not None:
        out.append(timing_sentence(r))
    if r.device == "cpu":
        out.append(f"Ran on CPU: the roofline describes {r.roofline_device}, so latency ratios and the calibrated MFU/MBU describe this CPU against that GPU's datasheet and should not be used for a GPU plan.")
        if r.peak_rss_delta_bytes is not None:
            out.append(f"Peak memory on CPU is the child process's peak RSS growth ({fmt_byte_count(r.peak_rss_delta_bytes)}): weights, activations, allocator caches and Python objects, not the cache alone.")
    elif r.cuda_peak_delta_bytes is not None:
        out.append(f"Peak CUDA memory above the baseline was {fmt_byte_count(r.cuda_peak_delta_bytes)} (weights {fmt_byte_count(r.measured_weights_bytes)}, cache and activations).")
    if r.measured_state_bytes:
        out.append(f"Recurrent (Mamba/linear-attention) layers hold {fmt_byte_count(r.measured_state_bytes)} of state, outside the K/V comparison.")
    if m.warmup:
        out.append("A short warm-up forward ran first so one-time start-up costs are not in the timings.")
    return out


def probe_summary(r: ProbeResult) -> str:
    lines = [
        f"probe        {r.mode} / {r.runtime} on {r.device} {r.device_name}".rstrip(),
        f"model        {r.model} ({r.model_type}), {r.layers_measured} of {r.layers_total} layers, {r.kv_dtype}, batch {r.batch}, {r.tokens:,} tokens" + (f" + {r.decode_steps} decode steps" if r.mode == "runtime" else ""),
        f"K/V bytes    predicted {fmt_byte_count(r.predicted_kv_bytes)}, measured {fmt_byte_count(r.measured_kv_bytes)}, ratio {r.ratio:.6f}" if r.ratio is not None else f"K/V bytes    predicted {fmt_byte_count(r.predicted_kv_bytes)}, measured n/a",
        f"planner.kv   {fmt_byte_count(r.planner_kv_bytes)}" + (f" (measured/planner {r.planner_ratio:.4f})" if r.planner_ratio is not None else ""),
    ]
    if r.layers_measured < r.layers_total:
        lines.append(f"full model   predicted {fmt_byte_count(r.predicted_full_model_kv_bytes)}, measured scaled {fmt_byte_count(r.scaled_measured_kv_bytes)}")
    if r.allocate_ms is not None:
        lines.append(f"allocate     {fmt_ms_measured(r.allocate_ms)}")
    if r.prefill_ms is not None:
        lines.append(f"prefill      {fmt_ms_measured(r.prefill_ms)} (roofline {fmt_ms_measured(r.predicted_prefill_ms)} on {r.roofline_device}); TTFT {fmt_ms_measured(r.ttft_ms)}")
        lines.append(f"decode step  p50 {fmt_ms_measured(r.decode_ms_p50)}, p95 {fmt_ms_measured(r.decode_ms_p95)} (roofline {fmt_ms_measured(r.predicted_decode_step_ms)})")
    if r.calibrated_mfu is not None:
        lines.append(f"calibrate    MFU {r.calibrated_mfu:.4g}, MBU {r.calibrated_mbu:.4g} (plan with --mfu {r.calibrated_mfu:.4g} --mbu {r.calibrated_mbu:.4g})")
    if r.error:
        lines.append(f"error        {r.error}")
    lines += [f"- {s}" for s in r.explanation]
    return "\n".join(lines)


def timing_sentence(r: ProbeResult) -> str:
    """The measured prefill and decode step beside the roofline's, each as the probe's table shows it
    (4 significant digits, thousands separated: "Prefill 5,115 ms", not "5115.08 ms")."""
    return (
        f"Prefill {fmt_ms_measured(r.prefill_ms)} vs roofline {fmt_ms_measured(r.predicted_prefill_ms)}; decode step p50 {fmt_ms_measured(r.decode_ms_p50)} vs roofline {fmt_ms_measured(r.predicted_decode_step_ms)} "
        f"(roofline for {r.roofline_device} at MFU {r.assumed_mfu:g}, MBU {r.assumed_mbu:g}, weights as planner.weights counts them, bf16 peak)."
    )
