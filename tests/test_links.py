"""Share links never lose parts silently (issue 27 item 5): every dropped key, defaulted value and
corrected name of a Plan, Compare or Size link is listed, with a "did you mean" where one is close.

The links are hand-made; the expected suggestions are the closest known key or catalog name by
difflib's ratio (``gpuz`` is one letter from ``gpu``; ``sequences`` is the long name of ``seq``).
"""

from __future__ import annotations

import pytest

from planner.compare import COLUMN_KEYS, COUNT_KEY, CURRENT, Column, decode_columns
from planner.hardware import CATALOG
from planner.linknotes import CORRECTED, DEFAULTED, DROPPED, closest
from planner.plan import PlanInputs
from planner.share import COMPARE_KEYS, decode_query, decode_size_params

BASE = PlanInputs().model_dump()


def _by_key(notes):
    return {n.key: n for n in notes}


def test_unknown_keys_are_dropped_with_the_nearest_key():
    state = decode_query({"v": "2", "m": "preset", "n": "llama-3.1-8b", "gpuz": "H200-141GB", "sequences": "64"})
    notes = _by_key(state.notes)
    assert (notes["gpuz"].kind, notes["gpuz"].suggestion) == (DROPPED, "gpu")
    assert (notes["sequences"].kind, notes["sequences"].suggestion) == (DROPPED, "seq")
    assert state.inputs.gpu == PlanInputs().gpu and state.inputs.sequences == PlanInputs().sequences  # nothing guessed
    assert state.warnings[:2] == [
        "gpuz='H200-141GB' is not a parameter this planner reads; ignored; did you mean 'gpu'?",
        "sequences='64' is not a parameter this planner reads; ignored; did you mean 'seq'?",
    ]


def test_other_pages_keys_and_foreign_only_links_are_not_reported():
    assert decode_query({"v": "2", "cmp": "2", "size_users": "5", "embed": "true"}).notes == []
    assert decode_query({"utm_source": "mail"}).warnings == []  # not a share link at all
    assert COMPARE_KEYS == (COUNT_KEY, *COLUMN_KEYS)


def test_a_mistyped_gpu_is_corrected_not_silently_the_default():
    state = decode_query({"v": "2", "gpu": "B200-18GB"})
    assert state.inputs.gpu == "B200-180GB"
    (note,) = state.notes
    assert (note.kind, note.key, note.value, note.used) == (CORRECTED, "gpu (gpu)", "B200-18GB", "B200-180GB")
    assert "did you mean B200-180GB?" in state.warnings[0]
    far = decode_query({"v": "2", "gpu": "Z100"})  # nothing close: the default, and said so
    assert far.inputs.gpu == PlanInputs().gpu and far.notes[0].kind == DEFAULTED


def test_bad_values_are_listed_as_defaulted_with_field_value_and_why():
    state = decode_query({"v": "2", "seq": "-5", "kvd": "fp9"})
    notes = _by_key(state.notes)
    assert notes["sequences (seq)"].kind == DEFAULTED and notes["sequences (seq)"].value == "-5" and "out of range" in notes["sequences (seq)"].why
    assert notes["kv_dtype (kvd)"].value == "fp9" and "is not one of" in notes["kv_dtype (kvd)"].why


@pytest.mark.parametrize(("word", "choices", "expected"), [("gpuz", ["gpu", "gpus", "tp"], "gpu"), ("B200-18GB", list(CATALOG), "B200-180GB"), ("H100", list(CATALOG), "H100-SXM-80GB"), ("XYZ", list(CATALOG), None)])
def test_closest(word, choices, expected):
    assert closest(word, choices) == expected


