"""One explanation of a plan (planner/explain.py): no line says a term is missing that the latency
or memory model computed for this plan, a term taken out of the model shows up as not modelled,
and the Plan page, the PDF and the CLI print the same explanation.

The terms a plan computed are read here from the models themselves (the step terms of the
plan's decode step and prefill, the Roofline's fixed per-layer cost, the served-latency model's
parts, the memory budget's terms), not from planner.explain, so a phenomenon table that
disagrees with the model fails."""

from __future__ import annotations

import re

import pytest

from planner import explain, latency
from planner import plan as plan_module
from planner.cli import main
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.presets import load_preset

# what a "not modelled" line would say if it claimed the term were missing
CLAIMS = {
    "allreduce": r"all-reduce",
    "alltoall": r"all-to-all|dispatch and combine",
    "fixed_per_layer": r"launch",
    "prefill_queue": r"prefill queue|wait of a prompt|behind the others",
    "mixed_prefill_decode_steps": r"interference|share steps with decodes",
    "block_rounding": r"part of a block|block rounding",
    "recurrent_state": r"mamba|recurrent",
    "encoder_kv": r"^encoder k/v:",
    "quantization_scales": r"scale and zero-point",
}

# (preset, plan inputs, terms the plan must compute, so the check below is not empty)
CASES = (
    ("llama-3.1-70b", {"gpu": "H100-SXM-80GB", "tp": 4, "gpu_count": 4, "sequences": 16}, {"allreduce", "fixed_per_layer", "block_rounding"}),
    ("qwen3-30b-a3b", {"gpu": "H100-SXM-80GB", "tp": 4, "gpu_count": 4, "ep": 4, "sequences": 8}, {"allreduce", "moe"}),
    ("qwen3-30b-a3b", {"gpu": "H100-SXM-80GB", "tp": 1, "dp": 4, "gpu_count": 4, "ep": 4, "sequences": 8}, {"alltoall", "moe"}),
    ("jamba-v0.1", {"gpu": "H100-SXM-80GB", "tp": 2, "gpu_count": 2, "reservation": "paged"}, {"recurrent_state", "block_rounding"}),
    ("llama-3.2-11b-vision", {"gpu": "H100-SXM-80GB", "encoder_tokens": 1601}, {"encoder_kv"}),
    ("llama-3.1-8b", {"gpu": "A100-SXM-80GB", "kv_dtype": "int8", "runtime": "transformers"}, {"quantization_scales"}),
    ("gemma-3-27b-it", {"gpu": "H200-141GB", "shared_prefix_tokens": 1024, "prefix_hit_rate": 0.5, "tenants": 2}, {"prefix_sharing", "block_rounding"}),
)


def computed_terms(plan) -> set[str]:
    """Every term the plan's models computed, read from the models (not from planner.explain)."""
    terms = set(plan.roofline.decode_terms_ms) | set(plan.roofline.prefill_terms_ms) | set(latency.SERVED_TERMS) | set(plan.memory_terms())
    if plan.roof.fixed_s() > 0:
        terms.add("fixed_per_layer")
    return terms


def missing_lines(plan) -> list[str]:
    return [f"{n.title}: {n.text}".lower() for n in explain.not_modelled(plan)]


@pytest.fixture
def fresh_rooflines():
    """Rooflines are memoised by their fields; a test that changes the step model builds its own and leaves none behind."""
    plan_module._ROOFLINES.clear()
    yield
    plan_module._ROOFLINES.clear()


@pytest.mark.parametrize(("preset", "values", "expected"), CASES, ids=[c[0] for c in CASES])
def test_no_line_says_a_computed_term_is_missing(preset, values, expected):
    plan = compute_plan(make_inputs(**values), prepare_model(load_preset(preset)))
    terms = computed_terms(plan)
    assert expected <= terms
    for term in terms & CLAIMS.keys():
        said = [line for line in missing_lines(plan) if re.search(CLAIMS[term], line)]
        assert not said, (term, said)


def test_tensor_parallel_all_reduce_is_modelled_at_tp_4():
    # the PDF once listed "interconnect time of tensor-parallel all-reduces" as not modelled; at TP 4
    # the step model times 2 all-reduces a layer (latency.Roofline), so no line may say so
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", tp=4, gpu_count=4), prepare_model(load_preset("llama-3.1-70b")))
    assert plan.roofline.decode_terms_ms["allreduce"] > 0
    assert not [line for line in missing_lines(plan) if "all-reduce" in line]
    latency_note = next(n for n in explain.assumptions(plan) if n.title == "Latency")
    assert "all-reduce" in latency_note.text and "kernel launch" in latency_note.text


