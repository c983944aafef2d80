"""Every control of a plan (:class:`PlanInputs`), validated once, and the seed's example inputs."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from planner import bench_calibration, latency, limits, pools
from planner.errors import PlannerError
from planner.hardware import CATALOG, DEFAULT_GPU, Device, custom_device, get_device

# The seed's runnable case: a dense 32-layer decoder with 8 KV heads of 128 (Llama-3.1-8B shape)
# with a 4,096-token context on a 16 GiB device.
EXAMPLE_CONFIG: dict = {
    "_name_or_path": "example/dense-32L-8kv-128",
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 32,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "vocab_size": 128256,
    "max_position_embeddings": 4096,
    "torch_dtype": "bfloat16",
}


def _checked(check, value: object) -> object:
    """``value`` when ``check`` (a text field's own reader) accepts it or it is None; its reason as pydantic's ValueError otherwise."""
    if value is not None:
        try:
            check(value)
        except PlannerError as exc:
            raise ValueError(exc.reason) from None
    return value


class PlanInputs(BaseModel):
    """Every control of a plan. Defaults are a meaningful plan for a preset on one H100."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    system_tokens: int = Field(default=128, ge=0, le=1 << 31)
    tool_tokens: int = Field(default=256, ge=0, le=1 << 31)
    retrieval_tokens: int = Field(default=512, ge=0, le=1 << 31)
    history_tokens: int = Field(default=640, ge=0, le=1 << 31)
    user_tokens: int = Field(default=512, ge=0, le=1 << 31)
    input_tokens: int | None = Field(default=None, ge=1, le=1 << 31)  # overrides the components
    output_tokens: int = Field(default=512, ge=1, le=1 << 31)
    encoder_tokens: int = Field(default=0, ge=0, le=1 << 24)  # image tokens cached by cross-attention layers
    max_context: int | None = Field(default=None, ge=1, le=1 << 31)  # None: the config's
    kv_dtype: Literal["auto", "fp32", "fp16", "bf16", "fp8", "int8", "int4"] = "auto"  # auto: as the checkpoint declares (vLLM's --kv-cache-dtype auto)
    mtp: bool = False  # count the MTP (next-token-prediction) layers an engine caches with MTP speculative decoding
    weight_dtype: Literal["auto", "fp32", "bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"] = "auto"  # planner.weights.WEIGHT_DTYPE_BITS
    runtime: Literal["vllm", "sglang", "transformers", "transformers-latent"] = "vllm"
    vllm_version: Literal["0.10", "0.11", "0.19", "0.24", "0.33"] = "0.33"  # whose start-up sizing runtime vllm follows
    mem_fraction_static: float | None = Field(default=None, gt=0, le=0.99)  # SGLang --mem-fraction-static; None: SGLang's default for the GPU and TP
    chunked_prefill_size: int | None = Field(default=None, ge=1, le=1 << 24)  # SGLang --chunked-prefill-size; None: SGLang's default for the GPU
    page_size: int | None = Field(default=None, ge=1, le=1 << 16)  # SGLang --page-size; None: SGLang's default for the model (1; 64 DSA, ...)
    # SGLang --scheduler-recv-interval: decode steps between the scheduler's polls for new requests (1, SGLang's default: every step);
    # at most 1,000, the weight SGLang's SchedulerRecvSkipper gives an extend step (above it an extend no longer polls at once)
    recv_interval: int = Field(default=1, ge=1, le=1000)
    # TensorRT-LLM batch waiting (LLM API batch_wait_timeout_iters / batch_wait_max_tokens_ratio): while others decode, a
    # new prompt is held for up to that many iterations, or until the held prompts and the decodes reach ratio x the token
    # budget (0 iterations: off, TensorRT-LLM's default; the ratio alone never holds one)
    batch_wait_iters: int = Field(default=0, ge=0, le=1000)
    batch_wait_tokens_ratio: float = Field(default=0.0, ge=0.0, le=1.0)
    entry_point: Literal["serve", "llm"] = "serve"  # vLLM's entry point: `vllm serve` or the LLM class (their batching defaults differ)
    enforce_eager: bool = False  # vLLM --enforce-eager: no CUDA graphs (outside the budget before 0.21, inside from it)
    limit_mm_per_prompt: int | None = Field(default=None, ge=0, le=1 << 20)  # images a prompt (vLLM --limit-mm-per-prompt); None: vLLM's 999, 0: text only
    enable_lora: bool = False  # vLLM --enable-lora: adapter slots in the budget
    max_loras: int = Field(default=1, ge=1, le=4096)  # vLLM --max-loras
    max_lora_rank: int = Field(default=16, ge=1, le=4096)  # vLLM --max-lora-rank
    reservation: Literal["dynamic", "static", "paged"] = "dynamic"
    block_tokens: int = Field(default=16, ge=1, le=4096)
    gpu: str = DEFAULT_GPU
    device_gib: float | None = Field(default=None, ge=limits.MIN_DEVICE_GIB, le=4096)  # custom device size
    device_bandwidth_gb_s: float | None = Field(default=None, ge=limits.MIN_BANDWIDTH_GB_S, le=100_000)  # custom device HBM bandwidth
    device_bf16_tflops: float | None = Field(default=None, ge=limits.MIN_TFLOPS, le=100_000)  # custom device dense peak
    gpu_count: int = Field(default=1, ge=1, le=4096)
    tp: int = Field(default=1, ge=1, le=4096)
    ep: int = Field(default=1, ge=1, le=4096)  # expert parallelism within a replica (MoE only): divides tp, or dp x tp with attention data parallelism
    dp: int = Field(default=1, ge=1, le=4096)  # attention data-parallel ranks of tp GPUs each in a replica (MoE only; experts over ep = dp x tp GPUs)
    pp: int = Field(default=1, ge=1, le=512)  # pipeline-parallel stages of a replica (consecutive layers each)
    # disaggregated prefill / decode pools serving this plan's workload (planner.pools text, e.g. 2P:4@H100-SXM-80GB,1D:8);
    # None: none. The plan's own figures stay its aggregated replicas'; planner.disagg.plan_of adds the pools' beside them
    disagg: str | None = Field(default=None, max_length=pools.MAX_POOLS_CHARS)

    @field_validator("disagg", mode="before")  # before the length limit: one sentence with the form for any bad text
    @classmethod
    def _check_disagg(cls, value: object) -> object:
        return _checked(pools.check_pools, value)
    serving_engine: Literal["auto", "vllm", "sglang", "trtllm"] = "auto"  # whose serving costs the latency uses (auto: the runtime's; vLLM's for transformers)
    request_rate: float | None = Field(default=None, gt=0, le=1e7, allow_inf_nan=False)  # open loop: Poisson requests a second to the deployment (None: sequences are clients in a closed loop)
    bench_prompts: int = Field(default=1000, ge=1, le=10_000_000)  # a closed-loop benchmark's prompts in all (vllm bench serve / sglang.bench_serving --num-prompts, 1000 by default): its mean TTFT counts the first C queued at once
    spec_method: Literal["none", "mtp", "eagle3", "draft"] = "none"  # speculative decoding
    spec_tokens: int | None = Field(default=None, ge=1, le=16)  # drafts per step (None: the method's default)
    spec_acceptance: float | None = Field(default=None, ge=1, le=17, allow_inf_nan=False)  # measured acceptance length (None: the method's published figure)
    spec_draft: str | None = Field(default=None, min_length=1, max_length=200)  # the draft model's preset (spec_method draft)
    max_batched_tokens: int | None = Field(default=None, ge=1, le=1 << 24)  # scheduler token budget per step; None: the engine's default
    headroom_bp: int = Field(default=1000, ge=0, le=9999)
    model_resident_gib: float | None = Field(default=None, ge=0, le=100_000)  # None: weights estimate / tp
    workspace_gib: float | None = Field(default=None, ge=0, le=100_000)  # None: runtime vllm's predicted terms, else 1 GiB
    sequences: int = Field(default=8, ge=1, le=10_000_000)
    max_num_seqs: int | None = Field(default=None, ge=1, le=10_000_000)  # runtime hard limit; None: vLLM's default (runtime vllm), else none
    tenant_quota: int | None = Field(default=None, ge=1, le=10_000_000)
    itl_slo_ms: float | None = Field(default=None, gt=0, le=1e7)
    ttft_slo_ms: float | None = Field(default=None, gt=0, le=1e9)
    shared_prefix_tokens: int = Field(default=0, ge=0, le=1 << 31)
    prefix_hit_rate: float = Field(default=0.0, ge=0, le=1)  # nothing assumed cached until the user says
    tenants: int = Field(default=1, ge=1, le=1_000_000)  # prefixes are shared within a tenant only
    gpu_hour_price: float | None = Field(default=None, ge=0, le=1e6)
    mfu: float = Field(default=latency.DEFAULT_MFU, ge=limits.MIN_UTILISATION, le=1)
    mbu: float = Field(default=latency.DEFAULT_MBU, ge=limits.MIN_UTILISATION, le=1)
    queue_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    preprocessing_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    prefill_ms: float | None = Field(default=None, ge=limits.MIN_PHASE_MS, le=1e9, allow_inf_nan=False)
    first_decode_ms: float | None = Field(default=None, ge=limits.MIN_PHASE_MS, le=1e9, allow_inf_nan=False)
    remaining_decode_ms: float | None = Field(default=None, ge=0, le=1e9, allow_inf_nan=False)
    generated_tokens: int | None = Field(default=None, ge=1, le=1 << 31)
    # a benchmark run's measured / predicted figures (planner.bench_calibration); changes no figure of the plan
    bench_calibration: str | None = Field(default=None, max_length=bench_calibration.MAX_CALIBRATION_CHARS)

    @field_validator("bench_calibration")
    @classmethod
    def _check_calibration(cls, value: str | None) -> str | None:
        return _checked(bench_calibration.parse_calibration, value)
    # a multi-turn session workload (planner/cache): gives the plan its ``cache`` section; all None: none
    sessions_per_min: float | None = Field(default=None, ge=0.001, le=1e7, allow_inf_nan=False)  # 0.001: 1.4 a day; below, sessions/s underflows (5e-324 / 60 = 0)
    turns: int | None = Field(default=None, ge=1, le=1000)  # None: 1
    think_time_s: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)  # None: 30 s
    doc_catalog: int | None = Field(default=None, ge=1, le=10_000_000)  # documents the retrieved context comes from; None: each session's own
    doc_zipf: float | None = Field(default=None, ge=0, le=10, allow_inf_nan=False)  # None: 1.0
    cpu_tier_gib: float | None = Field(default=None, ge=0, le=1e6, allow_inf_nan=False)  # CPU DRAM per replica for K/V
    disk_tier_gib: float | None = Field(default=None, ge=0, le=1e7, allow_inf_nan=False)  # local NVMe per replica for K/V
    cpu_link_gb_s: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)  # None: the GPU's host link
    disk_gb_s: float | None = Field(default=None, gt=0, le=10_000, allow_inf_nan=False)  # None: one NVMe SSD

    @model_validator(mode="after")
    def _check(self) -> PlanInputs:
        problem = _cross_field_problem(self.gpu, self.device_gib, self.gpu_count, self.tp, self.dp, self.pp) or _workload_problem({name: getattr(self, name) for name in ("sessions_per_min", *WORKLOAD_DETAILS)})
        if problem:
            raise ValueError(f"{problem[0]}={problem[1]!r}: {problem[2]}")
        return self

    @property
    def gpus_per_replica(self) -> int:
        """tp x dp x pp: the GPUs one replica of the deployment uses."""
        return self.tp * self.dp * self.pp

    @property
    def observed(self) -> bool:
        """Latency comes from observations when any measured phase is given (then all must be)."""
        return any(v is not None for v in (self.prefill_ms, self.first_decode_ms, self.remaining_decode_ms))


