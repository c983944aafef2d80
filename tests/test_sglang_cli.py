"""``python -m planner engine --engine sglang`` against SGLang 0.5.23's own numbers.

Measured-memory cases replay ``tests/data/sglang_engine_cases.json`` (written by
``scripts/gen_sglang_engine_cases.py`` with SGLang's code): the CLI must print exactly what
SGLang sized and logged. Predicted cases use hand arithmetic written beside the test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner.cli import main

DATA = json.loads((Path(__file__).parent / "data" / "sglang_engine_cases.json").read_text())
FLAGS = {"context_length": "--context-length", "mem_fraction_static": "--mem-fraction-static", "chunked_prefill_size": "--chunked-prefill-size", "max_running_requests": "--max-running-requests", "page_size": "--page-size"}


def _cases():
    """One sized case of each pool family and every refusal kind that needs no hf_quant_config.json."""
    picked, seen = [], set()
    for c in DATA["cases"]:
        conf = DATA["configs"][c["source"]]
        if conf.get("quantization"):
            continue
        family = c["refusal"]["message"][:30] if "refusal" in c else c["internals"].get("configurator", "") + str(c["result"]["swa_max_total_num_tokens"] is not None) + str(c["result"]["max_mamba_cache_size"] is not None)
        if family not in seen:
            seen.add(family)
            picked.append(c)
    return picked


def _argv(c: dict, path: Path) -> list[str]:
    argv = ["engine", "--config", str(path), "--engine", "sglang", "--gpu", c["gpu"], "--tp", str(c["tp"]), "--kv-cache-dtype", c["kv_cache_dtype"]]
    argv += ["--pre-load-free-gib", repr(c["pre_load_free_gib"]), "--available-after-weights-gib", repr(c["available_gib"])]
    for key, flag in FLAGS.items():
        if key in c:
            argv += [flag, str(c[key])]
    return argv


@pytest.mark.parametrize("case", _cases(), ids=lambda c: f"{Path(c['source']).stem}-{c['gpu']}-tp{c['tp']}")
def test_measured_case_prints_what_sglang_printed(case, tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(DATA["configs"][case["source"]]["config"]))
    rc = main([*_argv(case, path), "--json"])
    out, err = capsys.readouterr()
    if "refusal" in case:
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("error: ")
        if not case["refusal"]["message"].startswith("The checkpoint you are trying to load"):  # transformers' long text is shortened
            assert case["refusal"]["message"] in err
        return
    assert rc == 0, err
    got, res, d = json.loads(out), case["result"], case["defaults"]
    assert got["log_lines"] == case["log_lines"]
    for key in ("max_total_num_tokens", "swa_max_total_num_tokens", "max_running_requests", "max_mamba_cache_size"):
        assert got[key] == res[key], key
    assert got["kv_pool_bytes"] == res["kv_size_bytes"]
    for key in ("mem_fraction_static", "chunked_prefill_size", "max_prefill_tokens", "page_size", "cuda_graph_max_bs", "context_len"):
        assert got[key] == d[key], key
    assert got["sglang_version"] == "0.5.23" and got["launch_command"].startswith("python -m sglang.launch_server --model-path ")


def test_cases_cover_families_and_refusals():
    cases = _cases()
    assert sum("refusal" in c for c in cases) >= 4 and sum("refusal" not in c for c in cases) >= 4


def test_predicted_memory_by_hand(capsys):
    # Llama-3.1-8B on one H100: 81,559 MiB - 1.1 GiB context - 14.96 GiB weights; rest =
    # 63.590 - 78.5475 x 0.165 = 50.630 GiB / 131,072 B a token = 414,757 tokens (the Plan's figure).
    assert main(["engine", "--preset", "llama-3.1-8b", "--engine", "sglang", "--gpu", "H100-SXM-80GB"]) == 0
    out = capsys.readouterr().out
    assert "card memory" in out and "79.65 GiB" in out and "CUDA context" in out and "-1.10 GiB" in out
    assert "max_total_num_tokens=414757, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=2048, context_len=131072" in out
    assert out.rstrip().endswith("python -m sglang.launch_server --model-path meta-llama/Llama-3.1-8B-Instruct --tp-size 1")


def test_measured_memory_by_hand(capsys):
    # 79 GiB before, 60 after: rest = 60 - 79 x 0.165 = 46.965 GiB / 131,072 B = 384,737 tokens
    assert main(["engine", "--preset", "llama-3.1-8b", "--engine", "sglang", "--gpu", "H100-SXM-80GB", "--pre-load-free-gib", "79", "--available-after-weights-gib", "60", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["max_total_num_tokens"] == 384737


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--max-model-len", "4096"], "--max-model-len is a vLLM flag; with --engine sglang use --context-length"),
        (["--pre-load-free-gib", "70"], "give both --pre-load-free-gib and --available-after-weights-gib"),
        (["--mem-fraction-static", "1.5"], "mem_fraction_static"),
        (["--page-size", "0"], "page_size"),
    ],
)
def test_bad_flags_are_one_line(argv, words, capsys):
    assert main(["engine", "--preset", "llama-3.1-8b", "--engine", "sglang", "--gpu", "H100-SXM-80GB", *argv]) == 2
    err = capsys.readouterr().err
    assert words in err and err.strip().splitlines()[-1].startswith("error:")


def test_sglang_flag_without_the_engine_is_refused(capsys):
    assert main(["engine", "--preset", "llama-3.1-8b", "--gpu", "H100-SXM-80GB", "--page-size", "16"]) == 2
    assert "--page-size is an SGLang flag: add --engine sglang" in capsys.readouterr().err


def test_gpu_without_a_profile_and_missing_gpu(capsys):
    assert main(["engine", "--preset", "llama-3.1-8b", "--engine", "sglang", "--gpu", "MI300X-192GB"]) == 2
    assert "no SGLang GPU profile" in capsys.readouterr().err
    assert main(["engine", "--preset", "llama-3.1-8b", "--engine", "sglang", "--available-kv-gib", "10"]) == 2
    assert "vLLM flag" in capsys.readouterr().err

