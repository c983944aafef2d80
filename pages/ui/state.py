"""The session's plan state, shared by every page (Plan, Compare, Simulate, Size).

State lives in ``st.session_state`` and is derivable from two entries:

* ``plan_values``: one dict of plan input values (the :class:`~planner.plan.PlanInputs` fields,
  in the library's units, e.g. ``headroom_bp``), the source of truth behind the widgets;
* ``model_ref`` (a :class:`~planner.source.ModelRef` as a dict) plus ``model_config`` (see
  :mod:`pages.ui.models`).

Widgets are keyed by the field name (``headroom_bp`` is the slider ``headroom_pct``, in %) and
seeded from ``plan_values`` when absent, so values survive page switches; a share link only has
to write ``plan_values`` (:func:`apply_values`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import streamlit as st

from pages.ui.navigation import through_app
from planner.controls import CONTROLS
from planner.errors import PlannerError
from planner.hardware import CATALOG
from planner.plan import Plan, PlanInputs, PreparedModel, compute_plan, make_inputs
from planner.source import ModelRef

# --------------------------------------------------------------------------- plan values

FIELDS: tuple[str, ...] = tuple(PlanInputs.model_fields)
DEFAULT_VALUES: dict[str, Any] = PlanInputs().model_dump()
WIDGET_KEYS: dict[str, str] = {name: name for name in FIELDS} | {"headroom_bp": "headroom_pct"}
# text fields that may be empty (None), and the most characters their text boxes take
NULLABLE_TEXT: frozenset[str] = frozenset(name for name, c in CONTROLS.items() if c.kind == "text" and c.nullable)
MAX_TEXT_CHARS: dict[str, int] = {name: f.metadata[0].max_length for name, f in PlanInputs.model_fields.items() if f.metadata and getattr(f.metadata[0], "max_length", None)}
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


def enter_page(name: str) -> None:
    """Call first thing in every page: notes whether this run entered ``name`` from another page.

    Streamlit may keep stale values for widgets that were not drawn in between, so a page that
    was entered re-seeds its widgets from the session's state (:func:`entered_page`).
    """
    through_app()
    st.session_state["page_entered"] = st.session_state.get("page_current") != name
    st.session_state["page_current"] = name


def entered_page() -> bool:
    """True on the first run of a page after another page (or the session's first run)."""
    return bool(st.session_state.get("page_entered", True))


def read_widgets() -> dict[str, Any]:
    """Plan input values from the widget keys (library units), stored back into ``plan_values``.

    Entering the page from another one re-seeds every widget from ``plan_values``.
    """
    seed_widgets(force=entered_page() and isinstance(st.session_state.get("plan_values"), dict))
    state = st.session_state
    values: dict[str, Any] = {}
    for name in FIELDS:
        values[name] = state[WIDGET_KEYS[name]]
        if name in NULLABLE_TEXT and isinstance(values[name], str) and not values[name].strip():
            values[name] = None  # an emptied text box is "none", as an empty number box
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


def error_text(err: PlannerError, humanized: bool = True) -> str:
    """The message shown next to a field: the reason in the user's words (labels, not field
    names), with the offending value. ``humanized=False`` keeps the reason's own words, for a file's
    column names ("output_tokens" in a trace is a column, not the "Output reserve (tokens)" control)."""
    from planner.labels import humanize

    reason = humanize(err.reason) if humanized else err.reason
    if err.value is None or err.value == "":
        return reason
    if str(err.value) in err.reason or (isinstance(err.value, int) and f"{err.value:,}" in err.reason):
        return reason
    shown = repr(err.value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{reason} (got {shown})"


def error_sentence(err: PlannerError) -> str:
    """A whole error for a place with no control next to it: "“TTFT SLO (ms)”: must be positive (got -1)"."""
    from planner.labels import INPUTS, label

    field = str(err.field).split(".")[0]
    where = label(field) if field in INPUTS else None
    return f"{where}: {error_text(err)}" if where else error_text(err)


class Shown(NamedTuple):
    """A plan with what drew it: the result cards take one of these."""

    plan: Plan
    model: PreparedModel
    ref: ModelRef
    notes: tuple[str, ...] = ()
    config: dict | None = None  # the uploaded config (share links embed it), else None


def remember_good(shown: Shown) -> None:
    st.session_state["last_good"] = shown


def last_good() -> Shown | None:
    return st.session_state.get("last_good")




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



# --------------------------------------------------------------------------- probe calibration

CALIBRATION_KEY = "probe_calibration"


def calibration() -> dict | None:
    """The Probe page's calibration, when it holds usable MFU and MBU figures.

    ``applies_to`` is the catalog GPU it was measured on, or None: a probe run on a CPU (or
    whose device is unknown) describes that machine, not any GPU, and applies to no plan.
    """
    cal = st.session_state.get(CALIBRATION_KEY)
    if not isinstance(cal, dict):
        return None
    try:
        mfu, mbu = float(cal["mfu"]), float(cal["mbu"])
    except (KeyError, TypeError, ValueError):
        return None
    if not (mfu > 0 and mbu > 0 and mfu < float("inf") and mbu < float("inf")):
        return None
    device = str(cal.get("device") or "the probe device")
    on_gpu = cal.get("measured_device") == "cuda" and device in CATALOG
    probe = cal.get("probe") if on_gpu else None
    return {"mfu": mfu, "mbu": mbu, "device": device, "measured_on": str(cal.get("measured_on") or cal.get("measured_device") or "an unknown device"), "applies_to": device if on_gpu else None, "probe": probe}


def measured_budget(plan) -> dict[str, int] | None:
    """vLLM budget terms the session's probe measured, when it ran on this plan's GPU."""
    cal = calibration()
    if cal is None or cal["applies_to"] != plan.inputs.gpu or cal["probe"] is None:
        return None
    from planner.probe import ProbeResult, budget_measurements  # only once a GPU probe ran: it is not light

    return budget_measurements(cal["probe"], plan.batching.tokens, plan.inputs.tp) or None if isinstance(cal["probe"], ProbeResult) else None


def apply_calibration() -> None:
    """Button callback: put the calibrated MFU and MBU into the plan (clamped to the sliders),
    only when the plan's GPU is the one the probe measured."""
    cal = calibration()
    if cal is None or cal["applies_to"] is None or st.session_state.get("gpu") != cal["applies_to"]:
        return
    values, notes = clamp_to_widgets(dict(plan_values()) | {"mfu": cal["mfu"], "mbu": cal["mbu"]})
    apply_values(values)
    text = f"Applied the probe calibration from {cal['device']}: MFU {values['mfu']:.4g}, MBU {values['mbu']:.4g}."
    if notes:
        text += " Clamped to the sliders' range: " + "; ".join(notes) + "."
    st.session_state["calibration_note"] = text


# --------------------------------------------------------------------------- the current plan, for any page


def current() -> tuple[Shown | None, PlannerError | None]:
    """The session's plan as the Plan page last set it: (shown, None) or (None, the error).

    Pages other than Plan (Compare, Simulate, Size) start from this; they read ``plan_values``
    and the active model and never draw the Plan page's widgets.
    """
    from pages.ui.models import active_model, active_upload_config

    ref, model, notes = active_model()
    plan, err = build_plan(dict(plan_values()), model)
    if plan is None:
        return None, err
    return Shown(plan, model, ref, notes, active_upload_config()), None


# --------------------------------------------------------------------------- Compare's columns

COMPARE_KEY = "compare"


def compare_state(base: dict[str, Any]) -> dict[str, Any]:
    """The Compare page's state: ``{"n": 2..4, "columns": [4 column dicts]}`` (kept across pages)."""
    from dataclasses import asdict

    from planner.compare import default_columns

    hit = st.session_state.get(COMPARE_KEY)
    if not isinstance(hit, dict) or len(hit.get("columns") or ()) != 4:
        hit = {"n": 2, "columns": [asdict(c) for c in default_columns(base)]}
        st.session_state[COMPARE_KEY] = hit
    return hit


def set_compare_state(n: int, columns: list[dict[str, Any]]) -> None:
    """Replace Compare's state and its widgets (before the widgets are drawn, or in a callback)."""
    st.session_state[COMPARE_KEY] = {"n": n, "columns": [dict(c) for c in columns]}
    st.session_state["cmp_n"] = n
    for i, col in enumerate(columns):
        for name, value in col.items():
            st.session_state[f"cmp_{name}_{i}"] = value