def _cross_field_problem(gpu: object, device_gib: object, gpu_count: object, tp: object, dp: object = 1, pp: object = 1) -> tuple[str, object, str] | None:
    if all(isinstance(v, int) and v >= 1 for v in (gpu_count, tp, dp, pp)) and gpu_count % (tp * dp * pp):
        if dp == 1 and pp == 1:
            return "gpu_count", gpu_count, f"must be a multiple of tp {tp} (each replica uses tp GPUs)"
        return "gpu_count", gpu_count, f"must be a multiple of tp x dp x pp = {tp * dp * pp} (each replica uses {tp} x {dp} x {pp} GPUs)"
    if device_gib is None and str(gpu).lower() not in {k.lower() for k in CATALOG}:
        return "gpu", gpu, f"unknown GPU; known: {', '.join(CATALOG)} (or give a custom device size)"
    return None


# a session workload's details, meaningless without its rate (planner/cache/section.py reads them);
# the tiers (cpu_tier_gib, disk_tier_gib and their links) are the deployment's and stand alone:
# a trace replay (planner/cache/runs.py) and the start-up command use them without a workload
WORKLOAD_DETAILS = ("turns", "think_time_s", "doc_catalog", "doc_zipf")
TIER_INPUTS = ("cpu_tier_gib", "disk_tier_gib", "cpu_link_gb_s", "disk_gb_s")