def test_a_term_taken_out_of_the_step_model_is_listed_as_not_modelled(monkeypatch, fresh_rooflines):
    model = prepare_model(load_preset("llama-3.1-70b"))
    inputs = make_inputs(gpu="H100-SXM-80GB", tp=4, gpu_count=4)
    init = latency._StepConstants.__init__

    def without_allreduce(self, roof):
        init(self, roof)
        self.allreduce = False  # the step model stops timing the all-reduce

    monkeypatch.setattr(latency._StepConstants, "__init__", without_allreduce)
    plan = compute_plan(inputs, model)
    assert "allreduce" not in plan.roofline.decode_terms_ms
    assert "Tensor-parallel all-reduce" in [n.title for n in explain.not_modelled(plan)]
    assert "all-reduce" not in next(n for n in explain.assumptions(plan) if n.title == "Latency").text


def test_without_fixed_costs_or_the_served_model_their_lines_appear(monkeypatch, fresh_rooflines):
    model = prepare_model(load_preset("llama-3.1-8b"))
    assert "Kernel launches" not in [n.title for n in explain.not_modelled(compute_plan(make_inputs(), model))]
    monkeypatch.setattr(latency, "FITTED", latency.FLAT)  # the classic roofline: no fixed cost per layer
    monkeypatch.setattr(latency, "SERVED_TERMS", frozenset())  # as if the plan timed no queue and no mixed steps
    plan_module._ROOFLINES.clear()
    titles = [n.title for n in explain.not_modelled(compute_plan(make_inputs(), model))]
    assert {"Kernel launches", "Prefill queue", "Prefill/decode interference"} <= set(titles)


def test_phenomena_that_do_not_arise_are_not_listed():
    plan = compute_plan(make_inputs(), prepare_model(load_preset("llama-3.1-8b")))  # TP 1, dense, no prefix
    titles = {n.title for n in explain.not_modelled(plan)}
    assert not titles & {"Tensor-parallel all-reduce", "Expert-parallel all-to-all", "Prefix-cache eviction", "Recurrent state", "Pipeline parallelism", "Speculative decoding"}
    assert {"Allocator rounding and fragmentation"} <= titles  # what the models truly leave out
    # the engine's host work (the step model's runtime term) and the API server (the fitted
    # preprocessing) are modelled since issue 21's serving fit: neither is listed
    assert "runtime" in plan.roofline.decode_terms_ms and not titles & {"Engine CPU time", "API server"}
    # runtime vllm budgets vLLM's start-up terms (profiling peak, non-torch, graphs); transformers' plan does not
    assert not titles & {"CUDA graphs", "Activations", "Runtime buffers"}
    other = {n.title for n in explain.not_modelled(compute_plan(make_inputs(runtime="transformers"), prepare_model(load_preset("llama-3.1-8b"))))}
    assert {"CUDA graphs", "Activations", "Runtime buffers", "LoRA adapters"} <= other


def test_cli_prints_the_same_explanation(capsys):
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", tp=4, gpu_count=4, gpu_hour_price=3.0), prepare_model(load_preset("llama-3.1-70b")))
    assert main(["plan", "--preset", "llama-3.1-70b", "--gpu", "H100-SXM-80GB", "--tp", "4", "--gpu-hour-price", "3", "--explain"]) == 0
    out = capsys.readouterr().out
    e = explain.explain(plan)
    assert out == "\n".join(e.summary) + "\n" + e.text() + "\n"
    assert all(line in out for group in e.steps for line in group.lines)
    assert "Not modelled" in out and "all-reduce:" not in out.split("Not modelled")[1]


def test_pdf_prints_the_same_explanation(tmp_path):
    from planner.report import build_pdf
    from planner.source import preset_ref
    from tests.test_report import WHEN, pdftotext

    ref, model = preset_ref("llama-3.1-70b")
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", tp=4, gpu_count=4), model)
    path = tmp_path / "tp4.pdf"
    path.write_bytes(build_pdf(plan, ref, None, now=WHEN))
    text = " ".join(pdftotext(path).split())
    tail = text.split("Not modelled")[-1]
    for note in explain.not_modelled(plan):
        assert f"{note.title}:" in tail
    assert "all-reduce" not in tail and "interference" not in tail and "kernel-launch" not in tail
    for note in explain.assumptions(plan):
        assert f"{note.title}:" in text
