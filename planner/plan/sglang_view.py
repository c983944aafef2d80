"""Runtime sglang's view of a plan: SGLang's memory budget, token pool and admission ceiling.

Under runtime ``sglang`` a plan's memory is what ``python -m sglang.launch_server`` will find and
size on one GPU (:func:`planner.engines.sglang.sglang_preview`): the card's memory as nvidia-smi
reports it, less the CUDA context and the distributed-init buffers, times ``--mem-fraction-static``
(SGLang's default for the GPU and TP unless the plan gives one), less the weights, the VLM cache
reservation and a hybrid's Mamba state pool; what is left is the token pool
(``max_total_num_tokens`` tokens of the pool's cell). The plan's headroom and workspace do not
apply (SGLang's static fraction replaces both). A request holds its reserved tokens in the token
pool (whole pages) and, for hybrid sliding-window models, at most its window in the SWA pool;
SGLang runs at most ``max_running_requests`` at once (for Mamba hybrids: the state slots).
"""

from __future__ import annotations

from dataclasses import dataclass

from planner.engines.sglang import SglangCapacity, SglangMemory
from planner.errors import PlannerError
from planner.limits import ByteBudgetCache
from planner.plan.inputs import PlanInputs
from planner.plan.model import PreparedModel
from planner.plan.sections import Section
from planner.units import GIB

# the plan's KV dtype as SGLang's --kv-cache-dtype ("auto" lets SGLang resolve the checkpoint's,
# as it does at start-up); other plan dtypes have no SGLang flag
SGLANG_KV_DTYPES = {"auto": "auto", "fp8": "fp8_e4m3", "bf16": "bfloat16"}

# the plan control that changes each kind of SGLang refusal (SglangRefusal.kind -> PlanInputs field)
_REFUSAL_FIELDS = {
    "context_length": "max_context",
    "kv_cache_dtype": "kv_dtype",
    "quantization": "gpu",
    "config": "model",
    "no_kv_memory": "mem_fraction_static",
}


@dataclass(frozen=True, slots=True)
class SglangView(Section):
    """SGLang's start-up sizing of a plan on one GPU of a replica, and the requests it holds."""

    capacity: SglangCapacity  # what SGLang resolves, sizes and logs (planner.engines.sglang)
    memory: SglangMemory  # the memory state it sizes from, term by term
    # one request of the plan's reserved tokens, and how many the pools hold at once
    tokens_per_request: int  # reserved tokens rounded up to whole pages
    swa_tokens_per_request: int | None  # at most the window (rounded to pages) in the SWA pool
    max_sequences_per_replica: int
    binding: str  # "token pool", "SWA pool" or "max_running_requests"
    command: str
    why: str
    weights_bytes: int  # the checkpoint's resident weights over a replica's GPUs (SGLang loads them all)
    weights_source: str

    def to_json(self) -> dict:
        out = Section.to_json(self)
        del out["weights_source"]  # the memory terms name it
        out["capacity"], out["memory"] = self.capacity.summary(), self.memory.summary()
        return out


def sglang_kv_dtype(kv_dtype: str) -> str:
    """SGLang's ``--kv-cache-dtype`` for the plan's KV dtype.

    Raises:
        PlannerError: a plan dtype SGLang has no KV cache for (fp32, fp16, int8, int4).
    """
    hit = SGLANG_KV_DTYPES.get(kv_dtype)
    if hit is None:
        raise PlannerError("kv_dtype", kv_dtype, f"SGLang has no {kv_dtype} KV cache; choose {', '.join(SGLANG_KV_DTYPES)}")
    return hit


def sglang_settings(inputs: PlanInputs):
    """The ``launch_server`` flags of a plan (None: SGLang's own default)."""
    from planner.engines.sglang import DEFAULT_SGLANG_VERSION, SglangSettings

    return SglangSettings(
        tp=inputs.tp, kv_cache_dtype=sglang_kv_dtype(inputs.kv_dtype), context_length=inputs.max_context, mem_fraction_static=inputs.mem_fraction_static,
        chunked_prefill_size=inputs.chunked_prefill_size, max_running_requests=inputs.max_num_seqs, page_size=inputs.page_size, sglang_version=DEFAULT_SGLANG_VERSION,
        scheduler_recv_interval=inputs.recv_interval if inputs.recv_interval != 1 else None,
    )  # fmt: skip


def sglang_weights(inputs: PlanInputs, model: PreparedModel) -> tuple[int, str]:
    """(the checkpoint's resident weights over all GPUs of a replica, their source): the given
    weights per GPU x TP, else the whole checkpoint (a vision tower included: SGLang loads it)."""
    if inputs.model_resident_gib is not None:
        return int(inputs.model_resident_gib * GIB) * inputs.tp, "given (model resident per GPU)"
    w = model.weights(inputs.weight_dtype)
    return w.checkpoint_bytes, f"weights estimate ({w.source})"


