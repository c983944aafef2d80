"""The plan's load figures: how the requested load is served, each figure labelled by the load it
assumes, and the step model of the deployment's shape.

* **closed loop** (the default): ``sequences`` clients, each sending its next request when the
  last finishes (what load generators at a fixed concurrency measure): :func:`latency.closed_loop`;
* **open loop (Poisson)** (a ``request_rate``): arrivals at that rate, the requests in flight
  from Little's law: :func:`latency.open_loop` / :func:`latency.poisson_at`;
* **max throughput (offline)**: every request queued at once, the engine running what memory and
  its limit admit: :func:`latency.offline`.

The unit every figure is computed for is one *rank*: an attention data-parallel rank of ``tp``
GPUs (``dp`` of them a replica, their experts spread over ``ep = dp x tp`` GPUs), or a replica of
``tp`` x ``pp`` GPUs; the deployment's figures are the rank's times the ranks. Speculative decoding
(:mod:`planner.speculative`) scales the decode steps by its step model's TPOT at the same batch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

from planner import latency, parallel, speculative
from planner.hardware import Device
from planner.results import Result

CLOSED = "closed loop"
OPEN = "open loop (Poisson)"
OFFLINE = "max throughput (offline)"


def serving_engine(runtime: str, choice: str) -> str:
    """The engine whose serving costs the latency uses: ``choice``, or the runtime's (vLLM's for
    vllm and transformers, SGLang's for sglang)."""
    if choice != "auto":
        return choice
    return "sglang" if runtime == "sglang" else "vllm"


class Spec(NamedTuple):
    """Speculative decoding as planned: the method, drafts a step, the acceptance length (None:
    the method's published figure) and, for a draft model, its step model and K/V at the mean context."""

    method: str
    tokens: int
    acceptance: float | None
    draft_roof: latency.Roofline | None = None
    draft_kv_mid: float = 0.0


class Setup(NamedTuple):
    """What every load figure of a plan is computed from, on one rank (see the module docstring)."""

    roof: latency.Roofline
    prompt: int
    cached: int
    generated: int
    kv_mid: float  # K/V one sequence holds at the mean decode context ``mid``
    mid: int
    budget: int  # the scheduler's token budget a step
    max_running: int | None  # the engine's limit on running sequences (None: memory's)
    preprocess_s: float | None  # a measured preprocessing time (None: the engine's fitted API server)
    rate: float | None  # open loop: requests a second on this rank (None: a closed loop)
    spec: Spec | None
    recv_interval: int = 1  # decode steps between the scheduler's polls for new requests (SGLang's --scheduler-recv-interval; 1: every step)
    batch_wait: tuple[int, float] = (0, 0.0)  # TensorRT-LLM's batch waiting: (batch_wait_timeout_iters, batch_wait_max_tokens_ratio); (0, 0): off


@dataclass(frozen=True, slots=True)
class LoadFigures(Result):
    """Latency and throughput of one rank under a load (ms; rates per rank), labelled ``kind``."""

    kind: str  # CLOSED, OPEN or OFFLINE
    per_rank: int  # clients (closed loop), requests in flight (open loop) or running (offline)
    ttft_ms: float
    ttft_p95_ms: float
    tpot_ms: float
    tpot_p95_ms: float
    e2e_ms: float
    output_tokens_per_s: float
    requests_per_s: float
    preprocess_ms: float  # the API server's (or the given) preprocessing
    queue_ms: float  # waiting before the own prefill: the step in flight, the prefill budget, a free slot
    prefill_ms: float  # the request's own prefill steps
    saturated: bool  # closed loop: the prefill budget cannot keep up; open loop: the rate is not sustainable
    decode_step_ms: float = 0.0  # a decode-only step of the sequences decoding (speculation's step per token)
    step_share: float = 0.0  # of the decode steps that carry a prefill chunk
    speedup: float = 1.0  # speculative decoding's TPOT gain at this batch (1: none)
    tpot_p99_ms: float = 0.0  # the 99th-percentile gap (planner.latency.step_quantile)
    decoding: float = 0.0  # sequences decoding in a step on average (the decode-only step's batch)
    running: int = 0  # closed loop: clients the engine runs at once (the rest wait for a slot); else per_rank


