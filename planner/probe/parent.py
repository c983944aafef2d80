"""The parent: starts the measuring child under a timeout and turns its reply into a result.

A crash, an out-of-memory kill or a timeout of the child gives a result with ``ok=False`` and
the reason; a refusal (over the memory budget, a dtype this torch lacks) raises
:class:`~planner.errors.PlannerError` as a refusal in this process does.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from planner.errors import PlannerError
from planner.probe.calibration import calibrate
from planner.probe.child import execute
from planner.probe.explain import explain_probe, prediction_sentences
from planner.probe.layouts import transformers_layers, transformers_positions
from planner.probe.options import ProbeOptions, check_enabled
from planner.probe.prepare import Prepared, build_request, prepare_probe
from planner.probe.protocol import ELEMENT_BYTES
from planner.probe.results import LayerMeasurement, ProbeResult
from planner.probe.roofline import match_catalog_device, predict_roofline

ROOT = Path(__file__).resolve().parents[2]  # the checkout the child runs in: planner/probe/parent.py -> ../..


def run_probe(config: dict, options: ProbeOptions | None = None, *, source: dict | None = None, label: str | None = None, isolate: bool = True) -> ProbeResult:
    """Run one probe and return predicted vs measured.

    ``isolate`` (the default) runs the measurement in a child process under ``options.timeout_s``;
    a crash, an out-of-memory kill or a timeout gives a result with ``ok=False`` and ``error``.

    Raises:
        PlannerError: the probe is disabled, the options or config are invalid, or the
            predicted memory exceeds the budget (refused before allocating, in this process or
            in the child).
    """
    check_enabled()
    opts = options or ProbeOptions()
    started = time.perf_counter()
    prep = prepare_probe(config, opts, label=label)
    request = build_request(prep)
    reply = _run_child(request, opts.timeout_s) if isolate else execute(request)
    if reply.get("status") == "refused":
        raise PlannerError(str(reply.get("field", "probe")), reply.get("value"), str(reply.get("reason", "refused")))
    return _finish(prep, reply, source, time.perf_counter() - started)


def _child_command() -> list[str]:
    return [sys.executable, "-m", "planner.probe", "--child"]


def _run_child(request: dict, timeout_s: float) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    payload = json.dumps(request)
    try:
        proc = subprocess.run(_child_command(), input=payload, capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return {"status": "error", "error": f"the probe did not finish within {timeout_s:g} s and its process was stopped (everything it allocated went with it); lower --tokens, --batch or --decode-steps, use --layers-limit, or raise --timeout"}
    except OSError as exc:
        return {"status": "error", "error": f"could not start the probe process: {exc.strerror or exc}"}
    reply = None
    for line in reversed(proc.stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                reply = json.loads(line)
            except json.JSONDecodeError:
                reply = None
            break
    if isinstance(reply, dict) and reply.get("status") in ("ok", "refused", "error"):
        return reply
    if proc.returncode < 0:
        sig = -proc.returncode
        why = " (SIGKILL: usually the out-of-memory killer)" if sig == 9 else ""
        return {"status": "error", "error": f"the probe process was killed by signal {sig}{why}; nothing is left allocated"}
    tail = next((ln for ln in reversed(proc.stderr.strip().splitlines()) if ln.strip()), "no output")
    return {"status": "error", "error": f"the probe process exited with code {proc.returncode} without a result: {tail[:300]}"}


def _finish(prep: Prepared, reply: dict, source: dict | None, elapsed: float) -> ProbeResult:
    o = prep.options
    m = reply.get("measurement") or {}
    base: dict[str, Any] = {
        "ok": reply.get("status") == "ok",
        "error": None if reply.get("status") == "ok" else str(reply.get("error") or "unknown error")[:4000],
        "mode": o.mode,
        "runtime": o.effective_runtime,
        "device": m.get("device") or o.device,
        "device_name": m.get("device_name", ""),
        "model": prep.label[:300],
        "model_type": prep.geo.model_type[:100],
        "kv_dtype": o.kv_dtype,
        "tokens": o.tokens,
        "batch": o.batch,
        "decode_steps": o.decode_steps if o.mode == "runtime" else 0,
        "cached_tokens": prep.cached,
        "block_tokens": o.block_tokens if o.effective_runtime == "vllm" else None,
        "tp": o.tp,
        "static": o.static,
        "layers_measured": prep.geo.num_layers,
        "layers_total": prep.geo_full.num_layers,
        "layer_scale": prep.geo_full.num_layers / max(1, prep.geo.num_layers),
        "predicted_kv_bytes": prep.predicted,
        "predicted_logical_kv_bytes": prep.predicted_logical,
        "planner_kv_bytes": prep.planner,
        "predicted_kv_bytes_after_prefill": prep.predicted_after_prefill,
        "predicted_full_model_kv_bytes": prep.predicted_full,
        "planner_full_model_kv_bytes": prep.planner_full,
        "source": _flat_source(source),
        "torch_version": m.get("torch_version"),
        "transformers_version": m.get("transformers_version"),
        "elapsed_s": round(elapsed, 3),
    }
    if not base["ok"]:
        base["explanation"] = (f"no measurement: {base['error']}", *prediction_sentences(prep))
        return ProbeResult(**base)
    measured = int(m["kv_bytes"])
    base.update(
        measured_kv_bytes=measured,
        measured_logical_kv_bytes=m.get("logical_kv_bytes"),
        measured_storage_bytes=m.get("storage_bytes"),
        ratio=measured / prep.predicted if prep.predicted else None,
        planner_ratio=measured / prep.planner if prep.planner else None,
        measured_kv_bytes_after_prefill=m.get("kv_bytes_after_prefill"),
        scaled_measured_kv_bytes=round(measured * prep.predicted_full / prep.predicted) if prep.predicted else None,
        measured_state_bytes=m.get("state_bytes"),
        cuda_allocated_delta_bytes=m.get("cuda_allocated_delta_bytes"),
        cuda_peak_delta_bytes=m.get("cuda_peak_delta_bytes"),
        cuda_released=m.get("cuda_released"),
        peak_rss_delta_bytes=m.get("peak_rss_delta_bytes"),
        measured_weights_bytes=m.get("weights_bytes"),
        cuda_weights_bytes=m.get("cuda_weights_bytes"),
        cuda_non_torch_bytes=m.get("cuda_non_torch_bytes"),
        cuda_prefill_peak_bytes=m.get("cuda_prefill_peak_bytes"),
        allocate_ms=m.get("allocate_ms"),
    )
    layers = []
    if o.mode == "runtime":
        steps = [float(x) for x in m.get("decode_steps_ms", [])]
        prefill, first = m.get("prefill_ms"), (steps[0] if steps else None)
        base.update(
            prefill_ms=prefill,
            first_decode_ms=first,
            ttft_ms=prefill + first if prefill is not None and first is not None else prefill,
            decode_ms_p50=statistics.median(steps) if steps else None,
            decode_ms_p95=sorted(steps)[max(0, math.ceil(0.95 * len(steps)) - 1)] if steps else None,
            decode_ms_mean=statistics.fmean(steps) if steps else None,
            decode_steps_ms=tuple(round(s, 4) for s in steps),
        )
        roof_dev = o.gpu or (match_catalog_device(base["device_name"], m.get("device_total_bytes")) if base["device"] == "cuda" else None)
        from planner.hardware import DEFAULT_GPU

        base.update(predict_roofline(prep.text_cfg, prep.geo, o, roof_dev or DEFAULT_GPU))
        layers = _layer_rows(prep, m.get("layers", []))
        base["layers"] = tuple(layers)
        if steps and prefill:
            cal = calibrate(ProbeResult(**base))
            base.update(calibrated_mfu=cal.mfu, calibrated_mbu=cal.mbu)
    base["explanation"] = tuple(explain_probe(prep, base, m, layers))
    return ProbeResult(**base)


def _flat_source(source: dict | None) -> dict | None:
    if not source:
        return None
    return {str(k)[:64]: (v if isinstance(v, (int, float, bool)) or v is None else str(v)[:300]) for k, v in list(source.items())[:32]}


def _layer_rows(prep: Prepared, measured: list[dict]) -> list[LayerMeasurement]:
    o = prep.options
    static = prep.cached if o.static else None
    last = 1 if o.decode_steps else o.tokens
    expected = {layer.index: layer for layer in transformers_layers(prep.geo)}
    kinds = {layer.index: layer for layer in prep.geo.layers}
    rows = []
    for row in measured[:100_000]:
        i = int(row["index"])
        exp = expected.get(i)
        pred = None
        if exp is not None:
            _, pos = transformers_positions(exp.window, prep.cached, last, static)
            pred = o.batch * pos * (exp.k_dim + exp.v_dim) * exp.heads * ELEMENT_BYTES[o.kv_dtype]
        geo_layer = kinds.get(i)
        rows.append(
            LayerMeasurement(
                index=i,
                cache_class=str(row.get("cache_class", ""))[:100],
                planner_kind=geo_layer.kind if geo_layer else "",
                window=geo_layer.window if geo_layer else None,
                keys_shape=tuple(row.get("keys_shape", ()))[:8],
                values_shape=tuple(row.get("values_shape", ()))[:8],
                predicted_bytes=pred,
                measured_bytes=int(row.get("storage_bytes", 0)),
                logical_bytes=int(row.get("logical_bytes", 0)),
            )
        )
    return rows
