"""KV Capacity Planner: exact KV-cache geometry, capacity and latency plans from a model config.

The package is pure computation (pydantic models and functions). I/O lives at the edges:
``planner.hub`` (Hugging Face Hub), ``planner.presets`` (bundled ``model_configs/``),
``planner.report`` (PDF) and ``planner.probe`` (torch, imported lazily).

The planner sends the Hub no usage telemetry: importing it sets ``HF_HUB_DISABLE_TELEMETRY=1``
unless that is given (before ``huggingface_hub`` reads it; see :mod:`planner.settings`).
"""

from planner import settings as _settings

__version__ = "0.1.0"
_settings.quiet_hub_telemetry()
