"""Where a model's config came from, and loading it back: preset, Hub, upload or the example.

A :class:`ModelRef` is what share links, plan files and reports record to reproduce a plan:
a preset name, a Hub repo id pinned to its commit, or an uploaded config's content hash (with
the config itself embedded when it is small).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.geometry import config_hash
from planner.plan import EXAMPLE_CONFIG, PreparedModel, prepare_model


class ModelRef(BaseModel):
    """A reproducible reference to a model config."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["preset", "hub", "upload", "example"]
    name: str | None = None  # preset name or upload file name
    repo_id: str | None = None
    revision: str | None = None
    commit: str | None = None  # 40-hex commit a Hub config was read at
    config_hash: str | None = None  # sha256 of the config (uploads; recorded for all)

    def label(self) -> str:
        if self.kind == "preset":
            return f"preset {self.name}" + (f" ({self.repo_id})" if self.repo_id else "")
        if self.kind == "hub":
            return f"{self.repo_id}@{(self.commit or self.revision or 'main')[:12]}"
        if self.kind == "upload":
            return f"uploaded {self.name or 'config.json'} (sha256 {str(self.config_hash)[:12]})"
        return "seed example (32 layers, 8 KV heads x 128)"


def preset_ref(name: str) -> tuple[ModelRef, PreparedModel]:
    """Load a bundled preset.

    Raises:
        PlannerError: unknown preset name.
        ConfigError: the preset's config is invalid.
    """
    from planner.presets import load_preset

    config = load_preset(name)
    model = prepare_model(config)
    return ModelRef(kind="preset", name=name, repo_id=model.repo_id, config_hash=model.geometry.config_hash), model


def example_ref() -> tuple[ModelRef, PreparedModel]:
    model = prepare_model(EXAMPLE_CONFIG)
    return ModelRef(kind="example", config_hash=model.geometry.config_hash), model


def upload_ref(config: dict, name: str | None = None) -> tuple[ModelRef, PreparedModel]:
    """An uploaded or pasted config, pinned by its content hash.

    Raises:
        ConfigError: the config is invalid.
    """
    model = prepare_model(config)
    return ModelRef(kind="upload", name=name, config_hash=config_hash(config), repo_id=model.repo_id), model


def hub_ref(repo_id: str, revision: str = "main", token: str | None = None) -> tuple[ModelRef, PreparedModel, object]:
    """Fetch from the Hub (see :func:`planner.hub.fetch_model`); returns the HubModel too.

    Raises:
        planner.hub.HubError: any Hub failure, with a message saying what to do.
        ConfigError: the fetched config is invalid.
    """
    from planner import hub

    fetched = hub.fetch_model(repo_id, revision, token=token)
    model = prepare_model(fetched.config, fetched.parameter_counts, fetched.quantization)
    ref = ModelRef(kind="hub", repo_id=fetched.repo_id, revision=fetched.revision, commit=fetched.commit_sha, config_hash=model.geometry.config_hash)
    return ref, model, fetched


def resolve(ref: ModelRef, *, config: dict | None = None, token: str | None = None) -> PreparedModel:
    """Load the config a reference names (``config`` supplies an upload's content).

    Raises:
        PlannerError: an upload whose content is missing or does not match its hash.
        planner.hub.HubError: Hub failures.
    """
    if ref.kind == "preset":
        return preset_ref(ref.name or "")[1]
    if ref.kind == "example":
        return example_ref()[1]
    if ref.kind == "hub":
        return hub_ref(ref.repo_id or "", ref.commit or ref.revision or "main", token)[1]
    if config is None:
        raise PlannerError("model", ref.name or "upload", "this plan was made from an uploaded config: upload the same config.json to reproduce it")
    if ref.config_hash and config_hash(config) != ref.config_hash:
        raise PlannerError("model.config_hash", ref.config_hash[:12], "the uploaded config does not match the one this plan was made from")
    return prepare_model(config)
