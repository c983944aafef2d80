"""The measuring child (``python -m planner.probe --child``): the only code that imports torch.

It reads one request on stdin, allocates the cache tensors or runs a random transformers model,
and writes one JSON line on stdout. The memory check runs here again (against the free device
memory on CUDA) before anything is allocated. torch and transformers are imported inside the
functions, so importing this module stays light.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from planner.errors import PlannerError
from planner.probe.options import CUDA_ROUND, ENV_CPU_BUDGET, GPU_FREE_FRACTION
from planner.probe.protocol import (
    MAX_REQUEST_BYTES,
    TORCH_DTYPE,
    AllocateMeasurement,
    CacheLayer,
    FailedReply,
    MeasuredReply,
    ProbeReply,
    ProbeRequest,
    ProtocolError,
    RefusedReply,
    RuntimeMeasurement,
    decode_request,
    encode,
)


def execute(request: ProbeRequest) -> ProbeReply:
    """Measure one request in this process (the child's work). Never raises: a refusal or a
    failure is a reply too."""
    try:
        measure = _measure_allocate if request.mode == "allocate" else _measure_runtime
        return MeasuredReply(measurement=measure(request))
    except PlannerError as exc:
        return RefusedReply(field=str(exc.field), value=str(exc.value), reason=exc.reason)
    except Exception as exc:  # noqa: BLE001 - the child reports every failure as a result
        return FailedReply(error=f"{type(exc).__name__}: {str(exc)[:1000]}")
    finally:
        _release()


def _release() -> None:
    import gc

    gc.collect()
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _device(torch: Any, wanted: str) -> Any:
    if wanted == "cuda" and not torch.cuda.is_available():
        raise PlannerError("device", "cuda", "CUDA is not available on this machine (torch.cuda.is_available() is False); use --device cpu or auto")
    if wanted == "auto":
        wanted = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(wanted)


def _device_info(torch: Any, dev: Any) -> dict:
    import platform

    info = {"device": dev.type, "torch_version": torch.__version__}
    if dev.type == "cuda":
        props = torch.cuda.get_device_properties(dev)
        info.update(device_name=props.name, device_total_bytes=int(props.total_memory))
    else:
        info.update(device_name=f"{platform.machine()} {platform.processor() or ''} ({torch.get_num_threads()} threads)".replace("  ", " "))
    return info


def _check_memory(torch: Any, dev: Any, need: int, budget: int) -> None:
    if dev.type == "cuda":
        free, _total = torch.cuda.mem_get_info(dev)
        _refuse_child(need, GPU_FREE_FRACTION * free, f"80 % of the free device memory ({free:,} bytes free)")
    else:
        _refuse_child(need, budget, f"the CPU budget ({ENV_CPU_BUDGET})")


def _refuse_child(need: int, limit: float, what: str) -> None:
    if need > limit:
        raise PlannerError("probe", f"{need:,} bytes", f"the probe would need {need:,} bytes, above {what} of {int(limit):,} bytes: refused before allocating; lower --tokens or --batch, or use --layers-limit")


def _storage_bytes(tensors: list, seen: set | None = None) -> int:
    seen = set() if seen is None else seen
    total = 0
    for t in tensors:
        s = t.untyped_storage()
        key = (s.data_ptr(), s.nbytes())
        if s.nbytes() and key in seen:
            continue
        seen.add(key)
        total += s.nbytes()
    return total


def _sync(torch: Any, dev: Any) -> None:
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def _measure_allocate(req: ProbeRequest) -> AllocateMeasurement:
    import torch

    dev = _device(torch, req.device)
    specs = req.layout
    dtypes = {}
    for t in specs:
        if t.dtype not in dtypes:
            dt = getattr(torch, t.dtype, None)
            if dt is None:
                raise PlannerError("kv_dtype", t.dtype, f"this torch ({torch.__version__}) has no {t.dtype}")
            dtypes[t.dtype] = dt
    storage_pred = sum(t.nbytes for t in specs)
    rounded = sum(-(-t.nbytes // CUDA_ROUND) * CUDA_ROUND for t in specs)
    _check_memory(torch, dev, rounded if dev.type == "cuda" else storage_pred, req.cpu_budget)
    info = _device_info(torch, dev)
    tensors: list = []
    if dev.type == "cuda":
        torch.cuda.init()
        _sync(torch, dev)
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
        before = torch.cuda.memory_allocated(dev)
    t0 = time.perf_counter()
    try:
        for t in specs:
            tensors.append(torch.zeros(t.shape, dtype=dtypes[t.dtype], device=dev))
        _sync(torch, dev)
        elapsed = (time.perf_counter() - t0) * 1e3
        storage = _storage_bytes(tensors)
        out = {**info, "tensors": len(tensors), "storage_bytes": storage, "logical_kv_bytes": sum(t.numel() * t.element_size() for t in tensors), "allocate_ms": round(elapsed, 4), "rounded_bytes": rounded}
        if dev.type == "cuda":
            after = torch.cuda.memory_allocated(dev)
            out["cuda_allocated_delta_bytes"] = after - before
            out["cuda_peak_delta_bytes"] = torch.cuda.max_memory_allocated(dev) - before
            out["kv_bytes"] = after - before
        else:
            out["kv_bytes"] = storage
    finally:
        tensors.clear()
        _release()
    if dev.type == "cuda":
        out["cuda_released"] = torch.cuda.memory_allocated(dev) == before
    return AllocateMeasurement(**out)


_DROP_KEYS = {"model_type", "architectures", "auto_map", "quantization_config", "torch_dtype", "dtype", "transformers_version", "attn_implementation", "use_cache", "trust_remote_code"}


def build_transformers_config(text_cfg: dict) -> Any:
    """A transformers config from a (text) config dict, completed with the class defaults; never remote code."""
    from transformers import AutoConfig

    model_type = text_cfg.get("model_type")
    if not isinstance(model_type, str):
        raise PlannerError("model_type", model_type, "the config names no model_type: transformers cannot build a model from it")
    fields = {k: v for k, v in text_cfg.items() if not k.startswith("_") and k not in _DROP_KEYS}
    try:
        cfg = AutoConfig.for_model(model_type, **fields)
    except ValueError as exc:
        raise PlannerError("model_type", model_type, f"transformers does not know this model type (the probe never runs remote code): {str(exc)[:200]}") from None
    cfg.use_cache = True
    return cfg


def _cache_tensors(cache: Any) -> tuple[list[CacheLayer], list, list, int]:
    """Per-layer rows, K/V tensors, other state tensors of a cache, and the state bytes."""
    import torch

    rows, kv, state = [], [], []
    for i, layer in enumerate(cache.layers):
        keys, values = getattr(layer, "keys", None), getattr(layer, "values", None)
        pair = [t for t in (keys, values) if isinstance(t, torch.Tensor)]
        kv += pair
        for name, value in vars(layer).items():
            if name not in ("keys", "values") and isinstance(value, torch.Tensor) and value.dim() > 0 and value.numel() > 1:
                state.append(value)
        if pair:
            rows.append(
                CacheLayer(
                    index=i,
                    cache_class=type(layer).__name__,
                    keys_shape=tuple(keys.shape) if isinstance(keys, torch.Tensor) else (),
                    values_shape=tuple(values.shape) if isinstance(values, torch.Tensor) else (),
                    storage_bytes=_storage_bytes(pair),
                    logical_bytes=sum(t.numel() * t.element_size() for t in pair),
                )
            )
        else:
            rows.append(CacheLayer(index=i, cache_class=type(layer).__name__, storage_bytes=0, logical_bytes=0))
    return rows, kv, state, _storage_bytes(state)


def _forward(model: Any, ids: Any, cache: Any) -> Any:
    try:
        return model(input_ids=ids, cache=cache, use_cache=True, logits_to_keep=1)
    except TypeError:
        return model(input_ids=ids, cache=cache, use_cache=True)


def _measure_runtime(req: ProbeRequest) -> RuntimeMeasurement:
    import resource

    import torch
    import transformers
    from transformers import AutoModelForCausalLM

    dev = _device(torch, req.device)
    dtype = getattr(torch, TORCH_DTYPE[req.kv_dtype])
    cfg = build_transformers_config(req.text_config)
    with torch.device("meta"):
        meta = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
    weights = sum(p.numel() * p.element_size() for p in meta.parameters()) + sum(b.numel() * b.element_size() for b in meta.buffers())
    del meta
    _check_memory(torch, dev, weights + req.kv_peak_bytes + req.work_bytes, req.cpu_budget)
    fields = {**_device_info(torch, dev), "transformers_version": transformers.__version__, "weights_bytes": weights}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if dev.type == "cuda":
        torch.cuda.init()
        _sync(torch, dev)
        torch.cuda.empty_cache()
        base = torch.cuda.memory_allocated(dev)
    torch.manual_seed(0)
    model = cache = None
    try:
        with torch.device(dev):
            model = AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        model = model.to(dev).eval()
        if dev.type == "cuda":
            _sync(torch, dev)
            loaded = torch.cuda.memory_allocated(dev)
            free, total = torch.cuda.mem_get_info(dev)
            # what the device uses beyond torch's own pool: the CUDA context, cuBLAS/cuDNN workspaces
            non_torch = max(0, (total - free) - torch.cuda.memory_reserved(dev))
        cache, prefill_ms, after_prefill, steps = _prefill_and_decode(torch, model, cfg, req, dev)
        rows, kv, _state, state_bytes = _cache_tensors(cache)
        fields.update(
            kv_bytes=_storage_bytes(kv),
            storage_bytes=_storage_bytes(kv),
            logical_kv_bytes=sum(t.numel() * t.element_size() for t in kv),
            kv_bytes_after_prefill=after_prefill,
            state_bytes=state_bytes,
            prefill_ms=round(prefill_ms, 4),
            decode_steps_ms=tuple(round(s, 4) for s in steps),
            layers=tuple(rows),
            warmup=req.warmup,
            peak_rss_delta_bytes=max(0, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - rss0),
        )
        del kv, _state
        if dev.type == "cuda":
            peak = torch.cuda.max_memory_allocated(dev) - base
            # the prefill's peak above the weights and the cache it filled: its activations at B x T tokens
            fields.update(cuda_peak_delta_bytes=peak, cuda_weights_bytes=loaded - base, cuda_non_torch_bytes=non_torch, cuda_prefill_peak_bytes=max(0, peak - (loaded - base) - after_prefill))
    finally:
        del model, cache
        _release()
    if dev.type == "cuda":
        fields["cuda_released"] = torch.cuda.memory_allocated(dev) == base
    return RuntimeMeasurement(**fields)


def _prefill_and_decode(torch: Any, model: Any, cfg: Any, req: ProbeRequest, dev: Any) -> tuple[Any, float, int, list[float]]:
    """A (warm-up,) a timed prefill of ``tokens`` random ids and ``decode_steps`` timed single-token
    steps into a fresh cache: (the cache, prefill ms, cache bytes after the prefill, step ms)."""
    from transformers import DynamicCache, StaticCache

    B, T, N = req.batch, req.tokens, req.decode_steps
    vocab = int(getattr(cfg, "vocab_size", 0) or model.get_input_embeddings().num_embeddings)
    ids = torch.randint(0, vocab, (B, T), device=dev)
    with torch.inference_mode():
        if req.warmup:
            warm = DynamicCache(config=cfg)
            o = _forward(model, ids[:, : min(T, 8)], warm)
            _forward(model, o.logits[:, -1:].argmax(-1), warm)
            del warm, o
        cache = StaticCache(config=cfg, max_cache_len=T + N) if req.static else DynamicCache(config=cfg)
        if dev.type == "cuda":
            _sync(torch, dev)
            torch.cuda.reset_peak_memory_stats(dev)
        t0 = time.perf_counter()
        out = _forward(model, ids, cache)
        nxt = out.logits[:, -1:].argmax(-1)
        _sync(torch, dev)
        prefill_ms = (time.perf_counter() - t0) * 1e3
        _, kv_after_prefill, _, _ = _cache_tensors(cache)
        after_prefill = _storage_bytes(kv_after_prefill)
        del kv_after_prefill
        steps = []
        for _ in range(N):
            t0 = time.perf_counter()
            out = _forward(model, nxt, cache)
            nxt = out.logits[:, -1:].argmax(-1)
            _sync(torch, dev)
            steps.append((time.perf_counter() - t0) * 1e3)
    return cache, prefill_ms, after_prefill, steps


def _child_main() -> int:
    """``python -m planner.probe --child``: a request on stdin, one JSON line on stdout."""
    real_out = os.dup(1)
    os.dup2(2, 1)  # stray prints from libraries go to stderr, not into the reply
    sys.stdout = sys.stderr
    reply: ProbeReply
    try:
        raw = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
        if len(raw) > MAX_REQUEST_BYTES:
            reply = FailedReply(error="probe request too large")
        else:
            reply = execute(decode_request(raw))
    except ProtocolError as exc:
        reply = FailedReply(error=str(exc))
    except Exception as exc:  # noqa: BLE001
        reply = FailedReply(error=f"{type(exc).__name__}: {str(exc)[:1000]}")
    os.write(real_out, (encode(reply) + "\n").encode("utf-8"))
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m planner.probe --child``: the measuring process (the ``probe`` command is in :mod:`planner.cli`)."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child"]:
        return _child_main()
    print("error: run the probe as `python -m planner probe ...`; `python -m planner.probe --child` is the measuring process", file=sys.stderr)
    return 2
