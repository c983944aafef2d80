"""Every environment variable the planner reads, in one table (:data:`TABLE`), each read when it
is needed, never at import (tests and a long-running app change them), through one parser per
type: :func:`env_bool`, :func:`env_int`, :func:`env_float`, :func:`env_str`.

A variable that is unset or blank takes its default. A value that does not parse is logged and
the default used, except where a wrong value would make the planner do something the user did
not ask for (``KVP_PROBE_CPU_BUDGET_BYTES``): that one is refused with a
:class:`~planner.errors.PlannerError` naming the variable. Numbers are read as every other surface
reads them (:func:`planner.limits.parse_number_text`: ASCII digits, finite).

The README carries the table as :func:`markdown_table` renders it; a test keeps the two equal
(and prints the rendering when they differ).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.limits import parse_number_text

logger = logging.getLogger(__name__)

TRUE_WORDS = frozenset({"1", "true", "yes", "on"})  # any case; everything else is off
ROOT = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Setting:
    """One environment variable: its name, type, default as the table shows it, and what it does."""

    name: str
    kind: str  # bool | int | float | str | path
    default: str
    what: str


KVP_DISABLE_PROBE = Setting("KVP_DISABLE_PROBE", "bool", "off", "turns the live probe off (shared deployments): the Probe page only imports probe JSON and `probe` exits 2")
KVP_PROBE_CPU_BUDGET_BYTES = Setting("KVP_PROBE_CPU_BUDGET_BYTES", "int", "2147483648 (2 GiB)", "most bytes a CPU probe may allocate; a value that is not a positive integer is refused")
KVP_PRESETS_DIR = Setting("KVP_PRESETS_DIR", "path", "`model_configs/`", "folder the bundled presets are read from")
KVP_HUB_TTL_S = Setting("KVP_HUB_TTL_S", "float", "600", "seconds a fetched Hub config stays in the in-process cache (0: no cache)")
KVP_HUB_REQUESTS_PER_MIN = Setting("KVP_HUB_REQUESTS_PER_MIN", "int", "20", "Hub fetches one app session may start per minute (0: no limit)")
KVP_FIRST_PAINT_PAUSE_S = Setting("KVP_FIRST_PAINT_PAUSE_S", "float", "0.3", "a session's first Plan run stops after the headline numbers and the browser asks for the rest once it has painted them, or after this many seconds (0 turns it off: one run draws everything; at most 2 s)")
KVP_REFERENCE_DIR = Setting("KVP_REFERENCE_DIR", "path", "`../shared/reference`", "reference configs, start-up logs and measured points for the conformance tests and fitting scripts")
HF_TOKEN = Setting("HF_TOKEN", "str", "none", "Hugging Face token for gated or private repos (after the app's password field and Streamlit secrets); never logged")
HF_ENDPOINT = Setting("HF_ENDPOINT", "str", "huggingface_hub's", "address of the Hub (a mirror or a local fake)")
HF_HUB_OFFLINE = Setting("HF_HUB_OFFLINE", "bool", "off", "serve Hub models from the disk cache only")
HF_HUB_CACHE = Setting("HF_HUB_CACHE", "path", "`$HF_HOME/hub`", "the Hugging Face disk cache")
HUGGINGFACE_HUB_CACHE = Setting("HUGGINGFACE_HUB_CACHE", "path", "none", "the older name of `HF_HUB_CACHE`, read when that is unset")
HF_HOME = Setting("HF_HOME", "path", "huggingface_hub's", "the Hugging Face home; the disk cache is its `hub/`")
HF_HUB_DISABLE_TELEMETRY = Setting("HF_HUB_DISABLE_TELEMETRY", "bool", "on (set by the planner)", "the planner sends the Hub no usage telemetry; it sets this before huggingface_hub loads, unless given")

TABLE: tuple[Setting, ...] = (
    KVP_DISABLE_PROBE, KVP_PROBE_CPU_BUDGET_BYTES, KVP_PRESETS_DIR, KVP_HUB_TTL_S, KVP_HUB_REQUESTS_PER_MIN, KVP_FIRST_PAINT_PAUSE_S,
    KVP_REFERENCE_DIR, HF_TOKEN, HF_ENDPOINT, HF_HUB_OFFLINE, HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, HF_HUB_DISABLE_TELEMETRY,
)  # fmt: skip


# --------------------------------------------------------------------------- one parser per type


def given(setting: Setting) -> str | None:
    """The variable's text as set (for a message), or None."""
    return os.environ.get(setting.name)


