"""The benchmark formats the planner reads, each to one :class:`Measured` (milliseconds, tokens/s).

* ``vllm bench serve --save-result`` (vLLM 0.33 ``vllm/benchmarks/serve.py``): the summary keys
  ``mean_ttft_ms``, ``p95_ttft_ms``, ``mean_tpot_ms``, ``mean_itl_ms``, ``p95_itl_ms``,
  ``mean_e2el_ms``, ``output_throughput``, ``request_throughput``, ``completed``,
  ``total_input_tokens``, ``total_output_tokens``, ``duration``, ``request_rate`` ("inf" or a
  number), ``max_concurrency`` (the percentile keys exist when ``--metric-percentiles`` asked for 95);
* guidellm's report (guidellm 0.8 ``benchmark run --output-path x.json``): ``benchmarks[i].metrics``
  distributions (``time_to_first_token_ms``, ``time_per_output_token_ms``, ``inter_token_latency_ms``,
  ``request_latency`` in s, ``output_tokens_per_second``, ``requests_per_second``,
  ``prompt_token_count``, ``output_token_count``), each ``{"successful": {"mean", "percentiles": {"p95"}}}``;
* aiperf's ``profile_export_aiperf.json`` (aiperf 0.13 ``aiperf/common/models/export_models.py``
  ``JsonExportData``, schema 1.4, GenAI-Perf's shape): one object per metric,
  ``{"unit": "ms", "avg", "p50", "p95", ...}``: ``time_to_first_token``, ``inter_token_latency``
  (per request, (latency - TTFT) / (tokens - 1): vLLM's TPOT), ``inter_chunk_latency`` (the gaps
  between streamed chunks: vLLM's ITL), ``request_latency``, ``output_token_throughput``,
  ``request_throughput``, ``input_sequence_length``, ``output_sequence_length``, ``request_count``,
  ``benchmark_duration`` (sec); the load from ``input_config.phases`` (the profiling phase's
  ``concurrency`` or Poisson / constant ``rate``);
* a Prometheus text scrape of vLLM's ``/metrics`` (vLLM 0.33 ``vllm/v1/metrics/loggers.py``):
  gauges ``vllm:num_requests_running``, ``vllm:num_requests_waiting``, ``vllm:kv_cache_usage_perc``
  and histograms ``vllm:time_to_first_token_seconds``, ``vllm:inter_token_latency_seconds``,
  ``vllm:request_time_per_output_token_seconds``, ``vllm:e2e_request_latency_seconds`` (means from
  ``_sum / _count``, p95 from the cumulative buckets by linear interpolation).
"""

from __future__ import annotations

import json
import math
import re
import time

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError

MAX_JSON_BYTES = 64 << 20  # a --save-detailed vLLM result of 100,000 requests is ~20 MiB
MAX_TEXT_BYTES = 16 << 20
MAX_LINES = 200_000
MAX_LINE_CHARS = 64 * 1024
MAX_DEPTH = 64
MAX_SECONDS = 5.0  # reading one file stops with a refusal after this long
MAX_MS = 1e9
FORMATS = ("vllm-bench", "guidellm", "aiperf", "prometheus")


class Measured(BaseModel):
    """What one benchmark run measured; None where the format does not say."""

    model_config = ConfigDict(frozen=True)

    source: str  # one of FORMATS
    tool: str  # "vllm bench serve", "guidellm", "aiperf", "vLLM /metrics"
    requests: int | None = None
    duration_s: float | None = None
    request_rate: float | None = None  # the offered Poisson rate; None: as fast as the concurrency allows
    max_concurrency: int | None = None
    input_tokens_mean: float | None = None
    output_tokens_mean: float | None = None
    figures: dict[str, float]  # ttft_ms, ttft_p95_ms, tpot_ms, itl_ms, itl_p95_ms, e2e_ms, output_tokens_per_s, requests_per_s, running, waiting, kv_cache_usage


def _check_depth(value, depth: int = 0) -> None:
    if depth > MAX_DEPTH:
        raise PlannerError("file", f"nested deeper than {MAX_DEPTH}", "is not a benchmark result")
    if isinstance(value, dict):
        for v in value.values():
            _check_depth(v, depth + 1)
    elif isinstance(value, list):
        for v in value:
            _check_depth(v, depth + 1)


def _no_constant(name: str):
    raise PlannerError("file", name, "JSON with NaN or Infinity is not a benchmark result")


