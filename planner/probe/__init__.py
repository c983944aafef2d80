"""Live probe: build the K/V cache (or run a random model) on this machine, beside the estimate.

Two modes, both run in a child process (``python -m planner.probe --child``, JSON on stdout)
under a timeout, so an out-of-memory kill or a crash returns an error result instead of taking
the CLI or the app down:

* ``allocate``: the cache tensors of the model's per-layer geometry under a runtime's layout,
  allocated on the device. ``vllm``: per layer paged K and V of shape
  ``[blocks, block_tokens, kv_heads_per_gpu, head_dim]`` (MLA: one latent tensor
  ``[blocks, block_tokens, kv_lora_rank + rope]``); ``transformers``: per layer K/V
  ``[batch, kv_heads, positions, head_dim]`` as a ``DynamicCache`` holds them one decode step
  after ``tokens`` tokens. Measured: tensor storage bytes on CPU; ``torch.cuda.memory_allocated``
  before/after and ``max_memory_allocated`` on CUDA.
* ``runtime``: a randomly initialised transformers model built from the (text) config, never with
  remote code and without downloading weights, optionally cut to its first ``layers_limit``
  layers; a prefill of ``tokens`` tokens and ``decode_steps`` single-token decode steps with a
  ``DynamicCache`` (or ``StaticCache``). Measured: the cache tensors' storage bytes, prefill,
  first decode step, p50/p95 decode step, peak memory; beside the planner's bytes and its
  roofline latency, and MFU/MBU calibrated from the measurement.

Integer KV formats are allocated (vllm layout only) exactly as :mod:`planner.kv` counts them:
packed data plus one fp16 scale and one fp16 zero-point per 64 elements of each head vector.

What transformers 5.24 caches (measured, modelled by :func:`transformers_positions` and
:func:`predicted_transformers_cache_bytes`; :mod:`planner.kv` differs where noted):

* full attention: ``tokens`` positions, storage equal to the view;
* sliding window ``W`` (and chunked attention of chunk ``C``, which transformers caches as a
  sliding window of ``C``): the view ``keys`` holds the last ``W - 1`` positions, but it is a
  slice of the concatenation of the previous view and the new states, whose storage it keeps
  alive: ``min(previous, W - 1) + new`` positions, i.e. ``W`` after a decode step and the whole
  prompt right after a prefill longer than the window;
* MLA (DeepSeek-V2/V3, Kimi-K2): the compressed latent, one "head" with K = ``kv_lora_rank``
  and V = ``qk_rope_head_dim`` elements, not decompressed per-head K/V;
* ``StaticCache``: ``max_cache_len`` positions per full layer and ``min(max_cache_len, W)``
  per sliding layer, allocated at the first forward.

Safety: the prediction is checked against 80 % of the free device memory
(``torch.cuda.mem_get_info``) or a CPU budget (``KVP_PROBE_CPU_BUDGET_BYTES``, default 2 GiB)
before anything is allocated; ``KVP_DISABLE_PROBE=1`` turns the probe off (shared deployments).

The package, by concept: :mod:`~planner.probe.options` (what to run, the settings that bound
it), :mod:`~planner.probe.layouts` and :mod:`~planner.probe.prepare` (the predictions, pure
Python), :mod:`~planner.probe.parent` (runs the child, builds the result),
:mod:`~planner.probe.explain` (why measured and predicted differ), :mod:`~planner.probe.child`
(the measuring process: the only code that imports torch, inside its functions),
:mod:`~planner.probe.protocol` (what parent and child exchange), :mod:`~planner.probe.results`
(the probe JSON), :mod:`~planner.probe.calibration` and :mod:`~planner.probe.roofline`.

Importing the package never imports torch.
"""

from planner.probe.calibration import Calibration, budget_measurements, calibrate
from planner.probe.child import build_transformers_config, execute, main
from planner.probe.explain import probe_summary
from planner.probe.layouts import (
    TransformersLayer,
    planner_kv_bytes,
    predicted_transformers_cache_bytes,
    transformers_layers,
    transformers_layout,
    transformers_positions,
    vllm_layout,
)
from planner.probe.options import (
    CUDA_ROUND,
    DEFAULT_CPU_BUDGET,
    DEFAULT_TIMEOUT_S,
    DEVICES,
    ENV_CPU_BUDGET,
    ENV_DISABLE,
    GPU_FREE_FRACTION,
    INSTALLED_TRANSFORMERS_RUNTIME,
    MODES,
    RUNTIME_DTYPES,
    ProbeOptions,
    check_enabled,
    cpu_budget_bytes,
    make_options,
    probe_disabled,
)
from planner.probe.parent import ROOT, run_probe
from planner.probe.prepare import limit_layers, prepare_probe
from planner.probe.protocol import ELEMENT_BYTES, ITEMSIZE, MAX_REQUEST_BYTES, TORCH_DTYPE, CacheTensor
from planner.probe.results import FORMAT, MAX_INT, MAX_PROBE_JSON_BYTES, LayerMeasurement, ProbeResult, load_probe_json
from planner.probe.roofline import match_catalog_device

__all__ = [
    "CUDA_ROUND", "DEFAULT_CPU_BUDGET", "DEFAULT_TIMEOUT_S", "DEVICES", "ELEMENT_BYTES", "ENV_CPU_BUDGET", "ENV_DISABLE", "FORMAT",
    "GPU_FREE_FRACTION", "INSTALLED_TRANSFORMERS_RUNTIME", "ITEMSIZE", "MAX_INT", "MAX_PROBE_JSON_BYTES", "MAX_REQUEST_BYTES", "MODES",
    "ROOT", "RUNTIME_DTYPES", "TORCH_DTYPE", "CacheTensor", "Calibration", "LayerMeasurement", "ProbeOptions", "ProbeResult",
    "TransformersLayer", "budget_measurements", "build_transformers_config", "calibrate", "check_enabled", "cpu_budget_bytes",
    "execute", "limit_layers", "load_probe_json", "main", "make_options", "match_catalog_device", "planner_kv_bytes",
    "predicted_transformers_cache_bytes", "prepare_probe", "probe_disabled", "probe_summary", "run_probe",
    "transformers_layers", "transformers_layout", "transformers_positions", "vllm_layout",
]
