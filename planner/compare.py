"""Two to four plans side by side: what each column overrides, how a comparison travels in a link,
and which plan is better on each row (more headroom, lower cost, lower latency).

The Compare page, its share link and the comparison PDF all read :func:`compare_rows`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from planner.capacity import LIMIT_LABELS
from planner.errors import shorten
from planner.hardware import CATALOG
from planner.kv import KV_DTYPE_CHOICES, RUNTIMES
from planner.limits import parse_number_text
from planner.linknotes import closest
from planner.plan import Plan, memory_basis
from planner.units import fmt_bytes, fmt_money, fmt_ms, fmt_num

CURRENT = "plan"  # a column that uses the Plan page's model
LETTERS = "ABCD"
MIN_PLANS, MAX_PLANS = 2, 4
COUNT_KEY = "cmp"  # query parameter: how many plans
COLUMN_KEYS = tuple(f"c{letter.lower()}" for letter in LETTERS)  # ca..cd: one column each
SEPARATOR = "~"
_NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


@dataclass(frozen=True)
class Column:
    """What one Compare column overrides of the Plan page's inputs."""

    model: str  # CURRENT or a preset name
    gpu: str
    gpu_count: int
    tp: int
    kv_dtype: str
    runtime: str

    def overrides(self) -> dict:
        return {"gpu": self.gpu, "gpu_count": self.gpu_count, "tp": self.tp, "kv_dtype": self.kv_dtype, "runtime": self.runtime, "device_gib": None}


FIELDS = ("model", "gpu", "gpu_count", "tp", "kv_dtype", "runtime")


def default_columns(base: Mapping) -> list[Column]:
    """Starting columns: A is the Plan page's plan and every other column starts as a copy of it
    (same GPU, TP, KV dtype and runtime), so a comparison differs only in what the user changes
    (issue 27: B opening with an fp8 cache made "H200 vs B200" also "bf16 vs fp8")."""
    gpu = base["gpu"] if base.get("gpu") in CATALOG else next(iter(CATALOG))
    a = Column(CURRENT, gpu, int(base["gpu_count"]), int(base["tp"]), base["kv_dtype"], base["runtime"])
    return [a] * MAX_PLANS


DIFFERS = "Differs from A"
# what a column sets, as the table names it: (label, value of a plan and its model label)
_SETTINGS: tuple[tuple[str, Callable[[Plan, str], str]], ...] = (
    ("model", lambda p, lab: lab),
    ("GPU", lambda p, lab: p.device.name),
    ("GPUs", lambda p, lab: f"{p.inputs.gpu_count:,}"),
    ("TP", lambda p, lab: f"{p.inputs.tp:,}"),
    ("KV dtype", lambda p, lab: p.inputs.kv_dtype),
    ("runtime", lambda p, lab: p.inputs.runtime),
)


def differences(results: list[tuple[str, Plan | None, str]]) -> tuple[str, ...]:
    """Per column, the settings it changes from column A ("GPU B200-180GB, KV dtype fp8"),
    "same settings as A", "(reference)" for A itself, "–" where either has no plan."""
    first = results[0][1] if results else None
    out = []
    for i, (_n, p, lab) in enumerate(results):
        if i == 0:
            out.append("(reference)" if p is not None else "–")
            continue
        if p is None or first is None:
            out.append("–")
            continue
        changed = [f"{name} {get(p, lab)}" for name, get in _SETTINGS if get(p, lab) != get(first, results[0][2])]
        out.append(", ".join(changed) if changed else "same settings as A")
    return tuple(out)


# --------------------------------------------------------------------------- links


def encode_columns(columns: list[Column]) -> dict[str, str]:
    """``cmp=N`` and one ``ca``..``cd`` parameter a column: ``model~gpu~gpus~tp~kv_dtype~runtime``."""
    out = {COUNT_KEY: str(len(columns))}
    for key, col in zip(COLUMN_KEYS, columns, strict=False):
        out[key] = SEPARATOR.join(str(getattr(col, name)) for name in FIELDS)
    return out


def _int(text: str) -> int | None:
    """A count from 1 to 4,096 in ASCII digits (planner/limits.py), else None; never raises."""
    value = parse_number_text(text, integer=True) if isinstance(text, str) and text.isascii() and text.isdigit() else None
    return value if value is not None and 1 <= value <= 4096 else None


