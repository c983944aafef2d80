"""Probe page: measure the K/V cache on this machine beside the planner's estimate.

The measurement runs in a separate process (``planner.probe``) under a timeout; this page never
imports torch. ``KVP_DISABLE_PROBE=1`` turns the Run button off (importing a probe JSON made
elsewhere still works).
"""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

import streamlit as st  # noqa: E402

from pages.ui.safe_text import md  # noqa: E402
from planner.errors import PlannerError  # noqa: E402
from planner.kv import KV_DTYPE_BITS  # noqa: E402
from planner.limits import BOUNDS  # noqa: E402
from planner.presets import list_presets, load_preset  # noqa: E402
from planner.probe import DEVICES, MODES, RUNTIME_DTYPES, ProbeResult, calibrate, load_probe_json, make_options, probe_disabled, run_probe  # noqa: E402
from planner.probe.results import MAX_PROBE_JSON_BYTES  # noqa: E402
from planner.units import fmt_bytes, fmt_ms_measured  # noqa: E402

RESULT_KEY = "probe_result"
CALIBRATION_KEY = "probe_calibration"  # {"mfu": ..., "mbu": ...} for the plan page


def _size(n: int | None) -> str:
    return fmt_bytes(n, none="n/a")


# The Probe page's fields by the flag names the library's messages use.
FLAG_LABELS = {
    "--tokens": "Tokens",
    "--batch": "Batch",
    "--layers-limit": "Layers limit",
    "--decode-steps": "Decode steps",
    "--kv-dtype": "KV dtype",
    "--timeout": "Timeout (s)",
    "--runtime": "Cache layout",
    "--mode": "Mode",
    "--device": "Device",
    "--static": "StaticCache",
    "--gpu": "GPU",
}
FIELD_LABELS = {"tokens": "Tokens", "batch": "Batch", "layers_limit": "Layers limit", "decode_steps": "Decode steps", "kv_dtype": "KV dtype", "timeout_s": "Timeout (s)", "runtime": "Cache layout", "mode": "Mode", "device": "Device", "static": "StaticCache", "probe": "Probe"}
FALLBACK_PRESET = "qwen3-0.6b"  # small enough for a runtime probe within the default 2 GiB CPU budget
MODE_HELP = (
    "**allocate** builds the cache tensors the planner predicts and measures their bytes: it checks the planner's arithmetic, "
    "not the engine. **runtime** runs a randomly initialised transformers model (prefill, then decode steps) and measures the "
    "cache the engine really holds, and its timing."
)


def user_error(exc: PlannerError) -> str:
    """A probe refusal in the page's words: field labels, never CLI flags or field names."""
    import re

    reason = re.sub(r"--[a-z][a-z-]*", lambda m: f"“{FLAG_LABELS.get(m.group(0), m.group(0).lstrip('-'))}”", exc.reason)
    if str(exc.field) == "probe" and "budget" in reason:
        reason += f"; most of it is the model's weights, so a smaller preset (such as {FALLBACK_PRESET}) or the allocate mode runs here"
    where = FIELD_LABELS.get(str(exc.field))
    return f"{where}: {reason}" if where else reason


def _fits(name: str, mode: str) -> bool:
    """Whether the default settings of ``mode`` fit this machine's CPU budget for preset ``name``."""
    from planner.probe import prepare_probe

    try:
        prepare_probe(load_preset(name), make_options(mode=mode, device="cpu", tokens=512, batch=1, decode_steps=8 if mode == "runtime" else 0, layers_limit=2))
    except PlannerError:
        return False
    return True


def _start_preset(names: list[str]) -> tuple[str, str | None]:
    """(preset, note): the Plan page's model when a runtime probe of it fits here, else a small one
    that does, with a note saying which model the Plan page shows and why the probe opened on
    another (it used to switch silently)."""
    from pages.ui.models import start_preset

    ref = st.session_state.get("model_ref") or {}
    kind = ref.get("kind", "preset")
    wanted = ref.get("name") if kind == "preset" and ref.get("name") else start_preset()
    fallback = FALLBACK_PRESET if FALLBACK_PRESET in names else names[0]
    if kind != "preset":
        what = ref.get("repo_id") or ref.get("name") or "an uploaded config"
        return fallback, f"The Plan page shows {what}, which is not a bundled preset: the probe builds presets only, so it opens on {fallback}."
    if wanted not in names:
        return fallback, None
    if not _fits(wanted, "runtime"):
        return fallback, f"The Plan page's model, {wanted}, does not fit a runtime probe within this machine's CPU budget, so the probe opens on {fallback}; pick {wanted} above to probe it in allocate mode."
    return wanted, None


