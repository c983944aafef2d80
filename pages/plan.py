"""Plan page: one model, one deployment, every number of the plan with charts and formulas.

Thin UI: the numbers come from :func:`planner.plan.compute_plan` (and ``grid`` / ``itl_curve``
for the charts); this page only lays them out, converts units and formats them.
"""

from __future__ import annotations

import math

import plotly.graph_objects as go
import streamlit as st

from pages import common as C
from planner.capacity import BLOCK_SIZES, RESERVATIONS
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_BITS, RUNTIMES
from planner.plan import Plan, PreparedModel, grid_limits, itl_curve
from planner.share import share_url
from planner.weights import WEIGHT_DTYPE_BITS

PALETTE = ("#4C78A8", "#F58518", "#54A24B", "#B279A2", "#E45756", "#72B7B2", "#EECA3B", "#9D755D")
CHART_HEIGHT = 340
CHART_TABS = ("K/V vs context", "Context × concurrency", "Latency", "Roofline")
PLOT_CONFIG = {"displaylogo": False, "modeBarButtonsToRemove": ["lasso2d", "select2d"]}

RESERVATION_HELP = {
    "dynamic": "dynamic: each sequence reserves its input + output reserve (what a growing cache holds at the end)",
    "static": "static: each sequence reserves the model's maximum context up front",
    "paged": "paged: whole blocks of the block size (vLLM-style), windowed layers capped at window + 1 block",
}
GROUP_KEYS = {
    "context": ("system_tokens", "tool_tokens", "retrieval_tokens", "history_tokens", "user_tokens", "input_tokens", "output_tokens", "max_context", "encoder_tokens"),
    "cache": ("kv_dtype", "mtp", "runtime", "reservation", "block_tokens"),
    "hardware": ("gpu", "device_gib", "device_bandwidth_gb_s", "device_bf16_tflops", "gpu_count", "tp", "headroom_pct", "weight_dtype", "workspace_gib", "model_resident_gib"),
    "load": ("sequences", "itl_slo_ms", "ttft_slo_ms", "max_num_seqs", "tenant_quota"),
    "sharing": ("shared_prefix_tokens", "prefix_hit_rate", "tenants", "gpu_hour_price"),
    "efficiency": ("mfu", "mbu"),
    "observed": ("queue_ms", "preprocessing_ms", "prefill_ms", "first_decode_ms", "remaining_decode_ms", "generated_tokens"),
}
LABELS = {
    "system_tokens": "System prompt",
    "tool_tokens": "Tool definitions",
    "retrieval_tokens": "Retrieved context",
    "history_tokens": "Conversation history",
    "user_tokens": "User message",
    "input_tokens": "Input total (overrides the parts)",
    "output_tokens": "Output reserve",
    "encoder_tokens": "Image (encoder) tokens per request",
    "max_context": "Maximum context",
    "kv_dtype": "KV cache dtype",
    "mtp": "MTP speculative decoding",
    "runtime": "Runtime semantics",
    "reservation": "Reservation mode",
    "block_tokens": "Block size (tokens)",
    "gpu": "GPU",
    "device_gib": "Custom device memory (GiB)",
    "device_bandwidth_gb_s": "Custom bandwidth (GB/s)",
    "device_bf16_tflops": "Custom bf16 peak (TFLOP/s)",
    "gpu_count": "GPUs",
    "tp": "Tensor parallel (TP)",
    "headroom_pct": "Headroom (%)",
    "weight_dtype": "Weight dtype",
    "workspace_gib": "Workspace (GiB)",
    "model_resident_gib": "Model resident per GPU (GiB)",
    "sequences": "Requested sequences",
    "itl_slo_ms": "ITL SLO (ms)",
    "ttft_slo_ms": "TTFT SLO (ms)",
    "max_num_seqs": "Runtime max sequences",
    "tenant_quota": "Tenant quota (sequences)",
    "shared_prefix_tokens": "Shared prefix (tokens)",
    "prefix_hit_rate": "Prefix hit rate",
    "tenants": "Tenants",
    "gpu_hour_price": "GPU-hour price ($)",
    "mfu": "MFU (compute efficiency)",
    "mbu": "MBU (bandwidth efficiency)",
    "queue_ms": "Queue (ms)",
    "preprocessing_ms": "Preprocessing (ms)",
    "prefill_ms": "Observed prefill (ms)",
    "first_decode_ms": "Observed first decode (ms)",
    "remaining_decode_ms": "Observed remaining decode (ms)",
    "generated_tokens": "Generated tokens",
}
ASSUMPTIONS = (
    ("Allocator rounding", "PyTorch's caching allocator rounds blocks (512 B, 2 MiB segments) and keeps freed blocks cached; not counted."),
    ("Fragmentation", "paged engines waste at most part of one block per layer group (counted in paged mode); allocator fragmentation outside the pool is not."),
    ("Activations", "prefill activations, logits and sampler buffers are only covered by the workspace figure."),
    ("CUDA graphs", "captured graphs hold their own memory pool (hundreds of MiB to GiBs); not counted, use workspace or headroom."),
    ("Tensor alignment", "padding of heads or head dims to kernel tile sizes is not counted."),
    ("Quantization scales", "fp8 per-tensor scales are ignored; int8/int4 caches count one fp16 scale and zero-point per 64 elements; weight scales follow the config's quantization."),
    ("Offload buffers", "CPU/NVMe swap or offload space and pinned host buffers are not counted."),
    ("Speculative decoding", "draft-model weights and their KV caches, and target-side lookahead slots, are not counted."),
    ("Beam search / n > 1", "each beam or parallel sample is a sequence; shared prompt blocks across beams are not deduplicated."),
    ("Runtime temporary buffers", "attention-kernel workspaces, NCCL buffers under tensor parallelism and the CUDA context are left to the headroom."),
    ("Encoder caches", "vision/audio encoder outputs of multimodal models are not counted (cross-attention bytes per encoder token are shown separately)."),
    ("Prefix caching", "sharing assumes whole blocks stay resident within one tenant; eviction and cross-tenant sharing are not modelled."),
    ("Latency", "a roofline with constant MFU/MBU: no scheduler interference, chunked-prefill interleaving, kernel launch overheads or network time."),
)


# --------------------------------------------------------------------------- inputs


def _error_below(key: str, err_key: str | None, err) -> None:
    if err is not None and err_key == key:
        st.error(C.error_text(err), icon=":material/error:")


