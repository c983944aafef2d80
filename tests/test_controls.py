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
