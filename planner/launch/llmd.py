"""llm-d's Helm values for a deployment: the llm-d-modelservice chart (v0.4.x values layout).

The chart (llm-d-incubation/llm-d-modelservice) turns ``prefill`` and ``decode`` sections into
Deployments (or LeaderWorkerSets when ``multinode``); with ``modelCommand: vllmServe`` it writes
``vllm serve <model> --port --tensor-parallel-size`` (from ``parallelism``) and the GPU requests
itself, so each container here carries only the rest of the plan's flags and NIXL's connector; the
routing sidecar in front of decode (``routing.proxy``, connector ``nixlv2``) sends each prompt to a
prefill pod first. An aggregated deployment is a decode section alone with the sidecar off.

Mixed GPU kinds: each pool gets a ``nodeSelector`` on GPU Feature Discovery's
``nvidia.com/gpu.product`` label (the product name as nvidia-smi prints it, spaces as dashes) where
the planner knows it; check it against ``kubectl get nodes -L nvidia.com/gpu.product``.
"""

from __future__ import annotations

import math

import yaml

from planner import disagg as pools_of
from planner.hardware import GIB
from planner.launch.serve import NIXL_CONFIG, NIXL_PORT
from planner.plan import PreparedModel, compute_plan, make_inputs

CHART = "llm-d-modelservice"
CHART_VERSION = "v0.4.12"  # the values layout written here (charts/llm-d-modelservice/values.yaml at that version)
IMAGE = "ghcr.io/llm-d/llm-d-cuda:latest"  # as the chart's own examples (pin a release tag in production)
SERVICE_PORT, TARGET_PORT = 8000, 8200  # routing.servicePort; routing.proxy.targetPort (vLLM behind the sidecar)
# GPU Feature Discovery's nvidia.com/gpu.product values (nvidia-smi's product names, spaces as dashes)
GPU_PRODUCT = {
    "H100-SXM-80GB": "NVIDIA-H100-80GB-HBM3", "H100-PCIe-80GB": "NVIDIA-H100-PCIe", "H100-NVL-94GB": "NVIDIA-H100-NVL", "H200-141GB": "NVIDIA-H200",
    "B200-180GB": "NVIDIA-B200", "A100-SXM-80GB": "NVIDIA-A100-SXM4-80GB", "A100-SXM-40GB": "NVIDIA-A100-SXM4-40GB", "L40S-48GB": "NVIDIA-L40S",
    "L4-24GB": "NVIDIA-L4", "A10-24GB": "NVIDIA-A10", "A10G-24GB": "NVIDIA-A10G", "T4-16GB": "Tesla-T4", "L40-48GB": "NVIDIA-L40", "H20-96GB": "NVIDIA-H20",
}  # fmt: skip


def _flags(model: PreparedModel, values: dict) -> list[str]:
    """The plan's ``vllm serve`` flags less what the chart writes itself (model, port, tensor parallelism)."""
    from planner.launch.serve import vllm_line

    words = vllm_line(model, values, "MODEL").split()[3:]  # drop "vllm serve MODEL"
    out, skip = [], False
    for w in words:
        if skip:
            skip = False
            continue
        if w == "--tensor-parallel-size":
            skip = True
            continue
        out.append(w)
    return out


def _pool(model: PreparedModel, values: dict, replicas: int, role: str, disaggregated: bool) -> dict:
    gpu = values["gpu"]
    args = _flags(model, values)
    env = []
    if disaggregated:
        args += ["--kv-transfer-config", NIXL_CONFIG]
        env = [
            {"name": "VLLM_NIXL_SIDE_CHANNEL_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "VLLM_NIXL_SIDE_CHANNEL_PORT", "value": str(NIXL_PORT)},
            {"name": "UCX_TLS", "value": "all"},
        ]
    port = TARGET_PORT if role == "decode" and disaggregated else SERVICE_PORT
    container = {"name": "vllm", "image": IMAGE, "modelCommand": "vllmServe", "args": args, "env": env, "ports": [{"containerPort": port, "protocol": "TCP"}], "mountModelVolume": True}
    if disaggregated:
        container["ports"].append({"containerPort": NIXL_PORT, "protocol": "TCP"})
    out = {"create": True, "replicas": replicas, "parallelism": {"tensor": values["tp"], "data": 1, "dataLocal": 1, "workers": 1}, "containers": [container]}
    if gpu in GPU_PRODUCT:
        out["nodeSelector"] = {"nvidia.com/gpu.product": GPU_PRODUCT[gpu]}
    return out


def llmd_values(model: PreparedModel, values: dict, repo: str | None = None) -> dict:
    """The chart's values for a plan's deployment (``values``: plan inputs; ``values["disagg"]``
    the pools, or absent for ``gpu_count / tp`` aggregated replicas).

    Raises:
        PlannerError: a pools text that does not parse, or plan inputs that do not plan.
    """
    repo = repo or model.repo_id or "MODEL"
    spec = values.get("disagg")
    plan = compute_plan(make_inputs(**{k: v for k, v in values.items() if k != "disagg"}), model)
    weights_gib = plan.capacity.model_resident_bytes * plan.inputs.tp / GIB
    out = {
        "multinode": False,
        "accelerator": {"type": "amd" if plan.device.vendor == "amd" else "nvidia"},
        "modelArtifacts": {
            "name": repo, "uri": f"hf://{repo}", "size": f"{max(1, math.ceil(weights_gib * 1.2))}Gi", "authSecretName": "hf-token",
            "labels": {"llm-d.ai/inference-serving": "true", "llm-d.ai/model": repo.replace("/", "-").lower()[:63]},
        },
    }  # fmt: skip
    base = {k: v for k, v in values.items() if k not in ("disagg", "gpu", "tp", "ep", "gpu_count")}
    if spec:
        p, d = pools_of.parse_pools(spec, plan.inputs.gpu)
        out["routing"] = {"servicePort": SERVICE_PORT, "proxy": {"enabled": True, "connector": "nixlv2", "targetPort": TARGET_PORT, "secure": False}}
        prefill_values = {**{k: v for k, v in base.items() if k != "max_num_seqs"}, "gpu": p.gpu, "tp": p.tp, "ep": p.ep, "output_tokens": 1}
        out["prefill"] = _pool(model, prefill_values, p.replicas, "prefill", True)
        out["decode"] = _pool(model, {**base, "gpu": d.gpu, "tp": d.tp, "ep": d.ep}, d.replicas, "decode", True)
    else:
        out["routing"] = {"servicePort": SERVICE_PORT, "proxy": {"enabled": False}}
        out["prefill"] = {"create": False}
        out["decode"] = _pool(model, {**base, "gpu": plan.inputs.gpu, "tp": plan.inputs.tp, "ep": plan.inputs.ep}, plan.capacity.replicas, "decode", False)
    return out


def llmd_yaml(model: PreparedModel, values: dict, repo: str | None = None) -> str:
    """:func:`llmd_values` as the values file ``helm install -f`` takes, with a header saying what it is."""
    head = f"# {CHART} {CHART_VERSION} values written by the KV Capacity Planner: helm install <name> llm-d-modelservice/{CHART} -f this-file\n"
    return head + yaml.safe_dump(llmd_values(model, values, repo), sort_keys=False, width=200)
