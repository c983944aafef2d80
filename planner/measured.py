"""Measured-kernel latency: NVIDIA AIConfigurator's database of kernel timings.

``aiconfigurator-core`` (pinned in requirements.txt, Apache-2.0) holds GEMM, attention, MoE and
communication timings measured on real GPUs with vLLM, TensorRT-LLM and SGLang, and composes
them into a static-batch step time. This module is the planner's edge to it:

* it is imported lazily (the package and its pandas tables cost about a second), so a plan on the
  roofline path and the app's first paint never pay for it;
* one :class:`MeasuredEstimator` per (GPU, backend, model config, parallelism) is built once and
  cached; later estimates reuse its session (well under a millisecond each);
* where the database has no data for the GPU, the backend or the model family, :func:`coverage`
  says so in one sentence and callers fall back to the roofline;
* a plan is compared with the kernels of its own serving engine (vLLM's, SGLang's or TensorRT-LLM's
  database) in its own weight format (:func:`quant_modes`: fp8 block-scaled or per tensor, int4
  experts, NVFP4, MXFP4 experts), so a quantized checkpoint is never timed as bf16.

The config is handed to AIConfigurator as a local folder holding ``config.json``, so it never
reaches for the Hugging Face Hub.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
from dataclasses import dataclass
from functools import lru_cache

from planner.results import Result

VERSION = "0.12.0"
BACKEND = "vllm"  # the default database; a plan's comparison reads its serving engine's (vllm, sglang, trtllm)
# planner catalog name -> AIConfigurator system (0.12.0 ships vLLM, SGLang and TensorRT-LLM data for each)
SYSTEMS = {
    "H100-SXM-80GB": "h100_sxm",
    "H200-141GB": "h200_sxm",
    "B200-180GB": "b200_sxm",
    "A100-SXM-80GB": "a100_sxm",
    "L40S-48GB": "l40s",
    # the 2026 catalog entries AIConfigurator 0.12.0 ships vLLM 0.24.0 data for
    "B300-SXM-288GB": "b300_sxm",
    "GB200-NVL72-186GB": "gb200",
    "GB300-NVL72-288GB": "gb300",
}
# AIConfigurator's model families it builds from an architecture (sdk/models); others are not covered
_DTYPE = {"bf16": "bfloat16", "fp16": "float16", "fp8": "fp8"}
WEIGHT_FORMATS = ("bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4")  # the formats quant_modes maps


def quant_modes(weight_format: str, generation: str, moe: bool, block_fp8: bool = False) -> tuple[str, str | None]:
    """AIConfigurator's (GEMM quant mode, MoE quant mode) for weights in ``weight_format`` on a GPU of
    ``generation``: the kernels the engines run them with, as the planner's step model assumes them
    (:func:`planner.latency.kernel_dtype`). None for the MoE mode: AIConfigurator's default (the GEMM's).

    * fp8: block-scaled (``fp8_block``, DeepSeek-style checkpoints with ``weight_block_size``) or per tensor;
    * int4 (AWQ / GPTQ / compressed-tensors): W4A16 (``int4_wo``), on the routed experts of a MoE model
      (their attention and dense layers bf16), on every GEMM of a dense one; int8: W8A16 GEMMs (dense models);
    * nvfp4: W4A4 on FP4 tensor cores, else widened to bf16 (``nvfp4_wo``);
    * mxfp4 (gpt-oss: experts only): W4A8 MXFP4 x MXFP8 on FP4 tensor cores, else W4A16.

    Raises:
        NotCovered: a format AIConfigurator has no kernels for (fp32, int8 experts, dense mxfp4).
    """
    from planner.latency import FP4_GENERATIONS

    fp4 = generation in FP4_GENERATIONS
    if weight_format in ("bf16", "fp16"):
        return _DTYPE[weight_format], None
    if weight_format == "fp8":
        mode = "fp8_block" if block_fp8 else "fp8"
        return mode, mode
    if weight_format == "int4":
        return ("bfloat16", "int4_wo") if moe else ("int4_wo", None)
    if weight_format == "int8" and not moe:
        return "int8_wo", None  # W8A16, as the planner multiplies int8 weights (bf16 tensor cores)
    if weight_format == "nvfp4":
        mode = "nvfp4" if fp4 else "nvfp4_wo"
        return mode, mode
    if weight_format == "mxfp4" and moe:
        return "bfloat16", "w4a8_mxfp4_mxfp8" if fp4 else "w4a16_mxfp4"
    kind = "dense " if weight_format == "mxfp4" else "MoE " if weight_format == "int8" else ""
    raise NotCovered(f"AIConfigurator {VERSION} has no kernels for {kind}{weight_format} weights (covered: bf16, fp16, fp8, int4, nvfp4, int8 dense, mxfp4 experts)")


@dataclass(frozen=True, slots=True)
class MeasuredLatency(Result):
    """One static-batch estimate from measured kernels (milliseconds)."""

    prefill_ms: float  # time to first token of a batch of ``batch`` prompts, no queue
    itl_ms: float  # mean time per output token (TPOT) at ``batch`` sequences
    batch: int
    measured_share_prefill: float  # share of the prefill time that came from measured rows
    measured_share_decode: float
    system: str
    backend: str
    version: str


class NotCovered(Exception):
    """AIConfigurator has no data for this GPU, backend, model family or dtype (the message says which)."""


def available() -> bool:
    """Whether ``aiconfigurator-core`` can be imported (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("aiconfigurator_core") is not None


def coverage(gpu: str, kv_dtype: str = "bf16", weight_dtype: str = "bf16") -> str | None:
    """``None`` when the database covers the GPU and dtypes, else the sentence saying why not
    (``weight_dtype``: a weight format, :data:`WEIGHT_FORMATS`)."""
    if not available():
        return f"the measured backend needs aiconfigurator-core {VERSION} (pip install aiconfigurator-core=={VERSION})"
    if gpu not in SYSTEMS:
        return f"AIConfigurator {VERSION} has no vLLM kernel data for {gpu} (covered: {', '.join(SYSTEMS)})"
    if kv_dtype not in _DTYPE:
        return f"AIConfigurator's data has no {kv_dtype} K/V kernels (covered: bf16, fp16, fp8)"
    if weight_dtype not in WEIGHT_FORMATS:
        return f"AIConfigurator's data has no {weight_dtype} weight kernels (covered: {', '.join(WEIGHT_FORMATS)})"
    return None


def _config_dir(config: dict) -> str:
    """A folder holding ``config.json`` (AIConfigurator reads local folders without the network)."""
    blob = json.dumps(config, sort_keys=True).encode()
    folder = os.path.join(tempfile.gettempdir(), "kvp-aic-configs", hashlib.sha256(blob).hexdigest()[:16])
    path = os.path.join(folder, "config.json")
    if not os.path.exists(path):
        os.makedirs(folder, exist_ok=True)
        tmp = f"{path}.{os.getpid()}"
        with open(tmp, "wb") as f:
            f.write(blob)
        os.replace(tmp, path)
    return folder


def _measured_share(latency: dict, source: dict) -> float:
    total = sum(latency.values())
    measured = sum(v for k, v in latency.items() if source.get(k) == "silicon")
    return measured / total if total else 0.0


class MeasuredEstimator:
    """A reusable AIConfigurator session for one model, GPU and parallelism.

    Raises (at construction):
        NotCovered: the database has no data for the GPU/backend, the model family is not one
            AIConfigurator models, or the layout is invalid there.
    """

    def __init__(self, config_json: str, gpu: str, tp: int, kv_dtype: str = "bf16", weight_dtype: str = "bf16", ep: int = 1, backend: str = BACKEND, dp: int = 1) -> None:
        why = coverage(gpu, kv_dtype, weight_dtype)
        if why:
            raise NotCovered(why)
        logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
        from aiconfigurator_core.sdk.backends.factory import get_backend
        from aiconfigurator_core.sdk.config_builders import build_model_config
        from aiconfigurator_core.sdk.models import get_model
        from aiconfigurator_core.sdk.models.helpers import check_is_moe
        from aiconfigurator_core.sdk.perf_database import get_database_view, get_latest_database_version

        from planner.hardware import get_device

        self.system = SYSTEMS[gpu]
        self.backend = backend
        self.version = get_latest_database_version(system=self.system, backend=backend)
        if self.version is None:
            raise NotCovered(f"AIConfigurator {VERSION} ships no {backend} database for {gpu}")
        config = json.loads(config_json)
        folder = _config_dir(config)
        try:
            moe = check_is_moe(folder)
        except Exception as exc:  # AIConfigurator raises plain ValueError/KeyError for families it lacks
            raise NotCovered(f"AIConfigurator {VERSION} cannot model this architecture: {str(exc).splitlines()[0][:160]}") from None
        quant = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else {}
        gemm, moe_mode = quant_modes(weight_dtype, get_device(gpu).generation, moe, block_fp8=bool(quant.get("weight_block_size")))
        self.quant = (gemm, moe_mode)
        if moe and (tp * dp) % ep:
            raise NotCovered(f"AIConfigurator splits the experts over TP x DP = {tp * dp} GPUs, which expert parallelism {ep} does not divide")
        try:  # attention over tp GPUs in each of dp data-parallel ranks; the experts over all tp x dp, ep-way expert parallel
            model_config = build_model_config(tp, 1, dp, tp * dp // ep if moe else None, ep if moe else None, gemm, _DTYPE[kv_dtype], _DTYPE[kv_dtype] if kv_dtype != "fp8" else "bfloat16", moe_mode if moe else None)
            if moe:
                model_config.resolve_moe_parallelism()
            self._model = get_model(folder, model_config, backend)
        except Exception as exc:  # AIConfigurator raises plain ValueError/KeyError for families it lacks
            raise NotCovered(f"AIConfigurator {VERSION} cannot model this architecture: {str(exc).splitlines()[0][:160]}") from None
        self._database = get_database_view(self.system, backend, self.version, allow_missing_data=True, database_mode="HYBRID")
        self._backend = get_backend(backend)

    def run(self, prompt_tokens: int, output_tokens: int, batch: int):  # -> aiconfigurator's InferenceSummary
        """AIConfigurator's own summary of a static batch (per-op times and their sources).

        Raises:
            NotCovered: AIConfigurator found no usable data for this shape.
        """
        from aiconfigurator_core.sdk.config import RuntimeConfig

        runtime = RuntimeConfig(batch_size=batch, isl=prompt_tokens, osl=max(2, output_tokens), prefix=0)
        try:
            summary = self._backend.run_static(self._model, self._database, runtime, "static", 32)
            result = summary.get_result_dict()
        except Exception as exc:
            raise NotCovered(f"AIConfigurator has no usable data for this shape: {str(exc).splitlines()[0][:160]}") from None
        if not result:
            raise NotCovered("AIConfigurator returned no result for this shape")
        return summary

    def estimate(self, prompt_tokens: int, output_tokens: int, batch: int) -> MeasuredLatency:
        """Static batch of ``batch`` requests of ``prompt_tokens`` in and ``output_tokens`` out.

        Raises:
            NotCovered: AIConfigurator found no usable data for this shape.
        """
        summary = self.run(prompt_tokens, output_tokens, batch)
        result = summary.get_result_dict()
        return MeasuredLatency(
            prefill_ms=float(result["ttft"]),
            itl_ms=float(result["tpot"]),
            batch=batch,
            measured_share_prefill=_measured_share(summary.get_context_latency_dict(), summary.get_context_source_dict()),
            measured_share_decode=_measured_share(summary.get_generation_latency_dict(), summary.get_generation_source_dict()),
            system=self.system,
            backend=self.backend,
            version=self.version,
        )


@lru_cache(maxsize=16)
def estimator(config_json: str, gpu: str, tp: int, kv_dtype: str = "bf16", weight_dtype: str = "bf16", ep: int = 1, backend: str = BACKEND, dp: int = 1) -> MeasuredEstimator:
    """The cached session for this model and layout (``config_json``: the config, sorted keys).

    Raises:
        NotCovered: see :class:`MeasuredEstimator`.
    """
    return MeasuredEstimator(config_json, gpu, tp, kv_dtype, weight_dtype, ep, backend, dp)


@lru_cache(maxsize=4096)
def measured(config_json: str, gpu: str, tp: int, prompt_tokens: int, output_tokens: int, batch: int, kv_dtype: str = "bf16", weight_dtype: str = "bf16", ep: int = 1, backend: str = BACKEND, dp: int = 1) -> MeasuredLatency:
    """A cached static-batch estimate (see :meth:`MeasuredEstimator.estimate`).

    Raises:
        NotCovered: the database does not cover this GPU, family, dtype or shape.
    """
    return estimator(config_json, gpu, tp, kv_dtype, weight_dtype, ep, backend, dp).estimate(prompt_tokens, output_tokens, batch)


@dataclass(frozen=True, slots=True)
class Comparison(Result):
    """A plan's latency from measured kernels beside its roofline (ms), or why there is none.

    Static figures on both sides, so they compare like for like: one prompt's prefill and one
    sequence's decode step "at 1 request", and a static batch of the plan's requests per replica
    "at N requests" (AIConfigurator's TTFT of N prompts prefilled together, its TPOT at N).
    """

    covered: bool
    reason: str  # "" when covered; else the sentence saying what the database lacks
    requests: int
    source: str = ""
    prefill_ms_at_1: float | None = None
    itl_ms_at_1: float | None = None
    ttft_ms_at_n: float | None = None
    itl_ms_at_n: float | None = None
    roofline_prefill_ms_at_1: float | None = None
    roofline_itl_ms_at_1: float | None = None
    roofline_itl_ms_at_n: float | None = None
    measured_share: float | None = None  # of the decode time at N, from measured rows

    def difference(self) -> dict[str, float]:
        """roofline / measured for each figure both sides have."""
        if not self.covered:
            return {}
        pairs = {
            "prefill_at_1": (self.roofline_prefill_ms_at_1, self.prefill_ms_at_1),
            "itl_at_1": (self.roofline_itl_ms_at_1, self.itl_ms_at_1),
            "itl_at_n": (self.roofline_itl_ms_at_n, self.itl_ms_at_n),
        }
        return {k: r / m for k, (r, m) in pairs.items() if r and m}


def compare(plan, model) -> Comparison:  # planner.plan.Plan, planner.plan.PreparedModel
    """Measured-kernel latency for ``plan`` of ``model`` (its model, GPU, tensor parallelism, dtypes, prompt,
    output and requests per replica), or a :class:`Comparison` with ``covered=False`` and the reason.

    Never raises for a gap in AIConfigurator's data; the first call per model and layout costs
    about 1-2 s (import and database view), later ones well under a millisecond.
    """
    from planner.plan.serving import serving_engine

    inputs, r = plan.inputs, plan.roofline
    n = r.decode_concurrency
    weight_format = "fp32" if inputs.weight_dtype == "fp32" else "fp16" if inputs.weight_dtype == "fp16" else model.weight_format(inputs.weight_dtype)
    kv = plan.inspect.kv_dtype  # "auto" resolved from the checkpoint
    if plan.device.name not in SYSTEMS and plan.device.source == "user-provided":
        return Comparison(covered=False, reason=f"a custom device has no measured kernels in AIConfigurator {VERSION}", requests=n)
    why = coverage(plan.device.name, kv, weight_format)
    if why is None and inputs.pp > 1:
        why = "the comparison covers tensor, attention data and expert parallelism, not pipeline parallelism"
    if why is None and inputs.runtime not in ("vllm", "sglang"):
        why = f"AIConfigurator's kernels are measured under vLLM, SGLang and TensorRT-LLM; this plan's runtime is {inputs.runtime}"
    if why:
        return Comparison(covered=False, reason=why, requests=n)
    engine = serving_engine(inputs.runtime, inputs.serving_engine)
    prompt, output = plan.context.input_tokens, max(2, inputs.generated_tokens or inputs.output_tokens)
    config_json = json.dumps(model.config, sort_keys=True)
    try:
        one = measured(config_json, plan.device.name, inputs.tp, prompt, output, 1, kv, weight_format, inputs.ep, engine, inputs.dp)
        many = measured(config_json, plan.device.name, inputs.tp, prompt, output, n, kv, weight_format, inputs.ep, engine, inputs.dp) if n > 1 else one
    except NotCovered as exc:
        return Comparison(covered=False, reason=str(exc), requests=n)
    gemm, moe_mode = estimator(config_json, plan.device.name, inputs.tp, kv, weight_format, inputs.ep, engine, inputs.dp).quant
    kernels = gemm + (f" GEMMs, {moe_mode} experts" if moe_mode and moe_mode != gemm else " kernels")
    return Comparison(
        covered=True,
        reason="",
        requests=n,
        source=f"aiconfigurator-core {VERSION}, {one.backend} {one.version} database, {one.system}, {kernels}",
        prefill_ms_at_1=one.prefill_ms,
        itl_ms_at_1=one.itl_ms,
        ttft_ms_at_n=many.prefill_ms,
        itl_ms_at_n=many.itl_ms,
        roofline_prefill_ms_at_1=r.prefill_ms_at_1_request,
        roofline_itl_ms_at_1=r.itl_ms_at_1_request,
        roofline_itl_ms_at_n=r.itl_ms_decode_only,
        measured_share=many.measured_share_decode,
    )
