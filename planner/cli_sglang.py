"""``python -m planner engine --engine sglang``: what ``python -m sglang.launch_server`` sizes and
prints at start-up (:mod:`planner.engines.sglang`), from a measured memory state or one predicted
for ``--gpu`` term by term. :mod:`planner.cli` adds these flags to its ``engine`` command."""

from __future__ import annotations

import argparse
import sys

# vLLM-only flags of the engine command: refused with --engine sglang (each has an SGLang spelling or none)
VLLM_ONLY = {
    "block_size": "--page-size", "max_model_len": "--context-length", "max_num_seqs": "--max-running-requests", "available_kv_bytes": "--available-after-weights-gib",
    "available_kv_gib": "--available-after-weights-gib", "max_num_batched_tokens": "--chunked-prefill-size", "gpu_memory_utilization": "--mem-fraction-static",
    "vllm_version": "--sglang-version", "probe_json": None, "no_prefix_caching": None, "speculative_layers": None,
}  # fmt: skip
SGLANG_ONLY = ("context_length", "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "page_size", "pre_load_free_gib", "available_after_weights_gib")


def add_sglang_arguments(p: argparse.ArgumentParser, bounded) -> None:
    """The ``engine`` command's ``--engine`` choice and SGLang's flags (``bounded``: the CLI's
    argparse type reading a number within :data:`planner.limits.BOUNDS`)."""
    from planner.engines.sglang import DEFAULT_SGLANG_VERSION, SGLANG_VERSIONS

    defaults = {name: p.get_default(name) for name in VLLM_ONLY}  # a vLLM flag left at its default is not "given"
    p.set_defaults(engine_defaults=defaults)
    p.add_argument("--engine", choices=["vllm", "sglang"], default="vllm", help="whose start-up sizing to predict (default: %(default)s)")
    g = p.add_argument_group("SGLang (--engine sglang; --gpu is required, SGLang sizes its defaults from the card)")
    g.add_argument("--context-length", type=bounded("context_length"), help="SGLang --context-length (default: the model's; a longer one is refused, not clamped)")
    g.add_argument("--mem-fraction-static", type=bounded("mem_fraction_static"), help="SGLang --mem-fraction-static (default: SGLang's for the GPU and TP, e.g. 0.835 on one H100)")
    g.add_argument("--chunked-prefill-size", type=bounded("chunked_prefill_size"), help="SGLang --chunked-prefill-size, -1 for none (default: SGLang's for the GPU, 2,048 to 16,384)")
    g.add_argument("--max-running-requests", type=bounded("max_running_requests"), help="SGLang --max-running-requests (default: from the token pool and context, 2,048 to 4,096)")
    g.add_argument("--page-size", type=bounded("page_size"), help="SGLang --page-size (default: the model's, 1; 64 for DSA; 256 for DeepSeek-V4)")
    g.add_argument("--sglang-version", choices=list(SGLANG_VERSIONS), default=DEFAULT_SGLANG_VERSION, help="SGLang release whose rules apply (default %(default)s)")
    g.add_argument("--pre-load-free-gib", type=bounded("pre_load_free_gib"), help="measured free GiB per GPU before the weights load ('Load weight begin. avail mem'); with --available-after-weights-gib (default: predicted)")
    g.add_argument("--available-after-weights-gib", type=bounded("available_after_weights_gib"), help="measured free GiB per GPU once every weight is loaded (default: predicted)")


def check_flags(args: argparse.Namespace, error) -> None:
    """Refuse flags of the other engine (``error``: the CLI's one-line error class).

    Raises:
        CLIError: a vLLM-only flag with --engine sglang, or an SGLang-only one with vLLM.
    """
    defaults = getattr(args, "engine_defaults", {})
    given = lambda name: getattr(args, name, None) not in (None, False, defaults.get(name))  # noqa: E731
    if args.engine == "sglang":
        for name, instead in VLLM_ONLY.items():
            if given(name):
                flag = "--" + name.replace("_", "-")
                raise error(f"{flag} is a vLLM flag; with --engine sglang " + (f"use {instead}" if instead else "it has no equivalent"))
        if args.gpu is None:
            raise error("--engine sglang needs --gpu NAME (SGLang sizes its defaults from the card's memory and picks backends by its compute capability)")
        if (args.pre_load_free_gib is None) != (args.available_after_weights_gib is None):
            raise error("give both --pre-load-free-gib and --available-after-weights-gib (a measured memory state), or neither (predicted)")
    else:
        for name in SGLANG_ONLY:
            if given(name):
                raise error(f"--{name.replace('_', '-')} is an SGLang flag: add --engine sglang")


def cmd_engine_sglang(args: argparse.Namespace, config: dict, source: dict, model, emit, print_json) -> int:
    """Print SGLang's start-up sizing for ``model`` (a :class:`planner.plan.PreparedModel`): the
    memory terms, the log lines and the launch command, or SGLang's refusal (exit 2)."""
    from planner.engines.sglang import SglangSettings, sglang_preview

    settings = SglangSettings(
        tp=args.tp, kv_cache_dtype="fp8_e4m3" if args.kv_cache_dtype == "fp8" else args.kv_cache_dtype, context_length=args.context_length,
        mem_fraction_static=args.mem_fraction_static, chunked_prefill_size=args.chunked_prefill_size, max_running_requests=args.max_running_requests,
        page_size=args.page_size, sglang_version=args.sglang_version,
    )  # fmt: skip
    weights = model.weights("auto")
    preview = sglang_preview(
        config, gpu=args.gpu, weights_bytes=weights.checkpoint_bytes, settings=settings, model=model.repo_id or source.get("path") or "MODEL",
        weights_source=f"weights estimate ({weights.source})", measured_pre_load_free_gib=args.pre_load_free_gib, measured_available_gib=args.available_after_weights_gib,
        quantization=model.quantization, geometry=model.geometry,
    )  # fmt: skip
    if args.json and preview.capacity is not None:
        out = preview.capacity.summary()
        out.update(memory=preview.memory.summary(), launch_command=preview.command, source=source)
        print_json(out)
        return 0
    if preview.capacity is None:
        emit(f"error: SGLang {args.sglang_version} refuses to start: {preview.refusal}", file=sys.stderr)
        return 2
    for t in preview.memory.terms:
        emit(f"{t.name:<36} {t.gib:>9,.2f} GiB  ({t.source})")
    if args.available_after_weights_gib is not None:
        emit(f"{'free after the weights':<36} {args.available_after_weights_gib:>9,.2f} GiB  (measured)")
    c = preview.capacity
    emit(f"SGLang {c.sglang_version} on {c.gpu} x tp {c.tp}: mem_fraction_static {c.mem_fraction_static:g}, attention backend {c.attention_backend}, KV {c.kv_dtype}, page {c.page_size}, cuda_graph_max_bs {c.cuda_graph_max_bs}, {c.cell_bytes:,.1f} B a token")
    for line in c.log_lines:
        emit(line)
    emit(preview.command)
    return 0
