"""Conformance: every case of ../shared/reference/expected.json through the `inspect` CLI contract.

Each case names a real Hub config, a KV dtype, a tensor-parallel size and a token count, with the
expected bytes per token, bytes at the token count and layer kinds (or "refused").
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner import settings
from planner.cli import main
from planner.configio import parse_config_text
from planner.errors import PlannerError
from planner.kv import inspect_config

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = settings.kvp_reference_dir()
EXPECTED = REFERENCE / "expected.json"
CASES = json.loads(EXPECTED.read_text())["cases"] if EXPECTED.is_file() else []
needs_reference = pytest.mark.skipif(not CASES, reason=f"reference folder absent: {EXPECTED} not found")


def _id(case: dict) -> str:
    return f"{Path(case['config']).stem}-{case['kv_dtype']}-tp{case['tp']}-{case['tokens']}"


@needs_reference
def test_reference_has_cases():
    assert len(CASES) >= 100


@needs_reference
@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_reference_case(case):
    config = parse_config_text((REFERENCE / case["config"]).read_bytes())
    if case.get("expect") == "refused":
        with pytest.raises(PlannerError, match=f"tensor parallel size {case['tp']}"):
            inspect_config(config, kv_dtype=case["kv_dtype"], tp=case["tp"], tokens=case["tokens"])
        return
    r = inspect_config(config, kv_dtype=case["kv_dtype"], tp=case["tp"], tokens=case["tokens"])
    assert r.kv_bytes_per_token == case["kv_bytes_per_token"]
    assert r.kv_bytes_at_tokens == case["kv_bytes_at_tokens"]
    assert r.layers == case["layer_kinds"]


@needs_reference
def test_reference_through_the_cli_json(capsys):
    """The CLI prints the same numbers (a sample of cases: one per config)."""
    seen = set()
    for case in CASES:
        if case["config"] in seen or case.get("expect") == "refused":
            continue
        seen.add(case["config"])
        rc = main(["inspect", "--config", str(REFERENCE / case["config"]), "--kv-dtype", case["kv_dtype"], "--tp", str(case["tp"]), "--tokens", str(case["tokens"]), "--json"])
        out = json.loads(capsys.readouterr().out)
        assert rc == 0
        assert (out["kv_bytes_per_token"], out["kv_bytes_at_tokens"], out["layers"]) == (case["kv_bytes_per_token"], case["kv_bytes_at_tokens"], case["layer_kinds"])
    assert len(seen) >= 40


@needs_reference
def test_refused_case_exits_2_with_one_line():
    case = next(c for c in CASES if c.get("expect") == "refused")
    proc = subprocess.run(
        [sys.executable, "-m", "planner", "inspect", "--config", str(REFERENCE / case["config"]), "--tp", str(case["tp"]), "--json"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1
    assert f"tensor parallel size {case['tp']}" in proc.stderr
    assert "Traceback" not in proc.stderr
