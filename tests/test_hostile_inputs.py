"""Hostile input, round three (issue 24): one test per reproducer, and sweeps for each class.

* text: every CLI command in text mode, on a config whose model_type, _name_or_path and
  architectures hold lone surrogates ("\\ud800"), writes through a strict UTF-8 stream;
* numbers: every numeric flag of every command refuses an absurd value in one line (the table in
  planner/limits.py, or the plan inputs' own ranges), and count flags that multiply work are capped;
* configs no engine could load, refused with the field and why;
* digits: one ASCII-digit reader on links, traces, the compare columns and the Size page.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import time
from pathlib import Path

import pytest

from planner.cli import build_parser, main
from planner.compare import decode_columns
from planner.errors import PlannerError
from planner.limits import BOUNDS, MAX_CAPACITY_TOP, parse_number_text, safe_text, safe_tree
from planner.plan import PlanInputs, prepare_model

ROOT = Path(__file__).resolve().parents[1]
LLAMA = json.loads((ROOT / "model_configs" / "llama-3.1-8b.json").read_text())


class _Strict(io.TextIOWrapper):
    """A UTF-8 text stream with errors="strict", as a terminal or a pipe is: a lone surrogate raises."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), encoding="utf-8", errors="strict", write_through=True)

    def text(self) -> str:
        return self.buffer.getvalue().decode("utf-8")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = _Strict(), _Strict()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.text(), err.text()


# --------------------------------------------------------------------------- text


@pytest.fixture(scope="module")
def surrogate_config(tmp_path_factory) -> Path:
    config = dict(LLAMA, model_type="llama\ud800", _name_or_path="org/x\ud800y", architectures=["Llama\udc00ForCausalLM"])
    path = tmp_path_factory.mktemp("sur") / "config\udcff.json"  # a file name no UTF-8 decoder gave (argv's surrogateescape)
    path.write_text(json.dumps(config))  # ensure_ascii: the file holds the escapes "\ud800", as a hostile upload would
    return path


def test_safe_text_and_tree_replace_lone_surrogates_only():
    assert safe_text("a\ud800b\udfff") == "a\ufffdb\ufffd"
    assert safe_text("\U0001f600 ok") == "\U0001f600 ok"  # a real pair is one character in Python: kept
    assert safe_tree({"k\ud800": ["v\udc00", 3, None]}) == {"k\ufffd": ["v\ufffd", 3, None]}


@pytest.mark.parametrize("argv", [
    ["inspect"], ["inspect", "--json"], ["plan"], ["plan", "--json"], ["simulate", "--requests", "20"], ["size", "--users", "10", "--gpus", "H100-SXM-80GB"],
    ["engine", "--gpu", "H100-SXM-80GB"], ["engine", "--available-kv-gib", "20", "--json"], ["report", "--out", "{tmp}/r.pdf"],
], ids=lambda a: " ".join(a[:2]))
def test_every_command_in_text_mode_survives_lone_surrogates(surrogate_config, argv, tmp_path):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, out, err = _run([argv[0], "--config", str(surrogate_config), *argv[1:]])
    assert code == 0, err
    if argv[0] in ("inspect", "engine"):
        assert "\ufffd" in out or "\\ufffd" in out  # the names are shown, with U+FFFD for the surrogate
    if argv[0] == "report":
        assert (tmp_path / "r.pdf").read_bytes().startswith(b"%PDF")


def test_plan_file_and_pasted_text_with_surrogates_are_read():
    from planner.configio import parse_config_text
    from planner.share import load_plan_file

    assert parse_config_text('{"_name_or_path": "a\ud800"}')["_name_or_path"] == "a\ufffd"  # a str holding one (AppTest paste)
    doc = json.dumps({"schema": "kv-capacity-plan", "version": 1, "model": {"kind": "preset", "name": "llama-3.1-8b", "repo_id": "x\ud800"}, "inputs": {}})
    state = load_plan_file(doc)
    assert all("\ud800" not in w for w in state.warnings)


# --------------------------------------------------------------------------- numbers


def _numeric_actions():
    """(command, flag, bound name or None for a plan input) for every numeric option of the CLI."""
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command, p in sub.choices.items():
        for action in p._actions:
            kind = getattr(action.type, "__name__", "")
            if kind in BOUNDS or kind in ("positive_int", "nonneg_int", "positive_float", "nonneg_float", "_prices_arg"):
                yield command, action.option_strings[-1], kind


BASE = {
    "inspect": ["--preset", "llama-3.1-8b"], "plan": ["--example"], "simulate": ["--example", "--requests", "5"], "size": ["--example", "--users", "10"],
    "engine": ["--preset", "llama-3.1-8b", "--available-kv-gib", "10"], "report": ["--example", "--out", "/nonexistent-dir/r.pdf"], "probe": ["--preset", "llama-3.1-8b"],
}


def test_every_numeric_flag_refuses_absurd_values_in_one_line():
    actions = list(_numeric_actions())
    assert len(actions) > 60  # the sweep sees every command's flags
    for command, flag, _kind in actions:
        if flag == "--available-kv-bytes":
            argv = [command, "--preset", "llama-3.1-8b", flag]
        else:
            argv = [command, *BASE[command], flag]
        for value in ("1e300", "9" * 30, "-1", "\u0663", "1_000"):
            code, out, err = _run([*argv, value])
            assert code == 2 and out == "" and err.startswith("error: ") and err.count("\n") == 1, (command, flag, value, code, err[-300:])


