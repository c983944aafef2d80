"""The plan: every control in :class:`PlanInputs`, every number in :class:`Plan`.

``compute_plan(inputs, model)`` is the single function behind the CLI, the app, share links
and PDF reports. A :class:`PreparedModel` (geometry + parameter counts) is built once per
config and cached, so a plan itself is pure integer and float arithmetic (microseconds).

* ``inputs.py``       :class:`PlanInputs`, :func:`make_inputs`, the seed's example inputs;
* ``model.py``        :class:`PreparedModel`, :func:`prepare_model` (parsed once per config);
* ``stages.py``       :func:`compute_plan` and its stages;
* ``result.py``       :class:`Plan` and the labels every surface shows with it;
* ``engine_view.py``  vLLM's view of a plan (its block reservation and start-up log);
* ``sweeps.py``       many plans of one model: the ITL curve, the grid, input suggestions.
"""

from planner.plan.engine_view import _ENGINE_VIEWS, VLLM_KV_DTYPES, engine_view
from planner.plan.inputs import EXAMPLE_CONFIG, EXAMPLE_INPUTS, PlanInputs, _cross_field_problem, _workload_problem, make_inputs, resolve_device
from planner.plan.model import _PREPARED, SAFETENSORS_BYTES, PreparedModel, example_model, measured_weights, prepare_model
from planner.plan.result import Plan, memory_basis
from planner.plan.sections import at_requests
from planner.plan.stages import _CONTEXTS, _ROOFLINES, build_roofline, compute_plan
from planner.plan.sweeps import grid, grid_limits, itl_curve, suggest_inputs

__all__ = [
    "EXAMPLE_CONFIG",
    "EXAMPLE_INPUTS",
    "SAFETENSORS_BYTES",
    "VLLM_KV_DTYPES",
    "Plan",
    "PlanInputs",
    "PreparedModel",
    "at_requests",
    "build_roofline",
    "compute_plan",
    "engine_view",
    "example_model",
    "grid",
    "grid_limits",
    "itl_curve",
    "make_inputs",
    "measured_weights",
    "memory_basis",
    "prepare_model",
    "resolve_device",
    "suggest_inputs",
    "_CONTEXTS",
    "_ENGINE_VIEWS",
    "_PREPARED",
    "_ROOFLINES",
    "_cross_field_problem",
    "_workload_problem",
]
