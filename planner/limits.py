"""Plausible ranges for every number that comes from outside, and bounded process resources.

A number from a ``config.json``, a CLI flag, a share link or a plan file passes through this
module (or through a bound defined here) before any arithmetic: it must be finite and inside a
documented range, or it is refused with a :class:`~planner.errors.PlannerError` that names the
field and shows the value shortened (:func:`~planner.errors.shorten`).

Documented ranges (real models sit far inside them; the ceilings only stop absurd input):

========================  ===================  ===============================================
what                      range                largest real value seen (Hub, 2026)
========================  ===================  ===============================================
layers                    1 .. 10,000          126 (Llama 3.1 405B)
attention / KV heads      1 .. 16,384          128
head_dim, latent ranks    1 .. 65,536          576 (MLA latent)
hidden / MLP widths       1 .. 1,048,576       53,248 (Llama 3.1 405B MLP)
routed experts            0 .. 65,536          384 (Kimi K2)
context positions         1 .. 2**31           10,485,760 (Llama 4 Scout)
vocabulary                1 .. 2**24           262,144
K/V bytes per token       at most 1 TiB        ~ 0.5 MiB (fp32, all layers)
parameters                at most 10**14       ~ 10**12 (Kimi K2)
MFU / MBU                 1e-6 .. 1            0.3 - 0.8
measured phases (ms)      0.001 .. 10**9       -
custom device             0.01 .. 4,096 GiB,   -
                          1 .. 100,000 GB/s,
                          0.01 .. 100,000 TFLOP/s
========================  ===================  ===============================================

Plan-input ranges live on :class:`planner.plan.PlanInputs` fields (share links and plan files
read them from there); the floors below are the ones that stop a tiny positive float
(``5e-324``) from turning into an infinite time. Every other number a person types (a CLI flag
outside the plan inputs, an app widget for the simulator, the sizer or the probe) has its range in
:data:`BOUNDS`, one table the CLI's argument types and the app's widgets both read: a value
outside it is refused in one line (``--available-kv-gib 1e300 is absurdly large (limit
1,048,576)``), and count flags that multiply work (``--capacity-top``) have a small documented
ceiling beside a wall-time budget.

Text: :func:`safe_text` is the one filter for text on its way out of the process (terminal,
JSON, PDF, the app): a string JSON can carry may hold lone UTF-16 surrogates (``"\\ud800"``),
which no UTF-8 stream accepts; they become U+FFFD. Digits: :func:`parse_number_text` is the one
reader of number text on every surface (flags, links, traces, uploads, environment variables):
ASCII digits only.

Resources: :class:`ByteBudgetCache` bounds a process cache by the bytes its entries hold, not
by their count, and :class:`RateLimiter` bounds how often one caller may do an expensive thing
(a Hub request per app session).
"""

from __future__ import annotations

import json
import math
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass

from planner.errors import LimitError, PlannerError, shorten
from planner.units import fmt_limit

# --------------------------------------------------------------------------- config geometry
MAX_LAYERS = 10_000
MAX_HEADS = 16_384
MAX_HEAD_DIM = 65_536
MAX_DIM = 1 << 20
MAX_EXPERTS = 65_536
MAX_POSITIONS = 1 << 31
MAX_VOCAB = 1 << 24
MAX_KV_BYTES_PER_TOKEN = 1 << 40  # 1 TiB per token (every layer, fp32, one sequence, tp 1)
MAX_PARAMS = 10**14

# --------------------------------------------------------------------------- plan inputs
MIN_UTILISATION = 1e-6  # MFU / MBU floor (a CPU probe calibrated against a GPU roofline gets near it)
MIN_PHASE_MS = 0.001  # a measured phase shorter than 1 µs is a typo, and 5e-324 divides to inf
MIN_DEVICE_GIB = 0.01
MIN_BANDWIDTH_GB_S = 1.0
MIN_TFLOPS = 0.01

