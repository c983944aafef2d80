"""Regenerate ``tests/data/sglang_engine_cases*.json`` with SGLang 0.5.23's own start-up sizing code.

Run it in a throw-away venv that holds SGLang (never in CI, never in the project's venv)::

    python3 -m venv $VENV
    $VENV/bin/pip install torch==2.13.0                  # the CPU build
    $VENV/bin/pip install sglang==0.5.23 --no-deps
    $VENV/bin/pip install transformers==5.19.0 msgspec numpy psutil pydantic orjson einops tqdm pyzmq \
        pybase64 regex pillow triton apache-tvm-ffi==0.1.11 loguru gguf \
        starlette ipython aiohttp dill sentencepiece openai partial_json_parser uvicorn fastapi
    $VENV/bin/pip install compressed-tensors==0.18.0 --no-deps
    HF_HUB_OFFLINE=1 $VENV/bin/python scripts/gen_sglang_engine_cases.py   # about 10 minutes on 2 cores

(the second line of packages is what importing SGLang's model runner needs beyond RECIPES.md's
list). The 2026 checkpoints' configs come from aiconfigurator-core 0.12.0's ``model_configs/``
(``--aic DIR``; by default found in the project's ``.venv``). ``--only SUBSTR`` runs some sources
only (each source's draws are seeded by its name, so they do not depend on which others run).

Every case runs what ``python -m sglang.launch_server`` runs before the first forward, on a CPU
with the GPU faked (RECIPES.md, "SGLang's sizing code on a CPU"):

* ``ServerArgs(...)`` and ``publish`` (``resolve_once``: ``srt/arg_groups/`` with
  ``memory_hook.handle_gpu_memory_settings`` and the per-model overrides of
  ``srt/arg_groups/model_overrides/``), with the GPU's total memory as nvidia-smi reports it
  (``GPUS``: MiB per GPU, each figure's source beside it), its compute capability and the platform
  facts SGLang probes (``runtime_context.override_platform``), patched wherever a module imported
  the probe by name (the Qwen3-VL override calls ``is_sm90_supported`` itself);
* ``ModelConfig.from_server_args`` on the resolved arguments, as the TP worker builds it, from a
  folder holding the checkpoint's ``config.json`` and, where the checkpoint has one, its
  ``hf_quant_config.json`` (ModelOpt checkpoints declare FP8 KV there);
* the loader's quantization config (``model_loader/loader.py _get_quantization_config``, with its
  compute-capability check) on a stand-in model object that carries it, as
  ``configure_kv_cache_dtype`` reads ``model.quant_config.kv_cache_quant_algo``;
  ``resolve_layer_indices``, ``resolve_sliding_window_size`` (the model class's own
  ``get_attention_sliding_window_size`` is not run: no model is built), ``configure_kv_cache_dtype``;
* ``KVCacheConfigurator(...).configure(pre_model_load_memory=...)`` on ``device="meta"``
  (``_profile_available_bytes`` with ``get_available_gpu_memory`` answering the case's free GiB
  after weights, ``config_from_budget`` and the pool configurators, ``resolve_max_num_reqs``, the
  pool classes, which log SGLang's "KV Cache is allocated" / "Mamba Cache is allocated" lines);
* the scheduler's figures (``ModelRunner.logical_max_total_num_tokens``, ``get_worker_info``) and
  its start-up line without its trailing ``available_gpu_mem`` (measured after CUDA graphs).

Shims that change no sizing: torchvision (image transforms; its CUDA wheel cannot load beside
the CPU torch) is a stub module; ``mxfp4`` is registered as a CUDA import registers it (gpt-oss);
``_profile_available_bytes``' ``gc.collect()`` is a no-op (seconds a case with every model class
imported); every case starts from the same environment variables (Qwen3-VL's override sets
``SGLANG_VLM_CACHE_SIZE_MB``, the feature-transport hook ``SGLANG_USE_CUDA_IPC_TRANSPORT``, and
neither may leak into the next case); per-module quantization lists are slimmed (``_slim``).

The GPU table is the engine's own (``planner/engines/sglang/gpus.py``, loaded by path with
``planner/gpu_memory.py``), so the fixture and the engine read one set of MiB figures. Each source runs at a default start-up on
H100, H200 and B200 and at nine random draws, fifteen for the 2026 families (``cases_for``); its first sized case also yields
budgets at the edges of SGLang's refusals (``edge_cases``). A case either sizes (``result``, with
``internals``: SGLang's budget and per-token coefficients) or is refused (``refusal``: exception
type and SGLang's message). Cases whose inputs hash to 0 mod 4 go to
``sglang_engine_cases_holdout.json`` (``_holdout``).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.abc
import importlib.machinery
import io
import json
import logging
import os
import random
import sys
import tempfile
import time
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("SGLANG_LOGGING_LEVEL", "INFO")

ROOT = Path(__file__).resolve().parents[1]
GIB = 1 << 30


def _load_gpus():
    """The engine's GPU table (planner/engines/sglang/gpus.py), loaded by path with the one module it
    imports (planner/gpu_memory.py, the driver totals; neither imports anything else)."""
    import importlib.util
    import types

    sys.modules.setdefault("planner", types.ModuleType("planner"))
    shared = importlib.util.spec_from_file_location("planner.gpu_memory", ROOT / "planner" / "gpu_memory.py")
    sys.modules[shared.name] = importlib.util.module_from_spec(shared)
    shared.loader.exec_module(sys.modules[shared.name])
    spec = importlib.util.spec_from_file_location("_sglang_gpus", ROOT / "planner" / "engines" / "sglang" / "gpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.GPUS


GPUS = _load_gpus()

# real 2026 checkpoints' configs vendored by aiconfigurator-core 0.12.0 (its model_configs/), with the
# hf_quant_config.json beside them where the checkpoint has one
AIC_CONFIGS = (
    "deepseek-ai--DeepSeek-V3.2_config.json",
    "deepseek-ai--DeepSeek-V4-Flash_config.json",
    "deepseek-ai--DeepSeek-V4-Pro_config.json",
    "nvidia--DeepSeek-V4-Flash-NVFP4_config.json",
    "nvidia--GLM-5.1-NVFP4_config.json",
    "nvidia--GLM-5.2-NVFP4_config.json",
    "XiaomiMiMo--MiMo-V2-Flash_config.json",
    "XiaomiMiMo--MiMo-7B-Base_config.json",
    "google--gemma-4-26B-A4B_config.json",
    "nvidia--Gemma-4-31B-IT-NVFP4_config.json",
    "Qwen--Qwen3.5-122B-A10B_config.json",
    "Qwen--Qwen3.5-35B-A3B_config.json",
    "nvidia--Qwen3.6-27B-NVFP4_config.json",
    "moonshotai--Kimi-K3_config.json",
    "moonshotai--Kimi-K2.5_config.json",
    "MiniMaxAI--MiniMax-M3_config.json",
    "nvidia--MiniMax-M3-NVFP4_config.json",
    "MiniMaxAI--MiniMax-M2.5_config.json",
    "meta-llama--Llama-4-Maverick-17B-128E-Instruct_config.json",
    "Qwen--Qwen3-VL-8B-Instruct_config.json",
    "Qwen--Qwen3-VL-30B-A3B-Instruct_config.json",
    "Qwen--Qwen3-32B-FP8-Static-PerTensor_config.json",
    "nvidia--Llama-3.1-70B-Instruct-FP8_config.json",
    "nvidia--NVIDIA-Nemotron-3-Nano-30B-A3B-NVFP4_config.json",
    "nvidia--NVIDIA-Nemotron-3-Super-120B-A12B-FP8_config.json",
)


def _aic_dir() -> Path | None:
    """aiconfigurator-core's ``model_configs/`` in the project's venv (where the planner installs it)."""
    for base in sorted((ROOT / ".venv" / "lib").glob("python3*/site-packages/aiconfigurator_core")):
        if (base / "model_configs").is_dir():
            return base / "model_configs"
    return None


# --------------------------------------------------------------------------- CPU shims


class _StubModule(types.ModuleType):
    """torchvision (image transforms only) cannot load beside the CPU torch: a module of names."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _StubObject(f"{self.__name__}.{name}")