def _spec_factor(setup: Setup, decoding: float) -> float:
    """TPOT with speculation / TPOT without, at ``decoding`` sequences (1 without speculation)."""
    if setup.spec is None:
        return 1.0
    s = setup.spec
    r = speculative.speculative(setup.roof, s.method, max(1, round(decoding)), setup.kv_mid, setup.mid, s.tokens, s.acceptance, s.draft_roof, s.draft_kv_mid)
    return r.tpot_ms / r.plain_tpot_ms if r.plain_tpot_ms else 1.0


def _figures(setup: Setup, kind: str, per_rank: int, running: int, f: float, ttft: float, ttft_p95: float, tpot: float, tpot_p95: float, parts: tuple[float, float, float], saturated: bool, decode_step: float, share: float, slot_wait: float = 0.0, rate: float | None = None, tpot_p99: float = 0.0, decoding: float = 0.0) -> LoadFigures:
    """:class:`LoadFigures` from a load model's figures (ms) with speculation's factor ``f`` on the
    decode steps: end-to-end = TTFT + (output - 1) x TPOT; ``running`` requests take it in turn
    (``rate`` instead where the load fixes it); ``parts``: (preprocessing, queue, prefill)."""
    out = max(1, setup.generated)
    tpot *= f
    e2e_run = ttft - slot_wait + (out - 1) * tpot
    if rate is None:
        rate = running / (e2e_run / 1e3) if e2e_run > 0 else 0.0
    return LoadFigures(kind, per_rank, ttft, ttft_p95, tpot, tpot_p95 * f, e2e_run + slot_wait, rate * out, rate, *parts, saturated, decode_step * f, share, 1.0 / f, max(tpot_p99, tpot_p95) * f, decoding or running, running)


def closed(setup: Setup, clients: int) -> LoadFigures:
    """The closed loop of ``clients`` clients on one rank."""
    r = setup
    cl = latency.closed_loop(r.roof, r.prompt, r.cached, r.generated, clients, r.kv_mid, r.mid, r.budget, r.max_running, True, r.preprocess_s, r.recv_interval, r.batch_wait)
    parts = (cl.preprocess_ms, cl.wait_for_step_ms + cl.queue_ms + cl.slot_wait_ms, cl.prefill_ms)
    f = _spec_factor(setup, cl.decoding)
    return _figures(setup, CLOSED, cl.clients, cl.running, f, cl.ttft_ms, cl.ttft_p95_ms, cl.tpot_ms, cl.tpot_p95_ms, parts, cl.saturated, cl.decode_step_ms, cl.prefill_step_share, cl.slot_wait_ms, tpot_p99=cl.tpot_p99_ms, decoding=cl.decoding)


def benchmark_ttft_ms(setup: Setup, clients: int, prompts: int, steady_ms: float) -> float:
    """The mean TTFT a closed-loop benchmark measures when it starts its ``clients`` clients at once
    and sends ``prompts`` prompts in all (``vllm bench serve`` / ``sglang.bench_serving`` with
    ``--max-concurrency`` at an infinite request rate, InferenceX's ``benchmark_serving``): the first
    wave's C prompts queue on an idle engine (their mean: preprocessing + the burst's mean time to
    the end of its prefill, :func:`latency.served`), the other N - C see the steady state
    ``steady_ms``, so the mean is (C x first + (N - C) x steady) / N. N <= C: one wave of N prompts,
    its mean alone; one client: ``steady_ms`` (no queue to start with)."""
    c, n = min(clients, setup.max_running or clients), prompts  # beyond what runs at once, a prompt waits as in the steady state
    if c <= 1 or n <= 1:
        return steady_ms
    wave = min(c, n)
    return (wave * _burst_mean_ms(setup, wave) + (n - wave) * steady_ms) / n


def waves_ttft_ms(setup: Setup, clients: int, prompts: int, steady_ms: float) -> float:
    """Candidate W (docs/serving_fresh5_plan.md): the mean TTFT of the same benchmark on an engine
    that runs a waiting prompt's prefill before any decode (SGLang's scheduler without
    ``--enable-mixed-chunk``: ``get_next_batch_to_run`` runs a new prefill batch whenever it can
    form one) when every prompt and every output has the same length. Each wave's prompts are
    prefilled before any of them decodes, so they decode in the same steps, finish in the same step,
    and the clients send the next wave together: every wave of min(C, prompts left) queues on an
    engine with nothing else to do, as the first one does. The mean over N prompts is the waves'
    burst means weighted by their sizes; one client, or one prompt: ``steady_ms``. On any engine
    the prompts that end within the API server's time of each other reach the scheduler together,
    so the plan shows this figure as its benchmark's upper end (roofline.benchmark_ttft_waves_ms)."""
    c, n = min(clients, setup.max_running or clients), prompts  # waves of what runs at once
    if c <= 1 or n <= 1:
        return steady_ms
    full, rest = divmod(n, c)
    total = full * c * _burst_mean_ms(setup, c) + (rest * _burst_mean_ms(setup, rest) if rest else 0.0)
    return total / n