def _controls(disabled_reason: str | None) -> None:
    names = [p.name for p in list_presets()]
    if not names:
        st.warning("No presets found.")
        return
    if "probe_preset" not in st.session_state:
        st.session_state["probe_preset"], st.session_state["probe_start_note"] = _start_preset(names)
    if st.session_state.get("probe_start_note") and st.session_state["probe_preset"] != (st.session_state.get("model_ref") or {}).get("name"):
        st.info(md(st.session_state["probe_start_note"]), icon=":material/info:")
    st.session_state.setdefault("probe_mode", "runtime")
    c1, c2, c3 = st.columns(3)
    preset = c1.selectbox("Preset", names, key="probe_preset", help="Opens on the Plan page's model when a runtime probe of it fits this machine, else on a small model that does.")
    mode = c2.radio("Mode", MODES, horizontal=True, key="probe_mode", help=MODE_HELP)
    runtimes = ["transformers"] if mode == "runtime" else ["vllm", "transformers"]
    runtime = c3.selectbox("Cache layout", runtimes, key=f"probe_runtime_{mode}")
    st.caption(MODE_HELP)
    c1, c2, c3, c4 = st.columns(4)
    device = c1.selectbox("Device", DEVICES, key="probe_device")
    dtypes = list(RUNTIME_DTYPES) if runtime == "transformers" else list(KV_DTYPE_BITS)
    kv_dtype = c2.selectbox("KV dtype", dtypes, index=dtypes.index("bf16"), key=f"probe_kv_dtype_{runtime}")
    tokens = int(c3.number_input("Tokens", **BOUNDS["probe_tokens"].widget(), value=512, step=64, key="probe_tokens"))
    batch = int(c4.number_input("Batch", **BOUNDS["batch"].widget(), value=1, key="probe_batch"))
    c1, c2, c3, c4 = st.columns(4)
    decode_steps = int(c1.number_input("Decode steps", **BOUNDS["decode_steps"].widget(), value=8, key="probe_decode_steps", disabled=mode != "runtime"))
    layers = int(c2.number_input("Layers limit", min_value=0, max_value=100_000, value=2, key="probe_layers_limit", help="Measure the first K layers (0 = all); the scaling to the full model is stated."))
    timeout = float(c3.number_input("Timeout (s)", **BOUNDS["timeout"].widget(), value=120.0, format="%g", key="probe_timeout"))
    static = c4.checkbox("StaticCache", key="probe_static", disabled=mode != "runtime")

    if st.button("Run probe", type="primary", disabled=disabled_reason is not None, key="probe_run"):
        try:
            opts = make_options(
                mode=mode,
                runtime=runtime,
                device=device,
                tokens=tokens,
                batch=batch,
                decode_steps=decode_steps if mode == "runtime" else 0,
                kv_dtype=kv_dtype,
                layers_limit=layers or None,
                static=bool(static) and mode == "runtime",
                timeout_s=timeout,
            )
            result = _run_with_progress(load_preset(preset), opts, preset)
            st.session_state[RESULT_KEY] = result.model_dump(mode="json")
            st.session_state.pop(CALIBRATION_KEY, None)
        except PlannerError as exc:
            st.error(md(user_error(exc)), icon=":material/error:")


def _run_with_progress(config: dict, opts, preset: str) -> ProbeResult:
    """Run the probe (a child process under ``opts.timeout_s``) while a bar shows the time spent
    against that limit, then say how long it took."""
    bar = st.progress(0.0, text="Running the probe in a separate process…")
    start = time.monotonic()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(run_probe, config, opts, source={"kind": "preset", "preset": preset}, label=preset)
        while not future.done():
            elapsed = time.monotonic() - start
            bar.progress(min(elapsed / opts.timeout_s, 1.0), text=f"Running the probe in a separate process… {elapsed:,.0f} s of at most {opts.timeout_s:,.0f} s")
            time.sleep(0.25)
        result = future.result()
    bar.empty()
    st.caption(f"The probe ran for {time.monotonic() - start:,.1f} s of its {opts.timeout_s:,.0f} s limit.")
    return result


def _importer() -> None:
    uploaded = st.file_uploader(
        "Import a probe JSON made elsewhere (`kvp probe --json` on a GPU box, after `pip install .`)", type=["json"], key="probe_upload",
        max_upload_size=MAX_PROBE_JSON_BYTES >> 20, help="At most 1 MiB (a probe's JSON is a few KiB).",  # the uploader states the real cap
    )
    if uploaded is None or st.session_state.get("probe_upload_id") == uploaded.file_id:
        return
    st.session_state["probe_upload_id"] = uploaded.file_id
    try:
        result = load_probe_json(uploaded.getvalue())
    except PlannerError as exc:
        st.error(f"Cannot import {md(uploaded.name)}: {md(exc)}")
        return
    st.session_state[RESULT_KEY] = result.model_dump(mode="json")
    st.session_state.pop(CALIBRATION_KEY, None)
    st.success(f"Imported {md(uploaded.name)}.")


