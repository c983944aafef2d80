"""Shared helpers for the app's pages (this module is not a page).

Everything numeric comes from :mod:`planner`; this module only loads models (cached), keeps
the UI state, turns widgets into :class:`~planner.plan.PlanInputs` and formats numbers.

UI state lives in ``st.session_state`` and is derivable from two entries:

* ``plan_values``: one dict of plan input values (the :class:`PlanInputs` fields, in the
  library's units, e.g. ``headroom_bp``), the source of truth behind the widgets;
* ``model_ref`` (a :class:`~planner.source.ModelRef` as a dict) plus ``model_config`` (the
  config dict for Hub, uploaded or pasted models; ``None`` for presets).

Widgets are keyed by the field name (``headroom_bp`` is the slider ``headroom_pct``, in %) and
seeded from ``plan_values`` when absent, so values survive page switches and a later share
link only has to write ``plan_values`` (see :func:`apply_values`).
"""

from __future__ import annotations

import hashlib
from typing import Any

import streamlit as st

from planner.configio import parse_config_text
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.plan import Plan, PlanInputs, PreparedModel, compute_plan, make_inputs, prepare_model
from planner.presets import DEFAULT_PRESET, list_presets
from planner.source import ModelRef, preset_ref, upload_ref

# --------------------------------------------------------------------------- formatting

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def fmt_num(value: float, decimals: int = 2) -> str:
    """Thousands separators, at most ``decimals`` decimals, no trailing zeros: 1234.5 -> "1,234.5"."""
    if value is None:
        return "–"
    if float(value).is_integer():
        return f"{int(value):,}"
    text = f"{value:,.{decimals}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def fmt_bytes(n: float | None, decimals: int = 2) -> str:
    """Binary units with thousands separators: 1234 -> "1.21 KiB", 335544320 -> "320 MiB", 1000 -> "1,000 B"."""
    if n is None:
        return "–"
    size = abs(n)
    unit = 0
    while size >= 1024 and unit < len(_UNITS) - 1:
        size /= 1024
        unit += 1
    sign = "-" if n < 0 else ""
    if unit == 0:
        return f"{sign}{int(size):,} B"
    return f"{sign}{fmt_num(size, decimals)} {_UNITS[unit]}"


def fmt_bytes_exact(n: int) -> str:
    """"320 MiB (335,544,320 B)"; plain "1,000 B" under 1 KiB."""
    return fmt_bytes(n) if abs(n) < 1024 else f"{fmt_bytes(n)} ({int(n):,} B)"


def fmt_ms(ms: float | None) -> str:
    if ms is None:
        return "–"
    return f"{ms:,.2f} ms" if abs(ms) < 100 else f"{ms:,.1f} ms"


def mib(n: float) -> float:
    """Bytes to MiB (unit conversion for chart axes)."""
    return n / (1 << 20)


def gib(n: float) -> float:
    """Bytes to GiB (unit conversion for chart axes)."""
    return n / (1 << 30)


# --------------------------------------------------------------------------- cached loading


@st.cache_resource(show_spinner=False)
def presets() -> tuple:
    """The bundled presets (name, Hub id, family), listed once per process."""
    return tuple(list_presets())


@st.cache_resource(show_spinner=False)
def preset_names() -> tuple[str, ...]:
    return tuple(p.name for p in presets())


@st.cache_resource(show_spinner=False)
def _preset_labels() -> dict[str, str]:
    return {p.name: f"{p.name} · {p.hub_id or p.family}" for p in presets()}


def preset_label(name: str) -> str:
    return _preset_labels().get(name, name)


@st.cache_resource(show_spinner=False, max_entries=64)
def load_preset(name: str) -> tuple[ModelRef, PreparedModel]:
    """A preset's reference and prepared model (parsed once per process)."""
    return preset_ref(name)


@st.cache_resource(show_spinner=False, max_entries=64)
def _prepared(config_key: str, _config: dict) -> PreparedModel:
    return prepare_model(_config)


def prepared_from_config(config: dict, key: str | None = None) -> PreparedModel:
    """A prepared model for a config dict, cached by its content hash."""
    return _prepared(key or hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest(), config)


def start_preset() -> str:
    """The preset the session opens on: ``streamlit run app.py -- --preset NAME`` or the default."""
    wanted = st.session_state.get("start_preset") or DEFAULT_PRESET
    names = preset_names()
    if wanted in names:
        return wanted
    return DEFAULT_PRESET if DEFAULT_PRESET in names else (names[0] if names else DEFAULT_PRESET)


