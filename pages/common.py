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

Share links and plan files (:mod:`planner.share`) restore through :func:`restore`; the Plan
page writes the query string back after every good plan (:func:`sync_query_params`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from datetime import UTC, datetime
from typing import Any

import streamlit as st

from planner.configio import parse_config_text
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.plan import Plan, PlanInputs, PreparedModel, compute_plan, make_inputs, prepare_model
from planner.presets import DEFAULT_PRESET, list_presets
from planner.source import ModelRef, example_ref, preset_ref, upload_ref

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
    if name == EXAMPLE:
        return "seed example · dense 32 layers, 8 KV heads × 128"
    return _preset_labels().get(name, name)


@st.cache_resource(show_spinner=False, max_entries=64)
def load_preset(name: str) -> tuple[ModelRef, PreparedModel]:
    """A preset's reference and prepared model (parsed once per process)."""
    return preset_ref(name)


EXAMPLE = "__example__"  # the seed example in the preset picker (a share link's ``m=example``)


def load_choice(name: str) -> tuple[ModelRef, PreparedModel]:
    """A preset picker choice: a bundled preset or the seed example."""
    return example_ref() if name == EXAMPLE else load_preset(name)


@st.cache_resource(show_spinner=False, max_entries=64)
def _prepared(config_key: str, _config: dict, _counts: dict | None) -> PreparedModel:
    return prepare_model(_config, _counts)


def prepared_from_config(config: dict, key: str | None = None, counts: dict | None = None) -> PreparedModel:
    """A prepared model for a config dict (plus safetensors parameter counts), cached by content hash."""
    key = key or hashlib.sha256(repr(sorted(config.items())).encode()).hexdigest()
    if counts:
        key += ":" + hashlib.sha256(repr(sorted(counts.items())).encode()).hexdigest()
    return _prepared(key, config, counts)


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


def _remember(source: str, ref: ModelRef, config: dict, notes: tuple[str, ...] = (), counts: dict | None = None) -> None:
    _loaded()[source] = {"ref": ref.model_dump(exclude_none=True), "config": config, "notes": tuple(notes), "counts": counts}
    _source_errors().pop(source, None)
    if source != "Hugging Face Hub":
        _check_expected_upload(ref)


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
            if ref.kind == "example":
                ref, model = example_ref()
                return ref, model, ()
            if config is not None:
                model = prepared_from_config(config, ref.config_hash, st.session_state.get("model_counts"))
                return ref, model, tuple(st.session_state.get("model_notes", ()))
        except PlannerError:
            pass
    ref, model = load_preset(start_preset())
    return ref, model, ()


def active_upload_config() -> dict | None:
    """The config of the active model when it was uploaded or pasted (share links embed it)."""
    ref = st.session_state.get("model_ref") or {}
    return st.session_state.get("model_config") if ref.get("kind") == "upload" else None


def _set_active(ref: ModelRef, config: dict | None, notes: tuple[str, ...] = (), counts: dict | None = None) -> None:
    st.session_state["model_ref"] = ref.model_dump(exclude_none=True)
    st.session_state["model_config"] = config
    st.session_state["model_notes"] = tuple(notes)
    st.session_state["model_counts"] = counts


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


def secret_token() -> str | None:
    """``HF_TOKEN`` from Streamlit secrets, or None (also when there is no secrets file at all)."""
    try:
        if not st.secrets.load_if_toml_exists():
            return None
        value = st.secrets.get("HF_TOKEN")
    except Exception:  # noqa: BLE001 - a missing or broken secrets file just means "no token there"
        return None
    return value.strip() if isinstance(value, str) and value.strip() else None


def hub_token(explicit: str | None) -> str | None:
    """The session's password field, else Streamlit secrets, else the ``HF_TOKEN`` environment variable."""
    from planner import hub

    if explicit and explicit.strip():
        return hub.resolve_token(explicit)
    return hub.resolve_token(secret_token())  # None -> HF_TOKEN from the environment


def fetch_hub(repo_id: str, revision: str, explicit_token: str | None) -> bool:
    """Fetch a Hub model into the session's Hub slot; on failure the error sits next to the Hub fields.

    The token is used for this request only: it is never stored in a reference, link, plan
    file or report.
    """
    source = "Hugging Face Hub"
    try:
        from planner import hub  # lazy: huggingface_hub is only imported for Hub models
        from planner.source import hub_ref
    except ImportError as exc:  # the Hub module is optional at run time
        _source_errors()[source] = f"Hub support is not available in this installation ({exc.name or exc})."
        return False
    wait = hub.request_wait_s(st.session_state.setdefault("_session_key", secrets.token_hex(16)))
    if wait:
        _source_errors()[source] = f"Too many Hub requests from this session (at most {hub.requests_per_minute()} a minute); try again in {wait:.0f} s."
        return False
    try:
        ref, model, fetched = hub_ref(repo_id, revision, hub_token(explicit_token))
    except hub.HubError as exc:
        _source_errors()[source] = str(exc)
        return False
    except PlannerError as exc:
        _source_errors()[source] = f"{repo_id}@{revision}: {exc}"
        return False
    notes = tuple(getattr(fetched, "notes", ()) or ())
    _remember(source, ref, model.config, notes, getattr(fetched, "parameter_counts", None))
    return True


def _fetch_hub(text: str, revision: str, token: str) -> None:
    try:
        from planner import hub
    except ImportError as exc:
        _source_errors()["Hugging Face Hub"] = f"Hub support is not available in this installation ({exc.name or exc})."
        return
    try:
        repo_id, rev = hub.parse_model_ref(text or "")
    except hub.HubError as exc:
        _source_errors()["Hugging Face Hub"] = str(exc)
        return
    if "@" not in (text or ""):
        rev = (revision or "").strip() or "main"
    fetch_hub(repo_id, rev, token)


def model_source_widget() -> tuple[ModelRef, PreparedModel, tuple[str, ...]]:
    """Render the model-source controls in the current container; return the active model.

    Errors appear under the control that caused them; the previous model stays active.
    """
    names = preset_names()
    if "preset" not in st.session_state:
        ref_dict = st.session_state.get("model_ref") or {}
        st.session_state["preset"] = ref_dict.get("name") if ref_dict.get("kind") == "preset" and ref_dict.get("name") in names else start_preset()
    choices = (*names, EXAMPLE)
    if "model_source" not in st.session_state:
        kind = (st.session_state.get("model_ref") or {}).get("kind", "preset")
        st.session_state["model_source"] = {"hub": "Hugging Face Hub", "upload": "Upload config.json"}.get(kind, "Preset")
    source = st.segmented_control("Model source", SOURCES, key="model_source", required=True, help="Where the model config comes from.")
    source = source or "Preset"
    errors = _source_errors()
    if source == "Preset":
        st.selectbox(
            "Preset",
            choices,
            key="preset",
            format_func=preset_label,
            help="Type to search the bundled configs (model_configs/).",
        )
        if st.session_state.get("start_preset") and st.session_state["start_preset"] not in names and not st.session_state.get("start_warned"):
            st.session_state["start_warned"] = True
            st.warning(f"Unknown preset {st.session_state['start_preset']!r} on the command line; opened {start_preset()} instead.")
        name = st.session_state.get("preset") or start_preset()
        try:
            ref, _model = load_choice(name)
        except PlannerError as exc:
            st.error(str(exc))
        else:
            _set_active(ref, None)
    elif source == "Hugging Face Hub":
        st.text_input("Hub model id", key="hub_repo", placeholder="meta-llama/Llama-3.1-8B-Instruct", help="ORG/NAME, optionally ORG/NAME@REVISION.")
        if "hub_revision" not in st.session_state:
            st.session_state["hub_revision"] = "main"
        st.text_input("Revision", key="hub_revision", help="Branch, tag or commit sha; the resolved commit is recorded.")
        st.text_input("Access token (optional)", key="hub_token", type="password", help="For gated or private repos; kept in this browser session only. Falls back to HF_TOKEN in Streamlit secrets, then the HF_TOKEN environment variable. Never put in plans, links or reports.")
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
        expected = st.session_state.get("expected_upload")
        if expected and not _loaded().get(source):
            st.warning(expected_upload_text(expected), icon=":material/upload_file:")
        if st.session_state.get("upload_mismatch"):
            st.warning(st.session_state["upload_mismatch"], icon=":material/warning:")
    else:
        text = st.text_area("Config JSON", key="config_paste", height=160, placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}', help="Paste a config.json; applied when the field loses focus (Ctrl+Enter).")
        _handle_paste(text)
        if errors.get(source):
            st.error(errors[source], icon=":material/error:")

    if source != "Preset":
        hit = _loaded().get(source)
        if hit:
            _set_active(ModelRef(**hit["ref"]), hit["config"], hit.get("notes", ()), hit.get("counts"))
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
    else:  # a catalog GPU: the custom device's figures do not apply
        values["device_gib"] = None
        values["device_bandwidth_gb_s"] = None
        values["device_bf16_tflops"] = None
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


def remember_good(plan: Plan, model: PreparedModel, ref: ModelRef, notes: tuple[str, ...] = (), config: dict | None = None) -> None:
    st.session_state["last_good"] = {"plan": plan, "model": model, "ref": ref, "notes": tuple(notes), "config": config}


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


# --------------------------------------------------------------------------- widget ranges

# Controls whose range is narrower than what PlanInputs accepts (a link, a plan file or a probe
# calibration may carry such values): field -> (low, high) in library units.
WIDGET_RANGES: dict[str, tuple[float, float]] = {
    "headroom_bp": (0, 5000),  # the slider: 0-50 %
    "device_gib": (0.5, 4096.0),
    "device_bandwidth_gb_s": (0.001, 100_000.0),
    "device_bf16_tflops": (0.001, 100_000.0),
    "mfu": (0.01, 1.0),
    "mbu": (0.01, 1.0),
    "itl_slo_ms": (0.001, 1e7),
    "ttft_slo_ms": (0.001, 1e9),
    "prefill_ms": (0.001, 1e9),
    "first_decode_ms": (0.001, 1e9),
}
_RANGE_LABELS = {"headroom_bp": "headroom", "device_gib": "custom device memory (GiB)", "mfu": "MFU", "mbu": "MBU"}


def _range_text(name: str, value: float) -> str:
    return f"{value / 100:g} %" if name == "headroom_bp" else f"{value:g}"


def clamp_to_widgets(values: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``values`` with each field moved into its control's range, and one sentence per change."""
    out = dict(values)
    notes: list[str] = []
    for name, (lo, hi) in WIDGET_RANGES.items():
        value = out.get(name)
        if value is None or isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        clamped = min(max(value, lo), hi)
        if clamped != value:
            clamped = int(clamped) if name == "headroom_bp" else float(clamped)
            out[name] = clamped
            side = "below the control's minimum" if value < lo else "above the control's maximum"
            notes.append(f"{_RANGE_LABELS.get(name, name)} {_range_text(name, value)} is {side}; using {_range_text(name, clamped)}")
    return out, notes


def reset_inputs() -> None:
    """The reset button: defaults, then this model's deployment suggestions again."""
    apply_values(DEFAULT_VALUES)
    st.session_state.pop("suggested_for", None)


# --------------------------------------------------------------------------- deployment suggestions

RESTORED = "__restored__"  # `suggested_for` after a link or plan file: keep its inputs as they are
_CHANGE_LABELS = {"tp": "TP", "gpu_count": "GPUs", "input_tokens": "input tokens", "output_tokens": "output reserve", "max_context": "maximum context"}


def model_identity(ref: ModelRef) -> str:
    return "|".join(str(x) for x in (ref.kind, ref.name, ref.repo_id, ref.commit, ref.config_hash))


def apply_suggestions(ref: ModelRef, model: PreparedModel) -> None:
    """When the model changed, apply :func:`planner.plan.suggest_inputs` so it opens on a working plan.

    Call it after the model-source controls and before the input widgets are drawn. Inputs
    restored from a link or a plan file are kept exactly.
    """
    from planner.plan import suggest_inputs

    state = st.session_state
    ident = model_identity(ref)
    last = state.get("suggested_for")
    if last == ident:
        return
    state["suggested_for"] = ident
    if last == RESTORED:
        return
    values = read_widgets()
    try:
        updates, why = suggest_inputs(model, values)
    except PlannerError:
        return  # the current inputs are invalid on their own: the error shows next to its field
    if not updates and not why:
        state.pop("suggestion", None)
        return
    changes = []
    for name, new in updates.items():
        old = values.get(name)
        if old == new:
            continue
        label = _CHANGE_LABELS.get(name, name)
        changes.append(f"{label} {old:,} → {new:,}" if isinstance(old, int) else f"{label} → {new:,}")
    if updates:
        apply_values(values | updates)
    text = "; ".join(why)
    text = text[:1].upper() + text[1:]
    state["suggestion"] = {
        "for": ident,
        "level": "info" if updates else "warning",
        "text": f"{text}" + (f" — set {', '.join(changes)} for {ref.label()}." if changes else "."),
    }


def suggestion_for(ref: ModelRef) -> dict | None:
    hit = st.session_state.get("suggestion")
    return hit if hit and hit.get("for") == model_identity(ref) else None


# --------------------------------------------------------------------------- share links and plan files

HOLD_KEY = "link_hold"  # a model source whose link model is not loaded yet: keep the URL as opened


def expected_upload_text(expected: dict) -> str:
    name = expected.get("name") or "config.json"
    digest = expected.get("config_hash")
    short = f", sha256 {digest[:12]}" if digest else ""
    return f"This link was made from an uploaded config ({name}{short}): upload the same config.json to reproduce it. Until then the default model is shown."


def _check_expected_upload(ref: ModelRef) -> None:
    """An upload arrived while a link waits for one: say whether it is the same config."""
    state = st.session_state
    expected = state.pop("expected_upload", None)
    state.pop("upload_mismatch", None)
    if expected and expected.get("config_hash") and ref.config_hash != expected["config_hash"]:
        state["upload_mismatch"] = (
            f"{ref.name or 'This config'} (sha256 {str(ref.config_hash)[:12]}) is not the config the link was made from "
            f"(sha256 {expected['config_hash'][:12]}): the plan uses it anyway."
        )


def restore(decoded: Any, *, origin: str) -> None:
    """Apply a decoded share link or plan file (:class:`planner.share.DecodedState`).

    Call it before any widget is drawn (top of the page, or a widget callback). The model
    source and every control follow the link; bad fields have already fallen back to their
    defaults in :mod:`planner.share`, and their warnings are kept for the page to show.
    """
    state = st.session_state
    warnings = list(decoded.warnings)
    for key in ("expected_upload", "upload_mismatch", HOLD_KEY):
        state.pop(key, None)
    ref = decoded.ref
    if ref is None:
        ref = ModelRef(kind="preset", name=start_preset())
    if ref.kind in ("preset", "example"):
        choice = EXAMPLE if ref.kind == "example" else (ref.name or start_preset())
        try:
            loaded_ref, _model = load_choice(choice)
        except PlannerError as exc:
            warnings.append(f"{choice}: {exc}; using the default model")
            choice = start_preset()
            loaded_ref, _model = load_choice(choice)
        state["model_source"] = "Preset"
        state["preset"] = choice
        _set_active(loaded_ref, None)
    elif ref.kind == "hub":
        source = "Hugging Face Hub"
        revision = ref.commit or ref.revision or "main"
        state["model_source"] = source
        state["hub_repo"] = ref.repo_id or ""
        state["hub_revision"] = revision
        _loaded().pop(source, None)
        with st.spinner(HUB_SPINNER):
            ok = fetch_hub(ref.repo_id or "", revision, state.get("hub_token"))
        if ok:
            hit = _loaded()[source]
            got = ModelRef(**hit["ref"])
            if ref.config_hash and got.config_hash and got.config_hash != ref.config_hash:
                warnings.append(f"the config of {got.label()} does not match the link's config hash {ref.config_hash[:12]}; the plan uses the Hub's config")
            _set_active(got, hit["config"], hit.get("notes", ()), hit.get("counts"))
        else:
            warnings.append(f"the Hub model {ref.repo_id}@{revision[:12]} could not be loaded (the reason is next to the Hub fields); the previous model is shown")
            state[HOLD_KEY] = source
    else:
        source = "Upload config.json"
        state["model_source"] = source
        config = decoded.upload_config
        if config is not None:
            try:
                loaded_ref, _model = upload_ref(config, ref.name)
            except PlannerError as exc:
                warnings.append(f"the embedded config is not usable ({exc}); the previous model is shown")
                config = None
            else:
                _remember(source, loaded_ref, config)
                _set_active(loaded_ref, config)
        if config is None:
            _loaded().pop(source, None)
            state["expected_upload"] = ref.model_dump(exclude_none=True)
            state[HOLD_KEY] = source
    values, notes = clamp_to_widgets(decoded.inputs.model_dump())
    warnings += notes
    _ref, model, _notes = active_model()
    values = _workable(values, model, warnings)
    apply_values(values)
    state["restore_notice"] = {"origin": origin, "warnings": warnings}
    state["suggested_for"] = RESTORED


def _workable(values: dict[str, Any], model: PreparedModel, warnings: list[str]) -> dict[str, Any]:
    """Restored values that give a plan for ``model``: a field the plan refuses falls back to its
    default (field by field, with a warning); if the defaults do not fit the model either, the
    deployment suggestions apply. What still fails shows next to its field as usual."""
    from planner.plan import suggest_inputs

    values = dict(values)
    for _ in range(8):
        _plan, err = build_plan(values, model)
        if err is None:
            return values
        field = str(err.field).split(".")[0]
        field = {"tokens": "max_context", "device": "device_gib", "device_bytes": "gpu"}.get(field, field)
        if field not in DEFAULT_VALUES or values.get(field) == DEFAULT_VALUES[field]:
            break
        old = values[field]
        values[field] = DEFAULT_VALUES[field]
        if field == "tp":  # keep the number of replicas
            values["gpu_count"] = max(1, values.get("gpu_count", 1) // max(1, old)) * DEFAULT_VALUES["tp"]
        shown = f"{old:,}" if isinstance(old, int) and not isinstance(old, bool) else repr(old)
        warnings.append(f"{field} {shown}: {err.reason}; using the default {DEFAULT_VALUES[field]!r}" if DEFAULT_VALUES[field] is not None else f"{field} {shown}: {err.reason}; left empty (the default)")
    try:
        updates, why = suggest_inputs(model, values)
    except PlannerError:
        return values
    if updates:
        values |= updates
        warnings.append("the plan did not fit this model, so the deployment suggestions apply: " + "; ".join(why))
    return values


def restore_from_query_params() -> None:
    """On a session's first run of the Plan page, restore the plan a share link carries."""
    state = st.session_state
    if state.get("link_checked"):
        return
    state["link_checked"] = True
    params = st.query_params.to_dict()
    if not params:
        return
    from planner.share import INPUT_KEYS, REF_KEYS, decode_query

    known = set(INPUT_KEYS.values()) | set(REF_KEYS.values()) | {"v", "cfg"}
    if not known & set(params):
        return  # only foreign parameters (e.g. ?embed=true): not a share link
    try:
        restore(decode_query(params), origin="share link")
    except Exception as exc:  # noqa: BLE001 - a link must never break the page
        state["restore_notice"] = {"origin": "share link", "warnings": [f"the link could not be applied ({type(exc).__name__}: {exc}); showing the default plan"]}


def load_plan_upload() -> None:
    """Callback of the plan-file uploader: read the file, restore it on this rerun."""
    from planner.share import load_plan_file

    state = st.session_state
    uploaded = state.get("plan_upload")
    state.pop("plan_file_error", None)
    if uploaded is None:
        return
    try:
        decoded = load_plan_file(uploaded.getvalue())
        restore(decoded, origin=f"plan file {uploaded.name}")
    except PlannerError as exc:
        state["plan_file_error"] = f"{uploaded.name}: {exc}"
    except Exception as exc:  # noqa: BLE001 - a callback error would show a traceback
        state["plan_file_error"] = f"{uploaded.name}: could not be applied ({type(exc).__name__}: {exc})"


def share_params(ref: ModelRef, inputs: PlanInputs, upload_config: dict | None) -> dict[str, str]:
    """The compact query parameters of a plan (never a token; see :func:`planner.share.encode_query`)."""
    from planner.share import encode_query

    if inputs.device_gib is not None and inputs.gpu == CUSTOM_GPU:  # the custom size is what counts
        inputs = inputs.model_copy(update={"gpu": DEFAULT_VALUES["gpu"]})
    if ref.kind in ("preset", "example"):  # the name says it all; keeps links short (plan files keep the hash)
        ref = ref.model_copy(update={"repo_id": None, "config_hash": None})
    try:
        return encode_query(ref, inputs, upload_config if ref.kind == "upload" else None)
    except PlannerError:
        return encode_query(ref, inputs, None)


def plan_file_text(ref: ModelRef, inputs: PlanInputs, upload_config: dict | None) -> str:
    from planner.share import plan_file_json

    if inputs.device_gib is not None and inputs.gpu == CUSTOM_GPU:
        inputs = inputs.model_copy(update={"gpu": DEFAULT_VALUES["gpu"]})
    try:
        return plan_file_json(ref, inputs, upload_config if ref.kind == "upload" else None)
    except PlannerError:
        return plan_file_json(ref, inputs, None)


def sync_query_params(params: dict[str, str]) -> None:
    """Write the plan into the address bar (only when it changed)."""
    state = st.session_state
    hold = state.get(HOLD_KEY)
    if hold:
        if state.get("model_source") == hold and not _loaded().get(hold):
            return  # the link's model is not loaded yet: keep the link as it was opened
        state.pop(HOLD_KEY, None)
    if st.query_params.to_dict() != params:
        st.query_params.from_dict(params)


DEFAULT_BASE_URL = "http://localhost:8501/"


def base_url() -> str:
    """The app's address in the user's browser (without query), else a localhost default."""
    try:
        url = st.context.url
    except Exception:  # noqa: BLE001 - no browser context (tests, bare mode)
        url = None
    if isinstance(url, str) and url.startswith(("http://", "https://")):
        return url
    try:
        host = st.context.headers.get("Host")
    except Exception:  # noqa: BLE001
        host = None
    if isinstance(host, str) and host and all(c.isalnum() or c in ".-:[]" for c in host):
        return f"http://{host}/"
    return DEFAULT_BASE_URL


_PDF_CACHE: dict[tuple, bytes] = {}
_PDF_LOCK = threading.Lock()


def pdf_report(plan: Plan, ref: ModelRef, link: str) -> bytes:
    """The PDF sizing report of a plan (built on demand, cached by model, inputs, link and date)."""
    from planner.report import build_pdf

    key = (ref.model_dump_json(), plan.inputs.model_dump_json(), link, datetime.now(UTC).date().isoformat())
    with _PDF_LOCK:
        hit = _PDF_CACHE.get(key)
    if hit is not None:
        return hit
    data = build_pdf(plan, ref, link)
    with _PDF_LOCK:
        if len(_PDF_CACHE) >= 16:
            _PDF_CACHE.clear()
        _PDF_CACHE[key] = data
    return data


# --------------------------------------------------------------------------- probe calibration

CALIBRATION_KEY = "probe_calibration"


def calibration() -> dict | None:
    """The Probe page's calibration, when it holds usable MFU and MBU figures."""
    cal = st.session_state.get(CALIBRATION_KEY)
    if not isinstance(cal, dict):
        return None
    try:
        mfu, mbu = float(cal["mfu"]), float(cal["mbu"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (mfu > 0 and mbu > 0 and mfu < float("inf") and mbu < float("inf")):
        return None
    return {"mfu": mfu, "mbu": mbu, "device": str(cal.get("device") or "the probe device")}


def apply_calibration() -> None:
    """Button callback: put the calibrated MFU and MBU into the plan (clamped to the sliders)."""
    cal = calibration()
    if cal is None:
        return
    values, notes = clamp_to_widgets(dict(plan_values()) | {"mfu": cal["mfu"], "mbu": cal["mbu"]})
    apply_values(values)
    text = f"Applied the probe calibration from {cal['device']}: MFU {values['mfu']:.4g}, MBU {values['mbu']:.4g}."
    if notes:
        text += " Clamped to the sliders' range: " + "; ".join(notes) + "."
    st.session_state["calibration_note"] = text


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


def first_paint_pause() -> None:
    """On a session's first run, give the browser time to paint the headline numbers before the
    charts arrive: loading plotly.js blocks the page's first paint for about a second otherwise.

    Measured in headless Chromium on 2 cores (benchmarks/bench_app.py): page open to the first
    metric 3.9 s -> 2.0 s with a fresh browser profile, 2.7 s -> 1.2 s with a warm one; the charts
    follow 0.3 s later. ``KVP_FIRST_PAINT_PAUSE_S`` sets the pause (0 turns it off; tests use 0).
    """
    if st.session_state.get("_first_paint_done"):
        return
    st.session_state["_first_paint_done"] = True
    try:
        pause = float(os.environ.get("KVP_FIRST_PAINT_PAUSE_S", "0.3"))
    except ValueError:
        pause = 0.3
    if 0 < pause <= 2:
        time.sleep(pause)