__all__ = [
    "MAX_DIM", "MAX_EXPERTS", "MAX_HEADS", "MAX_HEAD_DIM", "MAX_KV_BYTES_PER_TOKEN", "MAX_LAYERS", "MAX_PARAMS",
    "MAX_POSITIONS", "MAX_VOCAB", "MIN_BANDWIDTH_GB_S", "MIN_DEVICE_GIB", "MIN_PHASE_MS", "MIN_TFLOPS", "MIN_UTILISATION",
    "BOUNDS", "CAPACITY_TIME_BUDGET_S", "FLOAT_TEXT", "INT_TEXT", "MAX_CAPACITY_TOP", "Bound", "ByteBudgetCache", "RateLimiter", "bounded_number",
    "check_number", "ensure_finite_json", "parse_number_text", "safe_json_loads", "safe_text", "safe_tree", "shorten", "size_of",
]


# --------------------------------------------------------------------------- counts that multiply work
MAX_CAPACITY_TOP = 10  # simulator capacity searches per sizing (each up to CAPACITY_MAX_RUNS simulations)
CAPACITY_TIME_BUDGET_S = 10.0  # wall time for all of them together; the rest are reported as not searched


@dataclass(frozen=True)
class Bound:
    """The range of one number a person types: ``lo <= value <= hi`` (``lo`` excluded when
    ``positive``), an integer when ``integer``; ``unit`` is shown in messages and help."""

    lo: float
    hi: float
    integer: bool = False
    unit: str = ""
    positive: bool = False

    def check(self, field: str, value: object) -> int | float:
        """``value`` if inside the range. Raises PlannerError naming ``field``."""
        value = check_number(field, value, lo=self.lo, hi=self.hi, integer=self.integer)
        if self.positive and value <= 0:
            raise PlannerError(field, value, "must be above 0")
        return value

    def widget(self) -> dict:
        """``min_value`` / ``max_value`` for a Streamlit ``number_input`` of this quantity."""
        if self.integer:
            return {"min_value": int(max(self.lo, 1 if self.positive else self.lo)), "max_value": int(self.hi)}
        return {"min_value": float(self.lo), "max_value": float(self.hi)}


_GIB_CEILING = 1 << 20  # 1 PiB of device memory: far above any GPU, below float overflow when scaled to bytes

