"""The Plan page's input controls, grouped in expanders; an error shows under its control.

Each widget is rendered from its :class:`~planner.controls.Control` (one per PlanInputs field):
its kind picks the widget (a number input for int / float, a select box for a choice, a check box
for a bool), the field's bounds (or the page's narrower :data:`pages.ui.state.WIDGET_RANGES`) its
range, a nullable field an empty-able input, :data:`planner.labels.DETAILS` its help. This module
says only where each control goes (:data:`GROUP_KEYS`) and what differs on the page (a shorter
label, a slider, a placeholder, a step); a field no group names is drawn under "More inputs".
"""

from __future__ import annotations

import threading
from contextlib import contextmanager

import streamlit as st

from pages.ui import state as S
from pages.ui.safe_text import md
from planner.controls import CONTROLS, Control
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_BITS, RUNTIMES
from planner.labels import INPUTS, label
from planner.plan import PreparedModel
from planner.plan.serving import serving_engine

RESERVATION_HELP = {
    "dynamic": "dynamic: each sequence reserves its input + output reserve (what a growing cache holds at the end)",
    "static": "static: each sequence reserves the model's maximum context up front",
    "paged": "paged: whole blocks of the block size (vLLM-style), windowed layers capped at window + 1 block",
}
VLLM_STARTUP = ("entry_point", "enforce_eager", "limit_mm_per_prompt", "enable_lora", "max_loras", "max_lora_rank")
GROUP_KEYS = {
    "context": ("system_tokens", "tool_tokens", "retrieval_tokens", "history_tokens", "user_tokens", "input_tokens", "output_tokens", "max_context", "encoder_tokens"),
    "cache": ("kv_dtype", "mtp", "runtime", "vllm_version", *VLLM_STARTUP, "mem_fraction_static", "chunked_prefill_size", "page_size", "reservation", "block_tokens"),
    "hardware": ("gpu", "device_gib", "device_bandwidth_gb_s", "device_bf16_tflops", "gpu_count", "tp", "ep", "dp", "pp", "disagg", "headroom_pct", "weight_dtype", "workspace_gib", "model_resident_gib"),
    "load": ("sequences", "request_rate", "bench_prompts", "itl_slo_ms", "ttft_slo_ms", "max_num_seqs", "tenant_quota", "max_batched_tokens", "serving_engine", "recv_interval", "batch_wait_iters", "batch_wait_tokens_ratio"),
    "speculation": ("spec_method", "spec_tokens", "spec_acceptance", "spec_draft"),
    "sharing": ("shared_prefix_tokens", "prefix_hit_rate", "tenants", "gpu_hour_price"),
    "efficiency": ("mfu", "mbu"),
    "observed": ("queue_ms", "preprocessing_ms", "prefill_ms", "first_decode_ms", "remaining_decode_ms", "generated_tokens", "bench_calibration"),
    "sessions": ("sessions_per_min", "turns", "think_time_s", "doc_catalog", "doc_zipf", "cpu_tier_gib", "disk_tier_gib", "cpu_link_gb_s", "disk_gb_s"),
}
# Controls drawn by the page in a widget of their own: the headroom slider shows percent.
WIDGET_OF = {"headroom_bp": "headroom_pct"}


def unplaced(controls=CONTROLS) -> tuple[str, ...]:
    """The controls no group places: drawn by kind under "More inputs" (none today; a new field lands there)."""
    placed = {k for group, keys in GROUP_KEYS.items() if group != "more" for k in keys}
    return tuple(name for name in controls if WIDGET_OF.get(name, name) not in placed)