_CHECKS: dict[str, Callable[[str], object]] = {
    "model": lambda t: t if _NAME_RE.fullmatch(t) else None,
    "gpu": lambda t: t if t in CATALOG else None,
    "gpu_count": _int,
    "tp": _int,
    "kv_dtype": lambda t: t if t in KV_DTYPE_CHOICES else None,
    "runtime": lambda t: t if t in RUNTIMES else None,
}


def decode_columns(params: Mapping[str, object], base: Mapping) -> tuple[list[Column], list[str]] | None:
    """The columns a link carries (None when it carries no comparison). Never raises: a bad
    field falls back to that column's default with a warning."""
    raw_n = params.get(COUNT_KEY)
    given = [i for i, k in enumerate(COLUMN_KEYS) if k in params]
    if raw_n is None and not given:
        return None
    warnings: list[str] = []
    defaults = default_columns(base)
    n = _int(raw_n) if isinstance(raw_n, str) else None  # a link's value is text; anything else is refused
    carried = max(MIN_PLANS, given[-1] + 1) if given else MIN_PLANS
    if n is None or not MIN_PLANS <= n <= MAX_PLANS:
        if raw_n is not None:
            warnings.append(f"number of plans (cmp) {shorten(raw_n, 24)} is not 2, 3 or 4; showing the {carried} the link carries")
        n = carried
    elif n > carried:  # cmp=3 without cc: show the plans the link has, never invent one
        missing = ", ".join(f"{LETTERS[i]} ({COLUMN_KEYS[i]})" for i in range(carried, n))
        warnings.append(f"number of plans (cmp) {n} but the link carries no plan {missing}; showing {carried} plans")
        n = carried
    for i in given:
        if i >= n:
            warnings.append(f"plan {LETTERS[i]} ({COLUMN_KEYS[i]}) is beyond the link's {n} plans (cmp); ignored")
    columns = []
    for i in range(n):
        key, default = COLUMN_KEYS[i], defaults[i]
        text = params.get(key)
        if text is None:
            if i < MIN_PLANS:  # a comparison has two plans at least: the missing one copies plan A
                warnings.append(f"plan {LETTERS[i]} ({key}) is missing from the link; using {'the Plan page' if i == 0 else 'plan A'}'s settings")
            columns.append(default if i == 0 else columns[0])
            continue
        parts = text.split(SEPARATOR) if isinstance(text, str) else []  # str() of a 4,400-digit int raises
        if len(parts) != len(FIELDS):
            warnings.append(f"plan {LETTERS[i]} ({key}) needs {len(FIELDS)} parts separated by {SEPARATOR!r}; using the default column")
            columns.append(default)
            continue
        values = {}
        for name, part in zip(FIELDS, parts, strict=True):
            value = _CHECKS[name](part)
            if value is None and name == "gpu" and (near := closest(part, CATALOG)) is not None:
                warnings.append(f"plan {LETTERS[i]} gpu {part[:40]!r} is not a catalog GPU; did you mean {near}? Using it")
                value = near
            elif value is None:
                warnings.append(f"plan {LETTERS[i]} {name} {part[:40]!r} is not valid; using {getattr(default, name)!r}")
                value = getattr(default, name)
            values[name] = value
        columns.append(Column(**values))
    return columns, warnings


# --------------------------------------------------------------------------- rows and verdicts


@dataclass(frozen=True)
class Row:
    label: str
    cells: tuple[str, ...]  # one per plan ("–" where a column has no plan)
    best: tuple[int, ...] = ()  # indexes of the better plan(s) on this row; empty: no verdict
    why: str = ""  # "more sequences", "lower cost", ...

    def verdict(self, names: list[str]) -> str:
        """"B: lower latency", "A, C: more headroom", "same" or "" (by each name's letter)."""
        if not self.why:
            return ""
        if not self.best:
            return "same"
        return f"{', '.join(letter_of(names[i]) for i in self.best)}: {self.why}"


def letter_of(name: str) -> str:
    """The letter of a column name: "B · llama-3.1-70b × 4 H100-SXM-80GB" or "Plan B" -> "B"."""
    return name.split(" · ")[0].split()[-1]


