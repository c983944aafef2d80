"""Deployment suggestions when the model changes (:func:`planner.plan.suggest_inputs`)."""

from __future__ import annotations

import streamlit as st

from pages.ui.state import apply_values, read_widgets
from planner.errors import PlannerError
from planner.plan import PreparedModel
from planner.source import ModelRef

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




def render_suggestion(ref: ModelRef) -> None:
    """The deployment suggestion for the active model, if any."""
    hint = suggestion_for(ref)
    if hint:
        (st.info if hint["level"] == "info" else st.warning)(hint["text"], icon=":material/auto_fix_high:")
