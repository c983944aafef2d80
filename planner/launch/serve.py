"""Serve lines for a deployment: one per pool (prefill, decode) and the router in front of them.

vLLM (``vllm serve``): each pool runs with NIXL's connector (``--kv-transfer-config
'{"kv_connector":"NixlConnector","kv_role":"kv_both"}'``, vLLM 0.33 config/kv_transfer.py: roles
kv_producer / kv_consumer / kv_both) and its side channel on ``VLLM_NIXL_SIDE_CHANNEL_PORT``
(vllm/envs.py, default 5600); the router is vllm-router's ``--vllm-pd-disaggregation`` mode.
SGLang (``python -m sglang.launch_server``): ``--disaggregation-mode prefill|decode`` with
``--disaggregation-transfer-backend nixl`` and the prefill's bootstrap port, behind
``sglang_router.launch_router --pd-disaggregation`` (SGLang 0.5.23's own PD test fixture).
"""

from __future__ import annotations

import json
import shlex

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.plan import PreparedModel, compute_plan, make_inputs

NIXL_CONFIG = json.dumps({"kv_connector": "NixlConnector", "kv_role": "kv_both"}, separators=(",", ":"))
NIXL_PORT = 5600  # vllm/envs.py VLLM_NIXL_SIDE_CHANNEL_PORT default
PREFILL_PORT, DECODE_PORT, ROUTER_PORT = 8100, 8200, 8000
SGLANG_BOOTSTRAP_PORT = 8998  # SGLang's --disaggregation-bootstrap-port default
SGLANG_KV = {"auto": "auto", "fp8": "fp8_e4m3", "bf16": "bfloat16"}  # planner KV dtype -> launch_server --kv-cache-dtype


class ServeLines(BaseModel):
    """The commands that start one deployment with one engine."""

    model_config = ConfigDict(frozen=True)

    engine: str  # "vllm" or "sglang"
    prefill: str | None  # None: aggregated
    decode: str  # the aggregated replica's line when not disaggregated
    router: str | None
    notes: list[str]


def _pool_plan(model: PreparedModel, values: dict):
    return compute_plan(make_inputs(**{k: v for k, v in values.items() if k != "disagg"}), model)


def vllm_line(model: PreparedModel, values: dict, repo: str) -> str:
    """``vllm serve`` for one replica of a pool (:func:`planner.engines.vllm.vllm_preview`'s command)."""
    from planner.engines.vllm.preview import vllm_preview

    plan = _pool_plan(model, {**values, "gpu_count": values["tp"]})
    return vllm_preview(plan, model).command.replace("vllm serve MODEL", f"vllm serve {repo}", 1)


def sglang_line(model: PreparedModel, values: dict, repo: str) -> str:
    """``python -m sglang.launch_server`` for one replica of a pool."""
    from planner.engines.sglang.preview import SglangSettings, launch_command

    plan = _pool_plan(model, {**values, "gpu_count": values["tp"]})
    kv = plan.inputs.kv_dtype if plan.inputs.kv_dtype == "auto" else plan.kv_cache.kv_dtype
    if kv not in SGLANG_KV:
        raise PlannerError("kv_dtype", kv, "SGLang has no such KV cache dtype; choose auto, bf16 or fp8")
    settings = SglangSettings(tp=plan.inputs.tp, kv_cache_dtype=SGLANG_KV[kv], context_length=plan.context.maximum_context_tokens, max_running_requests=values.get("max_num_seqs"), scheduler_recv_interval=values.get("recv_interval") if values.get("recv_interval", 1) != 1 else None)
    return launch_command(repo, settings)


def serve_lines(model: PreparedModel, values: dict, engine: str = "vllm", repo: str | None = None, disagg: str | None = None) -> ServeLines:
    """The commands for a plan's deployment: ``values`` are plan inputs (a size recommendation's
    ``plan_values`` or a plan's), ``disagg`` the pools (:func:`planner.disagg.parse_pools` text) or
    None for aggregated replicas.

    Raises:
        PlannerError: an unknown engine, a pools text that does not parse, a KV dtype the engine has no flag for.
    """
    from planner import disagg as pools_of

    repo = repo or model.repo_id or "MODEL"
    if engine not in ("vllm", "sglang"):
        raise PlannerError("engine", engine, "serve lines are written for vllm or sglang")
    line = vllm_line if engine == "vllm" else sglang_line
    spec = disagg or values.get("disagg")
    if not spec:
        return ServeLines(engine=engine, prefill=None, decode=line(model, values, repo), router=None, notes=[])
    p, d = pools_of.parse_pools(spec, values.get("gpu", "H100-SXM-80GB"))
    base = {k: v for k, v in values.items() if k not in ("disagg", "gpu", "tp", "ep", "gpu_count")}
    prefill = line(model, {**{k: v for k, v in base.items() if k != "max_num_seqs"}, "gpu": p.gpu, "tp": p.tp, "ep": p.ep, "output_tokens": 1}, repo)
    decode = line(model, {**base, "gpu": d.gpu, "tp": d.tp, "ep": d.ep}, repo)
    notes = [f"{p.replicas} prefill replica{'s' if p.replicas > 1 else ''} of {p.tp} × {p.gpu}; {d.replicas} decode replica{'s' if d.replicas > 1 else ''} of {d.tp} × {d.gpu}"]
    if engine == "vllm":
        env = f"VLLM_NIXL_SIDE_CHANNEL_HOST=$(hostname -i) VLLM_NIXL_SIDE_CHANNEL_PORT={NIXL_PORT} "
        kv = f" --kv-transfer-config {shlex.quote(NIXL_CONFIG)}"
        prefill = env + prefill + f" --port {PREFILL_PORT}" + kv
        decode = env + decode + f" --port {DECODE_PORT}" + kv
        router = f"vllm-router --vllm-pd-disaggregation --prefill http://PREFILL_HOST:{PREFILL_PORT} --decode http://DECODE_HOST:{DECODE_PORT} --host 0.0.0.0 --port {ROUTER_PORT}"
        notes.append("one --prefill / --decode per replica on the router line; the side channel port must be free on each host")
    else:
        common = f" --disaggregation-transfer-backend nixl --disaggregation-bootstrap-port {SGLANG_BOOTSTRAP_PORT}"
        prefill = prefill + f" --port {PREFILL_PORT} --disaggregation-mode prefill" + common
        decode = decode + f" --port {DECODE_PORT} --disaggregation-mode decode" + common
        router = f"python -m sglang_router.launch_router --pd-disaggregation --prefill http://PREFILL_HOST:{PREFILL_PORT} {SGLANG_BOOTSTRAP_PORT} --decode http://DECODE_HOST:{DECODE_PORT} --host 0.0.0.0 --port {ROUTER_PORT}"
        notes.append("one --prefill URL BOOTSTRAP_PORT / --decode URL per replica on the router line")
    return ServeLines(engine=engine, prefill=prefill, decode=decode, router=router, notes=notes)
