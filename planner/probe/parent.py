"""The parent: starts the measuring child under a timeout and turns its reply into a result.

A crash, an out-of-memory kill or a timeout of the child gives a result with ``ok=False`` and
the reason; a refusal (over the memory budget, a dtype this torch lacks) raises
:class:`~planner.errors.PlannerError` as a refusal in this process does.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from planner import settings
from planner.errors import PlannerError
from planner.probe.calibration import calibrate
from planner.probe.child import execute
from planner.probe.explain import explain_probe, prediction_sentences
from planner.probe.layouts import transformers_layers, transformers_positions
from planner.probe.options import ProbeOptions, check_enabled
from planner.probe.prepare import Prepared, build_request, prepare_probe
from planner.probe.protocol import (
    ELEMENT_BYTES,
    AllocateMeasurement,
    CacheLayer,
    FailedReply,
    MeasuredReply,
    ProbeRequest,
    ProtocolError,
    RefusedReply,
    RuntimeMeasurement,
    decode_reply,
    encode,
)
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
    if isinstance(reply, RefusedReply):
        raise PlannerError(reply.field, reply.value, reply.reason)
    return _finish(prep, reply, source, time.perf_counter() - started)


def _child_command() -> list[str]:
    return [sys.executable, "-m", "planner.probe", "--child"]


def _run_child(request: ProbeRequest, timeout_s: float) -> MeasuredReply | RefusedReply | FailedReply:
    env = settings.process_environment()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        proc = subprocess.run(_child_command(), input=encode(request), capture_output=True, text=True, timeout=timeout_s, env=env, cwd=str(ROOT))
    except subprocess.TimeoutExpired:
        return FailedReply(error=f"the probe did not finish within {timeout_s:g} s and its process was stopped (everything it allocated went with it); lower --tokens, --batch or --decode-steps, use --layers-limit, or raise --timeout")
    except OSError as exc:
        return FailedReply(error=f"could not start the probe process: {exc.strerror or exc}")
    line = next((ln for ln in reversed(proc.stdout.strip().splitlines()) if ln.startswith("{")), None)
    if line is not None:
        try:
            return decode_reply(line)
        except ProtocolError as exc:
            if proc.returncode == 0:
                return FailedReply(error=str(exc))
    if proc.returncode < 0:
        sig = -proc.returncode
        why = " (SIGKILL: usually the out-of-memory killer)" if sig == 9 else ""
        return FailedReply(error=f"the probe process was killed by signal {sig}{why}; nothing is left allocated")
    tail = next((ln for ln in reversed(proc.stderr.strip().splitlines()) if ln.strip()), "no output")
    return FailedReply(error=f"the probe process exited with code {proc.returncode} without a result: {tail[:300]}")


def _finish(prep: Prepared, reply: MeasuredReply | FailedReply, source: dict | None, elapsed: float) -> ProbeResult:
    fields = _predicted_fields(prep, source, elapsed)
    if isinstance(reply, FailedReply):
        error = (reply.error or "unknown error")[:4000]
        return ProbeResult(**fields, ok=False, error=error, device=prep.options.device, explanation=(f"no measurement: {error}", *prediction_sentences(prep)))
    m = reply.measurement
    fields.update(ok=True, device=m.device, device_name=m.device_name, torch_version=m.torch_version, **_measured_fields(prep, m))
    if isinstance(m, RuntimeMeasurement):
        fields.update(_runtime_fields(prep, m))
        if m.decode_steps_ms and m.prefill_ms:
            cal = calibrate(ProbeResult(**fields))
            fields.update(calibrated_mfu=cal.mfu, calibrated_mbu=cal.mbu)
    return ProbeResult(**fields, explanation=tuple(explain_probe(prep, ProbeResult(**fields), m)))


def _predicted_fields(prep: Prepared, source: dict | None, elapsed: float) -> dict[str, Any]:
    """The result's fields known before the measurement: what was asked and what was predicted."""
    o = prep.options
    return {
        "mode": o.mode,
        "runtime": o.effective_runtime,
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
        "elapsed_s": round(elapsed, 3),
    }