def test_size_link_lists_every_value_it_could_not_take():
    values, notes = decode_size_params({"size_users": "-5", "size_ttft": "abc", "size_gpus": "H100,XYZ", "size_itl": "40", "size_colour": "red"})
    assert values == {"size_itl": 40.0, "size_gpus": ["H100-SXM-80GB"]}  # users and TTFT keep the page's opening values
    kinds = [(n.kind, n.key, n.value) for n in notes]
    assert kinds == [
        (DEFAULTED, "size_users", "-5"),
        (DEFAULTED, "size_ttft", "abc"),
        (CORRECTED, "size_gpus", "H100"),
        (DEFAULTED, "size_gpus", "XYZ"),
        (DROPPED, "size_colour", "red"),
    ]
    assert "must be 1 to 10,000,000, a whole number" in notes[0].text()
    assert notes[2].used == "H100-SXM-80GB"


def test_size_link_with_nothing_usable_keeps_every_gpu_and_says_so():
    values, notes = decode_size_params({"size_gpus": "XYZ", "size_kv": "fp9,bf16", "size_disagg": "yes"})
    assert values["size_gpus"] == list(CATALOG) and values["size_kv"] == ["fp8", "bf16"]  # fp9 -> fp8 (one letter)
    assert [n.kind for n in notes] == [DEFAULTED, DEFAULTED, CORRECTED, DEFAULTED]


def test_compare_link_without_cc_never_invents_plan_c():
    a = Column(CURRENT, "H200-141GB", 1, 1, "bf16", "vllm")
    b = Column(CURRENT, "B200-180GB", 1, 1, "bf16", "vllm")
    enc = lambda c: "~".join(str(getattr(c, f)) for f in ("model", "gpu", "gpu_count", "tp", "kv_dtype", "runtime"))  # noqa: E731
    columns, warnings = decode_columns({"cmp": "3", "ca": enc(a), "cb": enc(b)}, BASE)
    assert columns == [a, b]
    assert warnings == ["number of plans (cmp) 3 but the link carries no plan C (cc); showing 2 plans"]


def test_compare_link_missing_b_copies_a_and_a_near_miss_gpu_is_corrected():
    a = "plan~H200-141GB~1~1~fp8~vllm"
    columns, warnings = decode_columns({"cmp": "2", "ca": a.replace("H200-141GB", "B200-18GB")}, BASE)
    assert columns[0].gpu == "B200-180GB" and columns[1] == columns[0]  # B starts from A: same KV dtype
    assert warnings == ["plan A gpu 'B200-18GB' is not a catalog GPU; did you mean B200-180GB? Using it", "plan B (cb) is missing from the link; using plan A's settings"]
    _cols, extra = decode_columns({"cmp": "2", "ca": a, "cb": a, "cd": a}, BASE)
    assert extra == ["plan D (cd) is beyond the link's 2 plans (cmp); ignored"]



# --------------------------------------------------------------------------- the app's one notice

def _app(query: dict[str, str]):
    pytest.importorskip("streamlit")
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception
    return at


def _notice(at) -> str:
    texts = [w.value for w in at.warning if w.value.startswith("Restored the plan")]
    assert len(texts) == 1, [w.value for w in at.warning]  # one notice, not one per part
    return texts[0]


def test_app_lists_dropped_corrected_and_kept_compare_parts_in_one_notice():
    at = _app({"v": "2", "m": "preset", "n": "llama-3.1-8b", "gpuz": "H200-141GB", "gpu": "B200-18GB", "cmp": "2", "ca": "plan~H200-141GB~1~1~bf16~vllm"})
    text = _notice(at)
    assert "did you mean 'gpu'?" in text and "did you mean B200-180GB?" in text
    assert "the link's comparison (cmp, ca) is kept" in text and "plan B (cb) is missing" in text


def test_size_link_shows_its_defaulted_values_in_the_notice():
    at = _app({"v": "2", "m": "preset", "n": "llama-3.1-8b", "size_users": "-5", "size_ttft": "abc", "size_gpus": "H100,XYZ"})
    text = _notice(at)
    assert "size_users '-5' is out of range" in text and "size_ttft 'abc' is not a number" in text
    assert "size_gpus 'H100'" in text and "size_gpus 'XYZ'" in text
    assert at.session_state["size_gpus"] == ["H100-SXM-80GB"]
