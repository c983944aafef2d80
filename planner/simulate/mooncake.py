"""Traces in the public Mooncake JSONL format, read as untrusted input.

One request a line (the FAST '25 Mooncake traces, github.com/kvcache-ai/Mooncake, FAST25-release/
traces): ``timestamp`` (arrival, milliseconds from the trace's start), ``input_length`` and
``output_length`` (tokens), ``hash_ids`` (one id per 512-token block of the prompt, equal ids
meaning equal blocks *and* equal prefixes before them). ``tenant`` (a string or an integer) is
read when present: cache keys carry it, so identical hash ids of two tenants never share a block.
Other fields are ignored. A malformed line is refused with its number; files above 8 MiB and
traces above 100,000 requests are refused before or while parsing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError, shorten
from planner.simulate.model import MAX_REQUESTS, MAX_TOKENS_PER_REQUEST
from planner.simulate.workload import MAX_TRACE_BYTES, read_trace_text

BLOCK_TOKENS = 512  # tokens per hash block in the published traces
MAX_LINE_CHARS = 1 << 20
MAX_TENANT_CHARS = 64
FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")
MAX_TIMESTAMP_MS = 1e12  # ~31.7 years: past it a float's seconds lose the sub-ms steps a replay times (1e300 ms gave a mean TTFT below its prefill)


@dataclass(frozen=True, slots=True)
class TraceRequest:
    arrival_s: float
    input_length: int
    output_length: int
    hash_ids: tuple[int, ...]
    tenant: str = ""


def read_mooncake(path: str | Path, max_bytes: int = MAX_TRACE_BYTES, block_tokens: int = BLOCK_TOKENS) -> list[TraceRequest]:
    """Read and parse a Mooncake JSONL trace file (at most ``max_bytes``).

    Raises:
        PlannerError: unreadable, oversized, not UTF-8, or a malformed line (named by number).
    """
    return parse_mooncake(read_trace_text(path, max_bytes, "JSONL"), block_tokens=block_tokens)


def _refuse_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _count(line: int, obj: dict, name: str, low: int, high: int) -> int:
    value = obj[name]
    if isinstance(value, bool) or not isinstance(value, int):
        raise PlannerError(f"line {line} {name}", value, "must be a whole number")
    if not low <= value <= high:
        raise PlannerError(f"line {line} {name}", value, f"must be from {low:,} to {high:,}")
    return value


def _parse_line(number: int, text: str, block_tokens: int) -> TraceRequest:
    if len(text) > MAX_LINE_CHARS:
        raise PlannerError(f"line {number}", f"{len(text):,} characters", f"a line is at most {MAX_LINE_CHARS:,} characters")
    try:
        obj = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError) as exc:
        raise PlannerError(f"line {number}", shorten(text, 60), f"not JSON ({str(exc)[:80]})") from None
    if not isinstance(obj, dict):
        raise PlannerError(f"line {number}", shorten(text, 60), "must be a JSON object with " + ", ".join(FIELDS))
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise PlannerError(f"line {number}", shorten(text, 60), f"missing {', '.join(missing)}")
    stamp = obj["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or not math.isfinite(stamp) or not 0 <= stamp <= MAX_TIMESTAMP_MS:
        raise PlannerError(f"line {number} timestamp", stamp, f"must be a time in milliseconds from 0 to {MAX_TIMESTAMP_MS:,.0f}")
    inputs = _count(number, obj, "input_length", 1, MAX_TOKENS_PER_REQUEST)
    outputs = _count(number, obj, "output_length", 1, MAX_TOKENS_PER_REQUEST)
    ids = obj["hash_ids"]
    blocks = -(-inputs // block_tokens)
    if not isinstance(ids, list):
        raise PlannerError(f"line {number} hash_ids", shorten(ids, 60), "must be a list of block ids")
    if len(ids) > blocks:
        raise PlannerError(f"line {number} hash_ids", f"{len(ids):,} ids", f"more than the {blocks:,} blocks of {block_tokens} tokens in {inputs:,} input tokens")
    for h in ids:
        if isinstance(h, bool) or not isinstance(h, int) or not 0 <= h < 1 << 63:
            raise PlannerError(f"line {number} hash_ids", shorten(h, 40), "every id must be a whole number from 0 to 2^63 - 1")
    tenant = obj.get("tenant", "")
    if isinstance(tenant, bool) or not isinstance(tenant, (str, int)) or len(str(tenant)) > MAX_TENANT_CHARS:
        raise PlannerError(f"line {number} tenant", shorten(tenant, 40), f"must be a string or a whole number of at most {MAX_TENANT_CHARS} characters")
    return TraceRequest(stamp / 1e3, inputs, outputs, tuple(ids), str(tenant))


def parse_mooncake(text: str, max_rows: int = MAX_REQUESTS, block_tokens: int = BLOCK_TOKENS) -> list[TraceRequest]:
    """Parse Mooncake JSONL text (blank lines skipped; lines numbered from 1).

    Raises:
        PlannerError: a malformed line, too many requests, or no request at all.
    """
    if not isinstance(text, str):
        raise PlannerError("trace", type(text).__name__, "must be JSONL text")
    out: list[TraceRequest] = []
    for number, line in enumerate(text.lstrip("\ufeff").splitlines(), start=1):
        if not line.strip():
            continue
        if len(out) >= max_rows:
            raise PlannerError("trace", f"more than {max_rows:,} requests", f"at most {max_rows:,} requests")
        out.append(_parse_line(number, line, block_tokens))
    if not out:
        raise PlannerError("trace", "", "no request lines (one JSON object a line: " + ", ".join(FIELDS) + ")")
    return out


def write_mooncake(requests: list[TraceRequest]) -> str:
    """JSONL text of ``requests`` in the published format (``tenant`` only where set)."""
    lines = []
    for r in requests:
        obj: dict = {"timestamp": int(round(r.arrival_s * 1e3)), "input_length": r.input_length, "output_length": r.output_length, "hash_ids": list(r.hash_ids)}
        if r.tenant:
            obj["tenant"] = r.tenant
        lines.append(json.dumps(obj))
    return "\n".join(lines) + "\n"


def session_trace(w, sessions: int, turn_s: float, seed: int = 0, block_tokens: int = BLOCK_TOKENS) -> list[TraceRequest]:
    """A trace of ``sessions`` sessions of workload ``w`` (:class:`planner.cache.SessionWorkload`)
    in the published format: Poisson session starts, a turn every ``turn_s`` + think time, and
    a hash id per block as the format defines them (equal ids: equal blocks and prefixes), so
    whole blocks of a tenant's prefix (and of a shared document) recur across sessions, the
    history's recur across a session's turns, and a prompt's last partial block is its own."""
    import random

    from planner.simulate.sessions import doc_sampler

    rng = random.Random(seed)
    draw_doc = doc_sampler(w)
    ids: dict[tuple, int] = {}
    out: list[TraceRequest] = []
    prefix, doc = w.shared_prefix_tokens, w.doc_tokens
    t = 0.0
    for s in range(sessions):
        t += rng.expovariate(w.sessions_per_s)
        tenant = rng.randrange(w.tenants)
        doc_key = ("doc", tenant, draw_doc(rng)) if draw_doc else ("session", s)
        arrival = t
        for turn in range(1, w.turns + 1):
            prompt = w.prompt_tokens(turn)
            hashes = []
            for b in range(-(-prompt // block_tokens)):
                end = (b + 1) * block_tokens
                if end > prompt:
                    key: tuple = ("partial", s, turn)
                elif end <= prefix:
                    key = ("prefix", tenant, b)
                elif end <= prefix + doc:
                    key = (*doc_key, b)
                else:
                    key = ("session", s, b)
                hashes.append(ids.setdefault(key, len(ids)))
            out.append(TraceRequest(round(arrival * 1e3) / 1e3, prompt, w.output_tokens, tuple(hashes), f"tenant-{tenant}"))  # whole milliseconds, as the format
            gap = w.think_time_s if w.think == "fixed" else rng.expovariate(1.0 / w.think_time_s) if w.think_time_s else 0.0
            arrival += turn_s + gap
    out.sort(key=lambda r: r.arrival_s)
    return out