def test_available_kv_gib_1e300_is_one_line():
    code, out, err = _run(["engine", "--preset", "llama-3.1-8b", "--available-kv-gib", "1e300"])
    assert (code, out) == (2, "") and err == "error: argument --available-kv-gib: available_kv_gib=1e+300: is absurdly large (limit 1,048,576)\n"


@pytest.mark.parametrize("value", ["1000", "2147483648"])
def test_capacity_top_is_capped(value):
    start = time.monotonic()
    code, _out, err = _run(["size", "--example", "--users", "10", "--capacity-top", value])
    assert code == 2 and f"absurdly large (limit {MAX_CAPACITY_TOP})" in err and time.monotonic() - start < 5


def test_capacity_search_stops_at_its_time_budget(monkeypatch):
    from planner import sizing

    monkeypatch.setattr(sizing, "CAPACITY_TIME_BUDGET_S", 0.0)  # every search after the first is past the budget
    result = sizing.size(prepare_model(LLAMA), {"max_context": 4096}, users=10, gpus=["H100-SXM-80GB"], capacity_top=MAX_CAPACITY_TOP)
    assert result.recommendations[0].capacity is not None and result.recommendations[1].capacity is None
    top = min(MAX_CAPACITY_TOP, len(result.recommendations))  # one GPU: 8 TP x KV dtype candidates hold it
    assert result.searched["capacity_search"] == f"capacity search stopped after 0 s: 1 of {top} recommendations searched"
    with pytest.raises(PlannerError, match="capacity_top"):
        sizing.size(prepare_model(LLAMA), users=10, capacity_top=11)


# --------------------------------------------------------------------------- configs no engine could load


@pytest.mark.parametrize(("edit", "field", "words"), [
    ({"hidden_size": 16}, "hidden_size", "below num_attention_heads=32"),
    ({"num_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok", "more experts than the 8 routed experts"),
    ({"n_routed_experts": 8, "num_experts_per_tok": 2, "first_k_dense_replace": 33}, "first_k_dense_replace", "beyond the model's 32 layers"),
    ({"num_experts": 8, "decoder_sparse_step": 40}, "decoder_sparse_step", "beyond the model's 32 layers"),
    ({"num_experts": 8, "mlp_only_layers": [0, 32]}, "mlp_only_layers", "0..31"),
    ({"layer_types": ["full_attention"] * 32, "block_configs": [7] * 32}, "block_configs[0]", "must be an object"),
    ({"hidden_size": 4100}, "hidden_size", "not divisible by 32 attention heads"),  # no head_dim: the family derives it
])
def test_inconsistent_configs_refused_with_field(edit, field, words):
    config = {k: v for k, v in LLAMA.items() if k != "head_dim"} if "hidden_size" in edit else dict(LLAMA)
    with pytest.raises(PlannerError) as err:
        prepare_model({**config, **edit})
    assert err.value.field == field and words in str(err.value), str(err.value)


def test_real_configs_still_load():
    paths = sorted((ROOT / "model_configs").glob("*.json")) + sorted((ROOT.parent / "shared" / "reference" / "configs").glob("*.json"))
    for path in paths:
        prepare_model(json.loads(path.read_text()))
    assert len(paths) >= 41


@pytest.mark.parametrize(("counts", "words"), [({"BF16": -10_000_000}, "at least 0"), ({"BF16": 10**30}, "absurdly large")])
def test_parameter_counts_pass_the_config_bounds(counts, words):
    with pytest.raises(PlannerError, match=words):
        prepare_model(LLAMA, counts)


# --------------------------------------------------------------------------- digits


@pytest.mark.parametrize("text", ["1_000", "\u0661\u0660", "\uff11\uff10", "\u00b2", " 5", "9" * 21, "inf", "nan", "0x10"])
def test_one_ascii_digit_reader(text):
    assert parse_number_text(text, integer=True) is None and (text in ("9" * 21,) or parse_number_text(text, integer=False) is None)


@pytest.mark.parametrize("value", ["\u00b2", "\u0663", "9" * 4400, 10**4400, "\uff13"], ids=["superscript", "arabic-indic", "4400-digit-text", "4400-digit-int", "full-width"])
def test_decode_columns_never_raises(value):
    columns, warnings = decode_columns({"cmp": value, "cmp_a": value}, PlanInputs().model_dump())
    assert len(columns) == 2 and warnings and all(len(w) < 300 for w in warnings)


@pytest.mark.parametrize("row", ["1_000,10,10", "0,\u0661\u0660,10", "0,10,\uff11\uff10", "0,1_0,10"])
def test_trace_digits_are_ascii(row):
    from planner.simulate import parse_trace_csv

    with pytest.raises(PlannerError, match="row 2"):
        parse_trace_csv(f"arrival_s,prompt_tokens,output_tokens\n{row}\n")


def test_link_digits_are_ascii():
    from planner.share import decode_query

    state = decode_query({"v": "1", "m": "preset", "n": "llama-3.1-8b", "seq": "\u0661\u0660", "in": "1_000"})
    assert state.inputs.sequences == PlanInputs().sequences and state.inputs.input_tokens == PlanInputs().input_tokens
    assert len(state.warnings) == 2
