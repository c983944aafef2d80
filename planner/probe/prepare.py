"""Everything the parent knows before the child runs: the predictions and the child's request.

:func:`prepare_probe` parses the config, cuts it to ``layers_limit`` layers, predicts the bytes
of the measured layers and of the whole model, and refuses a CPU probe over its budget before
any process starts.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from planner.config_keys import LAYER_COUNT_KEYS
from planner.errors import PlannerError
from planner.geometry import ModelGeometry, parse_geometry, text_config
from planner.probe.layouts import planner_kv_bytes, predicted_transformers_cache_bytes, transformers_layout, vllm_layout
from planner.probe.options import ENV_CPU_BUDGET, INSTALLED_TRANSFORMERS_RUNTIME, ProbeOptions, check_combination, cpu_budget_bytes
from planner.probe.protocol import ELEMENT_BYTES, CacheTensor, ProbeRequest


def limit_layers(cfg: dict, limit: int | None) -> tuple[dict, list[str]]:
    """The first ``limit`` layers of a (text) config, keeping the per-layer pattern.

    Per-layer lists (``layer_types``, ``no_rope_layers``, ``hybrid_override_pattern``) are cut;
    index lists (``cross_attention_layers``, ``mlp_only_layers``) keep the indices below the limit.
    """
    key = next((k for k in LAYER_COUNT_KEYS if isinstance(cfg.get(k), int) and not isinstance(cfg.get(k), bool)), None)
    if limit is None or key is None or limit >= cfg[key]:
        return cfg, []
    out = dict(cfg)
    out[key] = limit
    notes = []
    for name in ("layer_types", "no_rope_layers", "hybrid_override_pattern"):
        if isinstance(out.get(name), (list, str)):
            out[name] = out[name][:limit]
    for name in ("cross_attention_layers", "mlp_only_layers"):
        if isinstance(out.get(name), list):
            out[name] = [i for i in out[name] if isinstance(i, int) and i < limit]
    if out.get("num_kv_shared_layers"):
        out["num_kv_shared_layers"] = 0
        notes.append("num_kv_shared_layers set to 0: in the first layers every layer owns its K/V")
    return out, notes


class Prepared(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    options: ProbeOptions
    text_cfg: dict  # the (limited) decoder config the child builds
    geo_full: ModelGeometry
    geo: ModelGeometry  # the measured layers
    label: str
    layout: tuple[CacheTensor, ...] = ()  # allocate mode
    cached: int
    predicted: int
    predicted_logical: int | None = None
    predicted_after_prefill: int | None = None
    planner: int
    predicted_full: int
    planner_full: int
    need_bytes: int  # the pre-check estimate
    weights_estimate: int = 0
    work_estimate: int = 0
    notes: tuple[str, ...] = ()


def _work_bytes(cfg: dict, geo: ModelGeometry, opts: ProbeOptions) -> int:
    """A rough working-set estimate of one forward: activations, attention scores, logits, slack."""
    elem = ELEMENT_BYTES.get(opts.kv_dtype, 2)
    inter = cfg.get("intermediate_size") if isinstance(cfg.get("intermediate_size"), int) else 4 * geo.hidden_size
    tokens = opts.batch * opts.tokens
    acts = tokens * (16 * geo.hidden_size + 4 * inter) * elem
    scores = opts.batch * geo.num_attention_heads * opts.tokens * opts.tokens * 4
    logits = opts.batch * (geo.vocab_size or 32000) * 4
    return acts + scores + logits + (64 << 20)


def prepare_probe(config: dict, options: ProbeOptions, *, label: str | None = None) -> Prepared:
    """Predictions and the child's request for one probe, without torch.

    Raises:
        ConfigError / PlannerError: an invalid config, options, or a prediction above the CPU
            budget when the device is ``cpu`` (refused before anything is allocated).
    """
    check_combination(options)
    opts = options
    geo_full = parse_geometry(config)
    cfg_full = text_config(config)
    cfg, notes = limit_layers(cfg_full, opts.layers_limit)
    geo = parse_geometry(cfg) if cfg is not cfg_full else geo_full
    runtime = opts.effective_runtime
    T, B, N = opts.tokens, opts.batch, opts.decode_steps
    name = label or str(config.get("_name_or_path") or geo.model_type)
    fields: dict[str, Any] = {"options": opts, "text_cfg": cfg, "geo_full": geo_full, "geo": geo, "label": name, "notes": tuple(notes)}
    if opts.mode == "allocate":
        cached = T
        if runtime == "vllm":
            layout = vllm_layout(geo, opts.kv_dtype, T, B, opts.block_tokens, opts.tp)
            planner = planner_kv_bytes(geo, opts.kv_dtype, T, B, "vllm", opts.tp, opts.block_tokens)
            full_pred = planner_full = planner_kv_bytes(geo_full, opts.kv_dtype, T, B, "vllm", opts.tp, opts.block_tokens)
            logical = None
        else:
            static = T if opts.static else None
            layout = transformers_layout(geo, opts.kv_dtype, T, B, last_step=1, static_len=static)
            logical = sum(t.nbytes for t in transformers_layout(geo, opts.kv_dtype, T, B, last_step=1, static_len=static, logical=True))
            planner = planner_kv_bytes(geo, opts.kv_dtype, T, B, INSTALLED_TRANSFORMERS_RUNTIME)
            full_pred = predicted_transformers_cache_bytes(geo_full, T, B, opts.kv_dtype, static_len=static)
            planner_full = planner_kv_bytes(geo_full, opts.kv_dtype, T, B, INSTALLED_TRANSFORMERS_RUNTIME)
        predicted = sum(t.nbytes for t in layout)
        fields.update(layout=tuple(layout), cached=cached, predicted=predicted, predicted_logical=logical, planner=planner, predicted_full=full_pred, planner_full=planner_full, need_bytes=predicted)
    else:
        cached = T + N
        static = cached if opts.static else None
        last = 1 if N else T
        predicted = predicted_transformers_cache_bytes(geo, cached, B, opts.kv_dtype, last_step=last, static_len=static)
        logical = predicted_transformers_cache_bytes(geo, cached, B, opts.kv_dtype, last_step=last, static_len=static, logical=True)
        after_prefill = predicted_transformers_cache_bytes(geo, T, B, opts.kv_dtype, last_step=T, static_len=static)
        from planner.weights import estimate_weights

        weights = estimate_weights(cfg, geo, opts.kv_dtype).bytes
        work = _work_bytes(cfg, geo, opts)
        fields.update(
            cached=cached,
            predicted=predicted,
            predicted_logical=logical,
            predicted_after_prefill=after_prefill,
            planner=planner_kv_bytes(geo, opts.kv_dtype, cached, B, INSTALLED_TRANSFORMERS_RUNTIME),
            predicted_full=predicted_transformers_cache_bytes(geo_full, cached, B, opts.kv_dtype, last_step=last, static_len=static),
            planner_full=planner_kv_bytes(geo_full, opts.kv_dtype, cached, B, INSTALLED_TRANSFORMERS_RUNTIME),
            need_bytes=max(predicted, after_prefill) + weights + work,
            weights_estimate=weights,
            work_estimate=work,
        )
    prep = Prepared(**fields)
    if opts.device == "cpu":
        _refuse_over_budget(prep.need_bytes, cpu_budget_bytes(), "the CPU budget", f" ({ENV_CPU_BUDGET})", prep)
    return prep


def _refuse_over_budget(need: int, limit: float, what: str, hint: str, prep: Prepared | None) -> None:
    if need <= limit:
        return
    parts = ""
    if prep is not None and prep.options.mode == "runtime":
        parts = f" (K/V {max(prep.predicted, prep.predicted_after_prefill or 0):,} + weights about {prep.weights_estimate:,} + working memory about {prep.work_estimate:,})"
    raise PlannerError(
        "probe",
        f"{need:,} bytes",
        f"the probe would need {need:,} bytes{parts}, above {what} of {int(limit):,} bytes{hint}: refused before allocating; lower --tokens or --batch, or use --layers-limit",
    )


def build_request(prep: Prepared) -> ProbeRequest:
    """The child's request: the options it needs, the (limited) config or the tensors, its budgets."""
    o = prep.options
    return ProbeRequest(
        mode=o.mode,
        runtime=o.effective_runtime,
        device=o.device,
        kv_dtype=o.kv_dtype,
        tokens=o.tokens,
        batch=o.batch,
        decode_steps=o.decode_steps,
        static=o.static,
        warmup=o.warmup,
        text_config=prep.text_cfg,
        layout=prep.layout,
        kv_peak_bytes=max(prep.predicted, prep.predicted_after_prefill or 0),
        work_bytes=prep.work_estimate,
        cpu_budget=cpu_budget_bytes(),
    )
