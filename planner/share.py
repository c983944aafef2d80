"""Share links and plan files: a whole plan (model reference + every control) as text.

A share link is the app's address with a compact, versioned query string; a plan file is the
same content as JSON. Both are read back *field by field*: a bad, tampered or missing value
falls back to that control's default with a warning naming the parameter, the value and why,
and decoding a link never raises.

Only controls that differ from ``PlanInputs()`` defaults are written. Tokens and secrets are
never written (a :class:`ModelRef` holds none; free-text values that look like a token are
dropped), and an embedded config that contains token-looking text is not embedded.

Query keys (schema version 3; keys are stable, never reuse one for another meaning)::

    v      schema version (3; version-1 and -2 links are read too)
    -- model reference (ModelRef) --
    m      kind: preset | hub | upload | example
    n      name (preset name or uploaded file name)
    r      Hub repo id            rv   revision
    c      commit (40 hex)        h    config sha256 (64 hex)
    cfg    uploaded config, canonical JSON -> zlib -> urlsafe base64 (no padding);
           only when that text is under 2,048 characters
    -- plan inputs (PlanInputs) --
    sys    system_tokens          tool  tool_tokens          rag   retrieval_tokens
    hist   history_tokens         user  user_tokens          in    input_tokens
    out    output_tokens          ctx   max_context          kvd   kv_dtype
    wd     weight_dtype           rt    runtime              res   reservation
    blk    block_tokens           gpu   gpu                  dev   device_gib
    gpus   gpu_count              tp    tp                   hr    headroom_bp
    mres   model_resident_gib     ws    workspace_gib        seq   sequences
    mns    max_num_seqs           quota tenant_quota         itl   itl_slo_ms
    ttft   ttft_slo_ms            pfx   shared_prefix_tokens hit   prefix_hit_rate
    ten    tenants                price gpu_hour_price       mfu   mfu
    mbu    mbu                    q     queue_ms             pre   preprocessing_ms
    pf     prefill_ms             fd    first_decode_ms      rd    remaining_decode_ms
    gen    generated_tokens       ep    ep                   mbt   max_batched_tokens
    mtp    mtp (1/0)              vv    vllm_version         enc   encoder_tokens
    bw     device_bandwidth_gb_s  tf    device_bf16_tflops     mfs   mem_fraction_static
    cps    chunked_prefill_size   pg    page_size              rcv   recv_interval
    own   entry_point  enforce_eager (1/0)  limit_mm_per_prompt  enable_lora (1/0)
    names max_loras  max_lora_rank  (vLLM's start-up settings)
    -- under their own names (no short key) --
    dp     pp     serving_engine     request_rate     bench_prompts     spec_method     (shape, load)
    spec_tokens     spec_acceptance     spec_draft     (speculative decoding)
    batch_wait_iters     batch_wait_tokens_ratio     (TensorRT-LLM's batch waiting)
    -- session workload and cache tiers (planner/cache) --
    spm    sessions_per_min       turns turns                think think_time_s
    docs   doc_catalog            zipf  doc_zipf             cpu   cpu_tier_gib
    disk   disk_tier_gib          cpubw cpu_link_gb_s        diskbw disk_gb_s
    cal    bench_calibration (src=TOOL;figure=measured/predicted;...)
    pools  disagg (xP:TP[@GPU],yD:TP[@GPU]: disaggregated prefill / decode pools)
    A field without a short key here (a new PlanInputs field) is written under its own name.
    Version 2 made kv_dtype default to "auto"; in a version-1 link or plan file an absent kvd
    still means bf16. Version 3 made workspace_gib and max_batched_tokens default to None (vLLM's
    predicted start-up terms and batching defaults); in a version-1 or -2 link an absent ws still
    means 1 GiB and an absent mbt 8,192 tokens, so old links decode as they did.

Unknown query keys are ignored (the app may add its own). Plan files use the full field
names (``{"schema": "kv-capacity-plan", "version": 3, "model": {...}, "inputs": {...},
"config": {...}}``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlsplit, urlunsplit

from planner.controls import CONTROLS
from planner.errors import PlannerError
from planner.geometry import config_hash
from planner.hardware import CATALOG
from planner.limits import FLOAT_TEXT, parse_number_text, safe_json_loads
from planner.linknotes import CORRECTED, DEFAULTED, LinkNote, closest, unknown_key
from planner.plan import PlanInputs, _cross_field_problem, _workload_problem, make_inputs
from planner.source import ModelRef

SCHEMA_VERSION = 3
READ_VERSIONS = (1, 2, 3)
SCHEMA_NAME = "kv-capacity-plan"
MAX_EMBED_CHARS = 2048  # an embedded config's encoded text must be shorter than this
MAX_CFG_PARAM_CHARS = 64 * 1024  # longer `cfg` text is refused before decoding
MAX_CFG_BYTES = 64 * 1024  # decompressed config limit (zip bombs stop here)
MAX_PLAN_FILE_BYTES = 1024 * 1024
MAX_FILE_CONFIG_BYTES = 512 * 1024  # a plan file embeds an uploaded config up to this size
MAX_TEXT = 128  # free-text parameters (names, revisions, gpu)

# field -> its short query key; the order is the order keys are written in. A field without one
# (a new PlanInputs field) is written under its own name, after these (INPUT_KEYS).
SHORT_KEYS: dict[str, str] = {
    "system_tokens": "sys",
    "tool_tokens": "tool",
    "retrieval_tokens": "rag",
    "history_tokens": "hist",
    "user_tokens": "user",
    "input_tokens": "in",
    "output_tokens": "out",
    "encoder_tokens": "enc",
    "max_context": "ctx",
    "kv_dtype": "kvd",
    "weight_dtype": "wd",
    "runtime": "rt",
    "mem_fraction_static": "mfs",
    "chunked_prefill_size": "cps",
    "page_size": "pg",
    "recv_interval": "rcv",
    "vllm_version": "vv",
    "reservation": "res",
    "block_tokens": "blk",
    "gpu": "gpu",
    "device_gib": "dev",
    "device_bandwidth_gb_s": "bw",
    "device_bf16_tflops": "tf",
    "gpu_count": "gpus",
    "tp": "tp",
    "ep": "ep",
    "max_batched_tokens": "mbt",
    "headroom_bp": "hr",
    "model_resident_gib": "mres",
    "workspace_gib": "ws",
    "sequences": "seq",
    "max_num_seqs": "mns",
    "tenant_quota": "quota",
    "itl_slo_ms": "itl",
    "ttft_slo_ms": "ttft",
    "shared_prefix_tokens": "pfx",
    "prefix_hit_rate": "hit",
    "tenants": "ten",
    "gpu_hour_price": "price",
    "mfu": "mfu",
    "mbu": "mbu",
    "queue_ms": "q",
    "preprocessing_ms": "pre",
    "prefill_ms": "pf",
    "first_decode_ms": "fd",
    "remaining_decode_ms": "rd",
    "generated_tokens": "gen",
    "mtp": "mtp",
    "bench_calibration": "cal",
    "disagg": "pools",
    "sessions_per_min": "spm",
    "turns": "turns",
    "think_time_s": "think",
    "doc_catalog": "docs",
    "doc_zipf": "zipf",
    "cpu_tier_gib": "cpu",
    "disk_tier_gib": "disk",
    "cpu_link_gb_s": "cpubw",
    "disk_gb_s": "diskbw",
}


def input_keys(controls=CONTROLS) -> dict[str, str]:
    """Field -> link key: the short key where it has one, else the field's own name (a new field)."""
    return {name: key for name, key in SHORT_KEYS.items() if name in controls} | {name: name for name in controls if name not in SHORT_KEYS}