def plan_name(letter: str, model_label: str, plan) -> str:
    """A column's name: its letter, the model and the deployment ("B · llama-3.1-70b × 4 H100-SXM-80GB"),
    so a table, a chart or a PDF says what was compared, not "Plan B"."""
    if plan is None:
        return f"{letter} · {model_label}"
    return f"{letter} · {model_label} × {plan.inputs.gpu_count:,} {plan.device.name}"


# (label, text of a plan, number to rank by or None, "higher" / "lower" / "", why)
_SPECS: tuple[tuple[str, Callable[[Plan, str], str], Callable[[Plan], float | None] | None, str, str], ...] = (
    ("Model", lambda p, lab: lab, None, "", ""),
    ("GPU", lambda p, lab: f"{p.device.name} × {p.capacity.gpu_count:,}", None, "", ""),
    ("TP", lambda p, lab: f"{p.capacity.tp:,}", None, "", ""),
    ("KV dtype", lambda p, lab: p.inspect.kv_dtype, None, "", ""),
    ("Runtime", lambda p, lab: p.inputs.runtime + (f" (vLLM {p.inputs.vllm_version})" if p.inputs.runtime == "vllm" else f" (SGLang {p.sglang.capacity.sglang_version})" if p.sglang else ""), None, "", ""),
    ("KV bytes / token", lambda p, lab: fmt_bytes(p.kv_cache.bytes_per_token_per_sequence), lambda p: p.kv_cache.bytes_per_token_per_sequence, "lower", "smaller cache"),
    ("Memory per sequence", lambda p, lab: fmt_num(p.kv_cache.mib_per_reserved_sequence) + " MiB", lambda p: p.kv_cache.bytes_per_reserved_sequence, "lower", "less memory per sequence"),
    ("Weights per GPU", lambda p, lab: fmt_bytes(p.capacity.model_resident_bytes), None, "", ""),
    ("Available for K/V per GPU", lambda p, lab: fmt_bytes(p.capacity.available_for_kv_bytes), lambda p: p.capacity.available_for_kv_bytes, "higher", "more headroom"),
    ("Max sequences", lambda p, lab: f"{p.kv_cache.admissible_sequences:,}", lambda p: p.kv_cache.admissible_sequences, "higher", "more sequences"),
    ("Memory figure counts", lambda p, lab: memory_basis(p, short=True), None, "", ""),  # the Runtime row above names the engine
    ("Bound by", lambda p, lab: LIMIT_LABELS.get(p.kv_cache.binding_constraint, p.kv_cache.binding_constraint), None, "", ""),
    ("Admitted", lambda p, lab: "yes" if p.kv_cache.admitted else "no", lambda p: 1 if p.kv_cache.admitted else 0, "higher", "admits the load"),
    ("TTFT", lambda p, lab: fmt_ms(p.latency.time_to_first_token_ms), lambda p: p.latency.time_to_first_token_ms, "lower", "lower latency"),
    ("ITL", lambda p, lab: fmt_ms(p.latency.mean_inter_token_latency_ms), lambda p: p.latency.mean_inter_token_latency_ms, "lower", "lower latency"),
    ("Decode tokens/s", lambda p, lab: f"{p.roofline.decode_tokens_per_second:,.0f}", lambda p: p.roofline.decode_tokens_per_second, "higher", "more throughput"),
    # the Plan page's serving card figure (every request's whole cycle at the load, TTFT included),
    # per GPU so deployments of different sizes compare; "Decode tokens/s" above is the whole
    # deployment's decode rate (sequences / ITL), the cost basis
    ("Throughput per GPU", lambda p, lab: f"{p.roofline.output_tokens_per_second_per_gpu:,.0f} tok/s", lambda p: p.roofline.output_tokens_per_second_per_gpu, "higher", "more throughput per GPU"),
    ("Cost per hour", lambda p, lab: fmt_money(p.cost.deployment_per_hour) if p.cost.deployment_per_hour is not None else "–", lambda p: p.cost.deployment_per_hour, "lower", "lower cost"),
    (
        "Cost per M output tokens",
        lambda p, lab: fmt_money(p.cost.per_million_output_tokens) if p.cost.per_million_output_tokens is not None else "–",
        lambda p: p.cost.per_million_output_tokens,
        "lower",
        "lower cost",
    ),
)


