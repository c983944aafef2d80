"""Issue 27 item 9: ``pip install .`` installs the library with its presets and a ``kvp`` console
script that works outside the checkout (a wheel is built offline from a copy of the tree)."""

from __future__ import annotations

import configparser
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_pyproject_lists_every_planner_package():
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "planner").rglob("__init__.py")}
    assert found | {"planner.model_configs"} == listed


@pytest.mark.timeout(240)
def test_wheel_installs_kvp_console_script_that_runs_outside_the_checkout(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(ROOT / "pyproject.toml", src)
    shutil.copytree(ROOT / "planner", src / "planner", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "model_configs", src / "model_configs")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path / "dist"), str(src)], check=True, timeout=200, capture_output=True)
    (wheel,) = (tmp_path / "dist").glob("kv_capacity_planner-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(site)
        names = zf.namelist()
    assert "planner/model_configs/llama-3.1-8b.json" in names and "planner/arch_defaults.json" in names
    (ep,) = site.glob("*.dist-info/entry_points.txt")
    scripts = configparser.ConfigParser()
    scripts.read(ep)
    assert scripts["console_scripts"]["kvp"] == "planner.cli:main"
    # what the kvp script runs, from a folder with no checkout in sight
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code = f"import sys; sys.path.insert(0, {str(site)!r}); import planner.presets as p; assert str(p.PRESETS_DIR).startswith({str(site)!r}), p.PRESETS_DIR; from planner.cli import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", code, "inspect", "--preset", "llama-3.1-8b", "--tokens", "1024", "--json"], cwd=elsewhere, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["kv_bytes_per_token"] == 131_072  # 2 x 32 layers x 8 KV heads x 128 x 2 B (bf16)