def _json(data: bytes) -> object:
    if len(data) > MAX_JSON_BYTES:
        raise PlannerError("file", f"{len(data):,} bytes", f"a benchmark result JSON must be at most {MAX_JSON_BYTES >> 20} MiB")
    try:
        out = json.loads(data.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise PlannerError("file", "bytes", "is not UTF-8 text") from None
    except RecursionError:
        raise PlannerError("file", "nested JSON", "is too deeply nested to be a benchmark result") from None
    except ValueError as exc:
        if isinstance(exc, PlannerError):
            raise
        raise PlannerError("file", str(exc)[:80], "is not valid JSON") from None
    _check_depth(out)
    return out


def _num(where: str, value: object, *, lo: float = 0.0, hi: float = MAX_MS, optional: bool = True) -> float | None:
    """A finite number in [lo, hi] (bools and strings refused), or None when absent and optional."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not lo <= value <= hi:
        raise PlannerError(where, value, f"must be a number from {lo:g} to {hi:g}")
    return float(value)


def _count(where: str, value: object, hi: int = 10_000_000) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= hi:
        raise PlannerError(where, value, f"must be a whole number from 0 to {hi:,}")
    return value


def detect(data: bytes) -> str:
    """Which of :data:`FORMATS` ``data`` is (by its first bytes and keys)."""
    head = data[:4096].lstrip()
    if head.startswith((b"{", b"[")):
        doc = _json(data)
        if isinstance(doc, dict) and "benchmarks" in doc:
            return "guidellm"
        if isinstance(doc, dict) and ("mean_ttft_ms" in doc or "completed" in doc):
            return "vllm-bench"
        if isinstance(doc, dict) and ("aiperf_version" in doc or isinstance(doc.get("time_to_first_token"), dict)):
            return "aiperf"
        raise PlannerError("file", "JSON", "is not a vllm bench serve result (no mean_ttft_ms), a guidellm report (no benchmarks) or an aiperf export (no time_to_first_token)")
    if b"vllm:" in head or head.startswith(b"# HELP") or head.startswith(b"# TYPE"):
        return "prometheus"
    raise PlannerError("file", head[:40].decode("utf-8", "replace"), "is not a vllm bench serve result, a guidellm report, an aiperf export or a Prometheus scrape")


def read_result(data: bytes, kind: str | None = None) -> Measured:
    """:class:`Measured` from a file's bytes (``kind`` one of :data:`FORMATS`, or detected).

    Raises:
        PlannerError: too large, malformed, or a field of the wrong type or out of range (one line naming it).
    """
    if not isinstance(data, (bytes, bytearray)):
        raise PlannerError("file", type(data).__name__, "must be the file's bytes")
    if len(data) > MAX_JSON_BYTES:
        raise PlannerError("file", f"{len(data):,} bytes", f"a benchmark file must be at most {MAX_JSON_BYTES >> 20} MiB")
    kind = kind or detect(bytes(data))
    if kind == "vllm-bench":
        return vllm_bench(_json(bytes(data)))
    if kind == "guidellm":
        return guidellm(_json(bytes(data)))
    if kind == "aiperf":
        return aiperf(_json(bytes(data)))
    if kind == "prometheus":
        return prometheus(bytes(data))
    raise PlannerError("format", kind, f"must be one of {', '.join(FORMATS)}")


# --------------------------------------------------------------------------- vllm bench serve


def vllm_bench(doc: object) -> Measured:
    """A ``vllm bench serve`` result (see the module docstring)."""
    if not isinstance(doc, dict):
        raise PlannerError("file", type(doc).__name__, "a vllm bench serve result is a JSON object")
    completed = _count("completed", doc.get("completed"))
    if not completed:
        raise PlannerError("completed", doc.get("completed"), "the run completed no request")
    rate = doc.get("request_rate")
    if rate in ("inf", None) or (isinstance(rate, float) and math.isinf(rate)):
        rate = None
    else:
        rate = _num("request_rate", rate, lo=1e-9, hi=1e7)
    conc = doc.get("max_concurrency")
    figures = {}
    for key, name in (("mean_ttft_ms", "ttft_ms"), ("p95_ttft_ms", "ttft_p95_ms"), ("mean_tpot_ms", "tpot_ms"), ("mean_itl_ms", "itl_ms"), ("p95_itl_ms", "itl_p95_ms"), ("mean_e2el_ms", "e2e_ms")):
        v = _num(key, doc.get(key))
        if v is not None:
            figures[name] = v
    for key, name in (("output_throughput", "output_tokens_per_s"), ("request_throughput", "requests_per_s")):
        v = _num(key, doc.get(key), hi=1e9)
        if v is not None:
            figures[name] = v
    if "ttft_ms" not in figures:
        raise PlannerError("mean_ttft_ms", None, "a vllm bench serve result carries mean_ttft_ms")
    total_in, total_out = _count("total_input_tokens", doc.get("total_input_tokens"), 1 << 40), _count("total_output_tokens", doc.get("total_output_tokens"), 1 << 40)
    return Measured(
        source="vllm-bench", tool="vllm bench serve", requests=completed, duration_s=_num("duration", doc.get("duration"), hi=1e7), request_rate=rate,
        max_concurrency=_count("max_concurrency", conc, 10_000_000), input_tokens_mean=total_in / completed if total_in is not None else None,
        output_tokens_mean=total_out / completed if total_out is not None else None, figures=figures,
    )  # fmt: skip


# --------------------------------------------------------------------------- guidellm


def _dist(metrics: dict, key: str, where: str) -> dict | None:
    block = metrics.get(key)
    if block is None:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("successful"), dict):
        raise PlannerError(where, type(block).__name__, "a guidellm distribution is an object with 'successful'")
    return block["successful"]


def guidellm(doc: object, index: int = 0) -> Measured:
    """One benchmark (``index``, the first by default) of a guidellm report."""
    if not isinstance(doc, dict) or not isinstance(doc.get("benchmarks"), list) or not doc["benchmarks"]:
        raise PlannerError("benchmarks", None, "a guidellm report carries a non-empty benchmarks list")
    bench = doc["benchmarks"][index]
    if not isinstance(bench, dict) or not isinstance(bench.get("metrics"), dict):
        raise PlannerError(f"benchmarks[{index}].metrics", None, "must be an object")
    m = bench["metrics"]
    figures = {}
    for key, mean_name, p95_name, scale in (
        ("time_to_first_token_ms", "ttft_ms", "ttft_p95_ms", 1.0), ("time_per_output_token_ms", "tpot_ms", None, 1.0),
        ("inter_token_latency_ms", "itl_ms", "itl_p95_ms", 1.0), ("request_latency", "e2e_ms", None, 1e3),
        ("output_tokens_per_second", "output_tokens_per_s", None, 1.0), ("requests_per_second", "requests_per_s", None, 1.0),
        ("prompt_token_count", "_in", None, 1.0), ("output_token_count", "_out", None, 1.0), ("request_concurrency", "_conc", None, 1.0),
    ):  # fmt: skip
        where = f"benchmarks[{index}].metrics.{key}"
        d = _dist(m, key, where)
        if d is None:
            continue
        mean = _num(where + ".successful.mean", d.get("mean"), hi=1e9)
        if mean is not None:
            figures[mean_name] = mean * scale
        pct = d.get("percentiles")
        if p95_name and isinstance(pct, dict):
            p95 = _num(where + ".successful.percentiles.p95", pct.get("p95"), hi=1e9)
            if p95 is not None:
                figures[p95_name] = p95 * scale
    if "ttft_ms" not in figures:
        raise PlannerError(f"benchmarks[{index}].metrics.time_to_first_token_ms", None, "a guidellm benchmark carries the TTFT distribution")
    totals = m.get("request_totals") or bench.get("request_totals") or {}
    requests = _count(f"benchmarks[{index}].metrics.request_totals.successful", totals.get("successful")) if isinstance(totals, dict) else None
    strategy = (bench.get("config") or {}).get("strategy") if isinstance(bench.get("config"), dict) else None
    rate = conc = None
    if isinstance(strategy, dict):
        if strategy.get("type_") in ("constant", "poisson") or strategy.get("type") in ("constant", "poisson"):
            rate = _num("strategy.rate", strategy.get("rate"), lo=1e-9, hi=1e7)
        if strategy.get("type_") in ("concurrent",) or strategy.get("type") in ("concurrent",):
            conc = _count("strategy.streams", strategy.get("streams"))
    duration = None
    if isinstance(bench.get("start_time"), (int, float)) and isinstance(bench.get("end_time"), (int, float)):
        duration = _num("duration", bench["end_time"] - bench["start_time"], hi=1e7)
    return Measured(
        source="guidellm", tool="guidellm", requests=requests, duration_s=duration, request_rate=rate, max_concurrency=conc,
        input_tokens_mean=figures.pop("_in", None) or None, output_tokens_mean=figures.pop("_out", None) or None,
        figures={k: v for k, v in figures.items() if not k.startswith("_")},
    )  # fmt: skip


# --------------------------------------------------------------------------- aiperf

_AIPERF_SCALE = {"ms": 1.0, "sec": 1e3, "s": 1e3, "us": 1e-3, "ns": 1e-6}  # to milliseconds
# metric -> (mean figure, p95 figure); times in the export's unit, rates and counts as they are
_AIPERF_TIMES = {
    "time_to_first_token": ("ttft_ms", "ttft_p95_ms"), "inter_token_latency": ("tpot_ms", None),
    "inter_chunk_latency": ("itl_ms", "itl_p95_ms"), "request_latency": ("e2e_ms", None),
}  # fmt: skip
_AIPERF_RATES = {"output_token_throughput": "output_tokens_per_s", "request_throughput": "requests_per_s"}


def _aiperf_metric(doc: dict, key: str) -> dict | None:
    block = doc.get(key)
    if block is None:
        return None
    if not isinstance(block, dict) or not isinstance(block.get("unit"), str):
        raise PlannerError(key, type(block).__name__, "an aiperf metric is an object with a unit")
    return block


def _aiperf_load(doc: dict) -> tuple[float | None, int | None]:
    """(offered rate, concurrency) of the run's profiling phase (``input_config.phases``)."""
    cfg = doc.get("input_config")
    phases = cfg.get("phases") if isinstance(cfg, dict) else None
    if not isinstance(phases, list):
        return None, None
    for i, ph in enumerate(phases):
        if isinstance(ph, dict) and ph.get("kind", "profiling") == "profiling":
            rate = _num(f"input_config.phases[{i}].rate", ph.get("rate"), lo=1e-9, hi=1e7) if ph.get("type") in ("poisson", "constant", "gamma") else None
            conc = _count(f"input_config.phases[{i}].concurrency", ph.get("concurrency"))
            return rate, conc
    return None, None


def aiperf(doc: object) -> Measured:
    """An aiperf ``profile_export_aiperf.json`` (see the module docstring)."""
    if not isinstance(doc, dict):
        raise PlannerError("file", type(doc).__name__, "an aiperf export is a JSON object")
    figures = {}
    for key, (mean_name, p95_name) in _AIPERF_TIMES.items():
        m = _aiperf_metric(doc, key)
        if m is None:
            continue
        scale = _AIPERF_SCALE.get(m["unit"])
        if scale is None:
            raise PlannerError(f"{key}.unit", m["unit"], f"must be one of {', '.join(_AIPERF_SCALE)}")
        for stat, name in (("avg", mean_name), ("p95", p95_name)):
            v = _num(f"{key}.{stat}", m.get(stat), hi=MAX_MS / scale) if name else None
            if v is not None:
                figures[name] = v * scale
    for key, name in _AIPERF_RATES.items():
        m = _aiperf_metric(doc, key)
        v = _num(f"{key}.avg", m.get("avg"), hi=1e9) if m else None
        if v is not None:
            figures[name] = v
    if "ttft_ms" not in figures:
        raise PlannerError("time_to_first_token", None, "an aiperf export of a streamed run carries time_to_first_token")
    means = {}
    for key in ("request_count", "input_sequence_length", "output_sequence_length", "benchmark_duration"):
        m = _aiperf_metric(doc, key)
        means[key] = _num(f"{key}.avg", m.get("avg"), hi=1e12) if m else None
    requests = means["request_count"]
    if requests is not None and (requests < 1 or requests != int(requests)):
        raise PlannerError("request_count.avg", requests, "the run completed no request" if requests < 1 else "must be a whole number")
    rate, conc = _aiperf_load(doc)
    return Measured(
        source="aiperf", tool="aiperf", requests=int(requests) if requests is not None else None, duration_s=means["benchmark_duration"], request_rate=rate,
        max_concurrency=conc, input_tokens_mean=means["input_sequence_length"], output_tokens_mean=means["output_sequence_length"], figures=figures,
    )  # fmt: skip


# --------------------------------------------------------------------------- Prometheus text


_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+\d+)?$")
_LE = re.compile(r'le="([^"]+)"')
HISTOGRAMS = {"vllm:time_to_first_token_seconds": "ttft", "vllm:inter_token_latency_seconds": "itl", "vllm:request_time_per_output_token_seconds": "tpot", "vllm:e2e_request_latency_seconds": "e2e"}
GAUGES = {"vllm:num_requests_running": "running", "vllm:num_requests_waiting": "waiting", "vllm:kv_cache_usage_perc": "kv_cache_usage", "vllm:gpu_cache_usage_perc": "kv_cache_usage"}


