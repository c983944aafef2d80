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