INPUT_KEYS: dict[str, str] = input_keys()
# What an older link or plan file meant when it left a field out, where that differs from today's
# PlanInputs default: before version 2 the KV dtype defaulted to bf16, not "auto"; before version 3
# the workspace was 1 GiB and the step budget 8,192 tokens (version 3 made both None: vLLM's
# predicted start-up terms and its batching defaults for the GPU).
_BEFORE_V3: dict[str, object] = {"workspace_gib": 1.0, "max_batched_tokens": 8192}
LEGACY_DEFAULTS: dict[int, dict[str, object]] = {1: {"kv_dtype": "bf16"} | _BEFORE_V3, 2: dict(_BEFORE_V3)}
REF_KEYS: dict[str, str] = {"kind": "m", "name": "n", "repo_id": "r", "revision": "rv", "commit": "c", "config_hash": "h"}
KEY_FIELDS: dict[str, str] = {v: k for k, v in INPUT_KEYS.items()}
# keys the other pages read from the same link (Compare's columns, the Size page's search) and
# Streamlit's own; anything else in a link is reported as dropped, with the nearest known key
SIZE_KEYS = ("size_users", "size_rate", "size_ttft", "size_itl", "size_gpus", "size_kv", "size_eng", "size_disagg", "size_sessions")
COMPARE_KEYS = ("cmp", "ca", "cb", "cc", "cd")  # planner.compare's COUNT_KEY and COLUMN_KEYS
OTHER_KEYS = frozenset((*SIZE_KEYS, *COMPARE_KEYS, "embed", "embed_options"))
LINK_KEYS = (*INPUT_KEYS.values(), *REF_KEYS.values(), "v", "cfg", *SIZE_KEYS, *COMPARE_KEYS)
# a field's (or a ModelRef field's) long name typed as a key: "sequences" means "seq"
KEY_ALIASES: dict[str, str] = {name: key for name, key in INPUT_KEYS.items() if name != key} | {name: key for name, key in REF_KEYS.items()}

