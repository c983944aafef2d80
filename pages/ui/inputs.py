"""The Plan page's input controls, grouped in expanders; an error shows under its control."""

from __future__ import annotations

import threading
from contextlib import contextmanager

import streamlit as st

from pages.ui import state as S
from pages.ui.safe_text import md
from planner.capacity import BLOCK_SIZES, RESERVATIONS
from planner.engines.vllm import VLLM_VERSIONS
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_BITS, RUNTIMES
from planner.labels import INPUTS, label
from planner.plan import PreparedModel
from planner.weights import WEIGHT_DTYPE_BITS

RESERVATION_HELP = {
    "dynamic": "dynamic: each sequence reserves its input + output reserve (what a growing cache holds at the end)",
    "static": "static: each sequence reserves the model's maximum context up front",
    "paged": "paged: whole blocks of the block size (vLLM-style), windowed layers capped at window + 1 block",
}
GROUP_KEYS = {
    "context": ("system_tokens", "tool_tokens", "retrieval_tokens", "history_tokens", "user_tokens", "input_tokens", "output_tokens", "max_context", "encoder_tokens"),
    "cache": ("kv_dtype", "mtp", "runtime", "vllm_version", "reservation", "block_tokens"),
    "hardware": ("gpu", "device_gib", "device_bandwidth_gb_s", "device_bf16_tflops", "gpu_count", "tp", "ep", "headroom_pct", "weight_dtype", "workspace_gib", "model_resident_gib"),
    "load": ("sequences", "itl_slo_ms", "ttft_slo_ms", "max_num_seqs", "tenant_quota", "max_batched_tokens"),
    "sharing": ("shared_prefix_tokens", "prefix_hit_rate", "tenants", "gpu_hour_price"),
    "efficiency": ("mfu", "mbu"),
    "observed": ("queue_ms", "preprocessing_ms", "prefill_ms", "first_decode_ms", "remaining_decode_ms", "generated_tokens"),
}
# Control labels: the library's names for the inputs (planner.labels), in the controls' units.
LABELS = {name: label(name) for name in INPUTS} | {
    "headroom_pct": "Headroom (%)",
    "input_tokens": "Input total (overrides the parts)",
    "mfu": "MFU (compute efficiency)",
    "mbu": "MBU (bandwidth efficiency)",
}


# --------------------------------------------------------------------------- inputs


def _kv_dtype_label(model: PreparedModel, choice: str) -> str:
    if choice != "auto":
        return f"{choice} ({KV_DTYPE_BITS[choice]}-bit)"
    try:
        dtype, source = model.kv_dtype("auto")
    except PlannerError as exc:
        return f"auto ({exc.reason})"
    return f"auto → {dtype} ({source.removeprefix('auto: ')})"


_SLOTS = threading.local()  # where the error of a control in a two-column row goes


@contextmanager
def _pair():
    """Two columns of controls; an error of either shows below both, at full width (inside a
    half-width column a long message wrapped a few characters per line)."""
    a, b = st.columns(2)
    slot = st.container()
    stack = getattr(_SLOTS, "stack", None) or []
    _SLOTS.stack = [*stack, slot]
    try:
        yield a, b
    finally:
        _SLOTS.stack = stack


