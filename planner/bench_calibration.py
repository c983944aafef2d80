"""A benchmark run's calibration of a plan: measured and predicted, kept as one short text.

``src=vllm-bench;ttft_ms=77.52/24.63;tpot_ms=4.592/8.934;output_tokens_per_s=1370/871.9;at=c8`` — the
tool, then ``figure=measured/predicted`` (4 significant digits) for at most :data:`KEPT_FIGURES`'
three figures: mean TTFT, mean TPOT (ITL where the tool reports no TPOT) and output tokens a second,
then the run's load (``at=c8``: 8 concurrent clients; ``at=r4``: 4 requests/s; absent for a
``/metrics`` scrape and in calibrations kept before it was written), which lets
:mod:`planner.benchimport.calibrate` re-predict the run and apply the ratios only to the deployment
that made them.
It is the plan's ``bench_calibration`` input, so the plan file and the share link keep it (at most
:data:`MAX_CALIBRATION_CHARS` characters, the share link's limit on a text value). The ratio is
measured / predicted at the run's load (:func:`planner.benchimport.compare`), as the plan predicted
it then. No plan module is imported here: :class:`planner.plan.PlanInputs` validates with it.
"""

from __future__ import annotations

import math
import re

from planner.errors import PlannerError

LABELS = {
    "ttft_ms": "TTFT mean (ms)", "ttft_p95_ms": "TTFT p95 (ms)", "tpot_ms": "TPOT mean (ms)", "itl_ms": "ITL mean (ms)", "itl_p95_ms": "ITL p95 (ms)",
    "e2e_ms": "end-to-end mean (ms)", "output_tokens_per_s": "output tokens/s", "requests_per_s": "requests/s", "running": "running requests",
    "kv_cache_usage": "KV cache usage",
}  # fmt: skip
SOURCES = {"vllm-bench", "guidellm", "aiperf", "prometheus"}
# the figures a calibration keeps, each a choice in order of preference (TPOT, else ITL)
KEPT_FIGURES = (("ttft_ms",), ("tpot_ms", "itl_ms"), ("output_tokens_per_s",))
MAX_CALIBRATION_CHARS = 128  # planner.share.MAX_TEXT: three figures of 4 digits fit with room
_CAL_ITEM = re.compile(r"^([a-z0-9_]{1,24})=([0-9.eE+-]{1,24})/([0-9.eE+-]{1,24})$")
_LOAD_ITEM = re.compile(r"^at=([cr])([0-9.eE+-]{1,12})$")


def load_text(max_concurrency: int | None, request_rate: float | None) -> str | None:
    """``c8`` (8 concurrent clients) or ``r4`` (4 requests/s, 4 significant digits); None when neither."""
    if request_rate is None and max_concurrency:
        return f"c{max_concurrency}"
    if request_rate is not None:
        return f"r{request_rate:.4g}"
    return None


def format_calibration(source: str, rows, load: str | None = None) -> str:
    """The calibration text of comparison rows (each with ``figure``, ``measured``, ``predicted``):
    the :data:`KEPT_FIGURES` among them, 4 significant digits, then the run's ``load`` (:func:`load_text`)."""
    by = {r.figure: r for r in rows}
    parts = [f"src={source}"]
    for choices in KEPT_FIGURES:
        r = next((by[f] for f in choices if f in by), None)
        if r is not None:
            parts.append(f"{r.figure}={r.measured:.4g}/{r.predicted:.4g}")
    text = ";".join(parts)
    return text + f";at={load}" if load and len(text) + len(load) + 4 <= MAX_CALIBRATION_CHARS else text


def calibration_load(text: str) -> tuple[int | None, float | None]:
    """(clients, requests/s) of the run a calibration text names (``at=``); (None, None) when it names none."""
    for p in text.split(";"):
        m = _LOAD_ITEM.match(p)
        if m:
            value = float(m.group(2))
            return (int(value), None) if m.group(1) == "c" else (None, value)
    return None, None


def parse_calibration(text: str) -> tuple[str, dict[str, tuple[float, float]]]:
    """(source, figure -> (measured, predicted)) of a calibration text.

    Raises:
        PlannerError: too long, an unknown source or figure, or a value that is not a positive finite number.
    """
    if not isinstance(text, str) or len(text) > MAX_CALIBRATION_CHARS:
        raise PlannerError("bench_calibration", str(text)[:40], f"must be text of at most {MAX_CALIBRATION_CHARS} characters")
    parts = [p for p in text.split(";") if p]
    if not parts or not parts[0].startswith("src="):
        raise PlannerError("bench_calibration", text[:40], "must start with src=<tool>")
    source = parts[0][4:]
    if source not in SOURCES:
        raise PlannerError("bench_calibration", source, f"the source must be one of {', '.join(sorted(SOURCES))}")
    out = {}
    for p in parts[1:]:
        load = _LOAD_ITEM.match(p)
        if load:
            value = float(load.group(2)) if re.fullmatch(r"[0-9.]+(e[+-]?[0-9]+)?", load.group(2), re.I) else -1.0
            if not (math.isfinite(value) and 0 < value <= 1e7 and (load.group(1) == "r" or value == int(value))):
                raise PlannerError("bench_calibration", p[:40], "the load is at=c<clients> or at=r<requests per second>")
            continue
        m = _CAL_ITEM.match(p)
        if not m or m.group(1) not in LABELS:
            raise PlannerError("bench_calibration", p[:40], f"each entry is figure=measured/predicted with a figure among {', '.join(LABELS)}, or at=c<clients> / at=r<rate>")
        try:
            measured, predicted = float(m.group(2)), float(m.group(3))
        except ValueError:
            raise PlannerError("bench_calibration", p[:40], "the values are not numbers") from None
        if not all(math.isfinite(x) and 0 < x <= 1e12 for x in (measured, predicted)):
            raise PlannerError("bench_calibration", p[:40], "the values must be positive finite numbers")
        out[m.group(1)] = (measured, predicted)
    return source, out


def calibration_rows(text: str) -> list[dict]:
    """The table the Plan page and the PDF show for a kept calibration: figure, measured, predicted
    (when measured) and the ratio measured / predicted."""
    _source, figures = parse_calibration(text)
    return [{"figure": LABELS[k], "measured": m, "predicted": p, "ratio": m / p} for k, (m, p) in figures.items()]