BOUNDS: dict[str, Bound] = {
    # engine (what vLLM prints)
    "available_kv_gib": Bound(0, _GIB_CEILING, unit="GiB", positive=True),
    "available_kv_bytes": Bound(1, _GIB_CEILING << 30, integer=True, unit="bytes"),
    "gpu_memory_utilization": Bound(0, 1, positive=True),
    "block_size": Bound(1, 1 << 20, integer=True, unit="tokens"),
    "max_model_len": Bound(1, MAX_POSITIONS, integer=True, unit="tokens"),
    "max_num_batched_tokens": Bound(1, 1 << 24, integer=True, unit="tokens"),
    "max_num_seqs": Bound(1, 1 << 20, integer=True),
    "speculative_layers": Bound(0, MAX_LAYERS, integer=True),
    # engine --engine sglang (what SGLang prints)
    "context_length": Bound(1, MAX_POSITIONS, integer=True, unit="tokens"),
    "mem_fraction_static": Bound(0, 1, positive=True),  # below 1 too: SGLang's own check refuses 1
    "chunked_prefill_size": Bound(-1, 1 << 24, integer=True, unit="tokens"),  # -1: no chunking (0 refused by the engine)
    "max_running_requests": Bound(1, 1 << 24, integer=True),
    "page_size": Bound(1, 1 << 16, integer=True, unit="tokens"),
    "pre_load_free_gib": Bound(0, _GIB_CEILING, unit="GiB", positive=True),
    "available_after_weights_gib": Bound(0, _GIB_CEILING, unit="GiB", positive=True),
    "limit_mm_per_prompt": Bound(0, 1 << 20, integer=True),  # as PlanInputs.limit_mm_per_prompt
    "max_loras": Bound(1, 4096, integer=True),
    "max_lora_rank": Bound(1, 4096, integer=True),
    "tp": Bound(1, 4096, integer=True, unit="GPUs"),
    "ep": Bound(1, 4096, integer=True, unit="GPUs"),
    "tokens": Bound(0, MAX_POSITIONS, integer=True, unit="tokens"),
    "batch_tokens": Bound(1, 1 << 24, integer=True, unit="tokens"),
    # simulate
    "rate": Bound(0, 1e12, unit="requests/s"),  # the simulator: 1e9 is a burst of everything at once
    "requests": Bound(1, 100_000, integer=True),
    "chunk_tokens": Bound(1, 1 << 20, integer=True, unit="tokens"),
    "max_batched_tokens": Bound(1, 1 << 24, integer=True, unit="tokens"),
    "seed": Bound(0, 2**31 - 1, integer=True),
    "replicas": Bound(1, 1024, integer=True),
    "time_budget_s": Bound(0, 3600, unit="s", positive=True),
    "sessions": Bound(1, 100_000, integer=True),  # the tiered cache simulation (sessions x turns <= 100,000 requests)
    # size
    "users": Bound(1, 10_000_000, integer=True),
    "size_rate": Bound(1e-6, 1e6, unit="requests/s"),
    "ttft_p95_ms": Bound(0, 1e7, unit="ms", positive=True),
    "itl_p95_ms": Bound(0, 1e7, unit="ms", positive=True),
    "tpot_ms": Bound(0, 1e7, unit="ms", positive=True),
    "gpu_hour_price": Bound(0, 1e6, unit="USD"),
    "capacity_top": Bound(0, MAX_CAPACITY_TOP, integer=True),
    "top": Bound(1, 10_000, integer=True),
    "tps": Bound(1, 4096, integer=True, unit="GPUs"),
    "headroom_bp": Bound(0, 9_999, integer=True, unit="basis points"),
    # probe
    "probe_tokens": Bound(1, 1 << 24, integer=True, unit="tokens"),
    "batch": Bound(1, 4096, integer=True),
    "decode_steps": Bound(0, 4096, integer=True),
    "layers_limit": Bound(1, MAX_LAYERS, integer=True),
    "block_tokens": Bound(1, 1 << 20, integer=True, unit="tokens"),
    "timeout": Bound(1, 3600, unit="s"),
}


def bounded_number(name: str, text: str, field: str | None = None) -> int | float:
    """The number ``text`` spells (ASCII digits), inside :data:`BOUNDS` ``[name]``.

    Raises:
        PlannerError: naming ``field`` (default ``name``): not a number, or outside the range.
    """
    bound = BOUNDS[name]
    value = parse_number_text(text, integer=bound.integer)
    if value is None:
        raise PlannerError(field or name, text, "is not an integer (ASCII digits only)" if bound.integer else "is not a finite number (e.g. 0.5 or 1e-3)")
    return bound.check(field or name, value)


# --------------------------------------------------------------------------- text leaving the process
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
REPLACEMENT_CHARACTER = "\ufffd"


def safe_text(value: object) -> str:
    """``value`` as text every UTF-8 stream accepts: lone surrogates (which JSON's ``\\ud800``
    escape can put in any string) become U+FFFD. The one filter for text leaving the process:
    the CLI's output, plan JSON, the PDF report and the app's messages. Raises nothing."""
    text = value if isinstance(value, str) else str(value)
    return _LONE_SURROGATE.sub(REPLACEMENT_CHARACTER, text) if _LONE_SURROGATE.search(text) else text


