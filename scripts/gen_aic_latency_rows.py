"""Generate tests/data/aic_latency_rows.json: reference latencies from NVIDIA AIConfigurator.

Needs ``aiconfigurator-core==0.12.0`` (requirements.txt pins it). Run from the repo root:

    .venv/bin/python scripts/gen_aic_latency_rows.py

For each model, GPU, tensor-parallel size, ISL/OSL and batch it records AIConfigurator's vLLM
static-batch estimate: TTFT of the batch (``prefill_ms``), TPOT (``itl_ms``), the per-op times
folded into groups (GEMM, attention, all-reduce, MoE, logits, other) for the prefill and for the
whole decode, and which share of each phase's time came from measured ("silicon") rows rather
than AIConfigurator's own fallbacks. The model configs are AIConfigurator's bundled copies of the
Hub's ``config.json`` and are stored in the fixture, so tests and the accuracy benchmark need
neither AIConfigurator nor the network.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from planner import measured  # noqa: E402

OUT = ROOT / "tests" / "data" / "aic_latency_rows.json"

# (AIConfigurator bundled model id, tensor-parallel sizes, in the benchmark grid?)
MODELS = [
    ("meta-llama/Meta-Llama-3.1-8B", (1, 2), (1,)),
    ("meta-llama/Meta-Llama-3.1-70B", (4, 8), (4, 8)),
    ("Qwen/Qwen3-32B", (2, 4), (4,)),
    ("Qwen/Qwen3-30B-A3B", (1, 2), (1,)),
    ("Qwen/Qwen3-235B-A22B", (8,), (8,)),
    ("Qwen/Qwen3-8B", (1, 2), ()),
    ("mistralai/Mixtral-8x7B-v0.1", (2, 4), ()),
]
GPUS = ["H100-SXM-80GB", "H200-141GB", "B200-180GB", "A100-SXM-80GB", "L40S-48GB"]
GRID_GPUS = {"H100-SXM-80GB", "H200-141GB"}
SHAPES = [(2048, 512), (8192, 1024)]
BATCHES = [1, 8, 32, 64]
GROUPS = (("logits", ("logits",)), ("allreduce", ("_ar", "allreduce", "p2p", "alltoall", "dispatch", "combine")), ("moe", ("moe", "router")), ("attention", ("attention",)), ("gemm", ("gemm",)))


def _group(op: str) -> str:
    for name, keys in GROUPS:
        if any(k in op for k in keys):
            return name
    return "other"


def _fold(latency: dict, source: dict) -> tuple[dict, float]:
    groups: dict[str, float] = {}
    for op, ms in latency.items():
        groups[_group(op)] = groups.get(_group(op), 0.0) + ms
    total = sum(latency.values())
    silicon = sum(ms for op, ms in latency.items() if source.get(op) == "silicon")
    return {k: round(v, 5) for k, v in sorted(groups.items())}, round(silicon / total, 4) if total else 0.0


def _config(model_id: str) -> dict:
    import aiconfigurator_core

    path = Path(aiconfigurator_core.__file__).parent / "model_configs" / f"{model_id.replace('/', '--')}_config.json"
    config = json.loads(path.read_text())
    config["_name_or_path"] = model_id
    return config


def main() -> None:
    configs = {model_id: _config(model_id) for model_id, _, _ in MODELS}
    rows = []
    start = time.time()
    for model_id, tps, grid_tps in MODELS:
        config_json = json.dumps(configs[model_id], sort_keys=True)
        for gpu in GPUS:
            for tp in tps:
                try:
                    est = measured.estimator(config_json, gpu, tp)
                except measured.NotCovered as exc:
                    print(f"skip {model_id} {gpu} tp{tp}: {exc}", file=sys.stderr)
                    continue
                for isl, osl in SHAPES:
                    for batch in BATCHES:
                        try:
                            summary = est.run(isl, osl, batch)
                        except measured.NotCovered as exc:
                            print(f"skip {model_id} {gpu} tp{tp} {isl}/{osl} b{batch}: {exc}", file=sys.stderr)
                            continue
                        result = summary.get_result_dict()
                        prefill_ops, prefill_share = _fold(summary.get_context_latency_dict(), summary.get_context_source_dict())
                        decode_ops, decode_share = _fold(summary.get_generation_latency_dict(), summary.get_generation_source_dict())
                        rows.append(
                            {
                                "model": model_id,
                                "gpu": gpu,
                                "tp": tp,
                                "isl": isl,
                                "osl": osl,
                                "batch": batch,
                                "in_issue_grid": gpu in GRID_GPUS and tp in grid_tps,
                                "prefill_ms": round(float(result["ttft"]), 5),
                                "itl_ms": round(float(result["tpot"]), 6),
                                "oom": bool(summary.check_oom()),
                                "measured_share_prefill": prefill_share,
                                "measured_share_decode": decode_share,
                                "prefill_ops_ms": prefill_ops,
                                "decode_ops_ms_total": decode_ops,
                            }
                        )
        print(f"{model_id}: {len(rows)} rows, {time.time() - start:.0f} s", file=sys.stderr)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    payload = {
        "source": f"aiconfigurator-core {measured.VERSION}, backend vllm (database {', '.join(sorted({r['gpu'] for r in rows}))}), static mode, bf16 weights/K/V/attention",
        "generator": "scripts/gen_aic_latency_rows.py",
        "fields": {
            "prefill_ms": "TTFT of a static batch of `batch` prompts of `isl` tokens (no queue); batch 1 is one-prompt prefill",
            "itl_ms": "TPOT: mean decode step over `osl` tokens at `batch` sequences",
            "measured_share_*": "share of that phase's time from measured (silicon) rows, not AIConfigurator's fallbacks",
            "*_ops_ms": "per-op times folded into groups (decode: summed over all decode steps)",
            "oom": "AIConfigurator's own memory check says the batch does not fit",
        },
        "configs": configs,
        "rows": rows,
    }
    OUT.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {OUT} ({len(rows)} rows)", file=sys.stderr)


if __name__ == "__main__":
    main()