def _show(result: ProbeResult) -> None:
    st.subheader(md(f"{result.model} — {result.mode} / {result.runtime} on {result.device} {result.device_name}".rstrip()))
    if not result.ok:
        st.error(f"No measurement: {md(result.error)}")
    c1, c2, c3, c4 = st.columns(4)
    c1.metric("Predicted K/V", _size(result.predicted_kv_bytes), help=f"{result.predicted_kv_bytes:,} bytes")
    c2.metric("Measured K/V", _size(result.measured_kv_bytes), help=None if result.measured_kv_bytes is None else f"{result.measured_kv_bytes:,} bytes")
    c3.metric("Measured / predicted", "n/a" if result.ratio is None else f"{result.ratio:.4f}")
    c4.metric("planner.kv", _size(result.planner_kv_bytes), help="what the planner's kv module predicts for these layers")
    st.caption(
        f"{result.layers_measured} of {result.layers_total} layers, {result.kv_dtype}, batch {result.batch}, {result.tokens:,} tokens"
        + (f" + {result.decode_steps} decode steps" if result.mode == "runtime" else "")
        + (f"; full model predicted {_size(result.predicted_full_model_kv_bytes)}, measured scaled {_size(result.scaled_measured_kv_bytes)}" if result.layers_measured < result.layers_total else "")
    )
    rows = []
    if result.allocate_ms is not None:
        rows.append({"what": "allocate", "measured": fmt_ms_measured(result.allocate_ms), "roofline": "—"})
    if result.prefill_ms is not None:
        rows += [
            {"what": "prefill", "measured": fmt_ms_measured(result.prefill_ms), "roofline": fmt_ms_measured(result.predicted_prefill_ms)},
            {"what": "TTFT (prefill + first decode)", "measured": fmt_ms_measured(result.ttft_ms), "roofline": fmt_ms_measured(result.predicted_ttft_ms)},
            {"what": "decode step p50", "measured": fmt_ms_measured(result.decode_ms_p50), "roofline": fmt_ms_measured(result.predicted_decode_step_ms)},
            {"what": "decode step p95", "measured": fmt_ms_measured(result.decode_ms_p95), "roofline": "—"},
        ]
    if result.peak_rss_delta_bytes is not None:
        rows.append({"what": "peak RSS growth (CPU)", "measured": _size(result.peak_rss_delta_bytes), "roofline": "—"})
    if result.cuda_peak_delta_bytes is not None:
        rows.append({"what": "peak CUDA memory above baseline", "measured": _size(result.cuda_peak_delta_bytes), "roofline": "—"})
    if rows:
        st.table(rows)
    st.markdown("**Why the numbers are what they are**")
    st.markdown("\n".join(f"- {md(line)}" for line in result.explanation) or "-")
    if result.layers:
        with st.expander("Per-layer cache"):
            st.dataframe([row.model_dump(mode="json") for row in result.layers], hide_index=True)
    if result.mode == "runtime" and result.ok:
        if st.button("Calibrate", key="probe_calibrate", help="derive MFU (from the prefill) and MBU (from the decode step) and hand them to the plan"):
            try:
                cal = calibrate(result)
                st.session_state[CALIBRATION_KEY] = {
                    **cal.plan_values(), "notes": list(cal.notes), "device": cal.roofline_device, "measured_device": result.device, "measured_on": cal.measured_on,
                    "probe": result,  # a GPU run's memory terms feed the vLLM start-up preview (budget_measurements)
                }  # fmt: skip
            except PlannerError as exc:
                st.error(md(user_error(exc)), icon=":material/error:")
        cal_state = st.session_state.get(CALIBRATION_KEY)
        if cal_state:
            c1, c2 = st.columns(2)
            c1.metric("Calibrated MFU", f"{cal_state['mfu']:.4g}", help=f"assumed {result.assumed_mfu:g}")
            c2.metric("Calibrated MBU", f"{cal_state['mbu']:.4g}", help=f"assumed {result.assumed_mbu:g}")
            if cal_state.get("measured_device") == "cuda":
                st.caption(
                    f"Measured on {md(cal_state['device'])}: a plan on that GPU can apply these as MFU and MBU (a button on the Plan page), "
                    "and its vLLM start-up preview uses the non-torch memory and activation peak measured here instead of estimates (at TP 1)."
                )
            else:
                st.caption("Measured on a CPU: these figures describe this machine, not a GPU, so the Plan page does not offer them for a GPU plan.")
            for note in cal_state["notes"]:
                st.warning(md(note))
    st.download_button("Download probe JSON", result.to_json(), file_name="probe.json", mime="application/json", key="probe_download")


def main() -> None:
    from pages.ui.state import enter_page

    enter_page("probe")
    st.title("Live probe")
    st.caption("Allocate the K/V cache, or run a randomly initialised model, on this machine and put the measurement beside the estimate. Runs in a separate process with a timeout.")
    disabled = probe_disabled()
    if disabled:
        st.info(disabled)
    _controls(disabled)
    _importer()
    data = st.session_state.get(RESULT_KEY)
    if data:
        try:
            _show(ProbeResult.model_validate(data))
        except ValueError as exc:
            st.error(f"Stored probe result is invalid: {md(exc)}")
            st.session_state.pop(RESULT_KEY, None)


main()