class _StubObject:
    def __init__(self, name):
        self._name = name

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return _StubObject(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        return _StubObject(self._name + "()")

    def __mro_entries__(self, bases):
        return (object,)

    def __iter__(self):
        return iter(())


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in self.roots:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


def _import_sglang():
    """Import SGLang on the CPU (its CUDA branches stay unimported), then return its modules."""
    import torch
    import transformers.utils.import_utils as tiu

    tiu.is_torchvision_available()  # cached False before the stub exists: transformers keeps its PIL path
    sys.meta_path.insert(0, _StubFinder({"torchvision"}))
    import sglang.srt.arg_groups.memory_hook  # noqa: F401
    import sglang.srt.arg_groups.pipeline  # noqa: F401
    import sglang.srt.mem_cache.kv_cache_configurator  # noqa: F401
    import sglang.srt.model_executor.model_runner  # noqa: F401
    import sglang.srt.utils.common as common
    from sglang.srt.models.registry import ModelRegistry

    logging.getLogger("sglang.srt.models.registry").setLevel(logging.ERROR)
    assert ModelRegistry.models  # every model class imported now, on the CPU (a faked GPU sends imports down CUDA paths)
    from sglang.srt.layers import quantization
    from sglang.srt.layers.quantization.mxfp4 import Mxfp4Config

    # layers/quantization/__init__.py registers mxfp4 (gpt-oss) only on a CUDA / CPU / gfx95 import
    for table in (quantization.BASE_QUANTIZATION_METHODS, quantization.QUANTIZATION_METHODS):
        table.setdefault("mxfp4", Mxfp4Config)

    # _profile_available_bytes runs gc.collect() to free weight-loading temporaries; with every model
    # class imported it takes seconds a case and frees nothing that sizes anything here
    import sglang.srt.mem_cache.kv_cache_configurator as kcc

    kcc.gc = types.SimpleNamespace(collect=lambda *a: 0)
    # pools ask the device module for streams; on "meta" they get the CPU's
    original = torch.get_device_module
    torch.get_device_module = lambda device=None: torch.cpu if str(device) == "meta" else original(device)
    return common


_PROBES = (
    "get_device_memory_capacity", "get_device_capability", "get_device_sm", "is_sm90_supported", "is_sm100_supported",
    "is_sm100_or_sm110_supported", "is_sm110_supported", "is_sm120_supported", "is_blackwell_supported", "is_hopper_with_cuda_12_3",
    "is_flashinfer_available",
)


class FakeGpu:
    """The answers SGLang's probes give on one GPU, installed everywhere the probes were imported."""

    def __init__(self, common, name: str):
        import torch
        from sglang.srt.mem_cache import memory_pool

        gpu = GPUS[name]
        mib, (major, minor), device_name = gpu.memory_mib, gpu.capability, gpu.device_name
        self.name, self.mib = name, mib
        sm = major * 10 + minor
        answers = {
            "get_device_memory_capacity": lambda *a, **k: mib,
            "get_device_capability": lambda *a, **k: (major, minor),
            "get_device_sm": lambda *a, **k: sm,
            "is_sm90_supported": lambda *a, **k: major == 9,
            "is_sm100_supported": lambda *a, **k: major == 10,
            "is_sm100_or_sm110_supported": lambda *a, **k: major in (10, 11),
            "is_sm110_supported": lambda *a, **k: major == 11,
            "is_sm120_supported": lambda *a, **k: major == 12,
            "is_blackwell_supported": lambda *a, **k: major in (10, 11, 12),
            "is_hopper_with_cuda_12_3": lambda *a, **k: major == 9,
            "is_flashinfer_available": lambda *a, **k: True,
        }
        self.facts = {
            "is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False,
            "is_sm90": major == 9, "is_sm100": major == 10, "is_sm100_or_sm110": major in (10, 11), "is_sm110": major == 11,
            "is_sm120": major == 12, "is_blackwell": major in (10, 11, 12), "is_hopper_with_cuda_12_3": major == 9,
            "has_amx": False, "has_flashinfer": True, "device_sm": sm, "device_capability": (major, minor),
        }
        self.patches = []
        originals = {name: getattr(common, name) for name in _PROBES}
        for module in list(sys.modules.values()):
            if module is None or not getattr(module, "__name__", "").startswith("sglang"):
                continue
            for probe, original in originals.items():
                if getattr(module, probe, None) is original:
                    self.patches.append((module, probe, original, answers[probe]))
        props = types.SimpleNamespace(name=device_name, major=major, minor=minor, total_memory=mib << 20, is_integrated=False, multi_processor_count=132)
        self.value_patches = [
            (torch.cuda, "get_device_capability", lambda *a, **k: (major, minor)),
            (torch.cuda, "get_device_name", lambda *a, **k: device_name),
            (torch.cuda, "get_device_properties", lambda *a, **k: props),
            (torch.cuda, "device_count", lambda *a, **k: 8),
            # memory_pool.py reads is_cuda() once at import (False on this CPU); get_minimax_sparse_index_dtype
            # keeps Hopper's fp8 index keys behind it
            (memory_pool, "_is_cuda", True),
        ]

    @contextlib.contextmanager
    def installed(self):
        from sglang.srt import runtime_context

        saved = [(obj, attr, getattr(obj, attr)) for obj, attr, _ in self.value_patches]
        for module, probe, _, fake in self.patches:
            setattr(module, probe, fake)
        for obj, attr, fake in self.value_patches:
            setattr(obj, attr, fake)
        try:
            with runtime_context.override_platform(**self.facts):
                yield
        finally:
            for module, probe, original, _ in self.patches:
                setattr(module, probe, original)
            for obj, attr, value in saved:
                setattr(obj, attr, value)


_FAKES: dict[str, FakeGpu] = {}


def _fake_gpu(common, name: str) -> FakeGpu:
    if name not in _FAKES:
        _FAKES[name] = FakeGpu(common, name)
    return _FAKES[name]


class _Capture(logging.Handler):
    def __init__(self):
        super().__init__(logging.INFO)
        self.records: list[tuple[str, str]] = []

    def emit(self, record):
        try:
            self.records.append((record.name, record.getMessage()))
        except Exception:  # noqa: BLE001
            pass


# the start-up lines a case keeps (SGLang logs many more)
KEPT_LINES = ("KV Cache is allocated", "Mamba Cache is allocated", "Use sliding window memory pool", "DSV4 pool sizes")


def _checkpoint_dir(tmp: Path, config: dict, quant: dict | None) -> Path:
    folder = Path(tempfile.mkdtemp(dir=tmp))
    (folder / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (folder / "hf_quant_config.json").write_text(json.dumps(quant))
    return folder


def run_case(common, tmp: Path, config: dict, quant: dict | None, case: dict) -> dict:
    """SGLang's start-up sizing for one case: its defaults, pools, log lines, or its refusal."""
    import torch
    from sglang.srt import runtime_context as rc
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.configs.model_config import AttentionArch, ModelConfig
    from sglang.srt.mem_cache import kv_cache_configurator as kcc
    from sglang.srt.mem_cache import kv_cache_dtype as kvd
    from sglang.srt.model_executor.model_runner import ModelRunner
    from sglang.srt.model_executor.model_runner_components.layer_setup import resolve_layer_indices
    from sglang.srt.model_executor.model_runner_components.load_model_utils import resolve_sliding_window_size
    from sglang.srt.model_executor.model_runner_components.spec_aux_hidden_state import resolve_spec_aux_hidden_state_config
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    folder = _checkpoint_dir(tmp, config, quant)
    kwargs = {"model_path": str(folder), "device": "cuda", "tp_size": case["tp"], "kv_cache_dtype": case["kv_cache_dtype"], "skip_tokenizer_init": True}
    for key in ("context_length", "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "page_size"):
        if case.get(key) is not None:
            kwargs[key] = case[key]
    environ = dict(os.environ)  # hooks set SGLang env vars (Qwen3-VL: SGLANG_VLM_CACHE_SIZE_MB=0): none may leak into the next case
    capture = _Capture()
    root = logging.getLogger("sglang")
    root.addHandler(capture)
    root.setLevel(logging.INFO)
    out: dict = {}
    stage = "resolve"
    try:
        with _fake_gpu(common, case["gpu"]).installed():
            args = ServerArgs(**kwargs)
            rc.publish(args, role="scheduler")
            view = resolved_view(args)
            # the TP worker builds its own ModelConfig from the resolved arguments (managers/tp_worker.py
            # _init_model_config): a dtype an override declared (gpt-oss MXFP4: bfloat16) is in it
            cfg = ModelConfig.from_server_args(args, model_path=rc.get_model().model_path, model_revision=rc.get_model().revision, is_draft_model=False)
            decode = view.cuda_graph_config.decode
            out["defaults"] = {
                "mem_fraction_static": view.mem_fraction_static, "chunked_prefill_size": view.chunked_prefill_size, "max_prefill_tokens": view.max_prefill_tokens,
                "page_size": view.page_size, "cuda_graph_max_bs": decode.max_bs, "attention_backend": view.attention_backend, "kv_cache_dtype": view.kv_cache_dtype,
                "context_len": cfg.context_len,
            }
            stage = "load"
            par = rc.get_parallel()
            par.override_permanently(world_group=types.SimpleNamespace(cpu_group=None), tp_rank=0, pp_rank=0)
            model = types.SimpleNamespace(quant_config=_quant_config(cfg, args))
            layers = resolve_layer_indices(model=model, model_config=cfg, is_draft_worker=False)
            resolved_str, kv_dtype = kvd.configure_kv_cache_dtype(
                server_args_kv_cache_dtype=rc.get_model().kv_cache_dtype, model=model, model_dtype=cfg.dtype, is_draft_worker=False, is_dflash=False,
                speculative_draft_attention_backend=None, speculative_draft_kv_cache_dtype=None,
            )
            out["defaults"]["kv_cache_torch_dtype"] = str(kv_dtype)
            spec = SpeculativeAlgorithm.from_string(rc.get_spec().speculative_algorithm)
            stage = "size"
            kcc.get_available_gpu_memory = lambda *a, **k: case["available_gib"]
            kvc = kcc.KVCacheConfigurator(
                device="meta", gpu_id=0, attn_dp_size=par.attn_dp_size, pp_size=1, pp_group=types.SimpleNamespace(world_size=1, rank_in_group=0), model=model,
                model_config=cfg, server_args=args, kv_cache_dtype=kv_dtype, kv_cache_dtype_str=resolved_str if resolved_str is not None else rc.get_model().kv_cache_dtype,
                model_dtype=cfg.dtype, page_size=rc.get_schedule().page_size, sliding_window_size=resolve_sliding_window_size(model, cfg), spec_algorithm=spec,
                is_draft_worker=False, post_capture_kv_active=False,
                spec_aux_config=resolve_spec_aux_hidden_state_config(server_args=args, model_config=cfg, spec_algorithm=spec, is_draft_worker=False),
                is_hybrid_swa=cfg.is_hybrid_swa, is_hybrid_swa_compress=cfg.is_hybrid_swa_compress, use_mla_backend=cfg.attention_arch == AttentionArch.MLA,
                layer_info=layers, forward_stream=None, req_to_token_pool=None, token_to_kv_pool_allocator=None, memory_pool_config=None,
            )
            out["internals"] = internals = {"sliding_window_size": kvc.sliding_window_size, "num_effective_layers": layers.num_effective_layers}
            if layers.full_attention_layer_ids is not None:
                internals["full_layers"], internals["swa_layers"] = len(layers.full_attention_layer_ids), len(layers.swa_attention_layer_ids)
            if kvc.mambaish_config is not None:
                params = kvc.mambaish_config.mamba2_cache_params
                internals["mamba_cache_per_req"] = int(params.mamba_cache_per_req)
                internals["mamba_layers"] = len(params.layers)
                internals["full_attention_layers"] = len(kvc.mambaish_config.full_attention_layer_ids)
            with _recording(internals):
                res = kvc.configure(pre_model_load_memory=case["pre_load_free_gib"])
            runner = types.SimpleNamespace(
                req_to_token_pool=res.req_to_token_pool, kv_cache_configurator=kvc, max_total_num_tokens=res.max_total_num_tokens, is_hybrid_swa=cfg.is_hybrid_swa,
                full_max_total_num_tokens=res.full_max_total_num_tokens, swa_max_total_num_tokens=res.swa_max_total_num_tokens, token_to_kv_pool_allocator=res.token_to_kv_pool_allocator,
            )
            scheduler_tokens = ModelRunner.logical_max_total_num_tokens.fget(runner)
            pool = res.token_to_kv_pool
            size = pool.get_kv_size_bytes() if hasattr(pool, "get_kv_size_bytes") else None
            sched = rc.get_schedule()
            mamba = getattr(res.req_to_token_pool, "mamba_pool", None)
            out["result"] = {
                "max_total_num_tokens": scheduler_tokens, "pool_max_total_num_tokens": res.max_total_num_tokens,
                "full_max_total_num_tokens": res.full_max_total_num_tokens, "swa_max_total_num_tokens": res.swa_max_total_num_tokens,
                "max_running_requests": res.max_running_requests, "max_mamba_cache_size": getattr(sched, "max_mamba_cache_size", None) if mamba is not None else None,
                "kv_size_bytes": None if size is None else int(sum(size) if isinstance(size, tuple) else size), "kv_pool_bytes": _tensor_bytes(pool),
                "req_to_token_pool_size": res.req_to_token_pool.size, "mamba_pool_bytes": _tensor_bytes(mamba) if mamba is not None else None,
            }
            out["log_lines"] = [m for _, m in capture.records if any(k in m for k in KEPT_LINES)] + [
                f"max_total_num_tokens={scheduler_tokens}, chunked_prefill_size={sched.chunked_prefill_size}, max_prefill_tokens={sched.max_prefill_tokens}, "
                f"max_running_requests={res.max_running_requests}, context_len={cfg.context_len}"
            ]
            del torch
    except Exception as exc:  # noqa: BLE001 - every refusal is recorded with SGLang's own words
        out["refusal"] = {"stage": stage, "type": type(exc).__name__, "message": str(exc)}
    finally:
        root.removeHandler(capture)
        os.environ.clear()
        os.environ.update(environ)
    return out


@contextlib.contextmanager
def _recording(internals: dict):
    """Note the budget ``_profile_available_bytes`` returns and the pool configurator's per-token
    coefficients (debugging aids the fixture keeps; the test checks the ones the engine computes)."""
    from sglang.srt.mem_cache import kv_cache_configurator as kcc
    from sglang.srt.model_executor import pool_configurator as pc

    profile, create = kcc.KVCacheConfigurator._profile_available_bytes, pc.create_memory_pool_configurator

    def profiled(self, pre):
        internals["available_bytes"] = value = profile(self, pre)
        return value

    def created(kvc):
        conf = create(kvc)
        internals["configurator"] = type(conf).__name__
        for name in ("_cell_size", "_full_per_token", "_swa_per_token", "bytes_per_full_token", "bytes_per_swa_token", "kv_bytes"):
            if isinstance(getattr(conf, name, None), (int, float)):
                internals[name.lstrip("_")] = getattr(conf, name)
        return conf

    kcc.KVCacheConfigurator._profile_available_bytes, pc.create_memory_pool_configurator = profiled, created
    try:
        yield
    finally:
        kcc.KVCacheConfigurator._profile_available_bytes, pc.create_memory_pool_configurator = profile, create


def _tensor_bytes(obj) -> int:
    """Bytes of every tensor a pool object holds (its sub-pools too), each storage counted once."""
    import torch

    seen, total, stack, visited = set(), 0, [(obj, 0)], set()
    while stack:
        item, depth = stack.pop()
        if isinstance(item, torch.Tensor):
            base = item._base if item._base is not None else item
            if id(base) not in seen:
                seen.add(id(base))
                total += base.numel() * base.element_size()
            continue
        if isinstance(item, (list, tuple)):
            stack.extend((x, depth) for x in item)
            continue
        if isinstance(item, dict):
            stack.extend((x, depth) for x in item.values())
            continue
        module = type(item).__module__ or ""
        if depth > 5 or id(item) in visited or not module.startswith("sglang.srt.mem_cache"):
            continue
        visited.add(id(item))
        names = list(getattr(item, "__dict__", {})) + [n for c in type(item).__mro__ for n in getattr(c, "__slots__", ())]
        for name in names:
            try:
                stack.append((getattr(item, name), depth + 1))
            except Exception:  # noqa: BLE001
                pass
    return total


def _quant_config(cfg, args):
    """What the loader builds (and checks against the GPU's capability) before the model."""
    if cfg.quantization is None:
        return None
    from sglang.srt.model_executor.model_runner_components.load_model_utils import build_load_config
    from sglang.srt.model_loader.loader import _get_quantization_config
    from sglang.srt.runtime_context import get_model

    load = build_load_config(
        server_args=args, tp_rank=0, remote_instance_weight_transporter_engine=None, remote_instance_weight_transporter_session_id="", draft_model_idx=None,
        weight_cache_mode=get_model().weight_cache_mode, weight_cache_socket=None,
    )
    return _get_quantization_config(cfg, load)


# --------------------------------------------------------------------------- the cases


def _derived_len(config: dict) -> int:
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    for key in ("max_position_embeddings", "max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "n_positions"):
        if isinstance(text.get(key), int):
            return text[key]
    return 2048


INPUTS = ("source", "gpu", "tp", "kv_cache_dtype", "pre_load_free_gib", "available_gib", "context_length", "mem_fraction_static", "chunked_prefill_size", "max_running_requests", "page_size")


def _holdout(case: dict) -> bool:
    """A fixed quarter of the cases, by a hash of their inputs, is kept out of sight while the engine is written."""
    key = json.dumps({k: case[k] for k in INPUTS if k in case}, sort_keys=True)
    return int(hashlib.sha256(key.encode()).hexdigest(), 16) % 4 == 0


# the 2026 families, whose rules have the most branches: 15 random draws instead of 9
NEW_FAMILIES = frozenset({
    "MiniMaxM3SparseForConditionalGeneration", "DeepseekV4ForCausalLM", "DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM", "MiMoV2FlashForCausalLM",
    "KimiK3ForConditionalGeneration", "Gemma4ForConditionalGeneration", "Qwen3_5ForConditionalGeneration", "Qwen3_5MoeForConditionalGeneration",
    "NemotronHForCausalLM", "Llama4ForConditionalGeneration", "GptOssForCausalLM", "Qwen3NextForCausalLM",
})


def cases_for(source: str, config: dict, seed: int) -> list[dict]:
    """The settings one config runs at: a default start-up on each of three GPUs, then random
    draws over tp, KV dtype, context, fraction, chunk, running requests, page size and memory state
    (seeded by the source's name, so a source's cases do not depend on the others)."""
    rng = random.Random(f"{seed}:{source}")
    derived = _derived_len(config)
    out = []

    def memory(gpu: str, weights_share: float) -> tuple[float, float]:
        total = GPUS[gpu].memory_mib / 1024
        pre = round(total - rng.choice((0.45, 0.62, 0.9, 1.3)), 2)  # CUDA context (+ NCCL) before weights
        return pre, round(pre * (1 - weights_share), 2)

    for gpu in ("H100-SXM-80GB", "H200-141GB", "B200-180GB"):
        pre, avail = memory(gpu, 0.25)
        out.append({"gpu": gpu, "tp": 1, "kv_cache_dtype": "auto", "pre_load_free_gib": pre, "available_gib": avail})
    for _ in range(15 if (config.get("architectures") or [""])[0] in NEW_FAMILIES else 9):
        gpu = rng.choice(list(GPUS))
        case = {"gpu": gpu, "tp": rng.choice((1, 1, 2, 4, 8)), "kv_cache_dtype": rng.choice(("auto", "auto", "fp8_e4m3", "fp8_e5m2"))}
        share = rng.choice((0.05, 0.2, 0.35, 0.5, 0.65, 0.78, 0.88))
        case["pre_load_free_gib"], case["available_gib"] = memory(gpu, share)
        roll = rng.random()
        if roll < 0.15:
            case["context_length"] = derived * 2  # above the model's maximum: refused
        elif roll < 0.55:
            case["context_length"] = min(derived, rng.choice((2048, 4096, 8192, 32768, 131072)))
        if rng.random() < 0.3:
            case["mem_fraction_static"] = rng.choice((0.7, 0.8, 0.85, 0.88, 0.9, 0.93))
        if rng.random() < 0.25:
            case["chunked_prefill_size"] = rng.choice((1024, 2048, 4096, 16384, -1))
        if rng.random() < 0.3:
            case["max_running_requests"] = rng.choice((1, 8, 64, 256, 1024, 5000))
        if rng.random() < 0.25:
            case["page_size"] = rng.choice((16, 32, 64, 128, 256))
        out.append(case)
    return [{"source": source, **c} for c in out]


def edge_cases(base: dict) -> list[dict]:
    """Budgets at the edges of SGLang's refusals, derived from the first (sized) H100 case of a
    source: a KV budget of half a token's cell ("Not enough memory"), for hybrid-SWA models one
    whose SWA pool falls just short of the window, for Mamba hybrids a state pool of 2 slots
    (no request fits at 5 slots a request) and one of 7. The free memory after weights is set so
    that ``available - pre x (1 - fraction)`` lands there (plus the multimodal reservation)."""
    internals = base["internals"]
    fraction = base["defaults"]["mem_fraction_static"]
    pre = base["pre_load_free_gib"]
    reserved = base["available_gib"] - pre * (1 - fraction) - internals["available_bytes"] / GIB  # mm reservation + state pool
    if "mamba_cache_per_req" in internals:
        per_req = internals["mamba_cache_per_req"]
        mamba = base["result"]["max_mamba_cache_size"]
        reserved -= (mamba + 1) * per_req / GIB
        # rest = budget x 1.9 / 0.9, budget = (slots + 1.5) x per_req: floor((budget - per_req) / per_req) = slots
        targets = [(slots + 1.5) * per_req * 1.9 / 0.9 / GIB for slots in (2, 7)]
    else:
        cell = internals.get("cell_size") or internals.get("bytes_per_full_token")
        targets = [0.5 * cell / GIB]
        window = internals.get("sliding_window_size")
        if internals["configurator"] == "HybridSWAPoolConfigurator" and window:
            targets.append(window * 1.1 * cell / GIB)  # full ~1.1 x window tokens: SWA (0.8 x) below window + page
    out = []
    for rest in targets:
        out.append({"source": base["source"], "gpu": base["gpu"], "tp": base["tp"], "kv_cache_dtype": base["kv_cache_dtype"], "pre_load_free_gib": pre,
                    "available_gib": rest + pre * (1 - fraction) + reserved})
    return out


SLIM_KEYS = ("quantized_layers", "ignore", "exclude_modules", "modules_to_not_convert")
SLIM_KEEP = 16


def _slim(value):
    """A checkpoint's per-module quantization lists cut to their first 16 entries, keeping one of
    each distinct per-layer setting (MiniMax-M3-NVFP4 lists 22,422 layers, 2.4 MB twice): they name
    which Linear layers are quantized how, which no KV sizing reads beyond the set of algorithms.
    SGLang runs on the slimmed config, so the fixture holds what it computed."""
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in SLIM_KEYS and isinstance(item, dict) and len(item) > SLIM_KEEP:
                # the first entries and the first of every distinct value: SGLang names a MIXED_PRECISION
                # checkpoint's method by the algorithms its layers use (ModelConfig._parse_modelopt_quant_config)
                kept, seen = {}, set()
                for name, entry in item.items():
                    mark = json.dumps(entry, sort_keys=True)
                    if len(kept) < SLIM_KEEP or mark not in seen:
                        kept[name] = entry
                    seen.add(mark)
                item = kept
            elif key in SLIM_KEYS and isinstance(item, list) and len(item) > SLIM_KEEP:
                item = item[:SLIM_KEEP]
            out[key] = _slim(item)
        return out
    if isinstance(value, list):
        return [_slim(item) for item in value]
    return value


def _sources(reference: Path, aic: Path | None) -> list[tuple[str, dict, dict | None]]:
    out = [(f"reference/{p.name}", json.loads(p.read_text()), None) for p in sorted(reference.glob("*.json"))]
    out += [(f"preset/{p.name}", json.loads(p.read_text()), None) for p in sorted((ROOT / "model_configs").glob("*.json"))]
    if aic is not None:
        for name in AIC_CONFIGS:
            path = aic / name
            if path.is_file():
                quant_path = aic / name.replace("_config.json", "_hf_quant_config.json")
                out.append((f"aic/{name}", json.loads(path.read_text()), json.loads(quant_path.read_text()) if quant_path.is_file() else None))
    return [(source, _slim(config), _slim(quant) if quant is not None else None) for source, config, quant in out]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reference", type=Path, default=Path(os.environ.get("KVP_REFERENCE_DIR", ROOT.parent / "shared" / "reference")) / "configs")
    p.add_argument("--aic", type=Path, default=None, help="aiconfigurator-core's model_configs folder (default: found from an installed package)")
    p.add_argument("--only", default="", help="comma-separated substrings of sources to run (default: all)")
    p.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "sglang_engine_cases.json")
    p.add_argument("--seed", type=int, default=22)
    args = p.parse_args(argv)
    common = _import_sglang()
    import sglang

    logging.getLogger("sglang").propagate = False
    sources = _sources(args.reference, args.aic or _aic_dir())
    t0 = time.time()
    cases, configs = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        for source, config, quant in sources:
            if args.only and not any(s.strip().lower() in source.lower() for s in args.only.split(",") if s.strip()):
                continue
            planned = cases_for(source, config, args.seed)
            configs[source] = {"config": config, **({"quantization": quant.get("quantization", quant)} if quant else {})}
            queue = list(planned)
            while queue:
                case = queue.pop(0)
                with contextlib.redirect_stdout(io.StringIO()):
                    case.update(run_case(common, Path(tmp), config, quant, case))
                cases.append(case)
                if case is planned[0] and "result" in case:
                    queue[:0] = edge_cases(case)
                brief = case.get("result", {}).get("max_total_num_tokens") if "result" in case else case["refusal"]["type"] + ": " + case["refusal"]["message"][:140]
                print(f"{source} {case['gpu']} tp{case['tp']} {case['kv_cache_dtype']}: {brief}", file=sys.stderr)
    meta = {"sglang_version": sglang.__version__, "generated_s": round(time.time() - t0, 1), "gpus": {k: {"memory_mib": v.memory_mib, "capability": list(v.capability), "source": v.source} for k, v in GPUS.items()}}
    visible = [c for c in cases if not _holdout(c)]
    held = [c for c in cases if _holdout(c)]
    for path, part in ((args.out, visible), (args.out.with_name(args.out.stem + "_holdout.json"), held)):
        used = {c["source"] for c in part}
        path.write_text(json.dumps({**meta, "cases": part, "configs": {k: v for k, v in configs.items() if k in used}}, indent=1, sort_keys=False) + "\n")
        print(f"{path}: {len(part)} cases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