def sglang_view(inputs: PlanInputs, model: PreparedModel, reserved_tokens: int, windows: tuple[int, ...]) -> SglangView:
    """SGLang's sizing of this plan (memoised by everything it reads).

    ``reserved_tokens`` is what one request of the plan reserves; ``windows`` the sliding windows
    of the model's layers (the SWA pool holds at most the largest per request).

    Raises:
        PlannerError: a custom device or a GPU with no SGLang profile, a KV dtype SGLang has no
            flag for, or SGLang's refusal to start, in its own words, naming the plan control
            that changes it.
    """
    if inputs.device_gib is not None:
        from planner.engines.sglang import GPUS

        raise PlannerError("device_gib", inputs.device_gib, f"SGLang sizes its defaults from a known card's memory and compute capability; choose a catalog GPU ({', '.join(GPUS)})")
    # one string of what the view reads (the cache charges a string without walking it); a slider
    # that changes nothing here is a memo hit
    settings_key = (
        f"{model.geometry.config_hash}|{id(model)}|{inputs.gpu}|{inputs.tp}|{inputs.kv_dtype}|{inputs.max_context}|{inputs.mem_fraction_static!r}|{inputs.chunked_prefill_size}|"
        f"{inputs.max_num_seqs}|{inputs.page_size}|{inputs.model_resident_gib!r}|{inputs.weight_dtype}|{inputs.recv_interval}"
    )  # fmt: skip
    key = f"{settings_key}|{reserved_tokens}|{windows}"
    hit = _VIEWS.get(key)
    if hit is None or hit[0] is not model:  # id() is only unique while the model lives: the entry keeps it
        try:
            view = _view(inputs, model, _preview(inputs, model, settings_key), reserved_tokens, windows)
        except PlannerError as exc:
            view = PlannerError(exc.field, exc.value, exc.reason)
        hit = (model, view)
        _VIEWS.put(key, hit)
    hit = hit[1]
    if isinstance(hit, PlannerError):
        raise PlannerError(hit.field, hit.value, hit.reason)
    return hit  # type: ignore[return-value]


def _view_bytes(entry: tuple) -> int:
    """Charge for a memo entry without walking it: 4 kB plus 2 B a character of its text (its
    model is held by the model cache anyway)."""
    view = entry[1]
    if isinstance(view, PlannerError):
        return 1024 + 2 * len(view.reason)
    return 4096 + 2 * (sum(map(len, view.capacity.log_lines)) + len(view.why) + len(view.command) + sum(len(t.source) for t in view.memory.terms))


_VIEWS = ByteBudgetCache(4 << 20, sizer=_view_bytes)  # sglang_view by everything it reads, bounded in bytes
# SGLang's preview by the settings alone (a new prompt length re-uses it: only the ceiling changes)
_PREVIEWS = ByteBudgetCache(2 << 20, sizer=lambda entry: 8192)


def _preview(inputs: PlanInputs, model: PreparedModel, key: str):
    """(SGLang's preview, the weights it loads, their source) for the plan's settings, memoised."""
    hit = _PREVIEWS.get(key)
    if hit is None or hit[0] is not model:
        from planner.engines.sglang import sglang_preview

        settings = sglang_settings(inputs)
        weights, source = sglang_weights(inputs, model)
        p = sglang_preview(model.config, gpu=inputs.gpu, weights_bytes=weights, settings=settings, model=model.repo_id or "MODEL", weights_source=source, quantization=model.quantization, geometry=model.geometry)
        hit = (model, (p, settings.sglang_version, weights, source))
        _PREVIEWS.put(key, hit)
    return hit[1]


def _pages(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


def _view(inputs: PlanInputs, model: PreparedModel, preview: tuple, reserved_tokens: int, windows: tuple[int, ...]) -> SglangView:
    p, version, weights, source = preview
    if p.capacity is None:
        field = _REFUSAL_FIELDS.get(p.refusal_kind or "", "tp")
        value = "config" if field == "model" else getattr(inputs, field)
        raise PlannerError(field, value, f"SGLang {version} refuses to start: {p.refusal}")
    c = p.capacity
    page = c.page_size
    per_request = _pages(max(1, reserved_tokens), page)
    limits = {"max_running_requests": c.max_running_requests, "token pool": c.max_total_num_tokens // per_request}
    swa_per_request = None
    if c.swa_max_total_num_tokens is not None and windows:
        swa_per_request = min(per_request, _pages(max(windows), page))
        limits["SWA pool"] = c.swa_max_total_num_tokens // swa_per_request
    binding = min(limits, key=limits.__getitem__)
    held = limits[binding]
    pools = f"{c.max_total_num_tokens:,} tokens" + (f" and {c.swa_max_total_num_tokens:,} SWA tokens" if swa_per_request else "")
    cap = f"max_running_requests {c.max_running_requests:,}" + (f" (Mamba state slots {c.max_mamba_cache_size:,})" if c.max_mamba_cache_size is not None else "")
    why = (
        f"SGLang {c.sglang_version} holds {pools} on each GPU; a request of {reserved_tokens:,} reserved tokens takes {per_request:,} pool tokens"
        + (f" ({page}-token pages)" if page > 1 else "")
        + (f" and {swa_per_request:,} SWA tokens" if swa_per_request else "")
        + f", and {cap} run at once: {held:,} requests a replica ({binding} binds)."
    )
    return SglangView(
        capacity=c, memory=p.memory, tokens_per_request=per_request, swa_tokens_per_request=swa_per_request, max_sequences_per_replica=held, binding=binding,
        command=p.command, why=why, weights_bytes=weights, weights_source=source,
    )  # fmt: skip


def sglang_memory(view: SglangView, weights_per_gpu_bytes: int, source: str, replicas: int) -> tuple[int, int, str, int, int, int, int]:
    """The plan's memory of one GPU under SGLang, as :class:`~planner.plan.result.Memory`'s fields:
    usable = free before the weights x mem_fraction_static; resident = this GPU's weights; the rest
    of the static fraction (VLM cache reservation, Mamba state pool) is the workspace; available
    is the budget the token pool is sized from."""
    usable = int(view.memory.pre_load_free_gib * view.capacity.mem_fraction_static * GIB)
    available = view.capacity.available_kv_bytes
    workspace = max(0, usable - weights_per_gpu_bytes - available)
    return (usable, weights_per_gpu_bytes, source, workspace, weights_per_gpu_bytes + workspace, available, replicas)