def _burst_mean_ms(setup: Setup, wave: int) -> float:
    """Preprocessing + the mean time to the end of its own prefill of ``wave`` prompts that arrive
    at once on an idle engine (:func:`latency.served`'s burst)."""
    burst = latency.served(setup.roof, setup.prompt, setup.cached, setup.generated, wave, setup.kv_mid, setup.mid, setup.budget)
    return _preprocess_s(setup) * 1e3 + burst.prefill_served_ms


def decode_step_s(setup: Setup, sequences: int) -> float:
    """A decode-only step of ``sequences`` sequences on one rank (every one decoding, as in a
    disaggregated decode pool), speculation's factor included: the step :func:`closed` reports
    as ``decode_step_ms`` when that many decode."""
    n = max(1, sequences)
    return setup.roof.decode_step_s(n, setup.kv_mid, setup.mid) * _spec_factor(setup, n)


def poisson(setup: Setup, in_flight: int) -> LoadFigures:
    """Poisson arrivals with ``in_flight`` requests in flight on one rank (the SLO limits of an open loop)."""
    return _open_figures(setup, latency.poisson_at(setup.roof, setup.prompt, setup.cached, setup.generated, in_flight, setup.kv_mid, setup.mid, setup.budget, _preprocess_s(setup), setup.recv_interval, setup.batch_wait))


def open_at_rate(setup: Setup) -> LoadFigures:
    """The open loop at the rank's request rate (requests in flight from Little's law)."""
    r = setup
    ol = latency.open_loop(r.roof, r.prompt, r.cached, r.generated, r.rate, r.kv_mid, r.mid, r.budget, r.max_running, True, _preprocess_s(setup), r.recv_interval, r.batch_wait)
    return _open_figures(setup, ol)


def _preprocess_s(setup: Setup) -> float:
    return setup.preprocess_s if setup.preprocess_s is not None else latency.api_preprocess_s(setup.roof.eff, setup.prompt)


def _open_figures(setup: Setup, ol: latency.OpenLoop) -> LoadFigures:
    s = latency.served(setup.roof, setup.prompt, setup.cached, max(1, setup.generated), ol.in_flight, setup.kv_mid, setup.mid, setup.budget)
    prefill = s.prefill_one_ms
    parts = (ol.preprocess_ms, ol.ttft_ms - ol.preprocess_ms - prefill, prefill)
    rate = ol.rate_per_s if setup.rate is not None and ol.sustainable else None
    f = _spec_factor(setup, ol.in_flight)
    return _figures(setup, OPEN, ol.in_flight, ol.in_flight, f, ol.ttft_ms, ol.ttft_p95_ms, ol.tpot_ms, ol.tpot_p95_ms, parts, not ol.sustainable, s.itl_decode_ms, s.prefill_step_share, rate=rate, tpot_p99=ol.tpot_p99_ms)


def at(setup: Setup, per_rank: int) -> LoadFigures:
    """The figures SLO admission judges at ``per_rank`` sequences on a rank: the closed loop of that
    many clients, or (an open loop) that many requests in flight under Poisson arrivals."""
    return closed(setup, per_rank) if setup.rate is None else poisson(setup, per_rank)


def offline(setup: Setup, running: int) -> LoadFigures:
    """Max throughput: ``running`` requests queued at once on a rank, all admitted (one wave of
    :func:`latency.offline`, no API server)."""
    r = setup
    run = latency.offline(r.roof, r.prompt, r.cached, r.generated, running, running, r.kv_mid, r.mid, r.budget)
    f = _spec_factor(setup, run.running)
    return _figures(setup, OFFLINE, run.running, run.running, f, run.ttft_ms, run.ttft_ms, run.tpot_ms, run.tpot_ms, (0.0, 0.0, 0.0), False, run.tpot_ms, 0.0)


