"""KV Capacity Planner: exact KV-cache geometry, capacity and latency plans from a model config.

The package is pure computation (pydantic models and functions). I/O lives at the edges:
``planner.hub`` (Hugging Face Hub), ``planner.presets`` (bundled ``model_configs/``),
``planner.report`` (PDF) and ``planner.probe`` (torch, imported lazily).
"""

__version__ = "0.1.0"
