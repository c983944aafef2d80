"""Launch artifacts: serve lines per pool, llm-d Helm values validated against the chart's schema,
and the benchmark commands that reproduce a plan's workload.

The schema is the llm-d-modelservice chart's own values.schema.json at v0.4.12 (tests/data/llmd/,
Apache-2.0, source in its README). Flag spellings: vLLM 0.33 (``vllm serve``, ``vllm bench serve``:
both commands below were parsed with vLLM 0.33.0's own argument parser when this was written),
SGLang 0.5.23 (``--disaggregation-mode``), guidellm 0.8.1 (``guidellm run --help``).
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml

from planner.errors import PlannerError
from planner.launch.bench import bench_commands
from planner.launch.llmd import GPU_PRODUCT, llmd_values, llmd_yaml
from planner.launch.serve import NIXL_CONFIG, serve_lines
from planner.plan import prepare_model
from tests.test_disagg import QWEN3_32B

SCHEMA = json.loads((Path(__file__).parent / "data" / "llmd" / "values.schema.json").read_text())
REPO = "Qwen/Qwen3-32B-FP8"
BASE = {"input_tokens": 4000, "output_tokens": 1000, "weight_dtype": "fp8", "gpu": "H200-141GB", "tp": 2, "gpu_count": 4, "kv_dtype": "fp8", "sequences": 32}
DISAGG = {**BASE, "disagg": "2P:1@H200-141GB,1D:2@B200-180GB"}


@pytest.fixture(scope="module")
def qwen():
    return prepare_model(QWEN3_32B)


def validate(doc: dict) -> list[str]:
    return sorted(e.message for e in jsonschema.Draft7Validator(SCHEMA).iter_errors(doc))


def test_schema_fixture_is_the_charts_and_rejects_a_wrong_values_file():
    assert SCHEMA["$schema"] == "http://json-schema.org/draft-07/schema#" and {"decode", "prefill", "routing", "modelArtifacts"} <= set(SCHEMA["properties"])
    assert validate({"decode": {"replicas": "two"}})  # the schema can fail: a string replica count is refused
    assert validate({"decode": {"create": True, "replicas": 1, "nonsense": 1}}) or validate({"routing": {"proxy": {"enabled": "yes"}}})


def test_aggregated_values_validate_and_carry_the_plan(qwen):
    doc = yaml.safe_load(llmd_yaml(qwen, BASE, REPO))
    assert validate(doc) == []
    assert doc["prefill"] == {"create": False} and doc["routing"]["proxy"] == {"enabled": False}
    decode = doc["decode"]
    assert decode["replicas"] == 2 and decode["parallelism"]["tensor"] == 2  # 4 GPUs at TP 2
    assert decode["nodeSelector"] == {"nvidia.com/gpu.product": GPU_PRODUCT["H200-141GB"]}
    args = decode["containers"][0]["args"]
    assert "--tensor-parallel-size" not in args  # the chart writes it from parallelism.tensor
    assert args[args.index("--kv-cache-dtype") + 1] == "fp8"


def test_disaggregated_values_validate_with_mixed_gpus(qwen):
    doc = llmd_values(qwen, DISAGG, REPO)
    assert validate(doc) == []
    p, d = doc["prefill"], doc["decode"]
    assert (p["replicas"], p["parallelism"]["tensor"], d["replicas"], d["parallelism"]["tensor"]) == (2, 1, 1, 2)
    assert p["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-H200" and d["nodeSelector"]["nvidia.com/gpu.product"] == "NVIDIA-B200"
    assert doc["routing"]["proxy"]["enabled"] is True and doc["routing"]["proxy"]["connector"] == "nixlv2"
    for pool in (p, d):
        args = pool["containers"][0]["args"]
        assert json.loads(args[args.index("--kv-transfer-config") + 1]) == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}
        assert {e["name"] for e in pool["containers"][0]["env"]} >= {"VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT"}


def test_serve_lines_per_pool_and_router(qwen):
    agg = serve_lines(qwen, BASE, "vllm", REPO)
    assert agg.prefill is None and agg.router is None and agg.decode.startswith(f"vllm serve {REPO} --tensor-parallel-size 2")
    v = serve_lines(qwen, DISAGG, "vllm", REPO)
    assert "--tensor-parallel-size 1" in v.prefill and "--tensor-parallel-size 2" in v.decode
    for line in (v.prefill, v.decode):
        words = shlex.split(line.split(" vllm serve ", 1)[1])
        assert json.loads(words[words.index("--kv-transfer-config") + 1]) == json.loads(NIXL_CONFIG)  # the shell quoting survives
    assert "--vllm-pd-disaggregation" in v.router
    s = serve_lines(qwen, DISAGG, "sglang", REPO)
    assert "--disaggregation-mode prefill" in s.prefill and "--disaggregation-mode decode" in s.decode and "--kv-cache-dtype fp8_e4m3" in s.decode
    assert "--pd-disaggregation" in s.router
    with pytest.raises(PlannerError, match="vllm or sglang"):
        serve_lines(qwen, BASE, "trt", REPO)


def test_bench_commands_carry_the_plans_workload(qwen):
    closed = bench_commands(qwen, BASE, repo=REPO)
    words = shlex.split(closed.vllm)
    arg = lambda flag: words[words.index(flag) + 1]  # noqa: E731
    assert words[:3] == ["vllm", "bench", "serve"] and (arg("--input-len"), arg("--output-len"), arg("--max-concurrency")) == ("4000", "1000", "32")
    assert "--ignore-eos" in words and "--save-result" in words and "--request-rate" not in words
    assert arg("--num-prompts") == "320"  # 10 requests per client, 32 clients
    assert "kind=concurrent,streams=32" in closed.guidellm and "prompt_tokens=4000,output_tokens=1000" in closed.guidellm
    opened = bench_commands(qwen, BASE, rate_per_s=2.5, repo=REPO)
    assert "--request-rate 2.5" in opened.vllm and "--max-concurrency" not in opened.vllm and "kind=poisson,rate=2.5" in opened.guidellm
    assert opened.num_prompts == 300  # 2.5 requests/s for 120 s
    assert "DECODE_HOST" in bench_commands(qwen, DISAGG, repo=REPO).metrics  # a decode replica's engine metrics
    with pytest.raises(PlannerError, match="rate"):
        bench_commands(qwen, BASE, rate_per_s=float("nan"))


# --------------------------------------------------------------------------- the CLI


def run_cli(capsys, *argv):
    from planner.cli import main

    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def test_cli_launch_writes_validated_values_and_the_bench_line(capsys, tmp_path):
    values = tmp_path / "values.yaml"
    plan = ("--preset", "llama-3.1-70b", "--weight-dtype", "fp8", "--kv-dtype", "fp8", "--input-tokens", "4000", "--output-tokens", "1000", "--gpu", "H200-141GB", "--tp", "2")
    rc, out, _ = run_cli(capsys, "launch", *plan, "--disagg", "2P:1,1D:2@B200-180GB", "--out", str(values), "--json")
    assert rc == 0
    doc = json.loads(out)
    assert validate(yaml.safe_load(values.read_text())) == [] and values.read_text() == doc["llmd_values"]
    assert "--tensor-parallel-size 1" in doc["vllm"]["prefill"] and "--tensor-parallel-size 2" in doc["vllm"]["decode"]
    assert doc["bench"]["input_tokens"] == 4000 and "--input-len 4000" in doc["bench"]["vllm"]
    rc, out, _ = run_cli(capsys, "launch", *plan, "--what", "bench", "--rate", "1.5")
    assert rc == 0 and "--request-rate 1.5" in out and "kind=poisson,rate=1.5" in out


@pytest.mark.parametrize(("argv", "why"), [(("--disagg", "2P"), "write the pools"), (("--rate", "-1"), "--rate"), (("--rate", "١"), "--rate"), (("--what", "k8s"), "invalid choice")])
def test_cli_launch_refuses_in_one_line(capsys, argv, why):
    rc, out, err = run_cli(capsys, "launch", "--preset", "llama-3.1-8b", *argv)
    assert rc == 2 and why in err and len(err.strip().splitlines()) == 1


def test_cli_size_disagg_frontier_json_contract(capsys):
    rc, out, _ = run_cli(
        capsys, "size", "--preset", "llama-3.1-70b", "--input-tokens", "4000", "--output-tokens", "1000", "--weight-dtype", "fp8", "--users", "256",
        "--itl-p95-ms", "50", "--ttft-p95-ms", "2000", "--kv-dtypes", "fp8", "--gpus", "H200-141GB,B200-180GB,MI300X-192GB", "--disagg", "--frontier", "--json",
    )  # fmt: skip
    assert rc == 0
    doc = json.loads(out)
    points = doc["frontier"]
    assert points and {"tokens_per_s_per_gpu", "tokens_per_s_per_user", "gpus", "cost_per_hour", "pareto", "disaggregated", "meets_slo"} <= set(points[0])
    assert any(p["pareto"] for p in points) and {p["disaggregated"] for p in points} == {True, False}
    dis = next(p for p in points if p["disaggregated"])
    assert {"gpu", "tp", "replicas"} <= set(dis["prefill"]) and {"gpu", "tp", "replicas"} <= set(dis["decode"])
    for r in doc["recommendations"]:
        assert "disaggregated" in r and (not r["disaggregated"] or (r["prefill"] and r["decode"] and r["kv_transfer_ms"] > 0))
    assert "disaggregat" in doc["answer"].lower()  # it says whether disaggregation pays and why
