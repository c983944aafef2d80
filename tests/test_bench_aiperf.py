"""aiperf's result JSON (``profile_export_aiperf.json``) read back and put beside the plan.

tests/data/bench/aiperf_c4.json is a real aiperf 0.13.0 run (4 concurrent streamed chat clients,
32 requests of 512 prompt and 64 output tokens) against the fake OpenAI server of
scripts/gen_bench_fixtures.py; its provenance is in tests/data/bench/README.md. The expected
figures are the file's own keys; the cross-checks are arithmetic on them and the fake server's
timing (TTFT 20 ms + 0.02 ms a prompt token, a token every 4 ms + 0.05 ms a running request).
"""

from __future__ import annotations

import json

import pytest

from planner.bench_calibration import parse_calibration
from planner.benchimport import compare, read_result
from planner.benchimport.readers import detect
from planner.errors import PlannerError
from planner.plan import make_inputs
from tests.test_benchimport import DATA, PLAN, llama, raw  # noqa: F401 - the module's fixture

NAME = "aiperf_c4.json"


def test_aiperf_export_reads_its_own_keys():
    doc = json.loads(raw(NAME))
    assert doc["aiperf_version"] == json.loads(raw("versions.json"))["aiperf"] == "0.13.0" and doc["schema_version"] == "1.4"
    assert detect(raw(NAME)) == "aiperf"
    m = read_result(raw(NAME))
    assert m.source == "aiperf" and m.tool == "aiperf"
    assert m.requests == doc["request_count"]["avg"] == 32 and (m.max_concurrency, m.request_rate) == (4, None)  # --concurrency 4, no rate
    assert (m.input_tokens_mean, m.output_tokens_mean) == (512.0, 64.0)  # --isl 512 --isl-stddev 0 --osl 64, ignore_eos
    f = m.figures
    assert f["ttft_ms"] == doc["time_to_first_token"]["avg"] and f["ttft_p95_ms"] == doc["time_to_first_token"]["p95"]
    # aiperf's inter_token_latency is per request (latency - TTFT) / (tokens - 1): vLLM bench's TPOT; its
    # inter_chunk_latency is every streamed gap: vLLM's ITL
    assert f["tpot_ms"] == doc["inter_token_latency"]["avg"] and f["itl_ms"] == doc["inter_chunk_latency"]["avg"] and f["itl_p95_ms"] == doc["inter_chunk_latency"]["p95"]
    assert f["e2e_ms"] == doc["request_latency"]["avg"] and f["output_tokens_per_s"] == doc["output_token_throughput"]["avg"] and f["requests_per_s"] == doc["request_throughput"]["avg"]
    assert m.duration_s == doc["benchmark_duration"]["avg"]  # "sec" in the export


def test_aiperf_figures_hang_together():
    f = read_result(raw(NAME)).figures
    # every request streamed 64 tokens: its latency is TTFT + 63 per-request TPOTs (means of both sides)
    assert f["e2e_ms"] == pytest.approx(f["ttft_ms"] + 63 * f["tpot_ms"], rel=1e-6)
    # Little's law: 4 clients = throughput x latency, less the clients' own gaps between requests
    assert 3.0 <= f["requests_per_s"] * f["e2e_ms"] / 1e3 <= 4.0
    assert f["output_tokens_per_s"] == pytest.approx(64 * f["requests_per_s"], rel=0.02)
    # the fake server's floor: TTFT >= 20 + 0.02 x 512 = 30.24 ms, a token >= 4 ms
    assert f["ttft_ms"] >= 30.24 and f["tpot_ms"] >= 4.0 and f["itl_p95_ms"] >= f["itl_ms"]


def test_aiperf_run_beside_the_plan_and_its_calibration(llama):  # noqa: F811 - the imported fixture
    m = read_result(raw(NAME))
    c = compare(m, make_inputs(**PLAN), llama)
    assert c.tool == "aiperf" and c.load.startswith("4 concurrent clients")
    rows = {r.figure: r for r in c.rows}
    assert {"ttft_ms", "tpot_ms", "itl_ms", "output_tokens_per_s"} <= set(rows)
    assert all(r.ratio == pytest.approx(r.measured / r.predicted) for r in c.rows)
    source, kept = parse_calibration(c.calibration)
    assert source == "aiperf" and list(kept) == ["ttft_ms", "tpot_ms", "output_tokens_per_s"]
    assert kept["ttft_ms"][0] == float(f"{m.figures['ttft_ms']:.4g}")
    assert make_inputs(**PLAN, bench_calibration=c.calibration).bench_calibration == c.calibration  # a plan keeps it


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"aiperf_version": "0.13.0"}, "carries time_to_first_token"),
        ({"time_to_first_token": {"unit": "furlongs", "avg": 3}}, "time_to_first_token.unit"),
        ({"time_to_first_token": {"unit": "ms", "avg": "80"}}, "time_to_first_token.avg"),
        ({"time_to_first_token": 80}, "time_to_first_token"),
        ({"time_to_first_token": {"unit": "ms", "avg": 80}, "request_count": {"unit": "requests", "avg": 0}}, "no request"),
        ({"time_to_first_token": {"unit": "ms", "avg": 80}, "input_config": {"phases": [{"kind": "profiling", "type": "poisson", "rate": -1}]}}, "rate"),
    ],
)
def test_bad_aiperf_files_are_refused_in_one_line(doc, why):
    with pytest.raises(PlannerError) as exc:
        read_result(json.dumps(doc).encode(), "aiperf")
    text = str(exc.value)
    assert why in text and "\n" not in text and len(text) < 400


def test_a_poisson_aiperf_run_reads_its_rate():
    doc = json.loads(raw(NAME))
    doc["input_config"]["phases"][0] |= {"type": "poisson", "rate": 8.0}
    m = read_result(json.dumps(doc).encode())
    assert m.request_rate == 8.0


def test_cli_bench_import_reads_aiperf(capsys, tmp_path):
    from planner.cli import main

    rc = main(["bench-import", str(DATA / NAME), "--preset", "llama-3.1-8b", "--input-tokens", "512", "--output-tokens", "64", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and doc["tool"] == "aiperf" and doc["calibration"].startswith("src=aiperf;ttft_ms=")
