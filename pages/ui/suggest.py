"""Deployment suggestions (:func:`planner.plan.suggest_inputs`): offered, applied only when needed.

* When the model changes and the current inputs give no plan for it (e.g. its weights do not
  fit at this TP), the suggestion is applied and said as done - "Changed TP 1 → 4 because …" -
  with an Undo button. That notice lasts while the inputs stay as they were set.
* Otherwise nothing changes behind the user's back: whenever the current inputs give no plan,
  the suggestion for *these* inputs (this GPU, this TP) is offered with an Apply button. It is
  recomputed every run, so it never outlives its truth.
"""

from __future__ import annotations

import streamlit as st

from pages.ui.safe_text import md
from pages.ui.state import apply_values, build_plan, plan_values, read_widgets
from planner.errors import PlannerError
from planner.plan import PreparedModel
from planner.source import ModelRef

RESTORED = "__restored__"  # `suggested_for` after a link or plan file: keep its inputs as they are
APPLIED_KEY = "suggestion_applied"
_CHANGE_LABELS = {"tp": "TP", "gpu_count": "GPUs", "input_tokens": "input tokens", "output_tokens": "output reserve", "max_context": "maximum context"}


def model_identity(ref: ModelRef) -> str:
    return "|".join(str(x) for x in (ref.kind, ref.name, ref.repo_id, ref.commit, ref.config_hash))


def _changes(values: dict, updates: dict) -> list[str]:
    """"TP 2 → 4"-style phrases for the updates that change something."""
    out = []
    for name, new in updates.items():
        old = values.get(name)
        if old == new:
            continue
        label = _CHANGE_LABELS.get(name, name)
        out.append(f"{label} {old:,} → {new:,}" if isinstance(old, int) and not isinstance(old, bool) else f"{label} → {new:,}")
    return out


def _because(why: list[str]) -> str:
    return "; ".join(why)


def _suggestion(model: PreparedModel, values: dict, err: PlannerError | None = None, *, known: bool = False) -> tuple[dict, list[str]] | None:
    """(updates, why) when the inputs give no plan and the suggestion would give one.

    ``known``: ``err`` is already the result of planning ``values`` (saves a second plan).
    """
    from planner.plan import suggest_inputs

    if not known:
        _plan, err = build_plan(values, model)
    if err is None:
        return None
    try:
        updates, why = suggest_inputs(model, values)
    except PlannerError:
        return None  # the inputs are invalid on their own: the error shows next to its field
    updates = {k: v for k, v in updates.items() if values.get(k) != v}
    if not updates:
        return ({}, why) if why else None
    _plan, err = build_plan(values | updates, model)
    return (updates, why) if err is None else None


def apply_suggestions(ref: ModelRef, model: PreparedModel) -> None:
    """When the model changed and the inputs give no plan for it, apply the suggestion (with undo).

    Call it after the model-source controls and before the input widgets are drawn. Inputs
    restored from a link or a plan file are kept exactly.
    """
    state = st.session_state
    ident = model_identity(ref)
    last = state.get("suggested_for")
    if last == ident:
        return
    state["suggested_for"] = ident
    state.pop(APPLIED_KEY, None)
    if last == RESTORED:
        return
    values = read_widgets()
    hit = _suggestion(model, values)
    if not hit or not hit[0]:
        return
    updates, why = hit
    after = values | updates
    apply_values(after)
    state[APPLIED_KEY] = {
        "text": f"Changed {', '.join(_changes(values, updates))} for {ref.label()} because {_because(why)}; these inputs gave no plan for it.",
        "before": values,
        "after": dict(plan_values()),
    }


def _undo() -> None:
    hit = st.session_state.pop(APPLIED_KEY, None)
    if hit:
        apply_values(hit["before"])


def _apply(updates: dict) -> None:
    apply_values(dict(plan_values()) | updates)


def render_suggestion(ref: ModelRef, model: PreparedModel, err: PlannerError | None) -> None:
    """The change made for this model (with Undo) while it holds, else the live offer, if any."""
    state = st.session_state
    applied = state.get(APPLIED_KEY)
    if applied and applied["after"] == plan_values():
        with st.container(key="suggestion_applied_box"):
            st.info(md(applied["text"]), icon=":material/auto_fix_high:")
            st.button("Undo", key="suggestion_undo", on_click=_undo, icon=":material/undo:", help="Put the inputs back as they were; the plan then shows why they do not work.")
        return
    state.pop(APPLIED_KEY, None)
    hit = _suggestion(model, dict(plan_values()), err, known=True)
    if not hit:
        return
    updates, why = hit
    if not updates:
        st.warning(md(_because(why)[:1].upper() + _because(why)[1:] + "."), icon=":material/auto_fix_high:")
        return
    with st.container(key="suggestion_offer_box"):
        st.info(md(f"Suggestion: set {', '.join(_changes(plan_values(), updates))} because {_because(why)}."), icon=":material/lightbulb:")
        st.button("Apply suggestion", key="suggestion_apply", on_click=_apply, args=(updates,), icon=":material/auto_fix_high:")