# --------------------------------------------------------------------------- model source

SOURCES = ("Preset", "Hugging Face Hub", "Upload config.json", "Paste JSON")
HUB_SPINNER = "Fetching config from the Hugging Face Hub…"


def _loaded() -> dict:
    return st.session_state.setdefault("loaded_models", {})


def _source_errors() -> dict:
    return st.session_state.setdefault("source_errors", {})


def _remember(source: str, ref: ModelRef, config: dict, notes: tuple[str, ...] = ()) -> None:
    _loaded()[source] = {"ref": ref.model_dump(exclude_none=True), "config": config, "notes": tuple(notes)}
    _source_errors().pop(source, None)


def active_model() -> tuple[ModelRef, PreparedModel, tuple[str, ...]]:
    """The model the Plan page shows: (reference, prepared model, source notes).

    Derived from ``model_ref`` / ``model_config`` in the session (the start preset if none).
    """
    ref_dict = st.session_state.get("model_ref")
    config = st.session_state.get("model_config")
    if ref_dict:
        try:
            ref = ModelRef(**ref_dict)
            if ref.kind == "preset":
                ref, model = load_preset(ref.name or "")
                return ref, model, ()
            if config is not None:
                return ref, prepared_from_config(config, ref.config_hash), tuple(st.session_state.get("model_notes", ()))
        except PlannerError:
            pass
    ref, model = load_preset(start_preset())
    return ref, model, ()


def _set_active(ref: ModelRef, config: dict | None, notes: tuple[str, ...] = ()) -> None:
    st.session_state["model_ref"] = ref.model_dump(exclude_none=True)
    st.session_state["model_config"] = config
    st.session_state["model_notes"] = tuple(notes)


def _handle_upload(uploaded: Any) -> None:
    seen = st.session_state.get("upload_seen")
    if uploaded is None:
        st.session_state["upload_seen"] = None
        return
    marker = f"{uploaded.file_id}:{uploaded.name}:{uploaded.size}"
    if marker == seen:
        return
    st.session_state["upload_seen"] = marker
    try:
        config = parse_config_text(uploaded.getvalue(), source=uploaded.name or "config.json")
        ref, _model = upload_ref(config, uploaded.name)
    except PlannerError as exc:
        _source_errors()["Upload config.json"] = f"{uploaded.name}: {exc}"
        _loaded().pop("Upload config.json", None)
        return
    _remember("Upload config.json", ref, config)


def _handle_paste(text: str) -> None:
    digest = hashlib.sha256((text or "").encode()).hexdigest()
    if st.session_state.get("paste_seen") == digest:
        return
    st.session_state["paste_seen"] = digest
    if not (text or "").strip():
        _source_errors().pop("Paste JSON", None)
        _loaded().pop("Paste JSON", None)
        return
    try:
        config = parse_config_text(text, source="pasted JSON")
        ref, _model = upload_ref(config, "pasted config")
    except PlannerError as exc:
        _source_errors()["Paste JSON"] = str(exc)
        _loaded().pop("Paste JSON", None)
        return
    _remember("Paste JSON", ref, config)


def _fetch_hub(text: str, revision: str, token: str) -> None:
    try:
        from planner import hub  # lazy: huggingface_hub is only imported for Hub models
        from planner.source import hub_ref
    except ImportError as exc:  # the Hub module is optional at run time
        _source_errors()["Hugging Face Hub"] = f"Hub support is not available in this installation ({exc.name or exc})."
        return
    try:
        repo_id, rev = hub.parse_model_ref(text or "")
        if "@" not in (text or ""):
            rev = (revision or "").strip() or "main"
        ref, model, fetched = hub_ref(repo_id, rev, hub.resolve_token(token or None))
    except hub.HubError as exc:
        _source_errors()["Hugging Face Hub"] = str(exc)
        return
    except PlannerError as exc:
        _source_errors()["Hugging Face Hub"] = f"{text}: {exc}"
        return
    notes = tuple(getattr(fetched, "notes", ()) or ())
    _remember("Hugging Face Hub", ref, model.config, notes)