def _quantile(buckets: list[tuple[float, float]], q: float) -> float | None:
    """The q-quantile of a cumulative histogram, linear within the bucket (Prometheus's histogram_quantile)."""
    buckets = sorted(buckets)
    if not buckets or buckets[-1][1] <= 0:
        return None
    target = q * buckets[-1][1]
    prev_le, prev_n = 0.0, 0.0
    for le, n in buckets:
        if n >= target:
            if math.isinf(le):
                return prev_le
            return prev_le + (le - prev_le) * ((target - prev_n) / (n - prev_n) if n > prev_n else 0.0)
        prev_le, prev_n = le, n
    return prev_le


def prometheus(data: bytes) -> Measured:
    """A Prometheus text scrape of vLLM's ``/metrics`` (see the module docstring); several engines or
    models in one scrape are summed (gauges, counts) or pooled (histograms)."""
    if len(data) > MAX_TEXT_BYTES:
        raise PlannerError("file", f"{len(data):,} bytes", f"a /metrics scrape must be at most {MAX_TEXT_BYTES >> 20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlannerError("file", "bytes", "is not UTF-8 text") from None
    started = time.monotonic()
    gauges: dict[str, float] = {}
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    buckets: dict[str, dict[float, float]] = {}
    kv_samples: list[float] = []
    seen = False
    for n, line in enumerate(text.splitlines(), 1):
        if n > MAX_LINES:
            raise PlannerError("file", f"over {MAX_LINES:,} lines", "is too long for a /metrics scrape")
        if len(line) > MAX_LINE_CHARS:
            raise PlannerError(f"line {n}", f"{len(line):,} characters", f"a /metrics line must be at most {MAX_LINE_CHARS:,} characters")
        if n % 4096 == 0 and time.monotonic() - started > MAX_SECONDS:
            raise PlannerError("file", f"line {n}", f"reading took over {MAX_SECONDS:g} s")
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise PlannerError(f"line {n}", line[:60], "is not a Prometheus sample (name{labels} value)")
        name, labels, raw = m.group(1), m.group(2) or "", m.group(3)
        if not name.startswith("vllm:"):
            continue
        seen = True
        try:
            value = float(raw)
        except ValueError:
            raise PlannerError(f"line {n}", raw[:40], "the sample's value is not a number") from None
        if math.isnan(value) or value < 0 or (math.isinf(value) and not name.endswith("_bucket")):
            raise PlannerError(f"line {n} ({name})", raw[:40], "must be a finite number at least 0")
        if name in GAUGES:
            key = GAUGES[name]
            if key == "kv_cache_usage":  # a fraction of each engine's pool: averaged over the engines
                if value > 1.0:
                    raise PlannerError(f"line {n} ({name})", raw[:40], "is a fraction of the KV pool, 0 to 1")
                kv_samples.append(value)
            else:
                gauges[key] = gauges.get(key, 0.0) + value
            continue
        for base, key in HISTOGRAMS.items():
            if name == base + "_sum":
                sums[key] = sums.get(key, 0.0) + value
            elif name == base + "_count":
                counts[key] = counts.get(key, 0.0) + value
            elif name == base + "_bucket":
                le = _LE.search(labels)
                if not le:
                    raise PlannerError(f"line {n} ({name})", labels[:60], "a histogram bucket carries le=")
                try:
                    bound = float(le.group(1))
                except ValueError:
                    raise PlannerError(f"line {n} ({name})", le.group(1)[:20], "le= is not a number") from None
                per = buckets.setdefault(key, {})
                per[bound] = per.get(bound, 0.0) + value
    if not seen:
        raise PlannerError("file", "no vllm: samples", "is not a scrape of vLLM's /metrics")
    figures = {}
    for key in HISTOGRAMS.values():
        if counts.get(key):
            figures[f"{key}_ms"] = sums.get(key, 0.0) / counts[key] * 1e3
            p95 = _quantile(list(buckets.get(key, {}).items()), 0.95)
            if p95 is not None:
                figures[f"{key}_p95_ms"] = p95 * 1e3
    figures.update(gauges)
    if kv_samples:
        figures["kv_cache_usage"] = sum(kv_samples) / len(kv_samples)
    requests = int(counts["e2e"]) if counts.get("e2e") else None
    return Measured(source="prometheus", tool="vLLM /metrics", requests=requests, figures={k: v for k, v in figures.items() if not k.startswith("e2e_p95")})