def _text(setting: Setting) -> str | None:
    value = os.environ.get(setting.name)
    return value.strip() if value is not None and value.strip() else None


def env_bool(setting: Setting) -> bool:
    """On when set to 1, true, yes or on (any case); off when unset, blank or anything else."""
    text = _text(setting)
    return text is not None and text.lower() in TRUE_WORDS


def env_str(setting: Setting) -> str | None:
    """The value without surrounding spaces; None when unset or blank."""
    return _text(setting)


def _number(setting: Setting, default: float, integer: bool, lo: float | None, hi: float | None, problem: str, strict: bool) -> float:
    text = _text(setting)
    if text is None:
        return default
    value = parse_number_text(text, integer=integer)
    if value is not None and (lo is None or value >= lo) and (hi is None or value <= hi):
        return value
    if strict:
        raise PlannerError(setting.name, text, problem)
    logger.warning("%s=%r %s; using %s", setting.name, text[:20], problem, default)
    return default


def env_int(setting: Setting, default: int, *, lo: int | None = None, hi: int | None = None, problem: str = "is not an integer in range", strict: bool = False) -> int:
    """The value as an integer in ``lo..hi``; else the default (logged), or with ``strict`` a refusal.

    Raises:
        PlannerError: only with ``strict``, naming the variable, its value and ``problem``.
    """
    return int(_number(setting, default, True, lo, hi, problem, strict))


def env_float(setting: Setting, default: float, *, lo: float | None = None, hi: float | None = None, problem: str = "is not a number in range", strict: bool = False) -> float:
    """The value as a finite number in ``lo..hi``; else the default (logged), or with ``strict`` a refusal.

    Raises:
        PlannerError: only with ``strict``, naming the variable, its value and ``problem``.
    """
    return float(_number(setting, default, False, lo, hi, problem, strict))


# --------------------------------------------------------------------------- the settings, named like the variables


def kvp_disable_probe() -> bool:
    return env_bool(KVP_DISABLE_PROBE)


def kvp_probe_cpu_budget_bytes() -> int:
    """Raises: PlannerError: the variable is set but not a positive integer."""
    return env_int(KVP_PROBE_CPU_BUDGET_BYTES, 2 << 30, lo=1, problem="must be a positive integer number of bytes", strict=True)


def kvp_presets_dir() -> Path | None:
    text = env_str(KVP_PRESETS_DIR)
    return Path(text).expanduser() if text else None


def kvp_hub_ttl_s() -> float:
    return max(env_float(KVP_HUB_TTL_S, 600.0, problem="is not a number"), 0.0)


def kvp_hub_requests_per_min() -> int:
    return env_int(KVP_HUB_REQUESTS_PER_MIN, 20, lo=0, hi=999_999_999, problem="is not a non-negative integer")


def kvp_first_paint_pause_s() -> float:
    return env_float(KVP_FIRST_PAINT_PAUSE_S, 0.3, problem="is not a number")


def kvp_reference_dir() -> Path:
    text = env_str(KVP_REFERENCE_DIR)
    return Path(text).expanduser() if text else ROOT.parent / "shared" / "reference"


def hf_token() -> str | None:
    return env_str(HF_TOKEN)


def hf_endpoint() -> str | None:
    return env_str(HF_ENDPOINT)


def hf_hub_offline() -> bool:
    return env_bool(HF_HUB_OFFLINE)


def hf_hub_cache() -> str | None:
    """``HF_HUB_CACHE``, else its older name ``HUGGINGFACE_HUB_CACHE``."""
    return env_str(HF_HUB_CACHE) or env_str(HUGGINGFACE_HUB_CACHE)


def hf_home() -> str | None:
    return env_str(HF_HOME)


def quiet_hub_telemetry() -> None:
    """Set ``HF_HUB_DISABLE_TELEMETRY=1`` unless given: call before huggingface_hub is imported."""
    os.environ.setdefault(HF_HUB_DISABLE_TELEMETRY.name, "1")


def process_environment() -> dict[str, str]:
    """A copy of the whole environment, for a child process (the probe's)."""
    return dict(os.environ)


# --------------------------------------------------------------------------- the table


def markdown_table() -> str:
    """The table the README carries."""
    rows = ["| variable | type | default | what it does |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.kind} | {s.default} | {s.what} |" for s in TABLE]
    return "\n".join(rows)