def model_source_widget() -> tuple[ModelRef, PreparedModel, tuple[str, ...]]:
    """Render the model-source controls in the current container; return the active model.

    Errors appear under the control that caused them; the previous model stays active.
    """
    names = preset_names()
    if "preset" not in st.session_state:
        ref_dict = st.session_state.get("model_ref") or {}
        st.session_state["preset"] = ref_dict.get("name") if ref_dict.get("kind") == "preset" and ref_dict.get("name") in names else start_preset()
    if "model_source" not in st.session_state:
        kind = (st.session_state.get("model_ref") or {}).get("kind", "preset")
        st.session_state["model_source"] = {"hub": "Hugging Face Hub", "upload": "Upload config.json"}.get(kind, "Preset")
    source = st.segmented_control("Model source", SOURCES, key="model_source", required=True, help="Where the model config comes from.")
    source = source or "Preset"
    errors = _source_errors()
    if source == "Preset":
        st.selectbox(
            "Preset",
            names,
            key="preset",
            format_func=preset_label,
            help="Type to search the bundled configs (model_configs/).",
        )
        if st.session_state.get("start_preset") and st.session_state["start_preset"] not in names and not st.session_state.get("start_warned"):
            st.session_state["start_warned"] = True
            st.warning(f"Unknown preset {st.session_state['start_preset']!r} on the command line; opened {start_preset()} instead.")
        name = st.session_state.get("preset") or start_preset()
        try:
            ref, _model = load_preset(name)
        except PlannerError as exc:
            st.error(str(exc))
        else:
            _set_active(ref, None)
    elif source == "Hugging Face Hub":
        st.text_input("Hub model id", key="hub_repo", placeholder="meta-llama/Llama-3.1-8B-Instruct", help="ORG/NAME, optionally ORG/NAME@REVISION.")
        if "hub_revision" not in st.session_state:
            st.session_state["hub_revision"] = "main"
        st.text_input("Revision", key="hub_revision", help="Branch, tag or commit sha; the resolved commit is recorded.")
        st.text_input("Access token (optional)", key="hub_token", type="password", help="For gated or private repos; falls back to HF_TOKEN. Never stored in plans, links or reports.")
        if st.button("Fetch config", key="hub_fetch", icon=":material/cloud_download:"):
            with st.spinner(HUB_SPINNER):
                _fetch_hub(st.session_state.get("hub_repo", ""), st.session_state.get("hub_revision", "main"), st.session_state.get("hub_token", ""))
        if errors.get(source):
            st.error(errors[source], icon=":material/error:")
    elif source == "Upload config.json":
        uploaded = st.file_uploader("config.json", type=["json"], key="config_upload", help="A Hugging Face config.json (at most 1 MiB).")
        _handle_upload(uploaded)
        if errors.get(source):
            st.error(errors[source], icon=":material/error:")
    else:
        text = st.text_area("Config JSON", key="config_paste", height=160, placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}', help="Paste a config.json; applied when the field loses focus (Ctrl+Enter).")
        _handle_paste(text)
        if errors.get(source):
            st.error(errors[source], icon=":material/error:")

    if source != "Preset":
        hit = _loaded().get(source)
        if hit:
            _set_active(ModelRef(**hit["ref"]), hit["config"], hit.get("notes", ()))
        elif not errors.get(source):
            st.caption("No config loaded from this source yet: still showing the previous model.")
    ref, model, notes = active_model()
    if source != "Preset" or ref.kind != "preset":
        st.caption(f"Active model: {ref.label()}")
    return ref, model, notes


# --------------------------------------------------------------------------- plan values

FIELDS: tuple[str, ...] = tuple(PlanInputs.model_fields)
DEFAULT_VALUES: dict[str, Any] = PlanInputs().model_dump()
WIDGET_KEYS: dict[str, str] = {name: name for name in FIELDS} | {"headroom_bp": "headroom_pct"}
CUSTOM_GPU = "custom"
GPU_OPTIONS: tuple[str, ...] = (*CATALOG, CUSTOM_GPU)
DEFAULT_CUSTOM_GIB = 80.0


def plan_values() -> dict[str, Any]:
    """The session's plan input values (the Plan page's state), defaults filled in."""
    values = st.session_state.get("plan_values")
    if not isinstance(values, dict):
        values = dict(DEFAULT_VALUES)
        st.session_state["plan_values"] = values
    return values


def _to_widget(values: dict[str, Any]) -> dict[str, Any]:
    out = {WIDGET_KEYS[name]: values.get(name, DEFAULT_VALUES[name]) for name in FIELDS}
    out["headroom_pct"] = values.get("headroom_bp", DEFAULT_VALUES["headroom_bp"]) / 100
    custom = values.get("device_gib") is not None
    gpu = values.get("gpu", DEFAULT_VALUES["gpu"])
    out["gpu"] = CUSTOM_GPU if custom or gpu not in CATALOG else gpu
    out["device_gib"] = values.get("device_gib") or DEFAULT_CUSTOM_GIB
    return out


