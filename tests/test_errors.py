"""planner/errors.py: every user error is a PlannerError, documented with when it is raised and
what to do, and still importable where callers found it before."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import planner
from planner import errors

# Exceptions that are no user error: control flow inside one module, or a check that fails only
# when the planner itself is wrong. Anything else raised for bad input must be a PlannerError.
INTERNAL = {
    "planner.hub._Deadline": "the fetch deadline passed inside the worker thread; becomes HubTimeoutError",
    "planner.hub._Unreachable": "a network failure inside the worker thread; becomes HubOfflineError or the cached copy",
    "planner.hub._TooLarge": "a download over its byte cap; becomes InvalidHubConfigError, or a note for an optional file",
    "planner.hub._BadHeader": "a safetensors header that is not one; becomes a note (the weights fall back to the config)",
    "planner.measured.NotCovered": "AIConfigurator has no data; compare() turns it into its 'not available' reason",
    "planner.simulate.engine._Stop": "the simulator's budget stop, caught by its own loop",
    "planner.simulate.invariants.SimulationInvariantError": "a simulator invariant failed: a bug, never bad input",
    "planner.simulate.block_pool.AllocatorError": "the block pool's consistency check: a bug, never bad input",
    "planner.simulate.block_pool.DoubleFreeError": "the block pool's consistency check: a bug, never bad input",
    "planner.simulate.block_pool.OutOfBlocksError": "the block pool's consistency check: a bug, never bad input",
}


def _planner_exceptions() -> dict[str, type]:
    found = {}
    for info in pkgutil.walk_packages(planner.__path__, "planner."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        for _name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, BaseException) and obj.__module__ == info.name:
                found[f"{obj.__module__}.{obj.__qualname__}"] = obj
    return found


def test_every_user_error_is_a_planner_error():
    found = _planner_exceptions()
    assert "planner.errors.HubError" in found and "planner.cli.CLIError" in found  # the walk saw them
    strays = [name for name, cls in found.items() if not issubclass(cls, errors.PlannerError) and name not in INTERNAL]
    assert not strays, strays
    assert set(INTERNAL) <= set(found), set(INTERNAL) - set(found)  # the list names nothing that is gone


def test_every_error_class_says_when_and_what_to_do():
    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and issubclass(cls, errors.PlannerError) and cls is not errors.PlannerError:
            doc = inspect.getdoc(cls) or ""
            assert "What to do" in doc or "what to do" in doc, name
            assert len(doc.split()) >= 12, name


def test_errors_stay_importable_where_callers_found_them():
    from planner import hub
    from planner.engines.common import EngineRefusal
    from planner.probe.protocol import ProtocolError

    assert EngineRefusal is errors.EngineRefusal and ProtocolError is errors.ProbeProtocolError
    for name in ("HubError", "GatedRepoError", "RepoNotFoundError", "RevisionNotFoundError", "ConfigNotFoundError", "HubTimeoutError",
                 "HubOfflineError", "InvalidHubConfigError", "InvalidModelRefError", "RemoteCodeRequiredError"):
        assert getattr(hub, name) is getattr(errors, name) and issubclass(getattr(errors, name), errors.HubError)


def test_a_hub_error_is_one_scrubbed_line_and_a_planner_error():
    errors.remember_token("hf_" + "A" * 34)
    exc = errors.GatedRepoError(f"accept the licence\n  then retry with hf_{'A' * 34}")
    assert str(exc) == "accept the licence then retry with ***" == exc.message == exc.reason
    assert isinstance(exc, errors.PlannerError) and exc.field == "model" and exc.value is None
    assert str(errors.HubError("token hf_" + "b" * 31 + " leaked")) == "token hf_*** leaked"  # shaped like a token


def test_field_value_reason_message():
    exc = errors.PlannerError("tp", 3, "must divide the attention heads")
    assert str(exc) == "tp=3: must divide the attention heads"
    assert str(errors.ProbeProtocolError("the probe reply is not JSON")) == "the probe reply is not JSON"
    with pytest.raises(errors.LimitError):
        from planner.limits import ensure_finite_json

        ensure_finite_json({"x": float("inf")})