def engine_pool_tokens(p: Plan) -> int | None:
    """Tokens the engine's KV pool holds on one GPU at start-up: SGLang's ``max_total_num_tokens``
    (runtime sglang), vLLM's ``GPU KV cache size`` (runtime vllm), else None."""
    if p.sglang is not None:
        return p.sglang.capacity.max_total_num_tokens
    e = p.kv_cache.engine
    return e.startup_kv_cache_tokens if e is not None and e.applies else None


def engine_sizing(p: Plan) -> str:
    """Why one engine's pool differs from another's: the share of memory it takes, the bytes a
    token costs in its pool, its page or block, and the pools or caps only it has."""
    v = p.sglang
    if v is not None:
        parts = [f"mem_fraction_static {v.capacity.mem_fraction_static:g} of {v.memory.pre_load_free_gib:,.2f} GiB free before the weights", f"{v.capacity.cell_bytes:,.6g} B a token ({v.capacity.kv_dtype})", f"page {v.capacity.page_size}"]
        if v.capacity.swa_max_total_num_tokens is not None:
            parts.append(f"SWA pool {v.capacity.swa_max_total_num_tokens:,} tokens")
        if v.capacity.max_mamba_cache_size is not None:
            parts.append(f"Mamba state pool {v.capacity.max_mamba_cache_size:,} slots")
        parts.append(f"max_running_requests {v.capacity.max_running_requests:,}")
        return "; ".join(parts)
    e = p.kv_cache.engine
    if e is None or not e.applies or not e.block_size:
        return (e.reason or e.startup_refusal or "") if e is not None else "steady state (no engine's sizing)"
    per_token = e.bytes_per_block / e.block_size if e.block_size else 0
    return f"gpu_memory_utilization {(10_000 - p.inputs.headroom_bp) / 10_000:g} of the device; {per_token:,.6g} B a token ({p.inspect.kv_dtype}); {e.block_size}-token blocks for all reserved tokens of a request ({e.groups})"


ENGINE_SIZING = "Engine sizing (why the pools differ)"
# shown only when a column runs SGLang, so a vLLM-only comparison keeps its rows
_ENGINE_SPECS = (
    ("Engine KV pool (tokens / GPU)", lambda p, lab: f"{engine_pool_tokens(p):,}" if engine_pool_tokens(p) is not None else "–", engine_pool_tokens, "higher", "bigger pool"),
    (ENGINE_SIZING, lambda p, lab: engine_sizing(p), None, "", ""),
)


def compare_rows(results: list[tuple[str, Plan | None, str]]) -> list[Row]:
    """Rows of the comparison for ``(name, plan or None, model label)`` per column.

    A row with a direction names the better plan(s); values within 0.5 % of each other tie, and
    a row where any column lacks the figure (no plan, no price) gives no verdict but "same" only
    when every plan has it and they all tie.
    """
    rows = [Row(DIFFERS, differences(results))]
    specs = _SPECS
    if any(p is not None and p.sglang is not None for _n, p, _lab in results):
        at = next(i for i, spec in enumerate(_SPECS) if spec[0] == "Memory figure counts") + 1
        specs = (*_SPECS[:at], *_ENGINE_SPECS, *_SPECS[at:])
    for label, text, number, direction, why in specs:
        cells = tuple(text(p, lab) if p is not None else "–" for _n, p, lab in results)
        if number is None or not direction:
            rows.append(Row(label, cells))
            continue
        nums = [number(p) if p is not None else None for _n, p, _lab in results]
        if any(v is None for v in nums):
            rows.append(Row(label, cells))
            continue
        best_value = max(nums) if direction == "higher" else min(nums)
        tol = abs(best_value) * 0.005
        best = tuple(i for i, v in enumerate(nums) if abs(v - best_value) <= tol)
        rows.append(Row(label, cells, () if len(best) == len(nums) else best, why))
    return rows


__all__ = ["DIFFERS", "ENGINE_SIZING", "differences", "COLUMN_KEYS", "COUNT_KEY", "CURRENT", "Column", "Row", "compare_rows", "decode_columns", "default_columns", "encode_columns", "engine_pool_tokens", "engine_sizing"]
