"""Per-term residuals of :func:`planner.engines.vllm_memory.predict_memory` on the published vLLM
start-up logs (``$KVP_REFERENCE_DIR/vllm_startup_logs.json``, default ``../shared/reference``), and
the least-squares values of the constants in ``FITS`` on the logs each was fitted on::

    .venv/bin/python scripts/fit_vllm_memory.py

The same cases, inputs and tolerances are the tests in tests/test_vllm_memory.py.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run as a file from the repository root, as the docstring says

from planner import settings  # noqa: E402
from planner.units import GIB  # noqa: E402

REFERENCE = settings.kvp_reference_dir()

# Mistral-Small-3.2-24B-Instruct-2506's vision tower (its config.json's vision_config, Pixtral): the
# log's config file is the text-only 2501 preset, which has none
PIXTRAL = {
    "model_type": "mistral3",
    "vision_config": {"model_type": "pixtral", "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16, "head_dim": 64, "patch_size": 14, "image_size": 1540, "num_channels": 3},
    "spatial_merge_size": 2,
    "multimodal_projector_bias": False,
}
# The one log whose dummy sampler run took FlashInfer's path (14 bytes a logit, derived), not the sort
# (38): its "torch peak memory increase" of 2.12 GiB is below what the sort alone takes at 1,024
# requests x 131,072 vocabulary (4.75 GiB). vLLM 0.11.0 samples with FlashInfer whenever
# flashinfer.sampling imports (TopKTopPSampler.__init__; VLLM_USE_FLASHINFER_SAMPLER unset means on),
# as in the vllm-openai image the extract's runs use (this one names 0.11.0; from 0.11.1 FlashInfer's
# sampler is opt-in); the other nine fit the sort to 0.01 GiB.
SAMPLER = {"mistralai/Mistral-Small-3.2-24B-Instruct-2506": "flashinfer"}
# gpt-oss-120b's run used --gpu-memory-utilization 0.95, not the 0.9 the extract assumes (its
# summary row is the only record of that run: no per-run section, no "Desired GPU utilization"
# line). At 0.9 its own terms do not add up (71.26 - 64.38 - 7.38 - 0.13 = -0.63, and vLLM would
# have refused to start: "No available memory for the cache blocks"); at 0.95 they do to the
# printed digit (75.22 - 64.38 - 7.38 - 0.13 = 3.33), and the printed activation 7.38 is what the
# sort-based sampler derives for gpt-oss's vocabulary (201,088) and hidden size (2,880), the same as
# the 20b's, not a copy of it. The reference file keeps 0.9 and leaves the activation out; this
# applies the reading the printed terms support.
UTILIZATION_FROM_TERMS = {"openai/gpt-oss-120b": 0.95}
TERMS = (("weights_gib", "weights per GPU"), ("activation_gib", "profiling peak activations"), ("non_torch_gib", "non-torch memory"))
# what vLLM's "torch peak memory increase" holds: the dummy forward / sampler peak and the dummy
# multimodal encoder outputs cached through it
ACTIVATION_TERMS = ("profiling peak activations", "multimodal encoder cache (profiling)")


def term_gib(budget, term: str) -> float:
    """GiB of a printed term as the budget predicts it (activation: every term vLLM's peak holds)."""
    names = ACTIVATION_TERMS if term == "profiling peak activations" else (term,)
    return sum(t.bytes for t in budget.terms if t.name in names) / GIB


def load_cases() -> list[dict]:
    """The logs, each with a ``name``: model and TP (and max_model_len where those repeat)."""
    cases = json.loads((REFERENCE / "vllm_startup_logs.json").read_text())["cases"]
    for case in cases:
        case["name"] = f"{case['model'].split('/')[-1]} TP{case['tp']}"
        if case["model"] in UTILIZATION_FROM_TERMS:
            printed = case["printed"]
            case["gpu_memory_utilization"] = UTILIZATION_FROM_TERMS[case["model"]]
            printed["requested_gib"] = round(case["total_gpu_memory_gib"] * case["gpu_memory_utilization"], 2)
            if printed.get("activation_gib") is None:
                printed["activation_gib"] = printed.get("activation_gib_as_printed")
    repeated = {c["name"] for c in cases if sum(d["name"] == c["name"] for d in cases) > 1}
    for case in cases:
        if case["name"] in repeated:
            case["name"] += f" len {case['max_model_len']}"
    return cases


def case_config(case: dict) -> dict:
    base = REFERENCE.parent if case["config_file"].startswith("reference/") else ROOT
    config = json.loads((base / case["config_file"]).read_text())
    config.update(case.get("config_overrides") or {})
    if case["model"].startswith("mistralai/Mistral-Small-3.2"):
        config = {**PIXTRAL, "text_config": {**config}, "architectures": ["Mistral3ForConditionalGeneration"]}
    return config


def predict(case: dict):
    from planner.engines.vllm_memory import predict_memory
    from planner.hardware import get_device
    from planner.plan import prepare_model

    config = case_config(case)
    model = prepare_model(config)
    return predict_memory(
        config, model.geometry, get_device(case["gpu_catalog"]), gpu_memory_utilization=case["gpu_memory_utilization"], tp=case["tp"], max_model_len=case["max_model_len"],
        release=".".join(case["vllm_version"].split(".")[:2]), entry_point=case["entrypoint"], sampler=SAMPLER.get(case["model"], "auto"),
    )  # fmt: skip


def implied_activation(case: dict, budget) -> float:
    """GiB: the log's printed activation, or (where it is left out as inconsistent) what its own
    total implies: requested - weights - non-torch - available, with the predicted weights."""
    printed = case["printed"]
    if printed.get("activation_gib") is not None:
        return printed["activation_gib"]
    return printed["requested_gib"] - budget.term("weights per GPU").bytes / GIB - budget.term("non-torch memory").bytes / GIB - printed["available_kv_gib"]


def refit() -> None:
    """Least-squares (means) of the fitted constants on their logs, from the derived parts."""
    from planner.engines import vllm_memory as vm

    cases = {c["name"]: c for c in load_cases()}
    for key in ("non_torch_tp1", "non_torch_tp2"):
        fit = vm.FITS[key]
        print(f"{key}: {statistics.mean(cases[n]['printed']['non_torch_gib'] for n in fit.fitted_on):.4f} GiB (in use: {fit.value})")
    fit = vm.FITS["activation_rest"]
    rests = [implied_activation(cases[n], b) - (b.term("profiling peak activations").bytes / GIB - fit.value) for n in fit.fitted_on for b in [predict(cases[n])]]
    print(f"activation_rest: {statistics.mean(rests):.4f} GiB (in use: {fit.value})")


def main() -> int:
    from planner.engines.vllm_memory import FITS

    refit()
    held = {n for f in FITS.values() for n in f.held_out}
    rows = []
    for case in load_cases():
        budget = predict(case)
        printed = case["printed"]
        row = {"case": case["name"] + (" (held out)" if case["name"] in held else "")}
        for key, term in TERMS:
            if printed.get(key) is not None or key == "activation_gib":
                value = printed[key] if printed.get(key) is not None else implied_activation(case, budget)
                row[key] = value - term_gib(budget, term)
        row["available_kv_gib"] = printed["available_kv_gib"] - budget.available_kv_bytes / GIB
        row["refusal"] = budget.refusal
        rows.append(row)
        print(f"{row['case']:<48} " + " ".join(f"{k[:-4]} {row[k]:+.3f}" for k in (*(k for k, _ in TERMS), "available_kv_gib") if k in row) + (f"  refused: {budget.refusal[:40]}" if budget.refusal else ""))
    for key in (*(k for k, _ in TERMS), "available_kv_gib"):
        errors = [abs(r[key]) for r in rows if key in r]
        print(f"{key:<18} median |error| {statistics.median(errors):.3f} GiB, worst {max(errors):.3f} GiB over {len(errors)} logs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
