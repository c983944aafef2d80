"""Model source: the bundled presets (cached), Hub fetches, uploads and pasted configs, and the
active model of the session (``model_ref`` / ``model_config`` in ``st.session_state``)."""

from __future__ import annotations

import hashlib
import re
import secrets
from typing import Any

import streamlit as st

from pages.ui.safe_text import md
from planner.configio import parse_config_text
from planner.errors import PlannerError
from planner.plan import PreparedModel, prepare_model
from planner.presets import DEFAULT_PRESET, list_presets
from planner.source import ModelRef, example_ref, preset_ref, upload_ref

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


def prepared_from_config(config: dict, key: str | None = None, counts: dict | None = None) -> PreparedModel:
    """A prepared model for a config dict (plus safetensors parameter counts).

    Cached by content hash in :func:`planner.plan.prepare_model`'s byte-bounded cache, not in a
    Streamlit cache counted in entries: 64 entries of 10,000-layer models held 700 MB.
    """
    return prepare_model(config, counts)


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


_ADDRESS = re.compile(r"https?://[^\s'\"<>()]+")


def show_error(message: str, prefix: str = "") -> None:
    """An error whose web addresses come in a code block under it: escaped text puts an invisible
    word joiner inside every ``https://`` (pages/ui/safe_text.py, against autolinks), which a copy
    and paste of the address kept. A code block renders its text as it is, links nothing and copies
    clean."""
    addresses = _ADDRESS.findall(message)
    text = _ADDRESS.sub("the address below", message, count=1) if len(addresses) == 1 else _ADDRESS.sub("(address below)", message)
    st.error(prefix + md(text), icon=":material/error:")
    for address in dict.fromkeys(addresses):
        st.code(address.rstrip(".,;:"), language=None, wrap_lines=True)


def render_source_error(ref: ModelRef) -> None:
    """The model source's error at the top of the main pane (the sidebar's copy sits far down on
    a phone), saying which model is still shown."""
    source = st.session_state.get("model_source") or "Preset"
    message = _source_errors().get(source)
    if message and source != "Preset":
        show_error(message, f"{source}: ")
        st.caption(f"Still showing the previous model, {md(ref.label())}.")


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


def _seed_source_keys() -> tuple[str, ...]:
    """The model-source controls' values (``model_source``, ``preset``) where the session has none
    yet: the active model's (a share link's), else the start preset. Returns the preset names."""
    names = preset_names()
    if "preset" not in st.session_state:
        ref_dict = st.session_state.get("model_ref") or {}
        st.session_state["preset"] = ref_dict.get("name") if ref_dict.get("kind") == "preset" and ref_dict.get("name") in names else start_preset()
    if "model_source" not in st.session_state:
        kind = (st.session_state.get("model_ref") or {}).get("kind", "preset")
        st.session_state["model_source"] = {"hub": "Hugging Face Hub", "upload": "Upload config.json"}.get(kind, "Preset")
    return names


def _start_warning_due(names: tuple[str, ...]) -> bool:
    """Whether the session still has to say that its command-line preset is unknown."""
    wanted = st.session_state.get("start_preset")
    return bool(wanted) and wanted not in names and not st.session_state.get("start_warned")


def model_without_widgets() -> tuple[ModelRef, PreparedModel, tuple[str, ...]] | None:
    """The model :func:`model_source_widget` would return on this run, drawing nothing; None where
    the controls have something to draw or do first (a source other than a preset, a warning, a
    preset that does not load): then draw them.

    For a session's first Plan run, which stops after the headline numbers
    (:func:`pages.ui.results.headline_first`): no control can have changed yet, and drawing the
    segmented control and the preset box made a fresh browser load their code (some twenty
    chunks) before it drew the first metric. The next run draws them, with these same values.
    """
    names = _seed_source_keys()
    if st.session_state["model_source"] != "Preset" or _start_warning_due(names):
        return None
    try:
        ref, _model = load_choice(st.session_state.get("preset") or start_preset())
    except PlannerError:
        return None
    _set_active(ref, None)
    return active_model()


def model_source_widget() -> tuple[ModelRef, PreparedModel, tuple[str, ...]]:
    """Render the model-source controls in the current container; return the active model.

    Errors appear under the control that caused them; the previous model stays active.
    """
    names = _seed_source_keys()
    choices = (*names, EXAMPLE)
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
        if _start_warning_due(names):
            st.session_state["start_warned"] = True
            st.warning(md(f"Unknown preset {st.session_state['start_preset']!r} on the command line; opened {start_preset()} instead."))
        name = st.session_state.get("preset") or start_preset()
        try:
            ref, _model = load_choice(name)
        except PlannerError as exc:
            st.error(md(exc))
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
            show_error(errors[source])
    elif source == "Upload config.json":
        uploaded = st.file_uploader("config.json", type=["json"], key="config_upload", help="A Hugging Face config.json (at most 16 MiB).")
        _handle_upload(uploaded)
        if errors.get(source):
            st.error(md(errors[source]), icon=":material/error:")
        expected = st.session_state.get("expected_upload")
        if expected and not _loaded().get(source):
            st.warning(md(expected_upload_text(expected)), icon=":material/upload_file:")
        if st.session_state.get("upload_mismatch"):
            st.warning(md(st.session_state["upload_mismatch"]), icon=":material/warning:")
    else:
        text = st.text_area("Config JSON", key="config_paste", height=160, placeholder='{"model_type": "llama", "num_hidden_layers": 32, ...}', help="Paste a config.json; applied when the field loses focus (Ctrl+Enter).")
        _handle_paste(text)
        if errors.get(source):
            st.error(md(errors[source]), icon=":material/error:")

    if source != "Preset":
        hit = _loaded().get(source)
        if hit:
            _set_active(ModelRef(**hit["ref"]), hit["config"], hit.get("notes", ()), hit.get("counts"))
        elif not errors.get(source):
            st.caption("No config loaded from this source yet: still showing the previous model.")
    ref, model, notes = active_model()
    if source != "Preset" or ref.kind != "preset":
        st.caption(f"Active model: {md(ref.label())}")
    return ref, model, notes




# --------------------------------------------------------------------------- a link waiting for an upload


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


