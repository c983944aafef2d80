"""URL state: share links in the address bar and plan files (:mod:`planner.share`).

:func:`restore_from_query_params` applies a link on a session's first run; the Plan page writes
the query string back after every good plan (:func:`sync_query_params`); :func:`restore` is the
one path for links and plan files.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from pages.ui.models import EXAMPLE, HUB_SPINNER, _loaded, _remember, _set_active, active_model, fetch_hub, load_choice, start_preset
from pages.ui.safe_text import md
from pages.ui.state import CUSTOM_GPU, DEFAULT_VALUES, apply_values, build_plan, clamp_to_widgets
from pages.ui.suggest import RESTORED
from planner.errors import PlannerError
from planner.plan import PlanInputs, PreparedModel
from planner.source import ModelRef, upload_ref

# --------------------------------------------------------------------------- share links and plan files

HOLD_KEY = "link_hold"  # a model source whose link model is not loaded yet: keep the URL as opened



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


def restore_from_query_params(page: str = "plan") -> None:
    """On a session's first run (of any page), restore the plan a share link carries; a
    comparison in a link opened on another page is kept for the Compare page, and said so."""
    state = st.session_state
    if state.get("link_checked"):
        return
    state["link_checked"] = True
    params = st.query_params.to_dict()
    if not params:
        return
    from planner.share import COMPARE_KEYS, INPUT_KEYS, OTHER_KEYS, REF_KEYS, decode_query

    known = set(INPUT_KEYS.values()) | set(REF_KEYS.values()) | {"v", "cfg"}
    if not (known | OTHER_KEYS) & set(params):
        return  # only foreign parameters (e.g. ?utm_source=...): not a share link
    try:
        restore(decode_query(params), origin="share link")
    except Exception as exc:  # noqa: BLE001 - a link must never break the page
        state["restore_notice"] = {"origin": "share link", "warnings": [f"the link could not be applied ({type(exc).__name__}: {exc}); showing the default plan"]}
    carried = [k for k in COMPARE_KEYS if k in params]
    if carried and page != "compare":  # Compare parameters on a root link: kept, not dropped
        restore_compare_from_query_params()
        add_to_notice([f"the link's comparison ({', '.join(carried)}) is kept: open the Compare page to see it"])


def add_to_notice(warnings: list[str], origin: str = "share link", restored: str | None = None) -> None:
    """Add lines to the one restore notice (a link's Compare or Size parts join the plan's);
    ``restored`` names what the link restored beside the plan ("the 3 compared plans")."""
    state = st.session_state
    if restored and state.get("restore_notice"):
        state["restore_notice"]["restored"] = restored
    if not warnings:
        return
    notice = state.get("restore_notice") or {"origin": origin, "warnings": []}
    notice["warnings"] = list(notice.get("warnings") or []) + list(warnings)
    state["restore_notice"] = notice


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




def render_restore_notice() -> None:
    """What a share link or plan file restored, with its corrections (until dismissed)."""
    notice = st.session_state.get("restore_notice")
    if not notice:
        return
    warnings = notice.get("warnings") or []
    # "the plan" alone read wrong above three restored columns or a restored search
    what = f"the plan and {notice['restored']}" if notice.get("restored") else "the plan"
    if warnings:
        with st.container(key="restore_warnings"):
            st.warning(
                f"Restored {what} from the {notice['origin']}, with {len(warnings)} correction{'s' if len(warnings) > 1 else ''}:\n"
                + "\n".join(f"- {md(w)}" for w in warnings),
                icon=":material/warning:",
            )
            st.button("Dismiss", key="dismiss_restore", on_click=lambda: st.session_state.pop("restore_notice", None))
    else:
        st.success(f"Restored {what} from the {notice['origin']}.", icon=":material/link:")
        st.session_state.pop("restore_notice", None)


# --------------------------------------------------------------------------- Compare's link

COMPARE_CHECKED = "compare_link_checked"


def restore_compare_from_query_params() -> None:
    """On a session's first run of the Compare page, restore the columns its link carries.

    Call after :func:`restore_from_query_params` (the link's base plan comes first).
    """
    from dataclasses import asdict

    from pages.ui.state import compare_state, plan_values, set_compare_state
    from planner.compare import decode_columns

    state = st.session_state
    if state.get(COMPARE_CHECKED):
        return
    state[COMPARE_CHECKED] = True
    try:
        decoded = decode_columns(st.query_params.to_dict(), plan_values())
    except Exception as exc:  # noqa: BLE001 - a link must never break the page
        add_to_notice([f"the comparison in the link could not be read ({type(exc).__name__}); showing the default columns"])
        return
    if decoded is None:
        return
    columns, warnings = decoded
    full = [asdict(c) for c in columns] + compare_state(plan_values())["columns"][len(columns) :]
    set_compare_state(len(columns), full)
    add_to_notice(warnings, restored=f"the {len(columns)} compared plans")


def compare_params(ref: ModelRef, inputs: PlanInputs, upload_config: dict | None, columns: list) -> dict[str, str]:
    """The Compare page's link: the base plan's parameters and one parameter a column."""
    from planner.compare import encode_columns

    return share_params(ref, inputs, upload_config) | encode_columns(columns)