def report(fig: LoadFigures, prompt: int, cached: float, generated: int, queue_ms: float) -> latency.LatencyReport:
    """The seed's latency phases of one request under ``fig``: queue (the one given + the wait for
    the step in flight, the prefill budget and a free slot), preprocessing, the own prefill; the
    last prefill step emits the first token (as engines do, and as load generators time TTFT), so
    the first decode phase is 0 and every later token comes a TPOT after the one before."""
    remaining = fig.tpot_ms * (generated - 1)
    new = prompt - int(cached)
    return latency.LatencyReport(
        source="roofline estimate",
        queue_ms=queue_ms + fig.queue_ms,
        preprocessing_ms=fig.preprocess_ms,
        prefill_ms=fig.prefill_ms,
        first_decode_ms=0.0,
        remaining_decode_ms=remaining,
        time_to_first_token_ms=queue_ms + fig.ttft_ms,
        prefill_tokens_per_second=new / (fig.prefill_ms / 1e3) if fig.prefill_ms else 0.0,
        output_tokens_per_second=generated / (remaining / 1e3) if remaining else (generated / (fig.prefill_ms / 1e3) if fig.prefill_ms else 0.0),
        mean_inter_token_latency_ms=fig.tpot_ms if generated > 1 else 0.0,
        end_to_end_ms=queue_ms + fig.ttft_ms + remaining,
    )


def label(fig: LoadFigures, rate: float | None = None) -> str:
    """What every latency figure says it assumes: "closed loop of 8 clients", "open loop (Poisson)
    at 2.5 requests/s (12 in flight)", "max throughput (offline), 512 running" (per rank)."""
    if fig.kind == CLOSED:
        said = f"{CLOSED} of {fig.per_rank:,} client" + ("s" if fig.per_rank != 1 else "")
        if 0 < fig.running < fig.per_rank:  # the engine's limit or its K/V pool: the others queue
            said += f", {fig.running:,} running at once, {fig.per_rank - fig.running:,} waiting for a slot"
        return said
    if fig.kind == OPEN:
        at_rate = f" at {rate:,.4g} requests/s" if rate is not None else ""
        beyond = ", not sustainable: the queue grows without bound" if fig.saturated and rate is not None else ""
        return f"{OPEN}{at_rate} ({fig.per_rank:,} in flight{beyond})"
    return f"{OFFLINE}, {fig.per_rank:,} running"


# --------------------------------------------------------------------------- links of the deployment's shape


def alltoall_link(device: Device, ep: int) -> tuple[float, float]:
    """(GB/s per direction, us a message) of an expert-parallel all-to-all over ``ep`` GPUs:
    the scale-up link inside one node, the NICs (and their message latency) beyond it."""
    gb_s, us = device.link_at(min(ep, device.node_gpus))
    if ep <= device.node_gpus:
        return gb_s, us
    return device.scaleout_gb_s, us + device.scaleout_us


def stage_link(device: Device, gpus_per_replica: int) -> tuple[float, float]:
    """(GB/s, us) between consecutive pipeline stages: the NIC when a replica spans nodes (its
    stages sit on different nodes), else the scale-up link."""
    if gpus_per_replica > device.node_gpus:
        return device.scaleout_gb_s, device.link_latency_us + device.scaleout_us
    return device.link_gb_s, device.link_latency_us


def shaped(roof_all: latency.Roofline, device: Device, dp: int, pp: int, tp: int) -> latency.Roofline:
    """One rank's step model from the tensor-parallel model over a rank's dp x tp GPUs:
    attention data parallelism (:func:`parallel.expert_data_parallel`), then pipeline stages
    (:func:`parallel.pipeline_stage`)."""
    roof = roof_all
    if dp > 1:
        roof = parallel.expert_data_parallel(roof, dp, *alltoall_link(device, dp * tp))
    if pp > 1:
        roof = parallel.pipeline_stage(roof, pp, *stage_link(device, dp * tp * pp))
    return roof


def spec_tokens(method: str, tokens: int | None) -> int:
    """Drafts a step: the given count, or the method's default."""
    return tokens if tokens is not None else speculative.method(method).default_tokens


def ceil_div(a: int, b: int) -> int:
    return -(-a // max(1, b))


def per_rank_rate(rate: float | None, ranks: int) -> float | None:
    """A deployment's request rate spread evenly over its ranks."""
    return None if rate is None else rate / max(1, ranks)


def finite(x: float) -> float:
    return x if math.isfinite(x) else 0.0
