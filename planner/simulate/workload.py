"""Where requests come from: seeded Poisson arrivals (fixed or uniform lengths, or a named length
profile: chat, rag, agent, summarisation), or a CSV trace read with a size cap."""

from __future__ import annotations

import csv
import io
import math
import random
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerError
from planner.limits import parse_number_text
from planner.simulate.model import MAX_REQUESTS, MAX_TOKENS_PER_REQUEST, Request

MAX_TRACE_BYTES = 8 * 2**20  # a trace file is refused above 8 MiB, before it is parsed


def read_trace(path: str | Path, max_bytes: int = MAX_TRACE_BYTES) -> list[Request]:
    """Read and parse a CSV trace file, refusing one larger than ``max_bytes`` before parsing.

    Reads at most ``max_bytes + 1`` bytes, so endless inputs (``/dev/zero``, a pipe) stop at
    the cap. Raises :class:`PlannerError` for an unreadable, oversized, non-UTF-8 or bad trace.
    """
    return parse_trace_csv(read_trace_text(path, max_bytes, "CSV"))


def read_trace_text(path: str | Path, max_bytes: int = MAX_TRACE_BYTES, kind: str = "CSV") -> str:
    """A trace file's text: at most ``max_bytes`` (refused above, read no further), UTF-8, no NUL.

    Raises:
        PlannerError: unreadable, oversized, not UTF-8 or binary.
    """
    try:
        with open(path, "rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise PlannerError("trace", str(path)[:200], f"cannot read file ({exc.strerror or exc})") from None
    return trace_text(data, str(path), max_bytes, kind)


def trace_text(data: bytes, name: str, max_bytes: int = MAX_TRACE_BYTES, kind: str = "CSV") -> str:
    """The text of a trace's bytes (a file's, an upload's): at most ``max_bytes``, UTF-8, no NUL.

    Raises:
        PlannerError: naming the trace ``name``: oversized, not UTF-8 or binary.
    """
    if len(data) > max_bytes:
        raise PlannerError("trace", name[:200], f"larger than {max_bytes / 2**20:g} MiB; split it or sample it")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise PlannerError("trace", name[:200], "not UTF-8 text") from None
    if "\x00" in text:
        raise PlannerError("trace", name[:200], f"binary data, not {kind} text")
    return text


def _length_spec(name: str, spec: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(spec, bool):
        raise PlannerError(name, spec, "must be a token count or a (low, high) range")
    if isinstance(spec, int):
        lo = hi = spec
    elif isinstance(spec, (tuple, list)) and len(spec) == 2 and all(isinstance(x, int) and not isinstance(x, bool) for x in spec):
        lo, hi = spec
    else:
        raise PlannerError(name, spec, "must be a token count or a (low, high) range")
    if lo < 1 or hi > MAX_TOKENS_PER_REQUEST or lo > hi:
        raise PlannerError(name, spec, f"must satisfy 1 <= low <= high <= {MAX_TOKENS_PER_REQUEST:,}")
    return lo, hi


def poisson_requests(rate_per_s: float, n: int, prompt_tokens: int | tuple[int, int], output_tokens: int | tuple[int, int], seed: int = 0) -> list[Request]:
    """``n`` requests with exponential inter-arrival gaps at ``rate_per_s``; lengths fixed or
    uniform over an inclusive ``(low, high)`` range. Deterministic for a given ``seed``."""
    if isinstance(rate_per_s, bool) or not isinstance(rate_per_s, (int, float)) or not math.isfinite(rate_per_s) or rate_per_s <= 0:
        raise PlannerError("rate_per_s", rate_per_s, "must be a positive finite request rate")
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n > MAX_REQUESTS:
        raise PlannerError("requests", n, f"must be an integer from 1 to {MAX_REQUESTS:,}")
    plo, phi = _length_spec("prompt_tokens", prompt_tokens)
    olo, ohi = _length_spec("output_tokens", output_tokens)
    rng = random.Random(seed)
    t = 0.0
    out: list[Request] = []
    for i in range(n):
        t += rng.expovariate(rate_per_s)
        p = plo if plo == phi else rng.randint(plo, phi)
        o = olo if olo == ohi else rng.randint(olo, ohi)
        out.append(Request.model_construct(id=i, arrival_s=t, prompt_tokens=p, output_tokens=o))
    return out


@dataclass(frozen=True)
class LengthProfile:
    """A traffic shape: prompt and output lengths each log-normal, fixed by their p50 and p95.

    These are assumed shapes for a first look, not measurements of anyone's traffic: replace
    them with a trace of your own when you have one.
    """

    name: str
    prompt_p50: int
    prompt_p95: int
    output_p50: int
    output_p95: int
    about: str

    def describe(self) -> str:
        return f"{self.name}: prompt p50 {self.prompt_p50:,} / p95 {self.prompt_p95:,} tokens, output p50 {self.output_p50:,} / p95 {self.output_p95:,} ({self.about})"


Z95 = 1.6448536269514722  # the standard normal's 95th percentile: sigma = ln(p95 / p50) / Z95

LENGTH_PROFILES: dict[str, LengthProfile] = {
    p.name: p
    for p in (
        LengthProfile("chat", 1_000, 4_000, 250, 800, "a conversation's history and a reply"),
        LengthProfile("rag", 4_000, 12_000, 300, 900, "retrieved passages in the prompt, a short answer"),
        LengthProfile("agent", 12_000, 40_000, 400, 2_000, "tool outputs and history accumulating over steps"),
        LengthProfile("summarisation", 6_000, 24_000, 500, 1_200, "a long document in, a page out"),
    )
}


def _lognormal(rng: random.Random, p50: int, p95: int, lo: int, hi: int) -> int:
    sigma = math.log(p95 / p50) / Z95
    return max(lo, min(hi, round(rng.lognormvariate(math.log(p50), sigma))))


def profile_requests(rate_per_s: float, n: int, profile: str, seed: int = 0, max_tokens: int = MAX_TOKENS_PER_REQUEST) -> list[Request]:
    """``n`` Poisson arrivals at ``rate_per_s`` with lengths drawn from a named profile of
    :data:`LENGTH_PROFILES`; prompt + output is capped at ``max_tokens`` (the plan's context:
    an engine refuses longer requests before they reach the scheduler). Deterministic per seed."""
    shape = LENGTH_PROFILES.get(profile)
    if shape is None:
        raise PlannerError("lengths", profile, f"unknown length profile; choose one of {', '.join(LENGTH_PROFILES)}")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or not 2 <= max_tokens <= MAX_TOKENS_PER_REQUEST:
        raise PlannerError("max_tokens", max_tokens, f"must be an integer from 2 to {MAX_TOKENS_PER_REQUEST:,}")
    base = poisson_requests(rate_per_s, n, 1, 1, seed=seed)  # the arrival times, validated
    rng = random.Random(f"lengths-{profile}-{seed}")
    out = []
    for r in base:
        o = _lognormal(rng, shape.output_p50, shape.output_p95, 1, max_tokens - 1)
        p = _lognormal(rng, shape.prompt_p50, shape.prompt_p95, 1, max_tokens - o)
        out.append(Request.model_construct(id=r.id, arrival_s=r.arrival_s, prompt_tokens=p, output_tokens=o))
    return out


TRACE_COLUMNS = ("arrival_s", "prompt_tokens", "output_tokens")


def plan_requests(context, rate_per_s: float, n: int, *, lengths: str | None = None, trace_text: str | None = None, seed: int = 0) -> list[Request]:
    """The requests a simulation of a plan replays, the same on the CLI and the Simulate page: a
    CSV trace's rows, else ``n`` Poisson arrivals at ``rate_per_s`` with a length profile's draws
    (prompt + output capped at the plan's context and at least 2 tokens), else with the plan's
    own prompt and output. ``context`` is the plan's context section."""
    if trace_text is not None:
        return parse_trace_csv(trace_text)
    if lengths:
        return profile_requests(rate_per_s, n, lengths, seed=seed, max_tokens=max(2, min(context.maximum_context_tokens, MAX_TOKENS_PER_REQUEST)))
    return poisson_requests(rate_per_s, n, context.input_tokens, context.reserved_output_tokens, seed=seed)


def parse_trace_csv(text: str, max_rows: int = MAX_REQUESTS) -> list[Request]:
    """Parse an untrusted trace: a header naming ``arrival_s,prompt_tokens,output_tokens``
    (any order, other columns ignored) and one request per row. Rows are numbered as in a
    spreadsheet (the header is row 1); a bad row raises :class:`PlannerError` naming it."""
    if not isinstance(text, str):
        raise PlannerError("trace", type(text).__name__, "must be CSV text")
    if len(text) > max_rows * 200 + 4096:
        raise PlannerError("trace", f"{len(text):,} characters", f"trace is too large (at most {max_rows:,} rows)")
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    try:
        header = next(reader, None)
        while header is not None and not any(c.strip() for c in header):
            header = next(reader, None)
        if header is None:
            raise PlannerError("trace", "", "trace is empty (a header arrival_s,prompt_tokens,output_tokens is required)")
        names = [c.strip().lower() for c in header]
        missing = [c for c in TRACE_COLUMNS if c not in names]
        if missing:
            raise PlannerError("trace header", ",".join(header), f"missing column(s) {', '.join(missing)}; expected arrival_s,prompt_tokens,output_tokens")
        idx = {c: names.index(c) for c in TRACE_COLUMNS}
        need = max(idx.values()) + 1
        out: list[Request] = []
        for row in reader:
            rowno = reader.line_num
            if not any(c.strip() for c in row):
                continue
            if len(out) >= max_rows:
                raise PlannerError("trace", f"more than {max_rows:,} rows", f"trace has too many rows (at most {max_rows:,})")
            if len(row) < need:
                raise PlannerError(f"row {rowno}", ",".join(row), f"has {len(row)} column(s), expected at least {need}")
            raw = row[idx["arrival_s"]].strip()
            arrival = parse_number_text(raw, integer=False)  # ASCII digits only: no "1_000", no "١٠"
            if arrival is None:
                raise PlannerError(f"row {rowno} arrival_s", raw, "not a number (ASCII digits, e.g. 1.5)")
            if arrival < 0:
                raise PlannerError(f"row {rowno} arrival_s", raw, "must be a finite time >= 0 seconds")
            vals = []
            for col in ("prompt_tokens", "output_tokens"):
                raw = row[idx[col]].strip()
                v = parse_number_text(raw, integer=True)
                if v is None:
                    raise PlannerError(f"row {rowno} {col}", raw, "not an integer (ASCII digits)")
                if v < 1 or v > MAX_TOKENS_PER_REQUEST:
                    raise PlannerError(f"row {rowno} {col}", raw, f"must be from 1 to {MAX_TOKENS_PER_REQUEST:,}")
                vals.append(v)
            out.append(Request.model_construct(id=len(out), arrival_s=arrival, prompt_tokens=vals[0], output_tokens=vals[1]))
    except csv.Error as exc:
        raise PlannerError(f"row {reader.line_num}", "", f"malformed CSV: {exc}") from None
    if not out:
        raise PlannerError("trace", "", "trace has a header but no rows")
    return out