def _workload_problem(values: dict) -> tuple[str, object, str] | None:
    if values.get("sessions_per_min") is None:
        for name in WORKLOAD_DETAILS:
            if values.get(name) is not None:
                return name, values[name], "describes a session workload: give the sessions per minute too"
    return None


def make_inputs(**values: object) -> PlanInputs:
    """Validate plan inputs, turning pydantic's errors into one :class:`PlannerError`.

    Raises:
        PlannerError: the first invalid field, its value and why.
    """
    try:
        return PlanInputs(**values)
    except ValidationError as exc:
        err = exc.errors()[0]
        if not err.get("loc"):  # the cross-field check: every field alone was valid, so int() is safe
            problem = _cross_field_problem(values.get("gpu", DEFAULT_GPU), values.get("device_gib"), int(values.get("gpu_count", 1)), int(values.get("tp", 1)), int(values.get("dp", 1)), int(values.get("pp", 1))) or _workload_problem(values)
            if problem:
                raise PlannerError(*problem) from None
        field = ".".join(str(p) for p in err.get("loc", ())) or "inputs"
        raise PlannerError(field, err.get("input"), err.get("msg", "invalid").replace("Value error, ", "")) from None


EXAMPLE_INPUTS = PlanInputs(
    device_gib=16.0,
    headroom_bp=1000,
    model_resident_gib=4.0,
    workspace_gib=1.0,
    sequences=8,
    queue_ms=20.0,
    preprocessing_ms=10.0,
    prefill_ms=400.0,
    first_decode_ms=20.0,
    remaining_decode_ms=2560.0,
    generated_tokens=129,
)


def resolve_device(inputs: PlanInputs) -> Device:
    """The catalog GPU, or a custom device (its bandwidth and peak default to 1,000 GB/s and 100 TFLOP/s)."""
    if inputs.device_gib is None:
        return get_device(inputs.gpu)
    return custom_device(inputs.device_gib, inputs.device_bandwidth_gb_s or 1000.0, inputs.device_bf16_tflops or 100.0)