GROUP_KEYS["more"] = unplaced()
# Control labels: the library's names for the inputs (planner.labels), in the controls' units.
LABELS = {name: label(name) for name in INPUTS} | {name: c.label for name, c in CONTROLS.items()} | {
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


def widget_range(c: Control) -> tuple[float | None, float | None]:
    """A numeric control's (min, max): the page's narrower range where it has one
    (:data:`pages.ui.state.WIDGET_RANGES`), else the field's bounds; floats for a float field
    (Streamlit wants one type for value, min and max)."""
    lo, hi = S.WIDGET_RANGES.get(c.name, (c.lo, c.hi))
    if c.kind == "float":
        return (None if lo is None else float(lo)), (None if hi is None else float(hi))
    return lo, hi


def _help(key: str) -> str | None:
    c = CONTROLS.get(key)
    return c.detail if c is not None else None


def _num(key: str, err_key, err, *, optional: bool | None = None, step=None, fmt=None, help=None, placeholder=None, disabled=False, control: Control | None = None) -> None:
    """A number input rendered from the field's control: integer or not, its range, empty-able
    when the field is nullable (``optional`` overrides), its help from the labels."""
    c = control or CONTROLS[key]
    lo, hi = widget_range(c)
    optional = c.nullable if optional is None else optional
    kwargs = {"key": key, "help": help if help is not None else c.detail, "disabled": disabled, "min_value": lo, "max_value": hi}
    if step is not None:
        kwargs["step"] = step
    elif c.kind == "int":
        kwargs["step"] = 1
    if fmt:
        kwargs["format"] = fmt
    if optional:
        kwargs["value"] = None
        kwargs["placeholder"] = placeholder or "none"
    st.number_input(LABELS.get(key, c.label), **kwargs)
    _error_below(key, err_key, err)


def _select(key: str, err_key, err, options=None, *, format_func=str, help=None, disabled=False, control: Control | None = None) -> None:
    """A select box of the field's choices (its Literal's values, else the values it usually takes)."""
    c = control or CONTROLS[key]
    options = list(options if options is not None else c.choices or c.suggestions or ())
    st.selectbox(LABELS.get(key, c.label), options, key=key, format_func=format_func, help=help if help is not None else c.detail, disabled=disabled)
    _error_below(key, err_key, err)


def _slider(key: str, err_key, err, *, step: float, fmt: str | None = None) -> None:
    """A slider over the control's range."""
    lo, hi = widget_range(CONTROLS[key])
    st.slider(LABELS[key], lo, hi, step=step, key=key, help=_help(key), **({"format": fmt} if fmt else {}))
    _error_below(key, err_key, err)


def render_control(c: Control, err_key, err) -> None:
    """A control the page gives no place of its own, by its kind."""
    if c.kind == "bool":
        st.checkbox(LABELS.get(c.name, c.label), key=c.name, help=c.detail)
        _error_below(c.name, err_key, err)
    elif c.kind == "choice" or c.suggestions:
        _select(c.name, err_key, err, control=c)
    elif c.kind == "text":
        st.text_input(LABELS.get(c.name, c.label), key=c.name, help=c.detail, max_chars=S.MAX_TEXT_CHARS.get(c.name))
        _error_below(c.name, err_key, err)
    else:
        _num(c.name, err_key, err, step=None if c.kind == "int" else 1.0, control=c)


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
                    _num("system_tokens", err_key, err)
                    _num("retrieval_tokens", err_key, err)
                    _num("user_tokens", err_key, err)
                with b:
                    _num("tool_tokens", err_key, err)
                    _num("history_tokens", err_key, err)
                    _num("output_tokens", err_key, err)
            _num("input_tokens", err_key, err, placeholder="sum of the parts")
            cfg_max = geo.max_position_embeddings
            _num("max_context", err_key, err, placeholder=f"config: {cfg_max:,}" if cfg_max else "required: the config has none")
            if any(layer.kind == "cross" for layer in geo.layers):
                _num("encoder_tokens", err_key, err)

    exp = group("cache", "KV cache", ":material/memory:", True)
    if opened(exp):
        with exp:
            _select("kv_dtype", err_key, err, format_func=lambda d: _kv_dtype_label(model, d))
            if model.geometry.mtp_layers or (model.geometry.compressed and model.geometry.compressed.mtp_ratios):
                st.checkbox(LABELS["mtp"], key="mtp", help=_help("mtp"))
                _error_below("mtp", err_key, err)
            _select("runtime", err_key, err, help="\n\n".join(f"**{k}**: {v}" for k, v in RUNTIMES.items()))
            _select("vllm_version", err_key, err, disabled=st.session_state.get("runtime") != "vllm")
            if st.session_state.get("runtime") == "sglang":  # SGLang's launch flags (empty: SGLang's defaults)
                for key, extra in (("mem_fraction_static", {"step": 0.01, "fmt": "%.3f"}), ("chunked_prefill_size", {}), ("page_size", {})):
                    _num(key, err_key, err, placeholder="SGLang's default", help=CONTROLS[key].description, **extra)
            if st.session_state.get("runtime") == "vllm":  # vLLM's start-up settings: its budget's terms and the serve line
                for name in VLLM_STARTUP:
                    if name in ("max_loras", "max_lora_rank") and not st.session_state.get("enable_lora"):
                        continue
                    render_control(CONTROLS[name], err_key, err)
            _select("reservation", err_key, err, help="\n\n".join(RESERVATION_HELP.values()))
            sizes = list(CONTROLS["block_tokens"].suggestions or ())
            if st.session_state.get("block_tokens") not in sizes:
                sizes.append(st.session_state.get("block_tokens"))
            _select("block_tokens", err_key, err, sizes)

    exp = group("hardware", "Hardware and memory", ":material/developer_board:", True)
    if opened(exp):
        with exp:
            _select("gpu", err_key, err, S.GPU_OPTIONS, format_func=lambda g: f"{g} ({CATALOG[g].memory_gib:g} GiB)" if g in CATALOG else "Custom memory size…")
            _num("device_gib", err_key, err, optional=False, step=1.0, fmt="%.1f", disabled=st.session_state.get("gpu") != S.CUSTOM_GPU)
            if st.session_state.get("gpu") == S.CUSTOM_GPU:
                with _pair() as (a, b):
                    with a:
                        _num("device_bandwidth_gb_s", err_key, err, step=100.0, fmt="%.0f", placeholder="1,000")
                    with b:
                        _num("device_bf16_tflops", err_key, err, step=10.0, fmt="%.0f", placeholder="100")
            with _pair() as (a, b):
                with a:
                    _num("gpu_count", err_key, err)
                with b:
                    _num("tp", err_key, err)
            with _pair() as (a, b):
                with a:
                    _num("ep", err_key, err)
                with b:
                    _num("dp", err_key, err)
            _num("pp", err_key, err)
            render_control(CONTROLS["disagg"], err_key, err)  # its pools' card is under the results
            st.slider(LABELS["headroom_pct"], 0.0, S.WIDGET_RANGES["headroom_bp"][1] / 100, step=0.5, format="%.1f%%", key="headroom_pct", help=_help("headroom_bp"))
            _error_below("headroom_pct", err_key, err)
            _select("weight_dtype", err_key, err)
            _num("workspace_gib", err_key, err, step=0.25, fmt="%.2f")
            _num("model_resident_gib", err_key, err, step=1.0, fmt="%.2f", placeholder="weights estimate / TP")

    exp = group("load", "Load and SLOs", ":material/speed:", True)
    if opened(exp):
        with exp:
            _num("sequences", err_key, err)
            render_control(CONTROLS["request_rate"], err_key, err)
            _num("bench_prompts", err_key, err)
            with _pair() as (a, b):
                with a:
                    _num("itl_slo_ms", err_key, err, step=1.0, fmt="%.2f")
                    _num("max_num_seqs", err_key, err)
                with b:
                    _num("ttft_slo_ms", err_key, err, step=10.0, fmt="%.1f")
                    _num("tenant_quota", err_key, err)
            _num("max_batched_tokens", err_key, err)
            render_control(CONTROLS["serving_engine"], err_key, err)
            engine = serving_engine(st.session_state.get("runtime") or "vllm", st.session_state.get("serving_engine") or "auto")
            if engine == "sglang":  # SGLang's scheduler flag
                _num("recv_interval", err_key, err)
            elif engine == "trtllm":  # TensorRT-LLM's batch waiting
                _num("batch_wait_iters", err_key, err)
                _num("batch_wait_tokens_ratio", err_key, err, step=0.05, fmt="%g")

    exp = group("speculation", "Speculative decoding", ":material/fast_forward:", False)
    if opened(exp):
        with exp:
            for name in GROUP_KEYS["speculation"]:
                render_control(CONTROLS[name], err_key, err)

    exp = group("sharing", "Prefix sharing and cost", ":material/share:", False)
    if opened(exp):
        with exp:
            _num("shared_prefix_tokens", err_key, err)
            _slider("prefix_hit_rate", err_key, err, step=0.05)
            _num("tenants", err_key, err)
            _num("gpu_hour_price", err_key, err, step=0.1, fmt="%.2f")

    exp = group("efficiency", "Efficiency (MFU / MBU)", ":material/tune:", False)
    if opened(exp):
        with exp:
            _slider("mfu", err_key, err, step=0.01)
            _slider("mbu", err_key, err, step=0.01)

    exp = group("observed", "Observed latency", ":material/timer:", False)
    if opened(exp):
        with exp:
            st.caption(
                "To replace the roofline estimate with a measurement, give all three observed phases: prefill, first decode and remaining decode "
                "(remaining decode is 0 only when one token is generated). Queue and preprocessing add to either."
            )
            with _pair() as (a, b):
                with a:
                    _num("queue_ms", err_key, err, step=1.0, fmt="%.2f")
                    _num("prefill_ms", err_key, err, step=1.0, fmt="%.2f")
                    _num("remaining_decode_ms", err_key, err, step=1.0, fmt="%.2f")
                with b:
                    _num("preprocessing_ms", err_key, err, step=1.0, fmt="%.2f")
                    _num("first_decode_ms", err_key, err, step=1.0, fmt="%.2f")
                    _num("generated_tokens", err_key, err, placeholder="output reserve")
            render_control(CONTROLS["bench_calibration"], err_key, err)

    exp = group("sessions", "Sessions and cache tiers", ":material/forum:", False)
    if opened(exp):
        with exp:
            st.caption(
                "A chat or agent workload: sessions of turns, each resending the history. Its hit rate per tier comes from an LRU model "
                "(shared prefix per tenant, documents from the retrieved-context tokens); the CPU and disk tiers are per replica."
            )
            _num("sessions_per_min", err_key, err, step=10.0, fmt="%.4g", placeholder="none: no session workload")
            with _pair() as (a, b):
                with a:
                    _num("turns", err_key, err, placeholder="1")
                    _num("doc_catalog", err_key, err, placeholder="none")
                with b:
                    _num("think_time_s", err_key, err, step=5.0, fmt="%.4g", placeholder="30")
                    _num("doc_zipf", err_key, err, step=0.1, fmt="%.2f", placeholder="1.0")
            with _pair() as (a, b):
                with a:
                    _num("cpu_tier_gib", err_key, err, step=64.0, fmt="%.4g")
                    _num("cpu_link_gb_s", err_key, err, step=1.0, fmt="%.4g", placeholder="GPU default")
                with b:
                    _num("disk_tier_gib", err_key, err, step=256.0, fmt="%.4g")
                    _num("disk_gb_s", err_key, err, step=0.5, fmt="%.4g", placeholder="6.8")

    if GROUP_KEYS["more"]:
        exp = group("more", "More inputs", ":material/add_circle:", False)
        if opened(exp):
            with exp:
                for name in GROUP_KEYS["more"]:
                    render_control(CONTROLS[name], err_key, err)

    st.button("Reset inputs to defaults", key="reset_inputs", on_click=S.reset_inputs, icon=":material/restart_alt:", help="The defaults, then this model's deployment suggestions (TP, context) again.")




def render_error_banner(err, err_key: str | None, good) -> None:
    """The page-level error: which control, why, and that the last good plan is shown."""
    where = LABELS.get(err_key or "", None)
    msg = f"**{where}**: {md(S.error_text(err))}" if where else md(S.error_sentence(err))
    st.error(msg + ("  \nBelow, greyed: the last good plan (" + md(good.ref.label()) + "), not these inputs." if good else ""), icon=":material/error:")
