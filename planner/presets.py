"""Bundled model presets: ``model_configs/*.json`` next to the package.

Each preset is a ``config.json`` as published on the Hugging Face Hub (the fields the planner
reads), with the Hub id in ``_name_or_path``. This module only lists and reads them; turning a
config into geometry is :mod:`planner.geometry`'s job.

The directory is ``model_configs/`` beside the ``planner`` package unless the environment
variable ``KVP_PRESETS_DIR`` names another one. The listing is cached per directory (the app
asks for it on every rerun); call :func:`clear_cache` after changing files on disk.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from planner import settings
from planner.configio import read_config_file
from planner.errors import ConfigError, PlannerError

_CHECKOUT_PRESETS = Path(__file__).resolve().parent.parent / "model_configs"
PRESETS_DIR: Path = _CHECKOUT_PRESETS if _CHECKOUT_PRESETS.is_dir() else Path(__file__).resolve().parent / "model_configs"
"""The bundled presets (the checkout's model_configs/, or the copy ``pip install .`` puts in the
package); ``KVP_PRESETS_DIR`` overrides it at call time."""

DEFAULT_PRESET = "llama-3.1-8b"

ENV_VAR = settings.KVP_PRESETS_DIR.name

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

# model_type (of the outer config) -> family label shown in the app.
_FAMILIES: dict[str, str] = {
    "llama": "Llama",
    "mllama": "Llama 3.2 Vision",
    "llama4": "Llama 4",
    "llama4_text": "Llama 4",
    "qwen2": "Qwen",
    "qwen3": "Qwen",
    "qwen3_moe": "Qwen",
    "qwen3_next": "Qwen3-Next",
    "mistral": "Mistral",
    "mixtral": "Mistral",
    "gemma": "Gemma",
    "gemma2": "Gemma",
    "gemma3": "Gemma",
    "gemma3_text": "Gemma",
    "gemma3n": "Gemma",
    "cohere": "Cohere",
    "cohere2": "Cohere",
    "gpt_oss": "gpt-oss",
    "deepseek_v2": "DeepSeek",
    "deepseek_v3": "DeepSeek",
    "kimi_k2": "Kimi",
    "jamba": "Jamba",
    "nemotron_h": "Nemotron-H",
    "llava": "LLaVA",
    "phi3": "Phi",
    "falcon": "Falcon",
    "gpt_bigcode": "StarCoder",
    "mpt": "MPT",
    "dbrx": "DBRX",
    "chatglm": "GLM",
    "glm": "GLM",
    "glm_moe_dsa": "GLM",
    "gemma4": "Gemma",
    "gemma4_text": "Gemma",
    "deepseek_v32": "DeepSeek",
    "deepseek_v4": "DeepSeek",
    "kimi_k3": "Kimi",
    "kimi_linear": "Kimi",
    "qwen3_5_moe": "Qwen",
    "qwen3_5": "Qwen",
    "minimax_m3": "MiniMax",
    "minimax_m2": "MiniMax",
}


class PresetInfo(BaseModel):
    """One bundled preset, as listed (without reading its geometry)."""

    model_config = ConfigDict(frozen=True)

    name: str
    """File stem, the name :func:`load_preset` takes (e.g. ``llama-3.1-8b``)."""
    hub_id: str
    """Hugging Face Hub id from ``_name_or_path`` (``org/name``); empty if the file lacks it."""
    model_type: str
    """The outer ``model_type`` (``gemma3`` for the Gemma 3 wrapper, not ``gemma3_text``)."""
    family: str
    """Human-readable family label for grouping in the app."""


def presets_dir() -> Path:
    """The directory presets are read from: ``$KVP_PRESETS_DIR`` if set, else :data:`PRESETS_DIR`."""
    return settings.kvp_presets_dir() or PRESETS_DIR


def family_label(model_type: str) -> str:
    """Family label for a ``model_type``; unknown types are shown as they are."""
    return _FAMILIES.get(model_type, model_type or "unknown")


def _info(path: Path) -> PresetInfo:
    try:
        cfg = read_config_file(path, source=f"preset {path.stem}")
    except (ConfigError, OSError):
        # Listed anyway so the problem surfaces when it is loaded (load_preset raises).
        return PresetInfo(name=path.stem, hub_id="", model_type="", family="unknown")
    hub_id = cfg.get("_name_or_path")
    model_type = cfg.get("model_type")
    hub_id = hub_id if isinstance(hub_id, str) else ""
    model_type = model_type if isinstance(model_type, str) else ""
    return PresetInfo(name=path.stem, hub_id=hub_id, model_type=model_type, family=family_label(model_type))


@lru_cache(maxsize=8)
def _scan(directory: str) -> tuple[PresetInfo, ...]:
    root = Path(directory)
    if not root.is_dir():
        return ()
    paths = sorted((p for p in root.glob("*.json") if p.is_file() and _NAME_RE.match(p.stem)), key=lambda p: p.stem)  # by name: deepseek-v3 before deepseek-v3.2
    return tuple(_info(p) for p in paths)


def clear_cache() -> None:
    """Forget cached listings (after adding or editing preset files)."""
    _scan.cache_clear()


def list_presets() -> list[PresetInfo]:
    """All presets in :func:`presets_dir`, sorted by name. Cached per directory."""
    return list(_scan(str(presets_dir())))


def preset_names() -> list[str]:
    """Names of all presets, sorted."""
    return [p.name for p in list_presets()]


def _check_name(name: object) -> str:
    if not isinstance(name, str) or not name.strip():
        raise PlannerError("preset", name, "preset name must be a non-empty string")
    name = name.strip()
    if name.endswith(".json"):
        name = name[: -len(".json")]
    if "/" in name or "\\" in name or ".." in name or os.sep in name:
        raise PlannerError("preset", name, "preset name must not contain path separators or '..'")
    if not _NAME_RE.match(name):
        raise PlannerError("preset", name, "preset name may only use letters, digits, '.', '_' and '-'")
    return name


def load_preset(name: str) -> dict:
    """Read the preset ``name`` (a file stem from :func:`list_presets`) as a config dict.

    Raises:
        PlannerError: ``name`` is not a bundled preset or tries to leave the presets directory.
        ConfigError: the preset file is not a valid config (see :func:`planner.configio.parse_config_text`).
    """
    clean = _check_name(name)
    known = {p.name for p in list_presets()}
    if clean not in known:
        shown = ", ".join(sorted(known)) or "(none)"
        raise PlannerError("preset", name, f"unknown preset; known: {shown}")
    path = presets_dir() / f"{clean}.json"
    try:
        return read_config_file(path, source=f"preset {clean}")
    except OSError as exc:
        raise PlannerError("preset", name, f"cannot read {path.name}: {exc.strerror or exc}") from None


def preset_info(name: str) -> PresetInfo:
    """The listing entry of ``name`` (same errors as :func:`load_preset` for unknown names)."""
    clean = _check_name(name)
    for info in list_presets():
        if info.name == clean:
            return info
    shown = ", ".join(preset_names()) or "(none)"
    raise PlannerError("preset", name, f"unknown preset; known: {shown}")