def _measured_fields(prep: Prepared, m: AllocateMeasurement | RuntimeMeasurement) -> dict[str, Any]:
    """The bytes both modes measure, and their ratios to the predictions."""
    measured = m.kv_bytes
    fields: dict[str, Any] = {
        "measured_kv_bytes": measured,
        "measured_logical_kv_bytes": m.logical_kv_bytes,
        "measured_storage_bytes": m.storage_bytes,
        "ratio": measured / prep.predicted if prep.predicted else None,
        "planner_ratio": measured / prep.planner if prep.planner else None,
        "scaled_measured_kv_bytes": round(measured * prep.predicted_full / prep.predicted) if prep.predicted else None,
        "cuda_peak_delta_bytes": m.cuda_peak_delta_bytes,
        "cuda_released": m.cuda_released,
    }
    if isinstance(m, AllocateMeasurement):
        fields.update(cuda_allocated_delta_bytes=m.cuda_allocated_delta_bytes, allocate_ms=m.allocate_ms)
    return fields


def _runtime_fields(prep: Prepared, m: RuntimeMeasurement) -> dict[str, Any]:
    """A runtime probe's memory, timings, per-layer rows and the roofline they are held against."""
    from planner.hardware import DEFAULT_GPU

    o = prep.options
    steps = list(m.decode_steps_ms)
    first = steps[0] if steps else None
    roof_dev = o.gpu or (match_catalog_device(m.device_name, m.device_total_bytes) if m.device == "cuda" else None)
    return {
        "transformers_version": m.transformers_version,
        "measured_kv_bytes_after_prefill": m.kv_bytes_after_prefill,
        "measured_state_bytes": m.state_bytes,
        "peak_rss_delta_bytes": m.peak_rss_delta_bytes,
        "measured_weights_bytes": m.weights_bytes,
        "cuda_weights_bytes": m.cuda_weights_bytes,
        "cuda_non_torch_bytes": m.cuda_non_torch_bytes,
        "cuda_prefill_peak_bytes": m.cuda_prefill_peak_bytes,
        "prefill_ms": m.prefill_ms,
        "first_decode_ms": first,
        "ttft_ms": m.prefill_ms + first if first is not None else m.prefill_ms,
        "decode_ms_p50": statistics.median(steps) if steps else None,
        "decode_ms_p95": sorted(steps)[max(0, math.ceil(0.95 * len(steps)) - 1)] if steps else None,
        "decode_ms_mean": statistics.fmean(steps) if steps else None,
        "decode_steps_ms": tuple(round(s, 4) for s in steps),
        **predict_roofline(prep.text_cfg, prep.geo, o, roof_dev or DEFAULT_GPU),
        "layers": tuple(_layer_rows(prep, m.layers)),
    }


def _flat_source(source: dict | None) -> dict | None:
    if not source:
        return None
    return {str(k)[:64]: (v if isinstance(v, (int, float, bool)) or v is None else str(v)[:300]) for k, v in list(source.items())[:32]}


def _layer_rows(prep: Prepared, measured: tuple[CacheLayer, ...]) -> list[LayerMeasurement]:
    o = prep.options
    static = prep.cached if o.static else None
    last = 1 if o.decode_steps else o.tokens
    expected = {layer.index: layer for layer in transformers_layers(prep.geo)}
    kinds = {layer.index: layer for layer in prep.geo.layers}
    rows = []
    for row in measured[:100_000]:
        exp = expected.get(row.index)
        pred = None
        if exp is not None:
            _, pos = transformers_positions(exp.window, prep.cached, last, static)
            pred = o.batch * pos * (exp.k_dim + exp.v_dim) * exp.heads * ELEMENT_BYTES[o.kv_dtype]
        geo_layer = kinds.get(row.index)
        rows.append(
            LayerMeasurement(
                index=row.index,
                cache_class=row.cache_class[:100],
                planner_kind=geo_layer.kind if geo_layer else "",
                window=geo_layer.window if geo_layer else None,
                keys_shape=row.keys_shape[:8],
                values_shape=row.values_shape[:8],
                predicted_bytes=pred,
                measured_bytes=row.storage_bytes,
                logical_bytes=row.logical_bytes,
            )
        )
    return rows