def _error_below(key: str, err_key: str | None, err) -> None:
    if err is not None and err_key == key:
        stack = getattr(_SLOTS, "stack", None)
        with stack[-1] if stack else st.container():
            st.error(md(S.error_text(err)), icon=":material/error:")


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

    cal = S.calibration()
    if cal is not None and cal["applies_to"] is not None and cal["applies_to"] == st.session_state.get("gpu"):
        st.button(
            f"Apply probe calibration (MFU {cal['mfu']:.3g}, MBU {cal['mbu']:.3g} from {cal['device']})",
            key="apply_calibration",
            on_click=S.apply_calibration,
            icon=":material/science:",
            help="Use the MFU and MBU the Probe page measured on this GPU for the latency estimate (clamped to the sliders' 0.01–1 range).",
        )
    elif cal is not None:
        where = f"on {cal['applies_to']}" if cal["applies_to"] else f"on {cal['measured_on']}, not on a GPU"
        st.caption(f":material/science: The probe calibration was measured {where}; it applies only to a plan on the GPU it was measured on.")
    note = st.session_state.pop("calibration_note", None)
    if note:
        st.success(note, icon=":material/check_circle:")

    geo = model.geometry
    exp = group("context", "Context (tokens)", ":material/segment:", False)
    if opened(exp):
        with exp:
            with _pair() as (a, b):
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
            _select("vllm_version", list(VLLM_VERSIONS), err_key, err, disabled=st.session_state.get("runtime") != "vllm", help="Runtime vllm admits as this vLLM release does: each request reserves blocks for all its tokens in every KV-cache group.")
            _select("reservation", list(RESERVATIONS), err_key, err, help="\n\n".join(RESERVATION_HELP.values()))
            sizes = list(BLOCK_SIZES)
            if st.session_state.get("block_tokens") not in sizes:
                sizes.append(st.session_state.get("block_tokens"))
            _select("block_tokens", sizes, err_key, err, help="Tokens per paged block (paged reservation and prefix sharing).")

    exp = group("hardware", "Hardware and memory", ":material/developer_board:", True)
    if opened(exp):
        with exp:
            _select("gpu", list(S.GPU_OPTIONS), err_key, err, format_func=lambda g: f"{g} ({CATALOG[g].memory_gib:g} GiB)" if g in CATALOG else "Custom memory size…")
            _num("device_gib", err_key, err, integer=False, min_value=S.WIDGET_RANGES["device_gib"][0], max_value=S.WIDGET_RANGES["device_gib"][1], step=1.0, fmt="%.1f", disabled=st.session_state.get("gpu") != S.CUSTOM_GPU, help="Used when GPU is 'Custom'; give its bandwidth and peak below for the latency estimate.")
            if st.session_state.get("gpu") == S.CUSTOM_GPU:
                with _pair() as (a, b):
                    with a:
                        _num("device_bandwidth_gb_s", err_key, err, optional=True, integer=False, min_value=S.WIDGET_RANGES["device_bandwidth_gb_s"][0], max_value=S.WIDGET_RANGES["device_bandwidth_gb_s"][1], step=100.0, fmt="%.0f", placeholder="1,000", help="HBM bandwidth of the custom device (decode, ITL); empty: 1,000 GB/s.")
                    with b:
                        _num("device_bf16_tflops", err_key, err, optional=True, integer=False, min_value=S.WIDGET_RANGES["device_bf16_tflops"][0], max_value=S.WIDGET_RANGES["device_bf16_tflops"][1], step=10.0, fmt="%.0f", placeholder="100", help="Dense bf16 peak of the custom device (prefill, TTFT); empty: 100 TFLOP/s.")
            with _pair() as (a, b):
                with a:
                    _num("gpu_count", err_key, err, min_value=1, max_value=4096, help="A multiple of TP; each replica uses TP GPUs.")
                with b:
                    _num("tp", err_key, err, min_value=1, max_value=4096, help="Must divide the attention heads (and divide or be a multiple of the KV heads).")
            _num("ep", err_key, err, min_value=1, max_value=4096, help="MoE models only: GPUs of a replica the experts spread over (dispatch and combine by all-to-all); divides TP. 1: experts split by TP.")
            st.slider(LABELS["headroom_pct"], 0.0, S.WIDGET_RANGES["headroom_bp"][1] / 100, step=0.5, format="%.1f%%", key="headroom_pct", help="Share of device memory kept free (driver, CUDA context, fragmentation); stored in basis points.")
            _error_below("headroom_pct", err_key, err)
            _select("weight_dtype", list(WEIGHT_DTYPE_BITS), err_key, err, help="auto: the config's torch_dtype and quantization_config.")
            _num("workspace_gib", err_key, err, integer=False, min_value=0.0, max_value=100_000.0, step=0.25, fmt="%.2f", help="Activations, CUDA graphs and runtime buffers outside the KV pool.")
            _num("model_resident_gib", err_key, err, optional=True, integer=False, min_value=0.0, max_value=100_000.0, step=1.0, fmt="%.2f", placeholder="weights estimate / TP", help="Override the per-GPU weight bytes (e.g. from nvidia-smi).")

    exp = group("load", "Load and SLOs", ":material/speed:", True)
    if opened(exp):
        with exp:
            _num("sequences", err_key, err, min_value=1, max_value=10_000_000, help="Concurrent sequences across all replicas.")
            with _pair() as (a, b):
                with a:
                    _num("itl_slo_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e7, step=1.0, fmt="%.2f", help="Largest acceptable p95 inter-token latency (95 % of the gaps between tokens are shorter).")
                    _num("max_num_seqs", err_key, err, optional=True, min_value=1, max_value=10_000_000, help="The runtime's hard limit per replica (vLLM max_num_seqs).")
                with b:
                    _num("ttft_slo_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=10.0, fmt="%.1f", help="Largest acceptable p95 time to first token.")
                    _num("tenant_quota", err_key, err, optional=True, min_value=1, max_value=10_000_000)
            _num("max_batched_tokens", err_key, err, min_value=1, max_value=1 << 24, help="Tokens the scheduler runs per engine step (vLLM max_num_batched_tokens): a prompt waits behind the others' chunks (TTFT) and new prompts' chunks ride in decode steps (ITL).")

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
            st.slider(LABELS["mfu"], *S.WIDGET_RANGES["mfu"], step=0.01, key="mfu", help="Share of peak FLOP/s reached (prefill, compute-bound steps).")
            _error_below("mfu", err_key, err)
            st.slider(LABELS["mbu"], *S.WIDGET_RANGES["mbu"], step=0.01, key="mbu", help="Share of HBM bandwidth reached (decode, memory-bound steps).")
            _error_below("mbu", err_key, err)

    exp = group("observed", "Observed latency", ":material/timer:", False)
    if opened(exp):
        with exp:
            st.caption(
                "To replace the roofline estimate with a measurement, give all three observed phases: prefill, first decode and remaining decode "
                "(remaining decode is 0 only when one token is generated). Queue and preprocessing add to either."
            )
            with _pair() as (a, b):
                with a:
                    _num("queue_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
                    _num("prefill_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=1.0, fmt="%.2f")
                    _num("remaining_decode_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
                with b:
                    _num("preprocessing_ms", err_key, err, optional=True, integer=False, min_value=0.0, max_value=1e9, step=1.0, fmt="%.2f")
                    _num("first_decode_ms", err_key, err, optional=True, integer=False, min_value=0.001, max_value=1e9, step=1.0, fmt="%.2f")
                    _num("generated_tokens", err_key, err, optional=True, min_value=1, max_value=1 << 31, placeholder="output reserve")

    st.button("Reset inputs to defaults", key="reset_inputs", on_click=S.reset_inputs, icon=":material/restart_alt:", help="The defaults, then this model's deployment suggestions (TP, context) again.")




def render_error_banner(err, err_key: str | None, good) -> None:
    """The page-level error: which control, why, and that the last good plan is shown."""
    where = LABELS.get(err_key or "", None)
    msg = f"**{where}**: {md(S.error_text(err))}" if where else md(S.error_sentence(err))
    st.error(msg + ("  \nBelow, greyed: the last good plan (" + md(good.ref.label()) + "), not these inputs." if good else ""), icon=":material/error:")
