"""The benchmark that checks a plan: its workload as ``vllm bench serve`` and guidellm commands.

Both commands send the plan's prompt and output lengths (random token prompts, ``--ignore-eos``
so every request generates the plan's output length) at the plan's load: a fixed concurrency
(``--max-concurrency C`` / guidellm's ``concurrent`` profile, C = the plan's concurrent
sequences), or, when the plan is sized for a request rate, Poisson arrivals at that rate
(``--request-rate R`` / guidellm's ``poisson`` profile). Their result files are what
:func:`planner.benchimport.read_result` reads back (``--save-result`` JSON, guidellm's JSON report),
so the plan's own figures can be put beside them (:func:`planner.benchimport.compare`).

Flags as vLLM 0.33 ``vllm/benchmarks/serve.py`` and guidellm 0.8 ``guidellm run --help`` spell them.
"""

from __future__ import annotations

import math
import shlex

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.plan import PreparedModel, compute_plan, make_inputs

DEFAULT_TARGET = "http://ROUTER_HOST:8000"  # the router (disaggregated) or the service in front of the replicas
PROMPTS_PER_CLIENT = 10  # requests per concurrent client: enough for the steady state to dominate the means
MIN_PROMPTS, MAX_PROMPTS = 200, 100_000
RATE_SECONDS = 120  # a rate-driven run lasts this long at the offered rate (num_prompts = rate x this)


class BenchCommands(BaseModel):
    """The commands that reproduce one plan's workload against a running deployment."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int
    output_tokens: int
    load: str  # in words
    num_prompts: int
    vllm: str  # vllm bench serve ... --save-result
    guidellm: str  # guidellm run ... --output kind=json
    metrics: str  # a /metrics scrape of one replica (a decode replica when disaggregated) taken while the run is under way
    notes: list[str]


def bench_commands(model: PreparedModel, values: dict, rate_per_s: float | None = None, target: str = DEFAULT_TARGET, repo: str | None = None) -> BenchCommands:
    """The benchmark commands for a plan (``values``: plan inputs; ``rate_per_s``: the request rate
    the deployment was sized for, or None for the plan's concurrent sequences).

    Raises:
        PlannerError: the plan inputs do not plan, or a rate that is not a positive finite number.
    """
    if rate_per_s is not None and (isinstance(rate_per_s, bool) or not isinstance(rate_per_s, (int, float)) or not math.isfinite(rate_per_s) or not 0 < rate_per_s <= 1e6):
        raise PlannerError("rate", rate_per_s, "must be a request rate above 0 and at most 1,000,000 per second")
    plan = compute_plan(make_inputs(**{k: v for k, v in values.items() if k not in ("disagg", "calibration")}), model)
    repo = repo or model.repo_id or "MODEL"
    isl, osl = plan.context.input_tokens, plan.inputs.output_tokens
    if rate_per_s is not None:
        prompts = min(MAX_PROMPTS, max(MIN_PROMPTS, math.ceil(rate_per_s * RATE_SECONDS)))
        vllm_load, gl_profile = ["--request-rate", f"{rate_per_s:g}"], f"kind=poisson,rate={rate_per_s:g}"
        load = f"{rate_per_s:g} requests/s, Poisson arrivals"
    else:
        clients = plan.inputs.sequences
        prompts = min(MAX_PROMPTS, max(MIN_PROMPTS, clients * PROMPTS_PER_CLIENT))
        vllm_load, gl_profile = ["--max-concurrency", str(clients)], f"kind=concurrent,streams={clients}"
        load = f"{clients:,} concurrent clients, closed loop"
    q = shlex.quote
    vllm = [
        "vllm", "bench", "serve", "--backend", "openai", "--base-url", target, "--model", repo, "--dataset-name", "random",
        "--input-len", str(isl), "--output-len", str(osl), "--ignore-eos", "--num-prompts", str(prompts), *vllm_load,
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,95,99", "--save-result", "--result-filename", "bench.json",
    ]  # fmt: skip
    guidellm = [
        "guidellm", "run", "--backend", f"kind=openai_http,target={target},model={repo}", "--data", f"kind=synthetic_text,prompt_tokens={isl},output_tokens={osl}",
        "--profile", gl_profile, "--constraint", f"kind=max_requests,count={prompts}", "--output", "kind=json,path=guidellm.json",
    ]  # fmt: skip
    notes = [
        "run against the deployment as planned (same GPUs, parallelism and flags); import the result with: python -m planner bench-import bench.json --plan plan.json",
    ]
    if plan.inputs.prefix_hit_rate > 0:
        notes.append(f"the plan assumes {plan.inputs.prefix_hit_rate:.0%} of each prompt cached; random prompts share no prefix, so the run measures it uncached")
    return BenchCommands(
        input_tokens=isl, output_tokens=osl, load=load, num_prompts=prompts, vllm=" ".join(q(w) for w in vllm), guidellm=" ".join(q(w) for w in guidellm),
        metrics=f"curl -s http://{'DECODE' if values.get('disagg') else 'REPLICA'}_HOST:8000/metrics > metrics.prom", notes=notes,
    )  # fmt: skip
