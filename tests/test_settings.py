"""planner/settings.py: every environment variable the planner reads is read there, at call time,
through one parser per type, and documented in the README's table."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

from planner import settings
from planner.errors import PlannerError

ROOT = Path(__file__).resolve().parents[1]


def _environment_uses(path: Path) -> list[str]:
    """Where a module touches the process environment: ``os.environ``, ``os.getenv``, ``os.putenv``
    or a name imported from ``os`` for that."""
    tree = ast.parse(path.read_text())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "os" and node.attr in ("environ", "getenv", "putenv", "unsetenv", "environb"):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} os.{node.attr}")
        if isinstance(node, ast.ImportFrom) and node.module == "os" and any(a.name in ("environ", "getenv", "putenv", "environb") for a in node.names):
            out.append(f"{path.relative_to(ROOT)}:{node.lineno} from os import ...")
    return out


def test_every_environment_read_goes_through_settings():
    files = [*(ROOT / "planner").rglob("*.py"), *(ROOT / "pages").rglob("*.py"), ROOT / "app.py"]
    found = [use for path in files if path.name != "settings.py" or path.parent.name != "planner" for use in _environment_uses(path)]
    assert not found, found


def test_the_readme_table_is_the_settings_table():
    readme = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- settings table: planner\.settings\.markdown_table\(\) -->\n(.*?)\n<!-- end of settings table -->", readme, re.S)
    assert block, "README.md lost its settings table markers"
    assert block.group(1) == settings.markdown_table(), "README.md's environment table differs from planner/settings.py; replace it with:\n" + settings.markdown_table()


def test_every_variable_named_in_the_code_is_in_the_table():
    # a variable spelled in planner/ or pages/ (a message, a docstring) that the table lacks is one the table forgot
    names = {s.name for s in settings.TABLE}
    spelled = set()
    for path in [*(ROOT / "planner").rglob("*.py"), *(ROOT / "pages").rglob("*.py")]:
        spelled |= set(re.findall(r"\b(?:KVP|HF|HUGGINGFACE)_[A-Z_]+\b", path.read_text()))
    assert spelled <= names, spelled - names
    assert len(names) == len(settings.TABLE)


# each accessor: (function, value to set, what it must read; None: the default)
CASES = [
    (settings.kvp_disable_probe, "1", True), (settings.kvp_disable_probe, "YES", True), (settings.kvp_disable_probe, "0", False),
    (settings.kvp_disable_probe, "", False),
    (settings.kvp_probe_cpu_budget_bytes, "1000", 1000), (settings.kvp_probe_cpu_budget_bytes, " ", 2 << 30),
    (settings.kvp_presets_dir, "/tmp/presets", Path("/tmp/presets")), (settings.kvp_presets_dir, " ", None),
    (settings.kvp_hub_ttl_s, "0", 0.0), (settings.kvp_hub_ttl_s, "-5", 0.0), (settings.kvp_hub_ttl_s, "1.5", 1.5), (settings.kvp_hub_ttl_s, "soon", 600.0),
    (settings.kvp_hub_ttl_s, "inf", 600.0),
    (settings.kvp_hub_requests_per_min, "0", 0), (settings.kvp_hub_requests_per_min, "-1", 20), (settings.kvp_hub_requests_per_min, "1_000", 20),
    (settings.kvp_hub_requests_per_min, "9" * 10, 20),
    (settings.kvp_first_paint_pause_s, "0", 0.0), (settings.kvp_first_paint_pause_s, "x", 0.3),
    (settings.kvp_reference_dir, "/data/ref", Path("/data/ref")),
    (settings.hf_token, " hf_abc ", "hf_abc"), (settings.hf_token, "  ", None),
    (settings.hf_endpoint, "http://127.0.0.1:9", "http://127.0.0.1:9"),
    (settings.hf_hub_offline, "on", True), (settings.hf_hub_offline, "2", False),
    (settings.hf_hub_cache, "/c", "/c"), (settings.hf_home, "/h", "/h"),
]  # fmt: skip
VARIABLE = {
    settings.kvp_disable_probe: "KVP_DISABLE_PROBE", settings.kvp_probe_cpu_budget_bytes: "KVP_PROBE_CPU_BUDGET_BYTES", settings.kvp_presets_dir: "KVP_PRESETS_DIR",
    settings.kvp_hub_ttl_s: "KVP_HUB_TTL_S", settings.kvp_hub_requests_per_min: "KVP_HUB_REQUESTS_PER_MIN", settings.kvp_first_paint_pause_s: "KVP_FIRST_PAINT_PAUSE_S",
    settings.kvp_reference_dir: "KVP_REFERENCE_DIR", settings.hf_token: "HF_TOKEN", settings.hf_endpoint: "HF_ENDPOINT", settings.hf_hub_offline: "HF_HUB_OFFLINE",
    settings.hf_hub_cache: "HF_HUB_CACHE", settings.hf_home: "HF_HOME",
}  # fmt: skip


UNSET = {
    settings.kvp_disable_probe: False, settings.kvp_probe_cpu_budget_bytes: 2 << 30, settings.kvp_presets_dir: None, settings.kvp_hub_ttl_s: 600.0,
    settings.kvp_hub_requests_per_min: 20, settings.kvp_first_paint_pause_s: 0.3, settings.kvp_reference_dir: ROOT.parent / "shared" / "reference",
    settings.hf_token: None, settings.hf_endpoint: None, settings.hf_hub_offline: False, settings.hf_hub_cache: None, settings.hf_home: None,
}  # fmt: skip


@pytest.mark.parametrize(("read", "text", "expected"), CASES)
def test_each_setting_is_read_at_call_time(monkeypatch, read, text, expected):
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    monkeypatch.setenv(VARIABLE[read], text)
    assert read() == expected
    monkeypatch.delenv(VARIABLE[read])
    assert read() == UNSET[read]  # the default again, with no restart


def test_a_bad_number_is_logged_and_the_default_used(monkeypatch, caplog):
    caplog.set_level(logging.WARNING, logger="planner.settings")
    monkeypatch.setenv("KVP_HUB_REQUESTS_PER_MIN", "lots")
    assert settings.kvp_hub_requests_per_min() == 20
    assert "KVP_HUB_REQUESTS_PER_MIN='lots' is not a non-negative integer; using 20" in caplog.text


def test_the_probe_budget_is_refused_not_guessed(monkeypatch):
    for text in ("lots", "0", "-1", "1_000", "\u0663"):
        monkeypatch.setenv("KVP_PROBE_CPU_BUDGET_BYTES", text)
        with pytest.raises(PlannerError) as exc:
            settings.kvp_probe_cpu_budget_bytes()
        assert exc.value.field == "KVP_PROBE_CPU_BUDGET_BYTES" and "positive integer" in exc.value.reason


def test_the_older_hub_cache_name(monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.setenv("HUGGINGFACE_HUB_CACHE", "/old")
    assert settings.hf_hub_cache() == "/old"
    monkeypatch.setenv("HF_HUB_CACHE", "/new")
    assert settings.hf_hub_cache() == "/new"