def seed_widgets(values: dict[str, Any] | None = None, *, force: bool = False) -> None:
    """Put ``values`` into the widget keys (only missing keys unless ``force``)."""
    for key, value in _to_widget(values if values is not None else plan_values()).items():
        if force or key not in st.session_state:
            st.session_state[key] = value


def apply_values(values: dict[str, Any]) -> None:
    """Replace the plan input values (e.g. from a share link or a reset) and the widgets with them.

    Call it before the widgets are drawn in a run, or from a widget callback.
    """
    merged = dict(DEFAULT_VALUES) | {k: v for k, v in values.items() if k in DEFAULT_VALUES}
    st.session_state["plan_values"] = merged
    seed_widgets(merged, force=True)


def read_widgets() -> dict[str, Any]:
    """Plan input values from the widget keys (library units), stored back into ``plan_values``."""
    seed_widgets()
    state = st.session_state
    values: dict[str, Any] = {}
    for name in FIELDS:
        values[name] = state[WIDGET_KEYS[name]]
    pct = state["headroom_pct"]
    values["headroom_bp"] = round(pct * 100) if isinstance(pct, (int, float)) else pct
    if state["gpu"] == CUSTOM_GPU:
        values["gpu"] = CUSTOM_GPU
        values["device_gib"] = state["device_gib"]
    else:
        values["device_gib"] = None
    st.session_state["plan_values"] = values
    return values


def build_plan(values: dict[str, Any], model: PreparedModel) -> tuple[Plan | None, PlannerError | None]:
    """(plan, None) or (None, the PlannerError naming the field)."""
    try:
        inputs = make_inputs(**values)
        return compute_plan(inputs, model), None
    except PlannerError as exc:
        return None, exc


# Library field names that are not widgets -> the widget that shows the message.
ERROR_ALIASES = {
    "headroom_bp": "headroom_pct",
    "device": "device_gib",
    "device_bytes": "gpu",
    "tokens": "max_context",
    "kv_bytes_per_sequence": "kv_dtype",
}


def error_key(err: PlannerError | None, values: dict[str, Any]) -> str | None:
    """The widget key an error belongs next to (``None``: no widget matches)."""
    if err is None:
        return None
    field = str(err.field).split(".")[0]
    if field == "model_resident_gib" and values.get("model_resident_gib") is None:
        return "tp"  # the weights estimate does not fit: more GPUs (tp) or a smaller dtype
    field = ERROR_ALIASES.get(field, field)
    return WIDGET_KEYS.get(field, field if field in WIDGET_KEYS.values() else None)


def error_text(err: PlannerError) -> str:
    """The message shown next to a field: the reason, with the offending value."""
    if err.value is None or err.value == "":
        return err.reason
    if str(err.value) in err.reason or (isinstance(err.value, int) and f"{err.value:,}" in err.reason):
        return err.reason
    shown = repr(err.value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{err.reason} (got {shown})"


def remember_good(plan: Plan, model: PreparedModel, ref: ModelRef, notes: tuple[str, ...] = ()) -> None:
    st.session_state["last_good"] = {"plan": plan, "model": model, "ref": ref, "notes": tuple(notes)}


def last_good() -> dict | None:
    return st.session_state.get("last_good")


def safe(render, *args, what: str = "this section", **kwargs) -> None:
    """Run a render function; an unexpected error becomes one line, never a traceback."""
    try:
        render(*args, **kwargs)
    except PlannerError as exc:
        st.error(f"Cannot draw {what}: {exc}", icon=":material/error:")
    except Exception as exc:  # noqa: BLE001 - the UI must never show a traceback
        st.error(f"Cannot draw {what}: {type(exc).__name__}: {exc}", icon=":material/error:")


# --------------------------------------------------------------------------- shared result pieces


def binding_phrase(plan: Plan) -> str:
    from planner.capacity import LIMIT_PHRASES

    binding = plan.kv_cache["binding_constraint"]
    return LIMIT_PHRASES.get(binding, binding)


def admission_badge(plan: Plan) -> None:
    kv = plan.kv_cache
    if kv["admitted"]:
        st.badge(f"Admitted · {kv['requested_sequences']:,} of at most {kv['admissible_sequences']:,} sequences", icon=":material/check_circle:", color="green")
    else:
        st.badge(f"Refused · at most {kv['admissible_sequences']:,} of {kv['requested_sequences']:,} requested", icon=":material/block:", color="red")
    st.caption(f"Binding constraint: **{binding_phrase(plan)}**" + (f" — {kv['admission_error']}" if kv.get("admission_error") else ""))
