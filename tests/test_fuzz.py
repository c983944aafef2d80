"""Property-based fuzzing of every way in (issue 15): configs, CLI flags, share links, plan files.

Each property says: the input is refused with one line naming a field (exit 2 from the CLI, a
:class:`PlannerError` from the library), or the result is valid strict JSON whose numbers are
finite and inside the documented ranges (planner/limits.py). Never a traceback, never
``Infinity``/``NaN``. Examples are derandomized and capped so the module runs in well under 60 s
on two cores (about 20 s measured, 200 examples each); the simulator's trace fuzzing belongs to its own tests.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planner.cli import main
from planner.errors import PlannerError
from planner.limits import MAX_KV_BYTES_PER_TOKEN
from planner.plan import compute_plan, prepare_model
from planner.share import INPUT_KEYS, REF_KEYS, decode_query, load_plan_file

ROOT = Path(__file__).resolve().parents[1]
PRESETS = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "model_configs").glob("*.json"))}
SMALL_PRESETS = ["llama-3.1-8b", "qwen3-30b-a3b", "deepseek-v2-lite", "gemma-2-9b", "jamba-v0.1", "gpt-oss-20b", "llama-3.2-11b-vision"]

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))

HOSTILE_NUMBERS = st.sampled_from([
    float("inf"), float("-inf"), float("nan"), 1e308, -1e308, 5e-324, 1e-300, 0, -1, 0.5, 1.5, 10**30, -(10**30), 2**63, 10**4000,
    True, False, None, "4096", "", [], {}, [1, 2], 1 << 20, (1 << 20) + 1, 10_001, 65_537, 4096, 3,
])

# fields the planner reads from configs (geometry, weights, MoE, Mamba, linear attention)
CONFIG_KEYS = [
    "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "hidden_size", "head_dim", "intermediate_size",
    "vocab_size", "max_position_embeddings", "sliding_window", "sliding_window_pattern", "attention_chunk_size",
    "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim", "q_lora_rank", "num_experts", "num_local_experts",
    "n_routed_experts", "num_experts_per_tok", "n_shared_experts", "moe_intermediate_size", "shared_expert_intermediate_size",
    "ffn_hidden_size", "first_k_dense_replace", "decoder_sparse_step", "moe_layer_freq", "mamba_d_state", "mamba_d_conv",
    "mamba_expand", "mamba_num_heads", "mamba_head_dim", "n_groups", "linear_num_key_heads", "linear_num_value_heads",
    "linear_key_head_dim", "linear_value_head_dim", "linear_conv_kernel_dim", "full_attention_interval", "num_kv_shared_layers",
    "max_window_layers", "attn_layer_period", "attn_layer_offset", "tie_word_embeddings", "layer_types", "quantization_config",
]


def _finite_json(text: str) -> object:
    """Strict JSON: ``Infinity``/``NaN`` raise instead of parsing."""
    def refuse(constant: str) -> None:
        raise AssertionError(f"{constant} in JSON output")

    return json.loads(text, parse_constant=refuse)


def _numbers(obj: object):
    if isinstance(obj, bool):
        return
    if isinstance(obj, (int, float)):
        yield obj
    elif isinstance(obj, dict):
        for value in obj.values():
            yield from _numbers(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _numbers(value)


def _assert_valid_plan(plan) -> None:
    summary = plan.summary()
    text = json.dumps(summary, default=str, allow_nan=False)  # raises on a non-finite number
    assert all(math.isfinite(x) for x in _numbers(_finite_json(text)))
    assert 0 < plan.kv_cache.bytes_per_token_per_sequence <= MAX_KV_BYTES_PER_TOKEN or plan.kv_cache.bytes_per_token_per_sequence == 0
    assert plan.kv_cache.maximum_sequences_by_memory >= 0


def _run_cli(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def _assert_cli_contract(code: int, out: str, err: str) -> None:
    if code == 0:
        assert all(math.isfinite(x) for x in _numbers(_finite_json(out)))
    else:
        assert code == 2, (code, err)
        assert out == "" and err.startswith("error: ") and err.count("\n") == 1, err
        assert len(err) < 1000  # values are shown shortened


# --------------------------------------------------------------------------- configs


@FUZZ
@given(preset=st.sampled_from(SMALL_PRESETS), edits=st.lists(st.tuples(st.sampled_from(CONFIG_KEYS), HOSTILE_NUMBERS), min_size=1, max_size=3))
def test_mutated_real_configs_are_refused_or_planned_finitely(preset, edits):
    config = json.loads(json.dumps(PRESETS[preset]))
    target = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    for key, value in edits:
        target[key] = value
    try:
        model = prepare_model(config)
        plan = compute_plan(_inputs_for(model), model)
    except PlannerError as exc:
        assert exc.field and "\n" not in str(exc) and len(str(exc)) < 1000
        return
    _assert_valid_plan(plan)


def _inputs_for(model):
    from planner.plan import make_inputs

    limit = model.geometry.max_position_embeddings or 4096
    return make_inputs(input_tokens=max(1, min(2048, limit // 2)), output_tokens=max(1, min(512, limit // 4)), gpu_count=8, tp=8 if model.geometry.num_attention_heads % 8 == 0 else 1)


@FUZZ
@given(edits=st.lists(st.tuples(st.sampled_from(CONFIG_KEYS), HOSTILE_NUMBERS), min_size=1, max_size=2))
def test_mutated_configs_through_the_cli(tmp_path_factory, edits):
    config = json.loads(json.dumps(PRESETS["qwen3-30b-a3b"]))
    for key, value in edits:
        config[key] = value
    path = tmp_path_factory.mktemp("cfg") / "config.json"
    path.write_text(json.dumps(config, allow_nan=True))
    _assert_cli_contract(*_run_cli(["plan", "--config", str(path), "--input-tokens", "1000", "--output-tokens", "200", "--json"]))


# --------------------------------------------------------------------------- flags

PLAN_FLAGS = ["--sequences", "--tp", "--gpu-count", "--input-tokens", "--output-tokens", "--max-context", "--block-tokens", "--headroom-bp",
              "--mfu", "--mbu", "--prefill-ms", "--first-decode-ms", "--remaining-decode-ms", "--queue-ms", "--device-gib",
              "--device-bandwidth-gb-s", "--device-bf16-tflops", "--workspace-gib", "--gpu-hour-price", "--itl-slo-ms", "--prefix-hit-rate",
              "--shared-prefix-tokens", "--tenants", "--generated-tokens", "--model-resident-gib"]
FLAG_TEXT = st.one_of(
    st.sampled_from(["5e-324", "1e-300", "1e308", "inf", "-inf", "nan", "0", "-1", "1_000", "\u0663", " 5 ", "", "0x10", "9" * 5001,
                     "1e-3", "0.001", "1", "8", "16", "1000000000", "4096", "0.5", "1e9", "+3", "3.", ".5"]),
    st.from_regex(r"[+-]?[0-9]{1,25}(\.[0-9]{0,5})?(e[+-]?[0-9]{1,3})?", fullmatch=True),
    st.text(max_size=12),
)


@FUZZ
@given(flags=st.lists(st.tuples(st.sampled_from(PLAN_FLAGS), FLAG_TEXT), min_size=1, max_size=4))
def test_numeric_flags_exit_2_in_one_line_or_print_finite_json(flags):
    argv = ["plan", "--example", "--json"]
    for flag, value in flags:
        argv.append(f"{flag}={value}")
    _assert_cli_contract(*_run_cli(argv))


# --------------------------------------------------------------------------- links and plan files

LINK_VALUE = st.one_of(
    st.sampled_from(["5e-324", "1e308", "inf", "nan", "-1", "0", "9" * 400, "1_0", "\u0663", "[x](https://evil.example)", "![i](https://evil.example/i.png)",
                     "<img src=x>", "llama-3.1-8b", "example", "preset", "hub", "upload", "bf16", "paged", "H100-SXM-80GB", "a" * 64]),
    st.text(max_size=20),
)


@FUZZ
@given(params=st.dictionaries(st.sampled_from(["v", "m", *REF_KEYS.values(), *INPUT_KEYS.values(), "cfg", "zz"]), LINK_VALUE, max_size=8))
def test_links_never_raise_and_plan_finitely_or_refuse(params):
    state = decode_query({"v": "3", "m": "preset", "n": "llama-3.1-8b", **params})  # a real link, then tampered
    for warning in state.warnings:
        assert "\n" not in warning and len(warning) < 600
    if state.ref is None or state.ref.kind not in ("preset", "example"):
        return
    from planner.source import resolve

    try:
        plan = compute_plan(state.inputs, resolve(state.ref))
    except PlannerError as exc:
        assert exc.field
        return
    _assert_valid_plan(plan)


PLAN_DOC = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10), HOSTILE_NUMBERS),
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(st.sampled_from([*INPUT_KEYS, *REF_KEYS, "x"]), children, max_size=4)),
    max_leaves=12,
)


@FUZZ
@given(inputs=st.dictionaries(st.sampled_from(list(INPUT_KEYS)), PLAN_DOC, max_size=6), model=st.one_of(PLAN_DOC, st.just({"kind": "example"}), st.just({"kind": "preset", "name": "llama-3.1-8b"})))
def test_plan_files_load_or_refuse_in_one_line(inputs, model):
    doc = {"schema": "kv-capacity-plan", "version": 1, "model": model, "inputs": inputs}
    try:
        text = json.dumps(doc, allow_nan=True)
    except ValueError:  # 10**4000 cannot be written by json.dumps: write the digits ourselves
        text = json.dumps({**doc, "inputs": {}})[:-2] + '"sequences": ' + "9" * 4400 + "}}"
    try:
        state = load_plan_file(text)
    except PlannerError as exc:
        assert "\n" not in str(exc) and len(str(exc)) < 600
        return
    if state.ref is not None and state.ref.kind in ("preset", "example"):
        from planner.source import resolve

        try:
            plan = compute_plan(state.inputs, resolve(state.ref))
        except PlannerError:
            return
        _assert_valid_plan(plan)
