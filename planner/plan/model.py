"""A parsed config (:class:`PreparedModel`: geometry and parameter counts), computed once per config."""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict

from planner.geometry import ModelGeometry, config_hash, parse_geometry
from planner.kv import resolve_kv_dtype
from planner.limits import ByteBudgetCache
from planner.plan.inputs import EXAMPLE_CONFIG
from planner.weights import WeightsEstimate, check_parameter_counts, estimate_weights, mlp_layers


class PreparedModel(BaseModel):
    """A parsed config: geometry and parameter counts, computed once."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    config: dict
    geometry: ModelGeometry
    repo_id: str | None = None
    parameter_counts: dict[str, int] | None = None  # safetensors dtype -> elements (Hub metadata)
    quantization: dict | None = None  # hf_quant_config.json, when config.json has no quantization_config

    def kv_dtype(self, requested: str) -> tuple[str, str]:
        """(KV dtype, source): ``requested``, or what ``"auto"`` resolves to for this checkpoint."""
        return resolve_kv_dtype(requested, self.config, self.quantization)

    def weight_format(self, weight_dtype: str) -> str:
        """The weight format the kernels run (what :func:`planner.latency.kernel_dtype` takes):
        ``weight_dtype`` when chosen, else the checkpoint's quantization format ("mxfp4", "nvfp4",
        "int4" for AWQ / GPTQ / 4-bit integer schemes, "fp8") or "bf16"."""
        if weight_dtype != "auto":
            return {"fp16": "bf16", "fp32": "bf16"}.get(weight_dtype, weight_dtype)
        key = (self.geometry.config_hash, "format", config_hash(self.quantization) if self.quantization else "")
        hit = _WEIGHTS_CACHE.get(key)
        if hit is None:
            label = estimate_weights(self.config, self.geometry, "auto", self.quantization).dtype_label.lower()
            hit = next((fmt for fmt, marks in FORMAT_MARKS if any(m in label for m in marks)), "bf16")
            _WEIGHTS_CACHE.put(key, hit)
        return hit  # type: ignore[return-value]

    def weights(self, weight_dtype: str) -> WeightsEstimate:
        key = (self.geometry.config_hash, weight_dtype, tuple(sorted((self.parameter_counts or {}).items())))
        hit = _WEIGHTS_CACHE.get(key)
        if hit is None:
            hit = estimate_weights(self.config, self.geometry, weight_dtype)
            if weight_dtype == "auto" and self.parameter_counts:
                hit = measured_weights(hit, self.parameter_counts)
            _WEIGHTS_CACHE.put(key, hit)
        return hit  # type: ignore[return-value]


    def mlp_layers(self) -> tuple[int, int]:
        """(layers with routed experts, layers with a dense MLP): :func:`planner.weights.mlp_layers`."""
        key = (self.geometry.config_hash, "mlp_layers")
        hit = _WEIGHTS_CACHE.get(key)
        if hit is None:
            hit = mlp_layers(self.config, self.geometry)
            _WEIGHTS_CACHE.put(key, hit)
        return hit  # type: ignore[return-value]


_WEIGHTS_CACHE = ByteBudgetCache(4 << 20)  # bounded in bytes (planner/limits.py)
# the kernel format a checkpoint's weights label names (planner/weights.py labels), first match
FORMAT_MARKS = (("mxfp4", ("mxfp4",)), ("nvfp4", ("nvfp4",)), ("int4", ("int4", "awq", "gptq", "nf4", "bitsandbytes fp4")), ("fp8", ("fp8",)))

# bytes per element of safetensors dtypes (packed 4-bit formats are stored in U8/I32 containers,
# so element counts x container size are the exact stored bytes)
SAFETENSORS_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2, "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "F8_E8M0": 1, "I8": 1, "U8": 1, "BOOL": 1}


def measured_weights(estimate: WeightsEstimate, counts: dict[str, int]) -> WeightsEstimate:
    """Weights bytes from the checkpoint's tensor dtypes and element counts (the Hub's metadata)."""
    size = sum(n * SAFETENSORS_BYTES.get(str(dtype).upper(), 2) for dtype, n in counts.items())
    label = "+".join(sorted(counts))
    return estimate.model_copy(update={"bytes": size, "expert_bytes": int(estimate.expert_bytes * size / estimate.bytes) if estimate.bytes else 0, "bits_per_param": size * 8 / max(1, estimate.total_params), "dtype_label": f"checkpoint ({label})", "source": "safetensors metadata (exact stored tensor bytes)", "encoder_bytes": 0})


_PREPARED = ByteBudgetCache(32 << 20)  # parsed configs by content hash, bounded in bytes


def prepare_model(config: dict, parameter_counts: dict[str, int] | None = None, quantization: dict | None = None) -> PreparedModel:
    """Parse and cache a config (by content hash), with the checkpoint's parameter counts if known.

    ``quantization`` is the checkpoint's ``hf_quant_config.json`` (read when config.json has no
    ``quantization_config``); ``kv_dtype="auto"`` resolves from it.

    Raises:
        ConfigError: the config is invalid.
    """
    quantization = quantization if "quantization_config" not in config else None
    parameter_counts = check_parameter_counts(parameter_counts)  # Hub numbers pass the config's bounds
    key = config_hash({"config": config, "counts": parameter_counts}) + (config_hash(quantization) if quantization else "")
    hit = _PREPARED.get(key)
    if hit is None:
        geo = parse_geometry(config)
        repo = config.get("_name_or_path")
        hit = PreparedModel(config=config, geometry=geo, repo_id=repo if isinstance(repo, str) and repo else None, parameter_counts=parameter_counts or None, quantization=quantization)
        hit.weights("auto")  # the weights fields are checked here too, so a bad config fails on load
        _PREPARED.put(key, hit)
    return hit  # type: ignore[return-value]


@lru_cache(maxsize=1)
def example_model() -> PreparedModel:
    return prepare_model(EXAMPLE_CONFIG)
