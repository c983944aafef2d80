"""Plan controls declared once (planner/controls.py) and rendered as CLI flags, app widgets and
share-link keys: each surface's names, bounds and choices are the PlanInputs field's."""

from __future__ import annotations

import typing

from planner.capacity import RESERVATIONS
from planner.engines.vllm import VLLM_VERSIONS
from planner.kv import KV_DTYPE_CHOICES, RUNTIMES
from planner.plan import PlanInputs
from planner.weights import WEIGHT_DTYPE_BITS


def test_choice_fields_list_what_the_library_computes():
    # the Literal of each choice field is the library table it is looked up in: a choice the table
    # has and the field lacks was offered by the app and refused by the plan (nvfp4 / mxfp4 weights)
    tables = {"kv_dtype": KV_DTYPE_CHOICES, "weight_dtype": WEIGHT_DTYPE_BITS, "runtime": RUNTIMES, "vllm_version": VLLM_VERSIONS, "reservation": RESERVATIONS}
    for name, table in tables.items():
        assert typing.get_args(PlanInputs.model_fields[name].annotation) == tuple(table), name


def test_every_field_is_declared_with_the_fields_bounds_and_choices():
    from planner.controls import CONTROLS
    from planner.labels import INPUTS

    assert list(CONTROLS) == list(PlanInputs.model_fields)
    for name, field in PlanInputs.model_fields.items():
        c = CONTROLS[name]
        bounds = {attr: getattr(m, attr) for m in field.metadata for attr in ("ge", "gt", "le", "lt") if getattr(m, attr, None) is not None}
        assert (c.ge, c.gt, c.le) == (bounds.get("ge"), bounds.get("gt"), bounds.get("le")) and "lt" not in bounds, name
        assert c.default == field.default and c.label and name in INPUTS, name
        if c.kind == "choice":
            assert c.choices == typing.get_args(field.annotation), name
    # spot checks by hand: tp 1..4,096, ITL SLO > 0 (exclusive), headroom 0..9,999 bp
    assert (CONTROLS["tp"].lo, CONTROLS["tp"].hi, CONTROLS["tp"].range_text()) == (1, 4096, ">= 1 and <= 4,096")
    assert CONTROLS["itl_slo_ms"].range_text() == "> 0 and <= 10,000,000" and not CONTROLS["itl_slo_ms"].in_range(0)
    assert CONTROLS["headroom_bp"].in_range(9999) and not CONTROLS["headroom_bp"].in_range(10_000)


def test_share_keys_come_from_the_declaration():
    import planner.share as share
    from planner.controls import CONTROLS

    assert list(share.INPUT_KEYS) == [*share.SHORT_KEYS, *(n for n in CONTROLS if n not in share.SHORT_KEYS)]
    assert set(share.INPUT_KEYS) == set(CONTROLS)
    keys = [*share.INPUT_KEYS.values(), *share.REF_KEYS.values(), "v", "cfg"]
    assert len(keys) == len(set(keys))  # one meaning per key
    for name, key in share.INPUT_KEYS.items():  # the module docstring documents every key
        assert f" {key} " in share.__doc__ and name in share.__doc__, (name, key)


# --------------------------------------------------------------------------- CLI


def _flags(command: str) -> dict[str, object]:
    import argparse

    from planner.cli import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices[command]
    return {s: a for a in sub._actions for s in a.option_strings}


def _check_flag(action, control) -> None:
    if control.kind == "bool":
        assert action.const is True and action.default is None, control.name
    elif control.kind == "choice":
        assert tuple(action.choices) == control.choices, control.name
    elif control.numeric:
        assert action.type.control is control, control.name  # the flag's range is the declaration's
    assert control.range_text() in action.help if control.numeric and control.range_text() else True


def test_every_field_is_a_flag_of_plan_simulate_and_report():
    from planner.controls import CONTROLS

    for command in ("plan", "simulate", "report"):
        flags = _flags(command)
        for control in CONTROLS.values():
            assert control.flag in flags, (command, control.flag)
            _check_flag(flags[control.flag], control)
    assert "--vllm-version" in _flags("plan")  # the hand-copied flags had left it out


def test_size_takes_every_field_it_does_not_search():
    from planner.controls import CONTROLS
    from planner.sizing import SEARCHED

    flags = _flags("size")
    for name, control in CONTROLS.items():
        if name in SEARCHED:  # the sizer sets these per candidate (its own flags: --gpus, --tps, --kv-dtypes, --users, SLOs, prices)
            continue
        assert control.flag in flags, control.flag
        _check_flag(flags[control.flag], control)


def _outside(control) -> list[str]:
    """Values just outside a numeric control's range, as flag text."""
    out = []
    if control.lo is not None:
        step = 1 if control.kind == "int" else max(abs(control.lo) * 1e-3, 1e-9)
        out.append(str(control.lo - (0 if control.gt is not None else step)))
    if control.hi is not None:
        out.append(str(control.hi * 2 if control.hi else 1))
    return out