def _num(key: str, err_key, err, *, optional: bool = False, integer: bool = True, min_value=None, max_value=None, step=None, fmt=None, help=None, placeholder=None, disabled=False) -> None:
    kwargs = {"key": key, "help": help, "disabled": disabled, "min_value": min_value, "max_value": max_value}
    if step is not None:
        kwargs["step"] = step
    elif integer:
        kwargs["step"] = 1
    if fmt:
        kwargs["format"] = fmt
    if optional:
        kwargs["value"] = None
        kwargs["placeholder"] = placeholder or "none"
    st.number_input(LABELS[key], **kwargs)
    _error_below(key, err_key, err)


def _select(key: str, options, err_key, err, *, format_func=str, help=None, disabled=False) -> None:
    st.selectbox(LABELS[key], options, key=key, format_func=format_func, help=help, disabled=disabled)
    _error_below(key, err_key, err)


def _kv_dtype_label(model: PreparedModel, choice: str) -> str:
    if choice != "auto":
        return f"{choice} ({KV_DTYPE_BITS[choice]}-bit)"
    try:
        dtype, source = model.kv_dtype("auto")
    except PlannerError as exc:
        return f"auto ({exc.reason})"
    return f"auto → {dtype} ({source.removeprefix('auto: ')})"


def render_inputs(model: PreparedModel, values: dict, err_key: str | None, err) -> None:
    """All plan controls, grouped; an error appears under the control that caused it."""

    def group(name: str, label: str, icon: str, default: bool):
        """A stateful expander: collapsed groups skip their widgets (less for the browser to draw).

        A group holding the field of the current error opens itself.
        """
        key = f"group_{name}"
        if err_key in GROUP_KEYS[name]:
            st.session_state[key] = True
        return st.expander(label, expanded=default, key=key, on_change="rerun", icon=icon)

    def opened(exp) -> bool:
        return exp.open is not False

    cal = C.calibration()
    if cal is not None:
        st.button(
            f"Apply probe calibration (MFU {cal['mfu']:.3g}, MBU {cal['mbu']:.3g} from {cal['device']})",
            key="apply_calibration",
            on_click=C.apply_calibration,
            icon=":material/science:",
            help="Use the MFU and MBU the Probe page measured for the latency estimate (clamped to the sliders' 0.01–1 range).",
        )
    note = st.session_state.pop("calibration_note", None)
    if note:
        st.success(note, icon=":material/check_circle:")

    geo = model.geometry
    exp = group("context", "Context (tokens)", ":material/segment:", False)
    if opened(exp):
        with exp:
            a, b = st.columns(2)
            with a:
                _num("system_tokens", err_key, err, min_value=0, max_value=1 << 31)
                _num("retrieval_tokens", err_key, err, min_value=0, max_value=1 << 31)
                _num("user_tokens", err_key, err, min_value=0, max_value=1 << 31)
            with b:
                _num("tool_tokens", err_key, err, min_value=0, max_value=1 << 31)
                _num("history_tokens", err_key, err, min_value=0, max_value=1 << 31)
                _num("output_tokens", err_key, err, min_value=1, max_value=1 << 31, help="Tokens reserved for the answer.")
            _num("input_tokens", err_key, err, optional=True, min_value=1, max_value=1 << 31, placeholder="sum of the parts", help="Leave empty to add up the parts above.")
            cfg_max = geo.max_position_embeddings
            _num("max_context", err_key, err, optional=True, min_value=1, max_value=1 << 31, placeholder=f"config: {cfg_max:,}" if cfg_max else "required: the config has none", help="Leave empty to use the config's max_position_embeddings.")
            if any(layer.kind == "cross" for layer in geo.layers):
                _num("encoder_tokens", err_key, err, min_value=0, max_value=1 << 24, help="Vision-encoder tokens each request's cross-attention layers cache (e.g. 4 tiles x 1,601 for Llama 3.2 Vision).")

    exp = group("cache", "KV cache", ":material/memory:", True)
    if opened(exp):
        with exp:
            _select("kv_dtype", ["auto", *KV_DTYPE_BITS], err_key, err, format_func=lambda d: _kv_dtype_label(model, d),
                    help="Element type of cached keys and values. auto: what the checkpoint declares (quantization_config or hf_quant_config.json), as vLLM's --kv-cache-dtype auto, else the model dtype. int8/int4 add a scale and zero-point per 64 elements.")
            if model.geometry.mtp_layers or (model.geometry.compressed and model.geometry.compressed.mtp_ratios):
                st.checkbox(LABELS["mtp"], key="mtp", help="Count the model's next-token-prediction layers (num_nextn_predict_layers): an engine caches them too when MTP speculative decoding is on.")
                _error_below("mtp", err_key, err)
            _select("runtime", list(RUNTIMES), err_key, err, help="\n\n".join(f"**{k}**: {v}" for k, v in RUNTIMES.items()))
            _select("reservation", list(RESERVATIONS), err_key, err, help="\n\n".join(RESERVATION_HELP.values()))
            sizes = list(BLOCK_SIZES)
            if st.session_state.get("block_tokens") not in sizes:
                sizes.append(st.session_state.get("block_tokens"))
            _select("block_tokens", sizes, err_key, err, help="Tokens per paged block (paged reservation and prefix sharing).")

    exp = group("hardware", "Hardware and memory", ":material/developer_board:", True)
    if opened(exp):
        with exp:
            _select("gpu", list(C.GPU_OPTIONS), err_key, err, format_func=lambda g: f"{g} ({CATALOG[g].memory_gib:g} GiB)" if g in CATALOG else "Custom memory size…")
            _num("device_gib", err_key, err, integer=False, min_value=C.WIDGET_RANGES["device_gib"][0], max_value=C.WIDGET_RANGES["device_gib"][1], step=1.0, fmt="%.1f", disabled=st.session_state.get("gpu") != C.CUSTOM_GPU, help="Used when GPU is 'Custom'; give its bandwidth and peak below for the latency estimate.")
            if st.session_state.get("gpu") == C.CUSTOM_GPU:
                a, b = st.columns(2)
                with a:
                    _num("device_bandwidth_gb_s", err_key, err, optional=True, integer=False, min_value=C.WIDGET_RANGES["device_bandwidth_gb_s"][0], max_value=C.WIDGET_RANGES["device_bandwidth_gb_s"][1], step=100.0, fmt="%.0f", placeholder="1,000", help="HBM bandwidth of the custom device (decode, ITL); empty: 1,000 GB/s.")
                with b:
                    _num("device_bf16_tflops", err_key, err, optional=True, integer=False, min_value=C.WIDGET_RANGES["device_bf16_tflops"][0], max_value=C.WIDGET_RANGES["device_bf16_tflops"][1], step=10.0, fmt="%.0f", placeholder="100", help="Dense bf16 peak of the custom device (prefill, TTFT); empty: 100 TFLOP/s.")
            a, b = st.columns(2)
            with a:
                _num("gpu_count", err_key, err, min_value=1, max_value=4096, help="A multiple of TP; each replica uses TP GPUs.")
            with b:
                _num("tp", err_key, err, min_value=1, max_value=4096, help="Must divide the attention heads (and divide or be a multiple of the KV heads).")
            st.slider(LABELS["headroom_pct"], 0.0, C.WIDGET_RANGES["headroom_bp"][1] / 100, step=0.5, format="%.1f%%", key="headroom_pct", help="Share of device memory kept free (driver, CUDA context, fragmentation); stored in basis points.")
            _error_below("headroom_pct", err_key, err)
            _select("weight_dtype", list(WEIGHT_DTYPE_BITS), err_key, err, help="auto: the config's torch_dtype and quantization_config.")
            _num("workspace_gib", err_key, err, integer=False, min_value=0.0, max_value=100_000.0, step=0.25, fmt="%.2f", help="Activations, CUDA graphs and runtime buffers outside the KV pool.")
            _num("model_resident_gib", err_key, err, optional=True, integer=False, min_value=0.0, max_value=100_000.0, step=1.0, fmt="%.2f", placeholder="weights estimate / TP", help="Override the per-GPU weight bytes (e.g. from nvidia-smi).")

    exp = group("load", "Load and SLOs", ":material/speed:", True)
    if opened(exp):
        with exp:
            _num("sequences", err_key, err, min_value=1, max_value=10_000_000, help="Concurrent sequences across all replicas.")
            a, b = st.columns(2)
            with a:
                _num("itl_slo_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e7, step=1.0, fmt="%.2f", help="Largest acceptable mean inter-token latency.")
                _num("max_num_seqs", err_key, err, optional=True, min_value=1, max_value=10_000_000, help="The runtime's hard limit per replica (vLLM max_num_seqs).")
            with b:
                _num("ttft_slo_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=10.0, fmt="%.1f", help="Largest acceptable time to first token.")
                _num("tenant_quota", err_key, err, optional=True, min_value=1, max_value=10_000_000)

    exp = group("sharing", "Prefix sharing and cost", ":material/share:", False)
    if opened(exp):
        with exp:
            _num("shared_prefix_tokens", err_key, err, min_value=0, max_value=1 << 31, help="Prompt tokens identical across the sequences of one tenant (system prompt, tools).")
            st.slider(LABELS["prefix_hit_rate"], 0.0, 1.0, step=0.05, key="prefix_hit_rate")
            _error_below("prefix_hit_rate", err_key, err)
            _num("tenants", err_key, err, min_value=1, max_value=1_000_000, help="Prefixes are shared within a tenant only.")
            _num("gpu_hour_price", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e6, step=0.1, fmt="%.2f", help="Price of one GPU-hour, for cost per million tokens.")

    exp = group("efficiency", "Efficiency (MFU / MBU)", ":material/tune:", False)
    if opened(exp):
        with exp:
            st.slider(LABELS["mfu"], *C.WIDGET_RANGES["mfu"], step=0.01, key="mfu", help="Share of peak FLOP/s reached (prefill, compute-bound steps).")
            _error_below("mfu", err_key, err)
            st.slider(LABELS["mbu"], *C.WIDGET_RANGES["mbu"], step=0.01, key="mbu", help="Share of HBM bandwidth reached (decode, memory-bound steps).")
            _error_below("mbu", err_key, err)

    exp = group("observed", "Observed latency", ":material/timer:", False)
    if opened(exp):
        with exp:
            st.caption("Give prefill and first decode to replace the roofline estimate with a measurement; queue and preprocessing also add to the estimate.")
            a, b = st.columns(2)
            with a:
                _num("queue_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
                _num("prefill_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=1.0, fmt="%.2f")
                _num("remaining_decode_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
            with b:
                _num("preprocessing_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
                _num("first_decode_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=1.0, fmt="%.2f")
                _num("generated_tokens", err_key, err, optional=True, min_value=1, max_value=1 << 31, placeholder="output reserve")

    st.button("Reset inputs to defaults", key="reset_inputs", on_click=C.reset_inputs, icon=":material/restart_alt:", help="The defaults, then this model's deployment suggestions (TP, context) again.")


# --------------------------------------------------------------------------- results


def render_metrics(plan: Plan) -> None:
    kv, cap, lat = plan.kv_cache, plan.capacity, plan.latency
    cols = st.columns(5)
    capped = [s for s in plan.inspect.specs if not s.grows_per_token and s.window]
    growing = kv["bytes_per_token_per_sequence"]
    within = kv["bytes_per_token_within_windows"]
    windowed_only = growing == 0 and within > 0  # every cached layer is windowed (e.g. Mistral-7B v0.1)
    if windowed_only:
        value = C.fmt_bytes(within)
        delta = "within the window" + ("s" if len(capped) > 1 else "") + " (up to " + ", ".join(f"{s.window:,}" for s in capped) + " tokens)"
        help_text = (
            f"Every cached layer is windowed: {within:,} B per token of one sequence on one GPU while the context is within the window, "
            f"then flat ({plan.inspect.kv_dtype}, TP {plan.inputs.tp}). " + ", ".join(f"{s.kind} ×{s.num_layers}: {s.bytes_per_token:,} B up to {s.window:,} tokens" for s in capped) + "."
        )
    else:
        value = C.fmt_bytes(growing)
        delta = ("+ " + ", ".join(f"{C.fmt_bytes(s.bytes_per_token)} up to {s.window:,}" for s in capped)) if capped else None
        help_text = f"{growing:,} B per token of one sequence on one GPU from layers whose cache grows with every token ({plan.inspect.kv_dtype}, TP {plan.inputs.tp})" + (
            f". Within the windows every layer adds up to {within:,} B per token; windowed layers stop growing at their window: "
            + ", ".join(f"{s.kind} ×{s.num_layers}: {s.bytes_per_token:,} B up to {s.window:,} tokens" for s in capped)
            if capped
            else "."
        )
    cols[0].metric("KV bytes / token", value, delta=delta, delta_color="gray", delta_arrow="off", help=help_text)
    cols[1].metric(
        "MiB / reserved sequence",
        f"{C.fmt_num(kv['mib_per_reserved_sequence'])} MiB",
        help=f"{kv['bytes_per_reserved_sequence']:,} B for {kv['reserved_tokens_per_sequence']:,} reserved tokens ({kv['reservation']} reservation) on one GPU.",
    )
    cols[2].metric(
        "Max sequences",
        f"{kv['admissible_sequences']:,}",
        help=f"Memory alone admits {kv['maximum_sequences_by_memory']:,} ({cap['sequences_per_replica']:,} per replica × {cap['replicas']:,} replicas); binding: {C.binding_phrase(plan)}.",
    )
    ttft_slo = plan.inputs.ttft_slo_ms
    met = plan.roofline.get("ttft_slo_met")
    cols[3].metric(
        "TTFT",
        C.fmt_ms(lat.time_to_first_token_ms),
        delta=None if ttft_slo is None else (f"meets {C.fmt_ms(ttft_slo)} SLO" if met else f"misses {C.fmt_ms(ttft_slo)} SLO"),
        delta_color="green" if met else "red",
        delta_arrow="off",
        help=f"Time to first token ({lat.source}).",
    )
    itl_slo = plan.inputs.itl_slo_ms
    itl_ok = itl_slo is not None and lat.mean_inter_token_latency_ms <= itl_slo
    cols[4].metric(
        "ITL",
        C.fmt_ms(lat.mean_inter_token_latency_ms),
        delta=None if itl_slo is None else (f"meets {C.fmt_ms(itl_slo)} SLO" if itl_ok else f"misses {C.fmt_ms(itl_slo)} SLO"),
        delta_color="green" if itl_ok else "red",
        delta_arrow="off",
        help=f"Mean inter-token latency at {plan.roofline['decode_concurrency']:,} concurrent sequences per replica ({lat.source}).",
    )


def _source_rows(ref) -> list[tuple[str, str]]:
    """Where the config came from: the Hub commit or the upload's hash (presets say it in the title)."""
    rows: list[tuple[str, str]] = []
    if ref.kind == "hub":
        rows.append(("Hub model", f"`{ref.repo_id}` (revision `{ref.revision or 'main'}`)"))
        rows.append(("Pinned commit", f"`{ref.commit}`" if ref.commit else "not resolved"))
    elif ref.kind == "upload":
        rows.append(("Uploaded config", f"{ref.name or 'config.json'}, sha256 `{str(ref.config_hash)[:16]}…`"))
    return rows


def _weights_row(plan: Plan) -> tuple[str, str]:
    w = plan.weights
    source = "safetensors metadata" if str(w.source).startswith("safetensors") else "config estimate"
    return ("Weights", f"{C.fmt_bytes(w.bytes)} ({w.dtype_label}) · source: **{source}**" + ("" if source == "safetensors metadata" else f" ({w.source})"))


def render_geometry(plan: Plan, ref, notes: tuple[str, ...]) -> None:
    ins, w = plan.inspect, plan.weights
    with st.container(border=True):
        st.markdown(f"**Geometry** · {ref.label()}")
        layers = ", ".join(f"{n} {k}" for k, n in ins.layers.items())
        rows = [
            *_source_rows(ref),
            ("Model type", f"`{ins.model_type}`" + (f" (from `{ins.config_path}`)" if ins.config_path else "")),
            ("Layers", layers or "–"),
            ("KV heads per GPU", f"{ins.kv_heads_per_gpu:,} (TP {ins.tp})"),
            ("Head dims (K / V)", f"{ins.head_dim:,} / {ins.v_head_dim:,}"),
            ("Windows", ", ".join(f"{k}: {v:,} tokens" for k, v in ins.windows.items()) or "none"),
            ("MLA latent", f"{ins.mla_latent_dim:,} elements" if ins.mla_latent_dim else "none"),
            ("KV dtype", f"{ins.kv_dtype}" + (f" ({ins.kv_dtype_source})" if ins.kv_dtype_source != "given" else "")),
            ("Recurrent state / sequence", C.fmt_bytes(ins.state_bytes_per_sequence) if ins.state_bytes_per_sequence else "none"),
            ("Parameters", f"{w.total_params:,} total, {w.active_params:,} active"),
            _weights_row(plan),
        ]
        if ins.cross_bytes_per_encoder_token:
            rows.append(("Cross-attention / encoder token", C.fmt_bytes(ins.cross_bytes_per_encoder_token)))
        st.markdown("\n".join(f"- **{k}:** {v}" for k, v in rows))
        groups = []
        for s in ins.specs:
            label = s.kind + (f" (window {s.window:,})" if s.window else "") + (" · MLA latent" if s.latent else "")
            shape = f"latent {s.k_head_dim:,}" if s.latent else f"{s.kv_heads_per_gpu:,} KV heads × (K {s.k_head_dim:,} + V {s.v_head_dim:,})"
            groups.append(f"- **{label} ×{s.num_layers:,}:** {shape} → {s.bytes_per_token_per_layer:,} B per token per layer, **{s.bytes_per_token:,} B** per token")
        if groups:
            st.markdown("**Cached layer groups** (one GPU, " + ins.kv_dtype + ")\n" + "\n".join(groups))
        cache_notes = [n for n in notes if "served from the local cache" in n]
        for n in cache_notes:
            st.caption(f":material/cached: {n[:1].upper() + n[1:]}: the Hub was not asked again; the commit above is the cached one.")
        all_notes = [n for n in (*notes, *plan.notes) if n not in cache_notes]
        if all_notes:
            st.caption("Notes: " + " · ".join(all_notes))


def _vline(x: float, text: str, color: str = "#888", dash: str = "dash", anchor: str = "left", log: bool = False, label_y: float = 1.0) -> tuple[dict, dict]:
    """A vertical line across the plot with a label at the top (as layout shape + annotation).

    On a log x axis plotly places annotations (not shapes) at log10(x): pass ``log=True``.
    """
    label_x = math.log10(x) if log else x
    shape = {"type": "line", "xref": "x", "yref": "paper", "x0": x, "x1": x, "y0": 0, "y1": 1, "line": {"color": color, "dash": dash, "width": 1.5}}
    note = {"x": label_x, "xref": "x", "y": label_y, "yref": "paper", "text": text, "showarrow": False, "xanchor": anchor, "yanchor": "bottom", "font": {"size": 11, "color": color}}
    return shape, note


def _hline(y: float, text: str, color: str = "#E45756") -> tuple[dict, dict]:
    shape = {"type": "line", "xref": "paper", "yref": "y", "x0": 0, "x1": 1, "y0": y, "y1": y, "line": {"color": color, "dash": "dash", "width": 1.5}}
    note = {"x": 1, "xref": "paper", "y": y, "yref": "y", "text": text, "showarrow": False, "xanchor": "right", "yanchor": "bottom", "font": {"size": 11, "color": color}}
    return shape, note


def _figure(traces: list[dict], title: str, lines: list[tuple[dict, dict]] = (), height: int = CHART_HEIGHT, **layout) -> go.Figure:
    """One Figure built in a single pass (plotly validates each property once)."""
    base = {
        "title": {"text": title, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 10, "r": 10, "t": 48, "b": 10},
        "legend": {"orientation": "h", "yanchor": "top", "y": -0.18, "x": 0},
        "shapes": [ln[0] for ln in lines],
        "annotations": [ln[1] for ln in lines] + list(layout.pop("annotations", [])),
    }
    return go.Figure(data=traces, layout=base | layout)


def fig_memory(plan: Plan) -> go.Figure:
    cap = plan.capacity
    headroom = cap["headroom_bytes"]
    free = cap["free_bytes_at_requested_load"]
    parts = [
        ("Weights", cap["model_resident_bytes"], PALETTE[0]),
        ("Workspace", cap["workspace_bytes"], PALETTE[5]),
        (f"KV at {plan.kv_cache['requested_sequences']:,} sequences", cap["kv_bytes_at_requested_load"], PALETTE[1]),
        ("Free", max(0, free), PALETTE[2]),
        ("Headroom", headroom, "#9E9E9E"),
    ]
    traces = [
        {
            "type": "bar",
            "name": name,
            "y": ["one GPU"],
            "x": [C.gib(value)],
            "orientation": "h",
            "marker": {"color": color},
            "text": [C.fmt_bytes(value)],
            "textposition": "inside",
            "insidetextanchor": "middle",
            "hovertemplate": f"{name}: {C.fmt_bytes_exact(value)}<extra></extra>",
        }
        for name, value, color in parts
    ]
    notes = []
    if free < 0:
        notes.append({"x": C.gib(cap["device_bytes"]), "y": 0.5, "yref": "paper", "text": f"KV at the requested load exceeds the space by {C.fmt_bytes(-free)}", "showarrow": False, "xanchor": "right", "font": {"color": "#E45756"}})
    return _figure(
        traces,
        f"Memory on one GPU: {plan.device.name}, {C.fmt_bytes(cap['device_bytes'])}",
        [_vline(C.gib(cap["usable_bytes"]), f"usable {C.fmt_bytes(cap['usable_bytes'])}", anchor="right")],
        height=210,
        barmode="stack",
        uniformtext={"minsize": 9, "mode": "hide"},
        xaxis={"title": {"text": "GiB"}},
        yaxis={"visible": False},
        legend={"orientation": "h", "yanchor": "top", "y": -0.45, "x": 0, "traceorder": "normal"},
        annotations=notes,
    )


def _kv_x(plan: Plan, log: bool) -> list[int]:
    """Context lengths to sample: even (or log) spacing plus every window edge and the reserved length."""
    top = plan.context.maximum_context_tokens
    if log:
        xs = {max(1, round(top ** (i / 300))) for i in range(301)}
    else:
        xs = {round(top * i / 300) for i in range(301)}
    xs.add(plan.context.reserved_total_tokens)
    for s in plan.inspect.specs:
        if s.window and s.window < top:
            if s.kind == "chunked" and top // s.window <= 64:
                for k in range(1, top // s.window + 1):
                    xs |= {k * s.window - 1, k * s.window}
            xs.add(s.window)
    return sorted(x for x in xs if (1 if log else 0) <= x <= top)


def fig_kv_context(plan: Plan, log: bool = False) -> go.Figure:
    ins = plan.inspect
    xs = _kv_x(plan, log)
    top = max([ins.mha_equivalent_bytes_per_token * xs[-1], *(s.bytes_at(xs[-1]) for s in ins.specs)])
    unit, conv = ("GiB", C.gib) if top >= 16 << 30 else ("MiB", C.mib)
    traces = []
    for i, s in enumerate(ins.specs):
        label = f"{s.kind}{' ' + format(s.window, ',') if s.window else ''} ×{s.num_layers}" + (" (MLA latent)" if s.latent else "")
        traces.append(
            {
                "type": "scatter",
                "x": xs,
                "y": [conv(s.bytes_at(x)) for x in xs],
                "name": label,
                "mode": "lines",
                "stackgroup": "kv",
                "line": {"width": 1.5, "color": PALETTE[i % len(PALETTE)]},
                "hovertemplate": f"{label}: %{{y:,.2f}} {unit}<extra></extra>",
            }
        )
    mha = ins.mha_equivalent_bytes_per_token
    mha_x = xs if log else [xs[0], xs[-1]]
    traces.append(
        {
            "type": "scatter",
            "x": mha_x,
            "y": [conv(mha * x) for x in mha_x],
            "name": f"MHA equivalent ({C.fmt_bytes(mha)}/token)",
            "mode": "lines",
            "line": {"dash": "dot", "color": "#888", "width": 2},
            "hovertemplate": f"MHA equivalent: %{{y:,.2f}} {unit}<extra></extra>",
        }
    )
    lines = [_vline(s.window, f"{s.kind} cap {s.window:,}", "#E45756", anchor="right", log=log) for s in ins.specs if s.window and s.window < xs[-1]]
    lines.append(_vline(plan.context.reserved_total_tokens, f"reserved {plan.context.reserved_total_tokens:,}", "#54A24B", "solid", "left", log=log, label_y=0.92))
    axis_type = "log" if log else "linear"
    return _figure(
        traces,
        f"K/V bytes vs context per layer kind ({ins.kv_dtype}, TP {ins.tp}; stacked)",
        lines,
        height=380,
        xaxis={"title": {"text": "context (tokens)"}, "tickformat": ",~r" if log else ",d", "type": axis_type},
        yaxis={"title": {"text": f"{unit} per sequence (one GPU)"}, "tickformat": ",~r", "type": axis_type},
        hovermode="x unified",
    )


def _axis_points(lo: int, hi: int, extra: int, limit: int = 14) -> list[int]:
    pts = []
    v = lo
    while v <= hi:
        pts.append(v)
        v *= 2
    if len(pts) > limit:
        step = -(-len(pts) // limit)
        pts = pts[::step]
    return sorted(set(pts) | {extra})


def fig_heatmap(plan: Plan, model: PreparedModel) -> go.Figure:
    inputs = plan.inputs
    max_ctx = plan.context.maximum_context_tokens
    lo = 1 << max(9, (inputs.output_tokens + 1).bit_length())
    contexts = [c for c in _axis_points(lo, max_ctx, plan.context.reserved_total_tokens) if c > inputs.output_tokens]
    ceiling = max(8, plan.kv_cache["admissible_sequences"], inputs.sequences)
    concs = _axis_points(1, 1 << ceiling.bit_length(), inputs.sequences)
    limits = grid_limits(inputs, model, contexts)  # admissible sequences per reserved context (-1: does not fit)
    cells = [[c <= lim for c in concs] for lim in limits]
    xs = [f"{c:,}" for c in concs]
    ys = [f"{c:,}" for c in contexts]

    def hover(i: int, j: int, ok: bool) -> str:
        lim = limits[i]
        ceiling = "does not fit at all" if lim < 0 else f"admits at most {lim:,} sequences"
        return f"{ys[i]} tokens × {xs[j]} sequences: {'admitted' if ok else 'refused'} ({ys[i]} tokens {ceiling})"

    grey, green = "rgba(158,158,158,0.35)", "rgba(84,162,75,0.85)"
    traces = [
        {
            "type": "heatmap",
            "z": [[1 if ok else 0 for ok in row] for row in cells],
            "x": xs,
            "y": ys,
            "zmin": 0,
            "zmax": 1,
            "colorscale": [[0, grey], [0.5, grey], [0.5, green], [1, green]],
            "showscale": False,
            "xgap": 1,
            "ygap": 1,
            "text": [[hover(i, j, ok) for j, ok in enumerate(row)] for i, row in enumerate(cells)],
            "hovertemplate": "%{text}<extra></extra>",
        },
        {
            "type": "scatter",
            "x": [f"{inputs.sequences:,}"],
            "y": [f"{plan.context.reserved_total_tokens:,}"],
            "mode": "markers",
            "marker": {"symbol": "x", "size": 14, "color": "#E45756", "line": {"width": 2}},
            "name": "this plan",
            "hovertemplate": "this plan<extra></extra>",
        },
    ]
    return _figure(
        traces,
        "Admitted region (green) by reserved context × concurrent sequences",
        height=380,
        xaxis={"title": {"text": "concurrent sequences"}, "type": "category"},
        yaxis={"title": {"text": "reserved context (tokens)"}, "type": "category"},
    )


def fig_waterfall(plan: Plan) -> go.Figure:
    lat = plan.latency
    steps = [
        ("Queue", lat.queue_ms, "relative", lat.queue_ms),
        ("Preprocessing", lat.preprocessing_ms, "relative", lat.preprocessing_ms),
        ("Prefill", lat.prefill_ms, "relative", lat.prefill_ms),
        ("First decode", lat.first_decode_ms, "relative", lat.first_decode_ms),
        ("TTFT", 0, "total", lat.time_to_first_token_ms),
        ("Remaining decode", lat.remaining_decode_ms, "relative", lat.remaining_decode_ms),
        ("End to end", 0, "total", lat.end_to_end_ms),
    ]
    trace = {
        "type": "waterfall",
        "x": [s[0] for s in steps],
        "y": [s[1] for s in steps],
        "measure": [s[2] for s in steps],
        "text": [C.fmt_ms(s[3]) for s in steps],
        "textposition": "outside",
        "connector": {"line": {"color": "#888", "dash": "dot"}},
        "increasing": {"marker": {"color": PALETTE[0]}},
        "totals": {"marker": {"color": PALETTE[1]}},
        "hovertemplate": "%{x}: %{text}<extra></extra>",
    }
    return _figure([trace], f"Latency by phase ({lat.source})", yaxis={"title": {"text": "ms"}}, showlegend=False)


def fig_itl(plan: Plan, model: PreparedModel) -> go.Figure:
    curve = itl_curve(plan, model)
    c = plan.roofline["decode_concurrency"]
    traces = [
        {"type": "scatter", "x": [k for k, _ in curve], "y": [v for _, v in curve], "mode": "lines+markers", "name": "estimated ITL", "line": {"color": PALETTE[0]}, "hovertemplate": "%{x:,} sequences: %{y:,.2f} ms<extra></extra>"},
        {"type": "scatter", "x": [c], "y": [plan.roofline["itl_ms_at_concurrency"]], "mode": "markers", "marker": {"size": 12, "color": "#E45756", "symbol": "x"}, "name": "this plan", "hovertemplate": "this plan: %{y:,.2f} ms<extra></extra>"},
    ]
    lines = [_hline(plan.inputs.itl_slo_ms, f"SLO {C.fmt_ms(plan.inputs.itl_slo_ms)}")] if plan.inputs.itl_slo_ms is not None else []
    return _figure(
        traces,
        "ITL vs concurrency (roofline estimate)",
        lines,
        xaxis={"title": {"text": "concurrent sequences per replica"}},
        yaxis={"title": {"text": "ms per token"}, "rangemode": "tozero"},
    )


def fig_roofline(plan: Plan) -> go.Figure:
    r = plan.roofline
    peak = r["peak_tflops"]
    bw_tb = r["bandwidth_gb_s"] / 1000  # TB/s = TFLOP/s per FLOP/byte (unit conversion)
    ridge = r["ridge_flops_per_byte"]
    pts = [
        ("prefill", r["prefill_intensity"], r["prefill_attainable_tflops"], PALETTE[1]),
        ("decode", r["decode_intensity"], r["decode_attainable_tflops"], PALETTE[0]),
    ]
    intensities = [p[1] for p in pts if p[1] > 0] + [ridge]
    x0, x1 = min(intensities) / 10, max(intensities) * 10  # axis range
    traces = [
        {
            "type": "scatter",
            "x": [x0, ridge, x1],
            "y": [x0 * bw_tb, peak, peak],
            "mode": "lines",
            "name": f"roof: {C.fmt_num(peak, 1)} TFLOP/s, {C.fmt_num(r['bandwidth_gb_s'])} GB/s",
            "line": {"color": "#888", "width": 2},
            "hovertemplate": "%{x:,.1f} FLOP/B: %{y:,.1f} TFLOP/s<extra></extra>",
        }
    ]
    for name, x, attainable, color in pts:
        if x > 0:
            bound = "compute-bound" if x >= ridge else "memory-bound"
            traces.append(
                {
                    "type": "scatter",
                    "x": [x],
                    "y": [attainable],
                    "mode": "markers+text",
                    "text": [name],
                    "textposition": "bottom center",
                    "marker": {"size": 13, "color": color},
                    "name": f"{name}: {C.fmt_num(x)} FLOP/B ({bound})",
                    "hovertemplate": f"{name}: %{{x:,.2f}} FLOP/B, attainable %{{y:,.1f}} TFLOP/s<extra></extra>",
                }
            )
    return _figure(
        traces,
        f"Roofline on {plan.device.name} ({r['decode_concurrency']:,} sequences decoding)",
        [_vline(ridge, f"ridge {C.fmt_num(ridge, 1)} FLOP/B", "#E45756", log=True)],
        xaxis={"type": "log", "title": {"text": "arithmetic intensity (FLOP/byte)"}},
        yaxis={"type": "log", "title": {"text": "attainable TFLOP/s"}},
    )


def render_formulas(plan: Plan) -> None:
    kv, cap, ctx, lat, r = plan.kv_cache, plan.capacity, plan.context, plan.latency, plan.roofline
    ins = plan.inspect
    lines = ["**K/V bytes per token** (one sequence, one GPU) = Σ over layer groups of layers × bytes per token per layer"]
    for s in ins.specs:
        what = f"latent of {s.k_head_dim:,} elements" if s.latent else f"{s.kv_heads_per_gpu:,} KV heads × (K {s.k_head_dim:,} + V {s.v_head_dim:,}) elements"
        grows = "" if s.grows_per_token else f" — capped at {s.window:,} tokens" if s.window else " — not per text token"
        lines.append(f"- {s.kind}: {s.num_layers:,} layers × {s.bytes_per_token_per_layer:,} B ({what} in {s.kv_dtype}) = **{s.bytes_per_token:,} B**{grows}")
    lines.append(f"- growing with every token: **{kv['bytes_per_token_per_sequence']:,} B** ({C.fmt_bytes(kv['bytes_per_token_per_sequence'])})")
    lines.append(
        f"\n**Reserved tokens** = input {ctx.input_tokens:,} + output {ctx.reserved_output_tokens:,} = **{ctx.reserved_total_tokens:,}** of the model's {ctx.maximum_context_tokens:,}"
    )
    mode = kv["reservation"]
    basis = {"dynamic": f"{kv['reserved_tokens_per_sequence']:,} reserved tokens", "static": f"the maximum context {kv['reserved_tokens_per_sequence']:,}", "paged": f"whole blocks of {plan.inputs.block_tokens:,} tokens ({', '.join(f'{k}: {v:,}' for k, v in kv['blocks_per_layer'].items())} blocks per layer)"}[mode]
    waste = kv["paged_waste_bytes"] or kv["static_waste_bytes"]
    lines.append(
        f"\n**Per sequence** ({mode}) = K/V held at {basis} + recurrent state {kv['state_bytes_per_sequence']:,} B = **{kv['bytes_per_reserved_sequence']:,} B** ({C.fmt_bytes(kv['bytes_per_reserved_sequence'])})"
        + (f", of which {waste:,} B reserved but unfilled" if waste else "")
    )
    lines.append(
        f"\n**Usable** = device {cap['device_bytes']:,} B × (10,000 − {cap['headroom_bp']:,}) / 10,000 = **{cap['usable_bytes']:,} B** ({C.fmt_bytes(cap['usable_bytes'])})"
    )
    lines.append(
        f"\n**Available for K/V** = usable − weights {cap['model_resident_bytes']:,} B ({cap['model_resident_source']}) − workspace {cap['workspace_bytes']:,} B = **{cap['available_for_kv_bytes']:,} B** ({C.fmt_bytes(cap['available_for_kv_bytes'])})"
    )
    lines.append(
        f"\n**Max sequences by memory** = ⌊{cap['available_for_kv_bytes']:,} / {kv['bytes_per_reserved_sequence']:,}⌋ = {cap['sequences_per_replica']:,} per replica × {cap['replicas']:,} replicas (GPUs {cap['gpu_count']:,} / TP {cap['tp']:,}) = **{kv['maximum_sequences_by_memory']:,}**"
        + (f"; with prefix sharing **{plan.prefix['maximum_sequences_with_sharing']:,}**" if plan.prefix.get("bytes_saved_per_extra_sequence") else "")
    )
    limits = ", ".join(f"{k} {v:,}" for k, v in kv["limits"].items())
    lines.append(
        f"\n**Admission**: requested {kv['requested_sequences']:,} vs min({limits}) = {kv['admissible_sequences']:,} → **{'admitted' if kv['admitted'] else 'refused'}** (binding: {C.binding_phrase(plan)})"
    )
    lines.append(
        f"\n**TTFT** = queue {lat.queue_ms:,.2f} + preprocessing {lat.preprocessing_ms:,.2f} + prefill {lat.prefill_ms:,.2f} + first decode {lat.first_decode_ms:,.2f} = **{lat.time_to_first_token_ms:,.2f} ms** ({lat.source})"
    )
    lines.append(
        f"\n**ITL** = max((weights {cap['model_resident_bytes']:,} B + c × K/V(n)) / ({C.fmt_num(r['bandwidth_gb_s'])} GB/s × MBU {r['mbu']:g}), c × FLOPs per token(n) / ({C.fmt_num(r['peak_tflops'])} TFLOP/s × MFU {r['mfu']:g})) at c = {r['decode_concurrency']:,}, n = input + half the output = **{r['itl_ms_at_concurrency']:,.2f} ms**"
    )
    lines.append(
        f"\n**Ridge** = {C.fmt_num(r['peak_tflops'])} TFLOP/s / {C.fmt_num(r['bandwidth_gb_s'])} GB/s = **{r['ridge_flops_per_byte']:,.1f} FLOP/B**; prefill {r['prefill_intensity']:,.1f} FLOP/B, decode {r['decode_intensity']:,.2f} FLOP/B"
    )
    if plan.cost.get("per_million_output_tokens") is not None:
        c = plan.cost
        lines.append(
            f"\n**Cost** = ${c['deployment_per_hour']:,.2f}/h ÷ ({c['output_tokens_per_second']:,.1f} output tokens/s × 3,600) × 10⁶ = **${c['per_million_output_tokens']:,.4f} per million output tokens**; input ${c['per_million_input_tokens']:,.4f} per million"
        )
    st.markdown("\n".join(lines))


def _file_stem(ref) -> str:
    raw = ref.name if ref.kind == "preset" and ref.name else ref.repo_id or ref.name or ref.kind
    stem = "".join(c if c.isalnum() or c in "-._" else "-" for c in str(raw)).strip("-.") or "model"
    return f"kv-plan-{stem[:60]}"


def render_share(plan: Plan, ref, config: dict | None) -> None:
    """Share link (the address bar holds the same), PDF report, plan file download and upload."""
    link = share_url(C.base_url(), C.share_params(ref, plan.inputs, config))
    with st.container(border=True, key="share_box"):
        st.markdown("**Share and export**")
        st.caption(
            "**Copy share link** with the copy button at the top right of the box (it shows when you point at the link). "
            "The address bar always holds the same link: the model reference and every input that differs from the defaults, never a token."
        )
        st.code(link, language=None, wrap_lines=True)
        if ref.kind == "upload" and "cfg=" not in link:
            st.caption(":material/info: The uploaded config is too large for a link: the recipient needs the same config.json (the plan file carries it).")
        stem = _file_stem(ref)
        st.download_button(
            "Download PDF sizing report",
            data=lambda: C.pdf_report(plan, ref, link),  # built only when clicked
            file_name=f"{stem}.pdf",
            mime="application/pdf",
            key="pdf_download",
            on_click="ignore",
            icon=":material/picture_as_pdf:",
            width="stretch",
        )
        st.download_button(
            "Download plan file (JSON)",
            data=C.plan_file_text(ref, plan.inputs, config),
            file_name=f"{stem}.json",
            mime="application/json",
            key="plan_download",
            on_click="ignore",
            icon=":material/download:",
            width="stretch",
        )
        st.file_uploader(
            "Load a plan file",
            type=["json"],
            key="plan_upload",
            on_change=C.load_plan_upload,
            help="A plan file downloaded here (or by the CLI): the model and every input are restored; bad fields fall back to their defaults with a warning.",
        )
        if st.session_state.get("plan_file_error"):
            st.error(st.session_state["plan_file_error"], icon=":material/error:")


def render_results(plan: Plan, model: PreparedModel, ref, notes: tuple[str, ...], config: dict | None = None) -> None:
    render_metrics(plan)
    C.admission_badge(plan)
    C.first_paint_pause()  # headline numbers first, then the charts
    left, right = st.columns([5, 7])
    with left:
        render_geometry(plan, ref, notes)
        C.safe(render_share, plan, ref, config, what="the share and export controls")
    with right:
        C.safe(lambda: st.plotly_chart(fig_memory(plan), config=PLOT_CONFIG, key="chart_memory"), what="the memory chart")
        cap = plan.capacity
        extra = []
        if cap["pool_kv_tokens"] is not None:
            extra.append(f"KV pool {cap['pool_kv_tokens']:,} tokens")
        extra.append(f"{cap['max_concurrency_at_reserved_tokens']:,} sequences at the reserved length")
        if plan.prefix.get("extra_sequences"):
            extra.append(f"prefix sharing adds {plan.prefix['extra_sequences']:,} sequences")
        if plan.cost.get("per_million_output_tokens") is not None:
            extra.append(f"${plan.cost['per_million_output_tokens']:,.4f} per million output tokens")
        st.caption(" · ".join(extra))
        # Only the open tab's charts are built (on_change="rerun" makes .open reliable).
        tabs = st.tabs(list(CHART_TABS), key="chart_tab", on_change="rerun")
        if tabs[0].open is not False:
            with tabs[0]:
                log = st.toggle("Log scales", key="kv_log", value=False, help="Log-log axes show window caps and small caches next to the MHA line.")
                C.safe(lambda: st.plotly_chart(fig_kv_context(plan, log), config=PLOT_CONFIG, key="chart_kv"), what="the K/V chart")
        if tabs[1].open is not False:
            with tabs[1]:
                C.safe(lambda: st.plotly_chart(fig_heatmap(plan, model), config=PLOT_CONFIG, key="chart_heatmap"), what="the heatmap")
        if tabs[2].open is not False:
            with tabs[2]:
                C.safe(lambda: st.plotly_chart(fig_waterfall(plan), config=PLOT_CONFIG, key="chart_waterfall"), what="the latency waterfall")
                C.safe(lambda: st.plotly_chart(fig_itl(plan, model), config=PLOT_CONFIG, key="chart_itl"), what="the ITL chart")
        if tabs[3].open is not False:
            with tabs[3]:
                C.safe(lambda: st.plotly_chart(fig_roofline(plan), config=PLOT_CONFIG, key="chart_roofline"), what="the roofline")
    with st.expander("Assumptions and omissions", icon=":material/info:"):
        st.markdown("\n".join(f"- **{k}**: {v}" for k, v in ASSUMPTIONS))
    with st.expander("Formulas with this plan's numbers", icon=":material/function:"):
        C.safe(render_formulas, plan, what="the formulas")


# --------------------------------------------------------------------------- page


def render_notices(ref) -> None:
    """What a share link or plan file restored (with its corrections) and the deployment suggestions."""
    notice = st.session_state.get("restore_notice")
    if notice:
        warnings = notice.get("warnings") or []
        if warnings:
            with st.container(key="restore_warnings"):
                st.warning(
                    f"Restored the plan from the {notice['origin']}, with {len(warnings)} correction{'s' if len(warnings) > 1 else ''}:\n"
                    + "\n".join(f"- {w}" for w in warnings),
                    icon=":material/warning:",
                )
                st.button("Dismiss", key="dismiss_restore", on_click=lambda: st.session_state.pop("restore_notice", None))
        else:
            st.success(f"Restored the plan from the {notice['origin']}.", icon=":material/link:")
            st.session_state.pop("restore_notice", None)
    hint = C.suggestion_for(ref)
    if hint:
        (st.info if hint["level"] == "info" else st.warning)(hint["text"], icon=":material/auto_fix_high:")


def main() -> None:
    C.restore_from_query_params()  # a share link, on the session's first run
    with st.sidebar:
        st.subheader("Model")
        ref, model, source_notes = C.model_source_widget()
        st.subheader("Inputs")
        inputs_box = st.container()  # filled last, so the plan reaches the browser first
    C.apply_suggestions(ref, model)  # a new model opens on a working plan
    values = C.read_widgets()
    plan, err = C.build_plan(values, model)
    upload_config = C.active_upload_config()
    if plan is not None:
        C.remember_good(plan, model, ref, source_notes, upload_config)
        C.sync_query_params(C.share_params(ref, plan.inputs, upload_config))  # the address bar is the share link
    err_key = C.error_key(err, values)

    st.title("KV capacity plan")
    render_notices(ref)
    good = C.last_good()
    if err is not None:
        where = LABELS.get(err_key or "", None)
        msg = f"**{where}**: {C.error_text(err)}" if where else f"{err}"
        st.error(msg + ("  \nShowing the last good plan (" + good["ref"].label() + ")." if good else ""), icon=":material/error:")
    if plan is None and not good:
        st.info("Fix the input in the sidebar to see a plan.")
    else:
        shown = good if plan is None else {"plan": plan, "model": model, "ref": ref, "notes": source_notes, "config": upload_config}
        render_results(shown["plan"], shown["model"], shown["ref"], shown["notes"], shown.get("config"))
    with inputs_box:
        render_inputs(model, values, err_key, err)


try:
    main()
except Exception as exc:  # noqa: BLE001 - never show a traceback
    st.error(f"Something went wrong while drawing this page: {type(exc).__name__}: {exc}", icon=":material/error:")
