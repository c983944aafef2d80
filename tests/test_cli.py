"""The CLI contract: inspect/plan with --config, --preset and --model (against a local fake Hub)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakehub import FakeHub, make_safetensors

ROOT = Path(__file__).resolve().parents[1]
LLAMA = {"model_type": "llama", "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8, "hidden_size": 4096, "max_position_embeddings": 131072, "vocab_size": 128256, "intermediate_size": 14336}


def run(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "planner", *argv], capture_output=True, text=True, cwd=ROOT, timeout=120, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def fake_hub(tmp_path_factory):
    with FakeHub() as hub:
        hub.add_repo("acme/llama-8b", {"config.json": json.dumps(LLAMA)}, sha="a" * 40)
        hub.add_repo("acme/gated", {"config.json": json.dumps(LLAMA)}, sha="b" * 40)
        # a checkpoint with 3,000 BF16 and 1,000 F8_E4M3 elements: 3,000 x 2 + 1,000 x 1 = 7,000 bytes
        st = make_safetensors({"a": ("BF16", [30, 100]), "b": ("F8_E4M3", [10, 100])})
        hub.add_repo("acme/tiny-st", {"config.json": json.dumps({**LLAMA, "num_hidden_layers": 2}), "model.safetensors": st}, sha="c" * 40)
        hub.gate("acme/gated")
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_HOME": str(tmp_path_factory.mktemp("hf_home")),
            "HF_HUB_CACHE": str(tmp_path_factory.mktemp("hf_cache")),
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_TOKEN": "",
        }
        yield hub, env


def test_inspect_json_keys_for_a_preset():
    proc = run("inspect", "--preset", "gemma-2-9b", "--tokens", "8192", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    for key in ("kv_bytes_per_token", "kv_bytes_at_tokens", "state_bytes_per_sequence", "layers", "kv_heads_per_gpu", "head_dim", "runtime", "notes"):
        assert key in out
    # Gemma 2 9B: 21 full layers x 8 KV heads x 256 x 2 x 2 = 172,032 B/token; sliding 21 x min(8192, 4096) x 8,192 B
    assert out["kv_bytes_per_token"] == 172032
    assert out["kv_bytes_at_tokens"] == 172032 * 8192 + 172032 * 4096
    assert out["layers"] == {"full": 21, "sliding": 21}
    assert out["runtime"] == "vllm"
    assert out["source"]["kind"] == "preset"


def test_inspect_readable_summary():
    proc = run("inspect", "--preset", "deepseek-v3", "--runtime", "transformers")
    assert proc.returncode == 0
    assert "4,997,120 B" in proc.stdout  # decompressed MLA in transformers eager
    assert "transformers" in proc.stdout


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["inspect", "--config", "/nonexistent/config.json"], "cannot read file"),
        (["inspect", "--preset", "no-such-model"], "unknown preset"),
        (["inspect", "--preset", "llama-3.1-8b", "--kv-dtype", "fp4"], "invalid choice"),
        (["inspect", "--preset", "llama-3.1-8b", "--tp", "0"], "--tp"),
        (["inspect"], "one of the arguments"),
        (["inspect", "--model", "../etc/passwd"], "not a valid Hub id"),
    ],
)
def test_inspect_bad_input_one_line_exit_2(argv, needle):
    proc = run(*argv)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr


def test_inspect_bad_config_file_names_the_field(tmp_path):
    bad = tmp_path / "config.json"
    bad.write_text(json.dumps({**LLAMA, "num_key_value_heads": 5}))
    proc = run("inspect", "--config", str(bad))
    assert proc.returncode == 2
    assert "num_key_value_heads=5" in proc.stderr and "does not divide" in proc.stderr


def test_model_from_hub_pins_commit(fake_hub):
    hub, env = fake_hub
    proc = run("inspect", "--model", "acme/llama-8b", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["kv_bytes_per_token"] == 131072
    assert out["source"] == {**out["source"], "kind": "hub", "repo_id": "acme/llama-8b", "commit": "a" * 40}
    proc = run("plan", "--model", "acme/llama-8b@main", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    plan = json.loads(proc.stdout)
    assert plan["source"]["commit"] == "a" * 40
    assert plan["kv_cache"]["bytes_per_token_per_sequence"] == 131072


def test_model_gated_gives_one_line_with_advice(fake_hub):
    _hub, env = fake_hub
    proc = run("inspect", "--model", "acme/gated", env={**env, "HF_TOKEN": "hf_SECRETTOKEN123"})
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "licence" in proc.stderr.lower() or "license" in proc.stderr.lower() or "gated" in proc.stderr.lower()
    assert "hf_SECRETTOKEN123" not in proc.stderr


def test_model_missing_repo(fake_hub):
    _hub, env = fake_hub
    proc = run("plan", "--model", "acme/missing", env=env)
    assert proc.returncode == 2
    assert "acme/missing" in proc.stderr


def test_hub_weights_come_from_safetensors_metadata(fake_hub):
    _hub, env = fake_hub
    proc = run("plan", "--model", "acme/tiny-st", "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["source"]["weights_source"] == "safetensors metadata"
    assert out["source"]["parameter_counts"] == {"BF16": 3000, "F8_E4M3": 1000}
    assert out["weights"]["bytes"] == 7000
    assert out["weights"]["source"].startswith("safetensors metadata")
    # runtime vllm: as vLLM loads them, the checkpoint's 7,000 B + its RoPE cos/sin cache (131,072 positions x 128 x 2 B)
    assert out["capacity"]["model_resident_bytes"] == 7000 + 131072 * 128 * 2
    assert "RoPE" in out["capacity"]["model_resident_source"]


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["plan", "--example", "--preset", "deepseek-v3"], "--example plans the seed's own model"),
        (["plan", "--preset", "llama-3.1-8b", "--gpu", "T4-16GB", "--device-gib", "100"], "not both"),
        (["inspect", "--config", "/dev/zero"], "larger than 16,777,216 bytes"),
    ],
)
def test_conflicting_or_unbounded_input_is_refused(argv, needle):
    proc = run(*argv)
    assert proc.returncode == 2
    assert needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_every_flag_of_every_command_has_help_with_its_default():
    """Issue 14, defect 13: each flag says what it is, its unit and its default.

    Walks every sub-command of ``build_parser()``; a command added later is checked too."""
    import argparse

    from planner.cli import build_parser

    parser = build_parser()
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert subs and len(subs[0].choices) >= 5
    missing = []
    for name, sub in subs[0].choices.items():
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            flag = "/".join(action.option_strings) or action.dest
            text = (action.help or "").strip()
            if len(text) < 12 or "default" not in text:
                missing.append(f"{name} {flag}: {text!r}")
            sub.format_help()  # a stray % in a help string raises here
    assert not missing, "\n".join(missing)


def test_plan_help_gives_units_and_library_defaults():
    out = run("plan", "--help").stdout
    flat = " ".join(out.split())
    assert "--headroom-bp BP Headroom: share of device memory kept free (1,000 = 10 %); under runtime vllm vLLM's gpu_memory_utilization is 1 - headroom, of the total CUDA reports; in basis points (default: 1,000; >= 0 and <= 9,999)" in flat
    assert "--ttft-slo-ms X TTFT SLO: largest acceptable p95 time to first token; empty: none; in ms (default: none; > 0 and <= 1,000,000,000)" in flat


def test_plan_and_size_refuse_what_vllm_would_not_start_with_the_numbers():
    # Llama-3.1-70B in bf16 on one H100 SXM: 70,553,706,496 parameters x 2 B = 131.42 GiB + the RoPE
    # cos/sin buffer (131,072 positions x 128 x 2 B = 0.03 GiB) = 131.45 GiB of weights against the
    # budget 79.18 GiB (CUDA's total) x 0.9 = 71.26 GiB; with the predicted profiling peak (1.97),
    # non-torch (0.13) and graph (0.39) terms start-up takes 133.94 GiB: short by 62.68 GiB
    numbers = "(weights 131.45 GiB + profiling peak activations 1.97 GiB, non-torch memory 0.13 GiB, CUDA graphs 0.39 GiB = 133.94 GiB against the budget 71.26 GiB (79.18 GiB x 0.9 on H100-SXM-80GB): short by 62.68 GiB)"
    plan = run("plan", "--preset", "llama-3.1-70b")
    assert plan.returncode == 2 and len(plan.stderr.strip().splitlines()) == 1
    assert plan.stderr.startswith("error: tp=1: vLLM 0.33 refuses to start: No available memory for the cache blocks (") and numbers in plan.stderr
    size = run("size", "--preset", "llama-3.1-70b", "--users", "20", "--gpus", "H100-SXM-80GB", "--tps", "1", "2", "4", "--kv-dtypes", "bf16")
    assert size.returncode == 0, size.stderr
    lines = size.stdout.splitlines()
    refused = [line for line in lines if line.startswith("refused ")]
    assert len(refused) == 1 and refused[0].startswith("refused H100-SXM-80GB TP 1 bf16: vLLM 0.33 refuses to start: No available memory for the cache blocks (") and numbers in refused[0]
    # every deployment it lists starts: its serve line, with the replica layout (4 x TP 2 in one node)
    serve = [line for line in lines if line.startswith("serve ")]
    assert serve[0].startswith("serve H100-SXM-80GB TP 4 x1: vllm serve meta-llama/Llama-3.1-70B-Instruct --tensor-parallel-size 4 --max-model-len 131072 --max-num-batched-tokens 8192")
    assert "--tensor-parallel-size 2 --data-parallel-size 4" in serve[1]


def test_engine_takes_vllms_batching_defaults_per_gpu_and_entry_point():
    # vLLM 0.33 EngineArgs.get_batch_defaults (tests/data/vllm_batch_defaults.json, written by its own
    # code): an A100 stays in the small tier (2,048 tokens / 256 sequences) though it has 80 GB; an
    # H100's LLM class takes 16,384 / 1,024; both land in the budget's profiling run and the serve line
    a100 = run("engine", "--preset", "llama-3.1-8b", "--gpu", "A100-SXM-80GB", "--max-model-len", "32768")
    assert a100.returncode == 0, a100.stderr
    assert "max_num_batched_tokens / max_num_seqs  2,048 / 256  (vLLM 0.33 EngineArgs.get_batch_defaults" in a100.stdout
    assert a100.stdout.rstrip().splitlines()[-1].endswith("--max-model-len 32768 --max-num-batched-tokens 2048 --max-num-seqs 256 --gpu-memory-utilization 0.9")
    llm = run("engine", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--entry-point", "llm", "--enable-lora", "--max-loras", "4", "--max-lora-rank", "64", "--max-model-len", "32768")
    assert llm.returncode == 0, llm.stderr
    assert "16,384 / 1,024  (vLLM 0.33 EngineArgs.get_batch_defaults: `LLM class` default" in llm.stdout
    assert "LoRA adapter slots" in llm.stdout and "derived from vLLM 0.33 lora/layers create_lora_weights: 4 adapter slot(s) of rank 64" in llm.stdout
    assert llm.stdout.rstrip().splitlines()[-1].startswith('LLM(model="meta-llama/Llama-3.1-8B-Instruct", tensor_parallel_size=1, max_model_len=32768, max_num_batched_tokens=16384, max_num_seqs=1024')


def test_simulate_closed_loop_runs_the_benchmark_the_plan_describes(capsys):
    # --closed-loop: --sequences clients started at once, --bench-prompts prompts, each client sending its
    # next when its last ends; the JSON carries the simulated mean TTFT (the plan's API server added: the
    # simulator has none) beside the plan's benchmark figure (serving.benchmark_ttft_ms)
    from planner.cli import main
    from planner.plan import compute_plan, make_inputs, prepare_model
    from planner.presets import load_preset

    argv = ["simulate", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--sequences", "8", "--input-tokens", "4096", "--output-tokens", "256", "--bench-prompts", "24", "--closed-loop", "--policy", "chunked", "--chunk-tokens", "8192"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    plan = compute_plan(make_inputs(gpu="H100-SXM-80GB", sequences=8, input_tokens=4096, output_tokens=256, bench_prompts=24), prepare_model(load_preset("llama-3.1-8b")))
    c = out["closed_loop"]
    assert (c["clients"], c["prompts"], out["requests_completed"]) == (8, 24, 24)
    assert c["simulated_ttft_mean_ms"] == pytest.approx(out["ttft_ms"]["mean"] + plan.latency.preprocessing_ms)
    assert c["plan_benchmark_ttft_ms"] == pytest.approx(plan.roofline.benchmark_ttft_ms)
    assert main(argv) == 0 and "closed loop of 8 clients started at once, 24 prompts: mean TTFT" in capsys.readouterr().out
    # every policy the simulator has is a --policy choice; each next prompt reaches the scheduler the API
    # server's preprocessing after the last ended (closed_loop_lag_s), so the 8 prompts a wave ends within
    # it queue together again: all 3 waves queue, above the plan's F figure, which queues the first alone
    from planner import simulate as sim

    assert sim.closed_loop_lag_s(plan) == plan.latency.preprocessing_ms / 1e3 > 0
    for policy in sim.POLICIES:
        assert main([*argv[:-4], "--policy", policy, "--chunk-tokens", "8192", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["closed_loop"]["simulated_ttft_mean_ms"] > 1.2 * plan.roofline.benchmark_ttft_ms
    # one replica, the plan's lengths: one clear line otherwise
    assert main([*argv, "--replicas", "2"]) == 2
    err = capsys.readouterr().err
    assert "closed_loop" in err and "one replica" in err and "Traceback" not in err