TOKEN_RE = re.compile(r"(hf_|api_org_|ghp_|gho_|github_pat_|sk-|xox[bp]-)[A-Za-z0-9_\-]{16,}")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_HEX40 = re.compile(r"[0-9a-f]{40}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
_REPO_RE = re.compile(rf"(?:{_PART}/)?{_PART}")
_REVISION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*")
_PRESET_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
_B64_RE = re.compile(r"[A-Za-z0-9_-]+={0,2}")


@dataclass
class DecodedState:
    """What a link or plan file restores. ``ref`` is None when no usable model was given."""

    ref: ModelRef | None
    inputs: PlanInputs
    upload_config: dict | None = None
    warnings: list[str] = field(default_factory=list)
    needs_upload: bool = False  # an uploaded config the link could not carry: ask for the file
    # every parameter not taken as written: dropped (unknown key), defaulted (bad value) or
    # corrected (a near-miss GPU name), each with a "did you mean" where one is close
    notes: list[LinkNote] = field(default_factory=list)


# --------------------------------------------------------------------------- helpers


def _shown(value: object) -> str:
    """A short, quoted rendering of a value for a warning (token-like text redacted)."""
    text = value if isinstance(value, str) else repr(value)
    text = TOKEN_RE.sub(lambda m: m.group(1) + "***", text)
    text = text if len(text) <= 40 else text[:37] + "..."
    return repr(text) if isinstance(value, str) else text


def looks_like_token(text: str) -> bool:
    return bool(TOKEN_RE.search(text))


def _printable(text: str) -> bool:
    return text.isprintable()


def _num_text(value: float | int) -> str:
    """Shortest exact text: ints as digits, integral floats without '.0', others by repr."""
    if isinstance(value, bool):
        raise TypeError("bool is not a plan number")
    if isinstance(value, int):
        return str(value)
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    return repr(value)


def _default_text(name: str, version: int = SCHEMA_VERSION) -> str:
    default = LEGACY_DEFAULTS.get(version, {}).get(name, PlanInputs.model_fields[name].default)
    if name == "headroom_bp":
        return f"the default {default:,} bp ({default / 100:g} %)"
    if default is None:
        return "the default (none: " + {
            "input_tokens": "the sum of the components",
            "max_context": "the config's maximum",
            "device_gib": "the catalog GPU",
            "model_resident_gib": "the weights estimate",
        }.get(name, "not set") + ")"
    if isinstance(default, bool):
        return f"the default {'1 (on)' if default else '0 (off)'}"
    return f"the default {_num_text(default) if isinstance(default, (int, float)) else default}"


# fields PlanInputs validates alone (a field_validator): checked one by one, so a bad one drops only itself
_OWN_VALIDATORS = frozenset(f for d in PlanInputs.__pydantic_decorators__.field_validators.values() for f in d.info.fields)


def check_field(name: str, raw: object, *, from_text: bool) -> tuple[object, str | None]:
    """Validate one PlanInputs value: (value, None) or (None, reason).

    ``from_text``: ``raw`` is query-string text; otherwise a JSON value (plan file).
    """
    control = CONTROLS[name]
    if raw is None:
        return (None, None) if control.nullable else (None, "must not be empty")
    if control.choices is not None:
        if not isinstance(raw, str) or raw not in control.choices:
            return None, f"is not one of {', '.join(control.choices)}"
        return raw, None
    if control.kind == "bool":
        if from_text:
            return ({"1": True, "0": False}.get(raw.strip()), None) if isinstance(raw, str) and raw.strip() in ("1", "0") else (None, "is not 1 or 0")
        return (raw, None) if isinstance(raw, bool) else (None, "is not true or false")
    if control.kind == "text":
        if not isinstance(raw, str) or not raw.strip():
            return None, "must be a non-empty name"
        if len(raw) > MAX_TEXT or not _printable(raw):
            return None, f"is not a plain name of at most {MAX_TEXT} characters"
        if looks_like_token(raw):
            return None, "looks like an access token"
        if name in _OWN_VALIDATORS:  # a text field with a validator of its own (bench_calibration's form)
            try:
                make_inputs(**{name: raw})
            except PlannerError as exc:
                return None, exc.reason
        return raw, None
    value: int | float
    if control.kind == "int":
        if from_text:
            if not isinstance(raw, str) or not _INT_RE.fullmatch(raw.strip()):
                return None, "is not a whole number"
            parsed = parse_number_text(raw.strip(), integer=True)  # the one ASCII-digit reader (planner/limits.py)
            if parsed is None:
                return None, "is far out of range"
            value = parsed
        elif isinstance(raw, bool) or not isinstance(raw, int):
            return None, "is not a whole number"
        else:
            value = raw
    else:
        if from_text:
            text = raw.strip() if isinstance(raw, str) else ""
            if text.lower().lstrip("+-") in ("nan", "inf", "infinity"):
                return None, "is not a finite number"
            parsed = parse_number_text(text, integer=False) if len(text) <= 40 else None
            if parsed is None:
                return None, "is not a finite number" if len(text) <= 40 and FLOAT_TEXT.fullmatch(text) else "is not a number"
            value = parsed
        elif isinstance(raw, bool) or not isinstance(raw, (int, float)):
            return None, "is not a number"
        else:
            value = float(raw)
        if not math.isfinite(value):
            return None, "is not a finite number"
    if not control.in_range(value):
        return None, f"is out of range (must be {control.range_text()})"
    return value, None


def _resolve_cross_field(values: dict, label, warnings: list[str], notes: list[LinkNote]) -> None:
    """Drop fields that break PlanInputs' cross-field rules, each with a warning."""
    while True:  # a session workload's details without its rate: each dropped (the tiers stand alone)
        problem = _workload_problem(values)
        if not problem:
            break
        values.pop(problem[0], None)
        warnings.append(f"{label(problem[0])} {_shown(problem[1])} {problem[2]}; using {_default_text(problem[0])}")
        notes.append(LinkNote(DEFAULTED, label(problem[0]), str(problem[1]), problem[2], _default_text(problem[0])))
    for _ in range(4):
        problem = _cross_field_problem(values.get("gpu", PlanInputs.model_fields["gpu"].default), values.get("device_gib"), values.get("gpu_count", 1), values.get("tp", 1))
        if not problem:
            return
        name, value, reason = problem
        if name == "gpu_count":
            tp = values.get("tp", 1)
            values["gpu_count"] = 1 if tp == 1 else tp
            warnings.append(f"{label(name)} {_shown(value)} {reason}; using {values['gpu_count']} (one replica)")
            notes.append(LinkNote(CORRECTED, label(name), str(value), reason, f"{values['gpu_count']} (one replica)"))
        elif (near := closest(str(value), CATALOG)) is not None:  # B200-18GB -> B200-180GB, not silently the default
            values[name] = near
            note = LinkNote(CORRECTED, label(name), str(value), "is not a catalog GPU", near)
            warnings.append(note.text())
            notes.append(note)
        else:
            values.pop(name, None)
            warnings.append(f"{label(name)} {_shown(value)} is an unknown GPU; using {_default_text(name)}")
            notes.append(LinkNote(DEFAULTED, label(name), str(value), "is an unknown GPU", _default_text(name)))


def _build_inputs(values: dict, label, warnings: list[str], notes: list[LinkNote], version: int = SCHEMA_VERSION) -> PlanInputs:
    for name, legacy in LEGACY_DEFAULTS.get(version, {}).items():
        values.setdefault(name, legacy)
    _resolve_cross_field(values, label, warnings, notes)
    try:
        return PlanInputs(**values)
    except ValueError as exc:  # not expected after the checks above: fall back to defaults
        warnings.append(f"the plan's inputs could not be combined ({str(exc).splitlines()[0][:120]}); using the defaults")
        return PlanInputs()


# --------------------------------------------------------------------------- embedded config


def _canonical(config: dict) -> bytes:
    return json.dumps(config, sort_keys=True, separators=(",", ":"), allow_nan=True).encode("utf-8")


def embed_config(config: dict) -> str | None:
    """The `cfg` text (zlib + urlsafe base64, no padding), or None if it is too long or risky."""
    raw = _canonical(config)
    if looks_like_token(raw.decode("utf-8", "replace")):
        return None
    text = base64.urlsafe_b64encode(zlib.compress(raw, 9)).decode("ascii").rstrip("=")
    return text if len(text) < MAX_EMBED_CHARS else None


def unembed_config(text: str) -> tuple[dict | None, str | None]:
    """(config, None) or (None, reason). Bounded: encoded length, decompressed size, depth."""
    if len(text) > MAX_CFG_PARAM_CHARS:
        return None, f"is {len(text):,} characters long (at most {MAX_CFG_PARAM_CHARS:,})"
    if not _B64_RE.fullmatch(text):
        return None, "is not urlsafe base64"
    try:
        data = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        return None, "is not valid base64 (truncated?)"
    d = zlib.decompressobj()
    try:
        raw = d.decompress(data, MAX_CFG_BYTES + 1)
    except zlib.error:
        return None, "is not zlib-compressed data (truncated or tampered)"
    if len(raw) > MAX_CFG_BYTES or d.unconsumed_tail:
        return None, f"decompresses to more than {MAX_CFG_BYTES // 1024} KiB"
    if not d.eof:
        return None, "is truncated (the compressed data ends early)"
    from planner.configio import parse_config_text

    try:
        return parse_config_text(raw, source="cfg"), None
    except PlannerError as exc:
        return None, f"is not a valid config ({exc.reason})"


# --------------------------------------------------------------------------- model reference


def _ref_fields(ref: ModelRef) -> dict[str, str]:
    """The ref's non-empty fields, minus anything that looks like a token."""
    out = {}
    for name in REF_KEYS:
        value = getattr(ref, name)
        if value is None or value == "":
            continue
        if _check_ref_field(name, str(value)):
            continue  # never write a secret (token-like) or a value the reader would refuse
        out[name] = str(value)
    return out


def _check_ref_field(name: str, value: object) -> str | None:
    """Reason the ModelRef field value is unacceptable, or None."""
    if not isinstance(value, str) or not value:
        return "is empty or not text"
    if looks_like_token(value):
        return "looks like an access token"
    if name == "kind":
        return None if value in ("preset", "hub", "upload", "example") else "is not one of preset, hub, upload, example"
    if name == "commit":
        return None if _HEX40.fullmatch(value) else "is not a 40-character hex commit"
    if name == "config_hash":
        return None if _HEX64.fullmatch(value) else "is not a 64-character hex sha256"
    if name == "repo_id":
        ok = len(value) <= 96 and _REPO_RE.fullmatch(value) and ".." not in value and "--" not in value
        return None if ok else "is not a Hub id (ORG/NAME)"
    if name == "revision":
        ok = len(value) <= 128 and _REVISION_RE.fullmatch(value) and ".." not in value and "//" not in value
        return None if ok else "is not a branch, tag or commit"
    if len(value) > MAX_TEXT or not _printable(value):
        return f"is not a plain name of at most {MAX_TEXT} characters"
    return None


_REF_LABEL = {"kind": "model kind", "name": "model name", "repo_id": "Hub id", "revision": "revision", "commit": "commit", "config_hash": "config hash"}


def _build_ref(raw: Mapping[str, object], where, warnings: list[str]) -> ModelRef | None:
    """A ModelRef from raw fields, dropping bad ones; None (with a warning) if it is unusable."""
    if not raw:
        return None
    good: dict[str, str] = {}
    for name, value in raw.items():
        reason = _check_ref_field(name, value)
        if reason:
            warnings.append(f"{_REF_LABEL[name]} ({where(name)}) {_shown(value)} {reason}; ignored")
        else:
            good[name] = value  # type: ignore[assignment]
    kind = good.get("kind")
    fallback = "; using the default model"
    if kind is None:
        if "kind" in raw:
            return None  # already warned
        warnings.append(f"the model kind ({where('kind')}) is missing" + fallback)
        return None
    if kind == "preset":
        name = good.get("name")
        if not name:
            warnings.append(f"preset link without a preset name ({where('name')})" + fallback)
            return None
        from planner.presets import preset_names

        if not _PRESET_RE.fullmatch(name) or name not in preset_names():
            warnings.append(f"preset ({where('name')}) {_shown(name)} is not a bundled preset" + fallback)
            return None
    if kind == "hub" and not good.get("repo_id"):
        warnings.append(f"Hub link without a Hub id ({where('repo_id')})" + fallback)
        return None
    if kind == "hub" and not good.get("commit"):
        warnings.append(f"Hub link without a pinned commit ({where('commit')}): the config is read at {good.get('revision', 'main')!r}, which may have changed since")
    if kind == "upload" and not good.get("config_hash"):
        warnings.append(f"upload link without a config hash ({where('config_hash')}): the config cannot be checked")
    return ModelRef(**good)


# --------------------------------------------------------------------------- links


def _non_default(inputs: PlanInputs) -> dict[str, object]:
    defaults = PlanInputs()
    return {name: getattr(inputs, name) for name in INPUT_KEYS if getattr(inputs, name) != getattr(defaults, name)}


def encode_query(ref: ModelRef, inputs: PlanInputs, upload_config: dict | None = None) -> dict[str, str]:
    """Compact query parameters for a plan (see the module docstring for the key table).

    ``upload_config`` (only for an ``upload`` ref) is embedded under ``cfg`` when its encoded
    text is under 2,048 characters; otherwise it is left out and the link says only its hash.

    Raises:
        PlannerError: ``upload_config`` does not match ``ref.config_hash``.
    """
    params: dict[str, str] = {"v": str(SCHEMA_VERSION)}
    for name, value in _ref_fields(ref).items():
        params[REF_KEYS[name]] = value
    if ref.kind == "upload" and upload_config is not None:
        if ref.config_hash and config_hash(upload_config) != ref.config_hash:
            raise PlannerError("upload_config", ref.config_hash[:12], "the config does not match the reference's config hash")
        embedded = embed_config(upload_config)
        if embedded is not None:
            params["cfg"] = embedded
    for name, value in _non_default(inputs).items():
        if isinstance(value, str):
            if looks_like_token(value):
                continue
            params[INPUT_KEYS[name]] = value
        elif isinstance(value, bool):
            params[INPUT_KEYS[name]] = "1" if value else "0"
        else:
            params[INPUT_KEYS[name]] = _num_text(value)  # type: ignore[arg-type]
    return params


def _one(value: object) -> tuple[str | None, bool]:
    """(last value, given more than once) of a query parameter."""
    if isinstance(value, (list, tuple)):
        items = [v for v in value if isinstance(v, str)]
        return (items[-1] if items else None), len(value) > 1
    return (value if isinstance(value, str) else None), False


def decode_query(params: Mapping[str, str | list[str]]) -> DecodedState:
    """Restore a plan from query parameters. Never raises.

    Every bad value falls back to its default with a warning; an unknown version gives the
    defaults; an uploaded config that is not embedded sets ``needs_upload``.
    """
    try:
        return _decode_query(params)
    except Exception as exc:  # last resort: a link must never crash the app
        return DecodedState(ref=None, inputs=PlanInputs(), warnings=[f"the link could not be read ({type(exc).__name__}); using the defaults"])


def _decode_query(params: Mapping[str, str | list[str]]) -> DecodedState:
    warnings: list[str] = []
    notes: list[LinkNote] = []
    flat: dict[str, str] = {}
    try:
        items = list(params.items())
    except Exception:
        return DecodedState(ref=None, inputs=PlanInputs(), warnings=["the link's parameters could not be read; using the defaults"])
    known = set(INPUT_KEYS.values()) | set(REF_KEYS.values()) | {"v", "cfg"}
    for key, value in items:
        if isinstance(key, str) and key not in known and key not in OTHER_KEYS:
            notes.append(unknown_key(key, value, LINK_KEYS, KEY_ALIASES))  # kept only if this is a share link
        if not isinstance(key, str) or key not in known:
            continue
        one, repeated = _one(value)
        if one is None:
            warnings.append(f"parameter {key!r} has no text value; ignored")
            continue
        if repeated:
            warnings.append(f"parameter {key!r} is given more than once; using the last value {_shown(one)}")
        flat[key] = one
    if not flat and not any(k in OTHER_KEYS for k, _v in items if isinstance(k, str)):
        return DecodedState(ref=None, inputs=PlanInputs(), warnings=warnings)  # only foreign parameters (utm_source=...): not a share link
    warnings[:0] = [note.text() for note in notes]  # the unknown keys, first, in the link's order
    if not flat:
        return DecodedState(ref=None, inputs=PlanInputs(), warnings=warnings, notes=notes)

    version_text = flat.pop("v", None)
    version = SCHEMA_VERSION
    if version_text is None:
        warnings.append(f"the link has no version (v); reading it as version {SCHEMA_VERSION}")
    elif version_text.strip() not in {str(v) for v in READ_VERSIONS}:
        warnings.append(f"link version (v) {_shown(version_text)} is not supported (this planner reads versions {', '.join(map(str, READ_VERSIONS))}); using the defaults")
        return DecodedState(ref=None, inputs=PlanInputs(), warnings=warnings)
    else:
        version = int(parse_number_text(version_text.strip(), integer=True))

    ref_raw = {name: flat[key] for name, key in REF_KEYS.items() if key in flat}
    ref = _build_ref(ref_raw, lambda name: REF_KEYS[name], warnings)

    def label(name: str) -> str:
        return f"{name} ({INPUT_KEYS[name]})"

    inputs = _checked_inputs(((name, flat[key]) for name, key in INPUT_KEYS.items() if key in flat), label, warnings, notes, from_text=True, version=version)

    upload_config, needs = _restore_upload(ref, flat.get("cfg"), "cfg", warnings, link=True)
    return DecodedState(ref=ref, inputs=inputs, upload_config=upload_config, warnings=warnings, needs_upload=needs, notes=notes)


def _checked_inputs(items, label, warnings: list[str], notes: list[LinkNote], *, from_text: bool, version: int = SCHEMA_VERSION) -> PlanInputs:
    """Plan inputs from (field, raw value) pairs: each bad value falls back to its default with a warning."""
    values: dict[str, object] = {}
    for name, raw in items:
        value, reason = check_field(name, raw, from_text=from_text)
        if reason:
            warnings.append(f"{label(name)} {_shown(raw)} {reason}; using {_default_text(name, version)}")
            notes.append(LinkNote(DEFAULTED, label(name), raw if isinstance(raw, str) else _shown(raw), reason, _default_text(name, version)))
        else:
            values[name] = value
    return _build_inputs(values, label, warnings, notes, version)


def _restore_upload(ref: ModelRef | None, cfg: object, where: str, warnings: list[str], *, link: bool) -> tuple[dict | None, bool]:
    if ref is None or ref.kind != "upload":
        if cfg is not None:
            warnings.append(f"an embedded config ({where}) is only used with an uploaded model; ignored")
        return None, False
    config: dict | None = None
    if cfg is not None:
        if link:
            config, reason = unembed_config(cfg) if isinstance(cfg, str) else (None, "is not text")
        elif isinstance(cfg, dict):
            config, reason = cfg, None
        else:
            config, reason = None, "is not a JSON object"
        if reason:
            warnings.append(f"the embedded config ({where}) {reason}; ignored")
        elif ref.config_hash and config_hash(config) != ref.config_hash:  # type: ignore[arg-type]
            warnings.append(f"the embedded config ({where}) does not match the config hash {ref.config_hash[:12]}; ignored")
            config = None
    if config is None:
        name = ref.name or "config.json"
        short = f", sha256 {ref.config_hash[:12]}" if ref.config_hash else ""
        why = "is not embedded in the link (too large for a URL)" if link and cfg is None else "is not included"
        warnings.append(f"this plan was made from an uploaded config ({name}{short}) that {why}: upload the same config.json to reproduce it")
        return None, True
    return config, False


def share_url(base: str, params: Mapping[str, str]) -> str:
    """``base`` with its query string replaced by ``params`` (and any fragment dropped)."""
    parts = urlsplit(base)
    return urlunsplit((parts.scheme, parts.netloc, parts.path or "/", urlencode(list(params.items())), ""))


# --------------------------------------------------------------------------- the Size page's link

SIZE_KV_CHOICES = ("bf16", "fp8", "int8", "fp16", "int4")
SIZE_ENGINES = ("vllm", "sglang")  # runtimes whose own sizing and admission the search can follow
_SIZE_NUMBERS = {"size_users": "users", "size_rate": "size_rate", "size_ttft": "size_slo", "size_itl": "size_slo"}


def _size_bound(name: str):
    from planner.limits import BOUNDS, Bound

    return Bound(0, BOUNDS["ttft_p95_ms"].hi) if name == "size_slo" else BOUNDS[name]


def _range_text(bound) -> str:
    def num(x: float) -> str:
        return f"{int(x):,}" if float(x).is_integer() else f"{x:g}"

    return f"{num(bound.lo)} to {num(bound.hi)}" + (", a whole number" if bound.integer else "")


def _size_list(key: str, text: str, choices, what: str, notes: list[LinkNote], default_text: str) -> list[str] | None:
    """The items of a comma list that are known (a near miss corrected, each other item noted);
    None when no item is usable (then the page keeps its default, noted too)."""
    good: list[str] = []
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        exact = next((c for c in choices if c.lower() == item.lower()), None)
        if exact is not None:
            good.append(exact)
        elif (near := closest(item, choices)) is not None:
            notes.append(LinkNote(CORRECTED, key, item, f"is not {what}", near))
            good.append(near)
        else:
            known = "" if len(choices) > 8 else f" (known: {', '.join(choices)})"
            notes.append(LinkNote(DEFAULTED, key, item, f"is not {what}{known}", "the others" if len(text.split(",")) > 1 else ""))
    if not good:
        notes.append(LinkNote(DEFAULTED, key, text, "names nothing usable", default_text))
        return None
    return list(dict.fromkeys(good))


def decode_size_params(params: Mapping[str, object]) -> tuple[dict[str, object], list[LinkNote]]:
    """The Size page's ``size_*`` parameters: ({control: value} for each usable one, a note for
    every other). ``size_mode`` is "users", "rate" or "sessions" (``size_sessions=1``: the plan's
    session workload); ``size_gpus`` "all" is every catalog GPU.
    Never raises."""
    values: dict[str, object] = {}
    notes: list[LinkNote] = []
    for key, raw in params.items():
        if not isinstance(key, str) or not key.startswith("size_"):
            continue
        text, _repeated = _one(raw)
        if key not in SIZE_KEYS:
            notes.append(unknown_key(key, raw, SIZE_KEYS))
            continue
        if text is None:
            notes.append(LinkNote(DEFAULTED, key, "", "has no text value", "the page's opening value"))
            continue
        if key in _SIZE_NUMBERS:
            bound = _size_bound(_SIZE_NUMBERS[key])
            value = parse_number_text(text.strip(), integer=bound.integer) if len(text) <= 40 else None
            if value is None or not bound.lo <= value <= bound.hi:
                why = "is not a number" if value is None else "is out of range"
                notes.append(LinkNote(DEFAULTED, key, text, f"{why} (must be {_range_text(bound)})", "the page's opening value"))
                continue
            values[key] = value
            if key in ("size_users", "size_rate"):
                values["size_mode"] = "users" if key == "size_users" else "rate"
        elif key == "size_gpus":
            gpus = list(CATALOG) if text.strip().lower() == "all" else _size_list(key, text, list(CATALOG), "a catalog GPU", notes, "every GPU")
            values[key] = gpus if gpus is not None else list(CATALOG)
        elif key == "size_kv":
            kvs = _size_list(key, text, SIZE_KV_CHOICES, "a KV dtype the search tries", notes, "bf16 and fp8")
            if kvs is not None:
                values[key] = kvs
        elif key == "size_eng":
            engines = _size_list(key, text, SIZE_ENGINES, "an engine the search follows", notes, "the plan's engine")
            if engines is not None:
                values[key] = engines
        elif key == "size_sessions":
            if text.strip() == "1":
                values["size_mode"] = "sessions"
            else:
                notes.append(LinkNote(DEFAULTED, key, text, "is not 1", "users or a rate"))
        elif key == "size_disagg":
            if text.strip() in ("1", "0"):
                values[key] = text.strip() == "1"
            else:
                notes.append(LinkNote(DEFAULTED, key, text, "is not 1 or 0", "off"))
    return values, notes


# --------------------------------------------------------------------------- plan files


def plan_file_json(ref: ModelRef, inputs: PlanInputs, upload_config: dict | None = None) -> str:
    """The plan as a versioned JSON document (same content as the link, full field names).

    An uploaded config is embedded (as JSON) up to 512 KiB.

    Raises:
        PlannerError: ``upload_config`` does not match ``ref.config_hash``.
    """
    doc: dict[str, object] = {"schema": SCHEMA_NAME, "version": SCHEMA_VERSION, "model": _ref_fields(ref)}
    doc["inputs"] = {name: value for name, value in _non_default(inputs).items() if not (isinstance(value, str) and looks_like_token(value))}
    if ref.kind == "upload" and upload_config is not None:
        if ref.config_hash and config_hash(upload_config) != ref.config_hash:
            raise PlannerError("upload_config", ref.config_hash[:12], "the config does not match the reference's config hash")
        raw = _canonical(upload_config)
        if len(raw) <= MAX_FILE_CONFIG_BYTES and not looks_like_token(raw.decode("utf-8", "replace")):
            doc["config"] = upload_config
    return json.dumps(doc, indent=2, allow_nan=True) + "\n"


def load_plan_file(text: str | bytes) -> DecodedState:
    """Read a plan file; bad fields fall back to defaults with warnings.

    Raises:
        PlannerError: the text is over 1 MiB, not JSON, not an object, not a plan file
            (``schema``) or of a version this planner does not read.
    """
    size = len(text) if isinstance(text, (bytes, bytearray)) else len(text.encode("utf-8", "replace"))
    if size > MAX_PLAN_FILE_BYTES:
        raise PlannerError("plan file", f"{size:,} bytes", f"is larger than {MAX_PLAN_FILE_BYTES:,} bytes (1 MiB); a plan file is a few KiB")
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PlannerError("plan file", f"byte {exc.start}", "is not UTF-8 text") from None
    try:
        doc = safe_json_loads(text)
    except json.JSONDecodeError as exc:
        raise PlannerError("plan file", f"line {exc.lineno} column {exc.colno}", f"is not valid JSON ({exc.msg})") from None
    except RecursionError:
        raise PlannerError("plan file", "nesting", "is nested too deeply to be a plan file") from None
    except ValueError:  # an integer literal of more than 4,300 digits
        raise PlannerError("plan file", "number", "holds a number with more than 4,300 digits; no plan value is that large") from None
    if not isinstance(doc, dict):
        raise PlannerError("plan file", type(doc).__name__, "must be a JSON object with schema 'kv-capacity-plan'")
    if doc.get("schema") != SCHEMA_NAME:
        raise PlannerError("plan file", doc.get("schema"), f"is not a KV capacity plan (schema must be {SCHEMA_NAME!r})")
    version = doc.get("version")
    if isinstance(version, bool) or version not in READ_VERSIONS:
        raise PlannerError("plan file version", version, f"this planner reads plan files of versions {', '.join(map(str, READ_VERSIONS))}")

    warnings: list[str] = []
    known_top = {"schema", "version", "model", "inputs", "config"}
    for key in doc:
        if key not in known_top:
            warnings.append(f"unknown top-level key {_shown(key)} in the plan file; ignored")

    model = doc.get("model")
    ref: ModelRef | None = None
    if model is None:
        warnings.append("the plan file names no model; using the default model")
    elif not isinstance(model, dict):
        warnings.append(f"model {_shown(model)} is not an object; using the default model")
    else:
        raw = {}
        for key, value in model.items():
            if key in REF_KEYS:
                raw[key] = value
            else:
                warnings.append(f"unknown model field {_shown(key)}; ignored")
        ref = _build_ref(raw, lambda name: f"model.{name}", warnings)

    def label(name: str) -> str:
        return f"inputs.{name}"

    inputs_raw = doc.get("inputs", {})
    if not isinstance(inputs_raw, dict):
        warnings.append(f"inputs {_shown(inputs_raw)} is not an object; using the defaults")
        inputs_raw = {}
    def known():  # in file order, so the warnings read in the order of the file
        for key, raw_value in inputs_raw.items():
            if key in INPUT_KEYS:
                yield key, raw_value
            else:
                warnings.append(f"unknown input {_shown(key)}; ignored")

    notes: list[LinkNote] = []
    inputs = _checked_inputs(known(), label, warnings, notes, from_text=False, version=version)
    upload_config, needs = _restore_upload(ref, doc.get("config"), "config", warnings, link=False)
    return DecodedState(ref=ref, inputs=inputs, upload_config=upload_config, warnings=warnings, needs_upload=needs, notes=notes)


__all__ = [
    "INPUT_KEYS",
    "REF_KEYS",
    "SCHEMA_VERSION",
    "DecodedState",
    "decode_query",
    "decode_size_params",
    "encode_query",
    "load_plan_file",
    "plan_file_json",
    "share_url",
]
