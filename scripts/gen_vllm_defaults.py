"""Regenerate ``tests/data/vllm_batch_defaults.json``: the ``max_num_batched_tokens`` and
``max_num_seqs`` vLLM picks when the user sets neither, per GPU, release and entry point, computed
by each release's own ``EngineArgs.create_engine_config``.

Run it once per release, each in a throw-away venv that holds that vLLM (never in CI, never in the
project's venv); each run merges its release into the fixture::

    python3 -m venv /work/venvs/vllm-0.33.0 && /work/venvs/vllm-0.33.0/bin/pip install vllm==0.33.0
    HF_HUB_OFFLINE=1 /work/venvs/vllm-0.33.0/bin/python scripts/gen_vllm_defaults.py
    # likewise vllm==0.24.0, 0.19.0, 0.11.0 and 0.10.1.1 (each brings its own CUDA torch)

vLLM asks the platform for the device's total memory and name (``get_batch_defaults`` in 0.19+,
``_set_default_args_v1`` in 0.10 / ``_set_default_args`` in 0.11): on this CPU-only host those
answers are patched in per GPU (the names ``torch.cuda.get_device_name`` returns and the totals
CUDA reports), and the platform answers "not a CPU, not a TPU" as the CUDA platform does. The
entry point is vLLM's ``UsageContext``: ``OPENAI_API_SERVER`` for ``vllm serve``, ``LLM_CLASS``
for the Python ``LLM`` class. The model is a small Llama config written to a temporary folder
(chunked prefill on, as for every generative model, so ``max_model_len`` does not raise the token
budget).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "tests" / "data" / "vllm_batch_defaults.json"
GIB = 1 << 30

# (planner catalog name, torch.cuda.get_device_name(), total memory in GiB as CUDA reports it);
# only the >= 70 GiB / >= 160 GiB tiers and the "a100" name test depend on these
GPUS = (
    ("H100-SXM-80GB", "NVIDIA H100 80GB HBM3", 79.18),
    ("H100-PCIe-80GB", "NVIDIA H100 PCIe", 79.18),
    ("H100-NVL-94GB", "NVIDIA H100 NVL", 93.1),
    ("H200-141GB", "NVIDIA H200", 139.81),
    ("B200-180GB", "NVIDIA B200", 178.36),
    ("A100-SXM-80GB", "NVIDIA A100-SXM4-80GB", 79.25),
    ("A100-SXM-40GB", "NVIDIA A100-SXM4-40GB", 39.38),
    ("L40S-48GB", "NVIDIA L40S", 44.4),
    ("L4-24GB", "NVIDIA L4", 22.0),
    ("A10-24GB", "NVIDIA A10", 22.0),
    ("T4-16GB", "Tesla T4", 14.6),
    ("RTX-4090-24GB", "NVIDIA GeForce RTX 4090", 23.6),
)
ENTRY_POINTS = (("vllm serve", "OPENAI_API_SERVER"), ("LLM class", "LLM_CLASS"))
LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 2048, "intermediate_size": 8192, "num_hidden_layers": 16,
    "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
    "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": True, "hidden_act": "silu",
}  # fmt: skip


def _patch_platform(name: str, total_bytes: int) -> None:
    """Answer the device questions of the defaults code as the CUDA platform does on this GPU."""
    from vllm.platforms import current_platform

    cls = type(current_platform)
    current_platform.device_type = "cuda"
    cls.get_device_total_memory = classmethod(lambda cls, device_id=0: total_bytes)
    cls.get_device_name = classmethod(lambda cls, device_id=0: name)
    cls.is_cpu = lambda self: False
    cls.is_tpu = lambda self: False
    if hasattr(cls, "is_device_capability"):  # 0.33 keeps GB10 (SM 12.1) on the small tier
        cls.is_device_capability = classmethod(lambda cls, capability, device_id=0: False)
    if hasattr(cls, "support_hybrid_kv_cache"):
        cls.support_hybrid_kv_cache = classmethod(lambda cls: True)
    if not hasattr(cls, "supports_v1") or cls.__name__ == "UnspecifiedPlatform":  # 0.10 finds no platform on a CPU
        cls.supports_v1 = classmethod(lambda cls, model_config: True)
        cls.is_async_output_supported = classmethod(lambda cls, enforce_eager: not enforce_eager)


def resolve(model_dir: str, usage: str) -> tuple[int, int]:
    """(max_num_batched_tokens, max_num_seqs) the release's create_engine_config settles on."""
    import dataclasses

    from vllm.engine.arg_utils import EngineArgs
    from vllm.usage.usage_lib import UsageContext

    extra = {"swap_space": 0} if "swap_space" in {f.name for f in dataclasses.fields(EngineArgs)} else {}
    args = EngineArgs(model=model_dir, skip_tokenizer_init=True, max_model_len=4096, **extra)
    cfg = args.create_engine_config(usage_context=getattr(UsageContext, usage))
    return cfg.scheduler_config.max_num_batched_tokens, cfg.scheduler_config.max_num_seqs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    import vllm

    version = vllm.__version__
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "config.json").write_text(json.dumps(LLAMA))
        for catalog, name, total_gib in GPUS:
            _patch_platform(name, int(total_gib * GIB))
            for entry, usage in ENTRY_POINTS:
                tokens, seqs = resolve(tmp, usage)
                rows.append({"gpu": catalog, "device_name": name, "total_memory_gib": total_gib, "entry_point": entry, "max_num_batched_tokens": tokens, "max_num_seqs": seqs})
                print(f"{version} {catalog:<15} {entry:<10} {tokens:>6} {seqs:>5}", file=sys.stderr)
    data = json.loads(args.out.read_text()) if args.out.exists() else {"about": "", "releases": {}}
    data["about"] = (
        "max_num_batched_tokens / max_num_seqs vLLM resolves when the user sets neither, per GPU (device name and total memory "
        "as CUDA reports them), release and entry point (UsageContext OPENAI_API_SERVER = `vllm serve`, LLM_CLASS = the LLM class); "
        "computed by each release's EngineArgs.create_engine_config with scripts/gen_vllm_defaults.py"
    )
    data["releases"][version] = rows
    data["releases"] = dict(sorted(data["releases"].items(), key=lambda kv: tuple(int(p) for p in kv[0].split(".")[:3])))
    args.out.write_text(json.dumps(data, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