def safe_tree(obj: object, _depth: int = 0) -> object:
    """A copy of a JSON-like tree with :func:`safe_text` applied to every string and key (64 levels
    at most; deeper nodes are left as they are). Raises nothing."""
    if _depth > 64:
        return obj
    if isinstance(obj, str):
        return safe_text(obj)
    if isinstance(obj, dict):
        return {safe_text(k) if isinstance(k, str) else k: safe_tree(v, _depth + 1) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [safe_tree(v, _depth + 1) for v in obj]
    return obj


_ESCAPED_SURROGATE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def safe_json_loads(text: str, **kwargs) -> object:
    """``json.loads(text, **kwargs)`` with :func:`safe_tree` applied when the text escapes a
    surrogate (``\\ud800``): how configs, plan files and probe JSON come in, so no lone surrogate
    reaches the planner. A valid escaped pair (an emoji) decodes to its character as before.

    Raises:
        whatever ``json.loads`` raises.
    """
    obj = json.loads(text, **kwargs)
    return safe_tree(obj) if _ESCAPED_SURROGATE.search(text) else obj


# number text from a flag or a link: ASCII digits only, no "_" separators, no spaces, no inf/nan
INT_TEXT = re.compile(r"[+-]?[0-9]{1,20}")
FLOAT_TEXT = re.compile(r"[+-]?(?:[0-9]{1,40}\.?[0-9]{0,40}|\.[0-9]{1,40})(?:[eE][+-]?[0-9]{1,4})?")


def parse_number_text(text: str, integer: bool) -> int | float | None:
    """The number ``text`` spells in plain ASCII (``"4096"``, ``"0.5"``, ``"1e-3"``), else None.

    Stricter than ``int()``/``float()``: ``"1_000"``, ``"٣"``, ``" 5 "``, ``"inf"``, ``"nan"`` and
    integers over 20 digits are None, so every surface reads numbers the same way.
    """
    if not isinstance(text, str) or not (INT_TEXT if integer else FLOAT_TEXT).fullmatch(text):
        return None
    value = int(text) if integer else float(text)
    return value if integer or math.isfinite(value) else None


def check_number(field: str, value: object, *, lo: float, hi: float, integer: bool = False, error: type[PlannerError] = LimitError) -> int | float:
    """``value`` if it is a finite number (an integer when ``integer``) with ``lo <= value <= hi``.

    Integral floats (``4096.0``) pass as integers; ``True``/``False`` and text never do.

    Raises:
        LimitError (or ``error``): naming ``field``, showing the value shortened, saying why.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise error(field, value, "must be an integer" if integer else "must be a number")
    if isinstance(value, float):
        if not math.isfinite(value):
            raise error(field, value, "must be a finite whole number" if integer else "must be a finite number")
        if integer:
            if value != int(value):
                raise error(field, value, "must be a whole number")
            value = int(value)
    if value < lo:
        raise error(field, value, f"must be at least {fmt_limit(lo)}")
    if value > hi:
        raise error(field, value, f"is absurdly large (limit {fmt_limit(hi)})")
    return value


def ensure_finite_json(obj: object, path: str = "result") -> None:
    """Refuse a result that would print ``Infinity`` or ``NaN`` (not JSON) before it is printed.

    Raises:
        LimitError: naming the first non-finite number's path.
    """
    if isinstance(obj, float):
        if not math.isfinite(obj):
            raise LimitError(path, obj, "came out non-finite: an input is outside its plausible range")
    elif isinstance(obj, dict):
        for key, value in obj.items():
            ensure_finite_json(value, f"{path}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, value in enumerate(obj):
            ensure_finite_json(value, f"{path}[{i}]")


# --------------------------------------------------------------------------- bounded resources


_LEAVES = (str, bytes, bytearray, int, float, bool)
_LEAF_TYPES = frozenset({str, bytes, bytearray, int, float, bool, type(None)})


def size_of(obj: object, _seen: set[int] | None = None, _depth: int = 0) -> int:
    """Approximate bytes an object graph holds (containers, pydantic models, dataclasses).

    Shared objects are counted once; the walk stops 64 levels down; a sequence of more than 256
    items is charged by a 64-item sample (a 5,000-layer geometry: within 1 % of tracemalloc's
    figure, in milliseconds). Used to charge cache entries.
    """
    seen = _seen if _seen is not None else set()
    if id(obj) in seen or _depth > 64:
        return 0
    seen.add(id(obj))
    size = sys.getsizeof(obj)
    if isinstance(obj, _LEAVES) or obj is None:
        return size
    if isinstance(obj, dict):
        return size + _children(obj.items(), seen, _depth + 1, pairs=True)
    if isinstance(obj, (list, tuple, set, frozenset)):
        items = list(obj)
        if len(items) > 256:  # long sequences (10,000 layer specs): charge a 64-item sample, scaled
            step = len(items) // 64
            sample = items[::step][:64]
            return size + _children(sample, seen, _depth + 1) * len(items) // len(sample)
        return size + _children(items, seen, _depth + 1)
    fields = getattr(obj, "__dict__", None)
    if fields is not None:
        size += size_of(fields, seen, _depth + 1)
    for slot in getattr(type(obj), "__slots__", ()):
        if isinstance(slot, str) and hasattr(obj, slot):
            size += size_of(getattr(obj, slot), seen, _depth + 1)
    return size


def _children(items, seen: set[int], depth: int, pairs: bool = False) -> int:
    """sum(size_of(item, seen, depth) for item in items) (of key and value for ``pairs``), in the
    same order, with leaves (numbers, strings, None) charged here rather than by a call each."""
    total = 0
    leaves = depth <= 64
    for item in items:
        for obj in item if pairs else (item,):
            if leaves and type(obj) in _LEAF_TYPES:
                i = id(obj)
                if i not in seen:
                    seen.add(i)
                    total += sys.getsizeof(obj)
            else:
                total += size_of(obj, seen, depth)
    return total


class ByteBudgetCache:
    """A thread-safe LRU map bounded by the bytes its entries hold (``max_bytes``), not their count.

    ``put`` charges each entry ``size(value) + size(key)`` (:func:`size_of` unless ``sizer`` is
    given) and evicts least recently used entries until the total fits; an entry larger than the
    whole budget is not kept at all. ``nbytes`` is the current charge.
    """

    def __init__(self, max_bytes: int, sizer: Callable[[object], int] = size_of) -> None:
        self.max_bytes = int(max_bytes)
        self.nbytes = 0
        self._sizer = sizer
        self._data: OrderedDict[Hashable, tuple[object, int]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable, default: object = None) -> object:
        with self._lock:
            entry = self._data.get(key)
            if entry is None:
                return default
            self._data.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: object) -> None:
        cost = self._sizer(value) + size_of(key)
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]
            if cost > self.max_bytes:
                return
            while self._data and self.nbytes + cost > self.max_bytes:
                _, (_, freed) = self._data.popitem(last=False)
                self.nbytes -= freed
            self._data[key] = (value, cost)
            self.nbytes += cost

    def pop(self, key: Hashable) -> None:
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.nbytes -= old[1]

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.nbytes = 0

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._data

    def keys(self) -> Iterator[Hashable]:
        with self._lock:
            return iter(list(self._data))


class RateLimiter:
    """At most ``per_window`` events per key in any ``window_s`` seconds (a sliding log per key).

    ``allow(key)`` records the event and answers True, or answers False (recording nothing) when
    the key is over its budget; ``retry_after(key)`` says how many seconds until the next slot.
    At most ``max_keys`` keys are remembered (the least recently seen are forgotten first).
    """

    def __init__(self, per_window: int, window_s: float, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_window = int(per_window)
        self.window_s = float(window_s)
        self.max_keys = int(max_keys)
        self._clock = clock
        self._log: OrderedDict[Hashable, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def _recent(self, key: Hashable, now: float) -> list[float]:
        times = [t for t in self._log.get(key, ()) if now - t < self.window_s]
        self._log[key] = times
        self._log.move_to_end(key)
        while len(self._log) > self.max_keys:
            self._log.popitem(last=False)
        return times

    def allow(self, key: Hashable) -> bool:
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            if len(times) >= self.per_window:
                return False
            times.append(now)
            return True

    def retry_after(self, key: Hashable) -> float:
        with self._lock:
            now = self._clock()
            times = self._recent(key, now)
            if len(times) < self.per_window:
                return 0.0
            return max(0.0, self.window_s - (now - times[0]))
