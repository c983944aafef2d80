"""Share and export: the share-link box, the PDF sizing report and plan-file download / upload."""

from __future__ import annotations

from datetime import UTC, datetime

import streamlit as st

from pages.ui.safe_text import md
from pages.ui.urlstate import load_plan_upload, plan_file_text, share_params
from planner.limits import ByteBudgetCache
from planner.plan import Plan
from planner.share import MAX_PLAN_FILE_BYTES, share_url
from planner.source import ModelRef

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


_PDF_CACHE = ByteBudgetCache(16 << 20)  # recent reports, bounded in bytes (planner/limits.py)


def pdf_report(plan: Plan, ref: ModelRef, link: str, model=None) -> bytes:
    """The PDF sizing report of a plan (built on demand, cached by model, inputs, link and date)."""
    from planner.report import build_pdf

    key = (ref.model_dump_json(), plan.inputs.model_dump_json(), link, datetime.now(UTC).date().isoformat())
    hit = _PDF_CACHE.get(key)
    if hit is not None:
        return hit  # type: ignore[return-value]
    data = build_pdf(plan, ref, link, model=model)
    _PDF_CACHE.put(key, data)
    return data



def _file_stem(ref) -> str:
    raw = ref.name if ref.kind == "preset" and ref.name else ref.repo_id or ref.name or ref.kind
    stem = "".join(c if c.isalnum() or c in "-._" else "-" for c in str(raw)).strip("-.") or "model"
    return f"kv-plan-{stem[:60]}"


def render_share(plan: Plan, ref, config: dict | None, model=None) -> None:
    """Share link (the address bar holds the same), PDF report, plan file download and upload."""
    link = share_url(base_url(), share_params(ref, plan.inputs, config))
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
            data=lambda: pdf_report(plan, ref, link, model),  # built only when clicked
            file_name=f"{stem}.pdf",
            mime="application/pdf",
            key="pdf_download",
            on_click="ignore",
            icon=":material/picture_as_pdf:",
            width="stretch",
        )
        st.download_button(
            "Download plan file (JSON)",
            data=plan_file_text(ref, plan.inputs, config),
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
            on_change=load_plan_upload,
            max_upload_size=MAX_PLAN_FILE_BYTES >> 20,  # the uploader's "Limit 1MB per file" is the real cap, not the server's 16
            help="A plan file downloaded here (or by the CLI), at most 1 MiB: the model and every input are restored; bad fields fall back to their defaults with a warning.",
        )
        if st.session_state.get("plan_file_error"):
            st.error(md(st.session_state["plan_file_error"]), icon=":material/error:")