def test_values_outside_a_fields_range_are_refused_naming_it(capsys):
    # every numeric plan flag, just below and far above the Field's bounds: exit 2, one line, the flag or the field named
    from planner.cli import main
    from planner.controls import CONTROLS

    for name, control in CONTROLS.items():
        if not control.numeric:
            continue
        for text in _outside(control):
            if control.kind == "int":
                text = str(int(float(text)))
            extra = ["--gpu-count=1"] if name == "tp" else []  # else --tp sets the GPU count, refused first
            assert main(["plan", "--example", "--json", *extra, f"{control.flag}={text}"]) == 2, (name, text)
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and (control.flag in err or f"{name}=" in err), (name, text, err)


# --------------------------------------------------------------------------- every field on every surface


def test_every_field_has_a_label_a_flag_a_link_key_and_a_place_on_the_page():
    # the reasons a field is not on a surface are named here, so a new one cannot fall off silently
    from pages.ui.inputs import GROUP_KEYS, WIDGET_OF, unplaced
    from planner.controls import CONTROLS
    from planner.labels import INPUTS
    from planner.share import INPUT_KEYS
    from planner.sizing import SEARCHED

    size = _flags("size")
    placed = [k for group, keys in GROUP_KEYS.items() if group != "more" for k in keys]
    assert len(placed) == len(set(placed))  # each control in one group
    for name, c in CONTROLS.items():
        assert name in INPUTS and c.label.startswith(INPUTS[name][0]), name
        assert c.flag in _flags("plan"), name
        assert c.flag in size or name in SEARCHED, name  # size: a flag, or set by the sizer per candidate (--gpus, --tps, SLOs, prices: its own flags)
        assert name in INPUT_KEYS, name
        assert WIDGET_OF.get(name, name) in placed, name  # headroom_bp is the percent slider headroom_pct
    assert unplaced() == ()  # today every field has its place; a new one is drawn under "More inputs"


def _extended_controls() -> dict:
    """The declaration of PlanInputs plus four new fields, one of each kind, as a new input would come."""
    from typing import Literal

    from pydantic import Field

    from planner.controls import declare

    class Extended(PlanInputs):
        draft_tokens: int = Field(4, ge=0, le=64)
        cache_tier: Literal["hbm", "host"] = "hbm"
        offload: bool = False
        spill_gib: float | None = Field(None, gt=0, le=1024)

    return declare(Extended)


NEW = ("draft_tokens", "cache_tier", "offload", "spill_gib")


def test_a_new_field_is_a_cli_flag_with_its_type_range_and_choices():
    import argparse

    import pytest

    from planner.cli import add_control_flags, control_values

    controls = _extended_controls()
    assert tuple(n for n in controls if n not in PlanInputs.model_fields) == NEW
    p = argparse.ArgumentParser()
    add_control_flags(p, controls, controls)
    args = p.parse_args(["--draft-tokens", "8", "--cache-tier", "host", "--offload", "--spill-gib", "2.5"])
    assert control_values(args, NEW, controls) == {"draft_tokens": 8, "cache_tier": "host", "offload": True, "spill_gib": 2.5}
    assert control_values(p.parse_args([]), NEW, controls) == {}  # an absent flag leaves the field's default
    help_text = " ".join(p.format_help().split())
    assert "--draft-tokens N draft_tokens: draft tokens (default: 4; >= 0 and <= 64)" in help_text
    assert "--spill-gib X" in help_text and "> 0 and <= 1,024" in help_text
    for bad in (["--draft-tokens", "-1"], ["--draft-tokens", "1.5"], ["--cache-tier", "disk"], ["--spill-gib", "nan"]):
        with pytest.raises(SystemExit):
            p.parse_args(bad)


def test_a_new_field_is_a_link_key_and_a_widget_under_more_inputs():
    import planner.share as share
    from pages.ui.inputs import unplaced

    controls = _extended_controls()
    keys = share.input_keys(controls)
    assert {n: keys[n] for n in NEW} == {n: n for n in NEW}  # its own name, no short key needed
    assert list(keys)[: len(share.SHORT_KEYS)] == list(share.SHORT_KEYS) and len(set(keys.values())) == len(keys)
    assert unplaced(controls) == NEW


def _render_new_controls():
    from pages.ui.inputs import render_control
    from tests.test_controls import NEW, _extended_controls

    controls = _extended_controls()
    for name in NEW:
        render_control(controls[name], None, None)


def test_a_new_field_renders_by_its_kind():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_render_new_controls, default_timeout=60).run()
    assert not at.exception
    draft, spill = at.number_input(key="draft_tokens"), at.number_input(key="spill_gib")
    assert (draft.proto.min, draft.proto.max, draft.proto.step, draft.value) == (0, 64, 1, 0)  # the field's range, whole numbers
    assert (spill.proto.min, spill.proto.max, spill.value) == (0.0, 1024.0, None)  # nullable: an empty input
    assert at.selectbox(key="cache_tier").options == ["hbm", "host"]
    assert at.checkbox(key="offload").value is False
    assert draft.label == "draft_tokens"  # no label yet: the field's name (planner.labels.label)
