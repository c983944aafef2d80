"""Plans under runtime sglang: SGLang's budget, token pool and admission ceiling in the plan.

Expected numbers: SGLang 0.5.23's own resolved defaults and pool cells from the conformance
fixture (``tests/data/sglang_engine_cases.json``, written by ``scripts/gen_sglang_engine_cases.py``
with SGLang's code), and hand arithmetic written beside each test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model

DATA = json.loads((Path(__file__).parent / "data" / "sglang_engine_cases.json").read_text())
HOLDOUT = json.loads((Path(__file__).parent / "data" / "sglang_engine_cases_holdout.json").read_text())
GIB = 1 << 30
H100_MIB = 81559  # nvidia-smi memory.total (planner/engines/sglang/gpus.py)


def _model(source: str, data: dict = DATA):
    conf = data["configs"][source]
    return prepare_model(conf["config"], quantization=conf.get("quantization"))


def test_llama8b_budget_and_token_pool_by_hand():
    # H100: 81,559 MiB = 79.6475 GiB; less the 1.1 GiB CUDA context = 78.5475 GiB before weights.
    # Weights 16,060,522,496 B (Llama-3.1-8B bf16) = 14.9575 GiB -> 63.5900 GiB after.
    # rest = 63.5900 - 78.5475 x (1 - 0.835) = 50.6297 GiB; cell 8 x 128 x 2 x 32 x 2 B = 131,072 B
    # -> 50.6297 x 2^30 / 131,072 = 414,757 tokens. A request of 2,048 + 512 reserved tokens:
    # 414,757 // 2,560 = 162 requests (max_running_requests 2,048 does not bind).
    plan = compute_plan(make_inputs(runtime="sglang"), _model("reference/meta-llama__Llama-3.1-8B.json"))
    v = plan.sglang
    assert v.capacity.mem_fraction_static == 0.835 and v.capacity.cell_bytes == 131072
    assert v.memory.pre_load_free_gib == pytest.approx(H100_MIB / 1024 - 1.1)
    assert v.capacity.max_total_num_tokens == 414757
    assert v.tokens_per_request == plan.context.reserved_total_tokens == 2560
    assert (v.max_sequences_per_replica, v.binding) == (162, "token pool")
    assert plan.kv_cache.maximum_sequences_by_memory == 162
    cap = plan.capacity
    assert cap.usable_bytes == int(v.memory.pre_load_free_gib * 0.835 * GIB)
    assert cap.model_resident_bytes == 16060522496
    assert cap.available_for_kv_bytes == v.capacity.available_kv_bytes
    assert cap.pool_kv_tokens == 414757  # SGLang's pool, not the planner's budget / bytes a token
    assert v.capacity.log_lines[-1] == "max_total_num_tokens=414757, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, context_len=131072"
    assert plan.summary()["kv_cache"]["sglang"]["capacity"]["max_total_num_tokens"] == 414757


def _default_cases(data: dict = DATA):
    """One sized fixture case per (config, GPU, TP, KV dtype) run at SGLang's defaults."""
    seen, out = set(), []
    for c in data["cases"]:
        if "refusal" in c or any(k in c for k in ("context_length", "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "page_size")):
            continue
        if c["kv_cache_dtype"] not in ("auto", "fp8_e4m3"):
            continue
        key = (c["source"], c["gpu"], c["tp"], c["kv_cache_dtype"])
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


@pytest.mark.parametrize(("data", "least"), [(DATA, 200), (HOLDOUT, 45)], ids=["visible", "holdout"])
def test_plan_resolves_defaults_and_cells_as_sglang_does(data, least):
    """The plan's SGLang view resolves every server default and the pool's cell as SGLang 0.5.23
    did for the same model, GPU, TP and KV dtype (the memory state differs; these do not depend on it)."""
    checked = 0
    for c in _default_cases(data):
        try:
            inputs = make_inputs(runtime="sglang", gpu=c["gpu"], tp=c["tp"], gpu_count=c["tp"], kv_dtype="auto" if c["kv_cache_dtype"] == "auto" else "fp8", input_tokens=1024, output_tokens=128)
            plan = compute_plan(inputs, _model(c["source"], data))
        except PlannerError:
            continue  # a GPU outside the plan's catalog, or the plan's own memory state (the whole checkpoint on this card) refused
        v, d = plan.sglang, c["defaults"]
        assert (v.capacity.mem_fraction_static, v.capacity.chunked_prefill_size, v.capacity.max_prefill_tokens, v.capacity.page_size, v.capacity.cuda_graph_max_bs, v.capacity.attention_backend) == (
            d["mem_fraction_static"], d["chunked_prefill_size"], d["max_prefill_tokens"], d["page_size"], d["cuda_graph_max_bs"], d["attention_backend"]
        ), c["source"]
        assert ("torch." + v.capacity.kv_dtype, v.capacity.kv_cache_dtype, v.capacity.context_len) == (d["kv_cache_torch_dtype"], d["kv_cache_dtype"], d["context_len"]), c["source"]
        assert v.capacity.cell_bytes == c["internals"].get("cell_size", c["internals"].get("bytes_per_full_token")), c["source"]
        assert v.capacity.max_total_num_tokens % v.capacity.page_size == 0
        checked += 1
    assert checked >= least  # visible: 206 of 301 start; held-out: 49 of 91 (the rest refused on their card or off the catalog)


def test_hybrid_swa_pool_limits_by_window():
    # gpt-oss-20b on one H100: the SWA pool holds 0.8 x the full pool's tokens; a request of
    # 2,560 tokens holds min(2,560, window 128) = 128 SWA tokens, so the full pool binds:
    # 1,280,887 // 2,560 = 500 requests.
    plan = compute_plan(make_inputs(runtime="sglang"), _model("reference/openai__gpt-oss-20b.json"))
    v = plan.sglang
    assert v.swa_tokens_per_request == 128
    assert v.max_sequences_per_replica == v.capacity.max_total_num_tokens // 2560 == 500
    assert (v.capacity.max_total_num_tokens, v.capacity.swa_max_total_num_tokens) == (1280887, int(0.8 * 1280887))  # 0.8 x the full pool (SWA ratio)
    assert v.capacity.log_lines[0].startswith("Use sliding window memory pool.")


def test_mamba_hybrid_binds_on_running_requests():
    # Nemotron-3 Nano on one H100: the Mamba pool holds max_mamba_cache_size slots and SGLang runs
    # at most slots // 5 requests with the overlap scheduler (resolve_max_num_reqs): 73 // 5 = 14.
    plan = compute_plan(make_inputs(runtime="sglang"), _model("reference/nvidia__NVIDIA-Nemotron-3-Nano-30B-A3B-BF16.json"))
    v = plan.sglang
    assert v.capacity.max_running_requests == v.capacity.max_mamba_cache_size // 5
    assert (v.binding, v.max_sequences_per_replica) == ("max_running_requests", v.capacity.max_running_requests)
    assert plan.kv_cache.maximum_sequences_by_memory == v.capacity.max_running_requests
    assert plan.capacity.workspace_bytes > 0  # the Mamba state pool comes out of the static fraction


def test_settings_reach_the_launch_command_and_pools():
    model = _model("reference/meta-llama__Llama-3.1-8B.json")
    plan = compute_plan(make_inputs(runtime="sglang", mem_fraction_static=0.8, chunked_prefill_size=4096, page_size=16, max_num_seqs=64, max_context=32768, kv_dtype="fp8", tp=2, gpu_count=4), model)
    v = plan.sglang
    # the reference config carries no _name_or_path: the command names MODEL
    assert v.command == "python -m sglang.launch_server --model-path MODEL --tp-size 2 --context-length 32768 --mem-fraction-static 0.8 --kv-cache-dtype fp8_e4m3 --chunked-prefill-size 4096 --max-running-requests 64 --page-size 16"
    assert (v.capacity.mem_fraction_static, v.capacity.chunked_prefill_size, v.capacity.page_size, v.capacity.context_len, v.capacity.kv_dtype) == (0.8, 4096, 16, 32768, "float8_e4m3fn")
    assert v.capacity.max_running_requests == 64 and v.max_sequences_per_replica == 64 and v.binding == "max_running_requests"
    # the request limit binds, not memory (issue 22: the headline named memory): memory's own
    # figure is the token pool's, max_total_num_tokens // pool tokens a request, on two replicas
    assert plan.kv_cache.maximum_sequences_by_memory == 2 * (v.capacity.max_total_num_tokens // v.tokens_per_request) > 128
    assert (plan.kv_cache.admissible_sequences, plan.kv_cache.binding_constraint) == (128, "runtime")
    assert plan.batching.tokens == 4096  # the step's prefill is SGLang's chunked_prefill_size
    assert v.capacity.max_total_num_tokens % 16 == 0


def test_refusals_are_one_line_naming_the_control():
    llama70 = _model("reference/meta-llama__Llama-3.1-70B.json")
    with pytest.raises(PlannerError) as info:  # 141 GB of bf16 weights on one 80 GB card
        compute_plan(make_inputs(runtime="sglang"), llama70)
    assert "SGLang 0.5.23 refuses to start" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(PlannerError) as info:
        compute_plan(make_inputs(runtime="sglang", kv_dtype="int8"), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert info.value.field == "kv_dtype"
    with pytest.raises(PlannerError) as info:
        compute_plan(make_inputs(runtime="sglang", device_gib=64.0), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert info.value.field == "device_gib"
    with pytest.raises(PlannerError) as info:  # Llama-3.1-8B's 131,072 tokens: SGLang refuses a longer context
        compute_plan(make_inputs(runtime="sglang", max_context=262144), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert info.value.field == "max_context" and "context_length" in info.value.reason
    with pytest.raises(PlannerError) as info:
        make_inputs(runtime="sglang", mem_fraction_static=1.2)
    assert info.value.field == "mem_fraction_static"


def test_other_runtimes_carry_no_sglang_section():
    plan = compute_plan(make_inputs(), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert plan.sglang is None and "sglang" not in plan.summary()["kv_cache"]
    assert "mem_fraction_static" not in plan.summary()["inputs"]


def test_defaults_take_sglangs_step_and_request_limits():
    # issue 22: the latency model ran SGLang plans at the planner's 8,192-token step and no running
    # limit; SGLang 0.5.23 resolves chunked_prefill_size 8,192 for an H200 (memory_hook's tier of
    # cards from 90 to 160 GiB; 16,384 above) and its max_running_requests, and the plan runs at those
    plan = compute_plan(make_inputs(runtime="sglang", gpu="H200-141GB"), _model("reference/meta-llama__Llama-3.1-8B.json"))
    c = plan.sglang.capacity
    assert (plan.batching.tokens, plan.batching.seqs) == (c.chunked_prefill_size, c.max_running_requests) and c.chunked_prefill_size == 8192
    assert "SGLang's chunked_prefill_size 8,192 tokens a step" in plan.batching.source
    b200 = compute_plan(make_inputs(runtime="sglang", gpu="B200-180GB"), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert b200.batching.tokens == 16384
    given = compute_plan(make_inputs(runtime="sglang", gpu="H200-141GB", max_batched_tokens=2048), _model("reference/meta-llama__Llama-3.1-8B.json"))
    assert given.batching.tokens == 2048
