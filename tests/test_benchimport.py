"""Benchmark results read back and put beside the plan's prediction.

The files under tests/data/bench/ are real outputs of vLLM 0.33.0's ``vllm bench serve``, guidellm
0.8.1's ``guidellm run``, aiperf 0.13.0's ``aiperf profile`` (tests/test_bench_aiperf.py) and vLLM's own Prometheus logger, all run against a fake OpenAI server on
127.0.0.1 (scripts/gen_bench_fixtures.py made them; versions.json says which tools). The measured
figures expected below are read from each file's own keys, not from the reader under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from planner import latency
from planner.benchimport import compare, format_calibration, parse_calibration, read_result
from planner.benchimport.readers import MAX_JSON_BYTES
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.plan.stages import kv_held
from planner.presets import load_preset

DATA = Path(__file__).parent / "data" / "bench"
LLAMA_8B = {  # meta-llama/Llama-3.1-8B config.json (the fields the planner reads)
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "max_position_embeddings": 131072,
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "vocab_size": 128256, "torch_dtype": "bfloat16", "tie_word_embeddings": False,
}  # fmt: skip
PLAN = {"input_tokens": 512, "output_tokens": 64, "gpu": "H100-SXM-80GB", "tp": 1, "gpu_count": 1, "sequences": 8}  # the workload the fixtures ran (ISL 512, OSL 64)


@pytest.fixture(scope="module")
def llama():
    return prepare_model(LLAMA_8B)


def raw(name: str) -> bytes:
    return (DATA / name).read_bytes()


def test_fixtures_come_from_the_tools():
    versions = json.loads(raw("versions.json"))
    assert versions == {"vllm": "0.33.0", "guidellm": "0.8.1", "isl": 512, "osl": 64, "model": "fake/planner-bench-model", "aiperf": "0.13.0"}


@pytest.mark.parametrize("name", ["vllm_bench_c8.json", "vllm_bench_rate8.json"])
def test_vllm_bench_result_reads_its_own_keys(name):
    doc = json.loads(raw(name))
    m = read_result(raw(name))
    assert m.source == "vllm-bench" and m.requests == doc["completed"] == 48
    assert m.figures["ttft_ms"] == doc["mean_ttft_ms"] and m.figures["ttft_p95_ms"] == doc["p95_ttft_ms"]
    assert m.figures["tpot_ms"] == doc["mean_tpot_ms"] and m.figures["itl_p95_ms"] == doc["p95_itl_ms"] and m.figures["e2e_ms"] == doc["mean_e2el_ms"]
    assert m.figures["output_tokens_per_s"] == doc["output_throughput"] and m.figures["requests_per_s"] == doc["request_throughput"]
    # every prompt was 512 tokens and every output 64 (--ignore-eos): the totals over 48 requests
    assert (m.input_tokens_mean, m.output_tokens_mean) == (512.0, 64.0) == (doc["total_input_tokens"] / 48, doc["total_output_tokens"] / 48)
    if name == "vllm_bench_c8.json":
        assert (m.max_concurrency, m.request_rate) == (8, None)  # the run's request_rate is "inf": as fast as 8 clients go
    else:
        assert (m.max_concurrency, m.request_rate) == (None, 8.0)


def test_guidellm_report_reads_the_first_benchmark():
    doc = json.loads(raw("guidellm_rate4.json"))
    metrics = doc["benchmarks"][0]["metrics"]
    m = read_result(raw("guidellm_rate4.json"))
    assert m.source == "guidellm" and m.request_rate == 4.0 and m.max_concurrency is None  # --profile kind=constant,rate=4
    assert m.requests == metrics["request_totals"]["successful"] <= 32  # --constraint kind=max_requests,count=32 (those still running at the cut are incomplete)
    ttft = metrics["time_to_first_token_ms"]["successful"]
    assert m.figures["ttft_ms"] == ttft["mean"] and m.figures["ttft_p95_ms"] == ttft["percentiles"]["p95"]
    assert m.figures["e2e_ms"] == pytest.approx(metrics["request_latency"]["successful"]["mean"] * 1e3)  # seconds in the report
    assert (m.input_tokens_mean, m.output_tokens_mean) == (512.0, 64.0)  # synthetic prompts of 512 tokens reached the server whole


def test_prometheus_scrape_means_and_p95_from_the_histograms():
    text = raw("vllm_metrics.prom").decode()
    sums = {line.split()[0].split("{")[0]: float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:time_to_first_token_seconds_") and "bucket" not in line}
    m = read_result(raw("vllm_metrics.prom"))
    ttft_sum, ttft_count = sums["vllm:time_to_first_token_seconds_sum"], sums["vllm:time_to_first_token_seconds_count"]
    assert m.figures["ttft_ms"] == pytest.approx(ttft_sum / ttft_count * 1e3)
    running = next(float(line.split()[-1]) for line in text.splitlines() if line.startswith("vllm:num_requests_running{"))
    assert m.figures["running"] == running and 1 <= running <= 8  # the scrape the script kept: the busiest under 8 concurrent clients
    assert 0 < m.figures["kv_cache_usage"] < 1
    # p95 by linear interpolation inside the bucket that crosses 95 % of the count (histogram_quantile)
    buckets = sorted(
        (float(line.split('le="')[1].split('"')[0]), float(line.split()[-1])) for line in text.splitlines() if line.startswith("vllm:time_to_first_token_seconds_bucket")
    )
    target = 0.95 * buckets[-1][1]
    k = next(i for i, (_le, n) in enumerate(buckets) if n >= target)
    (lo, n0), (hi, n1) = buckets[k - 1], buckets[k]
    assert m.figures["ttft_p95_ms"] == pytest.approx((lo + (hi - lo) * (target - n0) / (n1 - n0)) * 1e3)


def test_compare_closed_loop_predicts_the_plans_own_figures(llama):
    m = read_result(raw("vllm_bench_c8.json"))
    inputs = make_inputs(**PLAN)
    c = compare(m, inputs, llama)
    rows = {r.figure: r for r in c.rows}
    assert {"ttft_ms", "tpot_ms", "e2e_ms", "output_tokens_per_s"} <= set(rows)
    plan = compute_plan(inputs, llama)
    kv_at = kv_held(plan.inspect, plan.reservation)
    runtime = latency.runtime_limits("vllm", plan.device.memory_gib, plan.device.generation, plan.device.name).max_num_seqs
    cl = latency.closed_loop(plan.roof, 512, 0, 64, 8, kv_at(512 + 32), 512 + 32, plan.batching.tokens, runtime, True)
    assert rows["ttft_ms"].predicted == pytest.approx(cl.ttft_ms) and rows["tpot_ms"].predicted == pytest.approx(cl.tpot_ms)
    assert rows["output_tokens_per_s"].predicted == pytest.approx(cl.output_tokens_per_s)
    for r in c.rows:
        assert r.measured == m.figures[r.figure] and r.ratio == pytest.approx(r.measured / r.predicted)
    assert c.load == "8 concurrent clients in a closed loop on one replica" and c.load.count("closed loop") == 1


def test_compare_spreads_the_clients_over_the_replicas(llama):
    m = read_result(raw("vllm_bench_c8.json"))
    one = {r.figure: r.predicted for r in compare(m, make_inputs(**{**PLAN, "gpu_count": 2, "sequences": 4}), llama).rows}
    # 8 clients over 2 replicas: 4 each; the per-request figures are those of one replica with 4 clients
    plan = compute_plan(make_inputs(**PLAN), llama)
    kv_at = kv_held(plan.inspect, plan.reservation)
    runtime = latency.runtime_limits("vllm", plan.device.memory_gib, plan.device.generation, plan.device.name).max_num_seqs
    cl4 = latency.closed_loop(plan.roof, 512, 0, 64, 4, kv_at(544), 544, plan.batching.tokens, runtime, True)
    assert one["ttft_ms"] == pytest.approx(cl4.ttft_ms) and one["output_tokens_per_s"] == pytest.approx(2 * cl4.output_tokens_per_s)


def test_compare_open_loop_and_scrape(llama):
    rate = compare(read_result(raw("vllm_bench_rate8.json")), make_inputs(**PLAN), llama)
    assert rate.load.startswith("8 requests/s, Poisson")
    rows = {r.figure: r for r in rate.rows}
    assert rows["output_tokens_per_s"].predicted == pytest.approx(8 * 64)  # an open loop below saturation delivers what it is offered
    scrape = compare(read_result(raw("vllm_metrics.prom")), make_inputs(**PLAN), llama)
    assert scrape.load.endswith("running requests (the scrape's), the served model")
    assert "kv_cache_usage" in {r.figure for r in scrape.rows}
    gl = compare(read_result(raw("guidellm_rate4.json")), make_inputs(**PLAN), llama)
    assert gl.load.startswith("4 requests/s") and {r.figure for r in gl.rows} >= {"ttft_ms", "itl_ms", "e2e_ms"}
    # the served model's ITL is two steps: the decode step, and a step carrying a prefill chunk in
    # a share s of steps; mean = decode + s x (chunk - decode). With s <= 5 % (P95_Z) the p95 IS the
    # decode step, below that mean: a skewed two-point distribution, not a bug
    plan = compute_plan(make_inputs(**PLAN), llama)
    kv_at = kv_held(plan.inspect, plan.reservation)
    rows = {r.figure: r for r in gl.rows}
    n = int(gl.load.split("Poisson, ")[1].split(" ")[0])
    s = latency.served(plan.roof, 512, 0, 64, n, kv_at(544), 544, plan.batching.tokens)
    assert s.prefill_step_share <= latency.P95_Z and rows["itl_p95_ms"].predicted == pytest.approx(s.itl_decode_ms)
    assert rows["itl_ms"].predicted == pytest.approx(s.itl_ms) and s.itl_ms > s.itl_decode_ms


@pytest.mark.parametrize(
    ("extra", "name", "load"),
    [
        ({}, "vllm_bench_c8.json", {"sequences": 8}),
        ({"runtime": "sglang", "recv_interval": 4}, "vllm_bench_c8.json", {"sequences": 8}),  # SGLang polls for requests every 4th decode step
        ({"spec_method": "eagle3", "spec_tokens": 3}, "vllm_bench_c8.json", {"sequences": 8}),  # speculation scales the decode steps
        ({}, "vllm_bench_rate8.json", {"request_rate": 8.0}),
        ({"gpu_count": 2, "sequences": 8}, "vllm_bench_rate8.json", {"request_rate": 8.0}),  # 4 requests/s on each of 2 replicas
    ],
)
def test_compare_predicts_what_the_plan_shows_at_the_runs_load(llama, extra, name, load):
    # one function for every number: the comparison's prediction for a run is the plan's own TTFT,
    # TPOT and throughput when the plan is asked for that run's load (its closed loop of 8 clients,
    # or its open loop at 8 requests/s), with the same engine, scheduler poll and speculation
    c = compare(read_result(raw(name)), make_inputs(**{**PLAN, **extra}), llama)
    rows = {r.figure: r.predicted for r in c.rows}
    plan = compute_plan(make_inputs(**{**PLAN, **extra, **load}), llama)
    est, ranks = plan.estimate, plan._memory.ranks
    assert rows["ttft_ms"] == pytest.approx(est.time_to_first_token_ms, rel=1e-9)
    assert rows["tpot_ms"] == pytest.approx(est.mean_inter_token_latency_ms, rel=1e-9)
    assert rows["output_tokens_per_s"] == pytest.approx(plan._load.figures.output_tokens_per_s * ranks, rel=1e-9)


def test_compare_replans_at_the_runs_lengths_and_says_so(llama):
    m = read_result(raw("vllm_bench_c8.json"))
    c = compare(m, make_inputs(**{**PLAN, "input_tokens": 2000}), llama)
    assert any("prompts average 512 tokens, the plan's 2,000" in w for w in c.warnings)
    same = compare(m, make_inputs(**PLAN), llama)
    assert [r.predicted for r in c.rows] == [r.predicted for r in same.rows]  # predicted for the run's 512, not the plan's 2,000


def test_calibration_round_trips_and_refuses_bad_text(llama):
    c = compare(read_result(raw("vllm_bench_c8.json")), make_inputs(**PLAN), llama)
    source, ratios = parse_calibration(c.calibration)
    # kept small for the share link: mean TTFT, mean TPOT (vllm bench reports it) and output tokens/s
    assert source == "vllm-bench" and list(ratios) == ["ttft_ms", "tpot_ms", "output_tokens_per_s"] and len(c.calibration) <= 128
    for r in c.rows:
        if r.figure in ratios:
            assert ratios[r.figure] == (float(f"{r.measured:.4g}"), float(f"{r.predicted:.4g}"))
    gl = compare(read_result(raw("guidellm_rate4.json")), make_inputs(**PLAN), llama)
    assert gl.calibration == "src=guidellm;ttft_ms=51.38/59.12;tpot_ms=8.263/8.229;output_tokens_per_s=249.7/256;at=r4"  # the file's means beside the plan's (the fitted serving constants: scripts/fit_serving.py)
    assert format_calibration("vllm-bench", c.rows, "c8") == c.calibration  # the run's 8 clients last
    for bad, why in (("ttft_ms=1/2", "src="), ("src=nope;ttft_ms=1/2", "source"), ("src=guidellm;evil=1/2", "figure="), ("src=guidellm;ttft_ms=0/2", "positive"), ("x" * 129, "at most")):
        with pytest.raises(PlannerError) as exc:
            parse_calibration(bad)
        assert why in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b'{"completed": 3, "mean_ttft_ms": NaN}', "NaN"),
        (b'{"completed": 3, "mean_ttft_ms": "12"}', "mean_ttft_ms"),
        (b'{"completed": 0, "mean_ttft_ms": 12}', "no request"),
        (b'{"completed": true, "mean_ttft_ms": 12}', "completed"),
        (b"[" * 100_000 + b"]" * 100_000, "nested"),
        (b'{"benchmarks": []}', "non-empty"),
        (b'{"benchmarks": [{"metrics": {"time_to_first_token_ms": 3}}]}', "successful"),
        (b"vllm:num_requests_running{a=\"b\"} -1\n", "at least 0"),
        (b"vllm:kv_cache_usage_perc 7\n", "fraction"),
        (b"hello world", "is not a vllm bench"),
        (b'{"a": "\xff"}', "UTF-8"),
        (b"{" + b" " * (MAX_JSON_BYTES + 1) + b"}", "MiB"),
    ],
)
def test_bad_files_are_refused_in_one_line(data, why):
    with pytest.raises(PlannerError) as exc:
        read_result(data)
    text = str(exc.value)
    assert why in text and "\n" not in text and len(text) < 400


def test_cli_bench_import_against_a_plan_file(capsys, tmp_path, llama):
    from planner.cli import main
    from planner.share import plan_file_json
    from planner.source import ModelRef

    plan = tmp_path / "plan.json"
    plan.write_text(plan_file_json(ModelRef(kind="preset", name="llama-3.1-8b"), make_inputs(**PLAN)))
    assert main(["bench-import", str(DATA / "vllm_bench_c8.json"), "--plan", str(plan), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rows = {r["figure"]: r for r in doc["rows"]}
    doc_raw = json.loads(raw("vllm_bench_c8.json"))
    assert rows["ttft_ms"]["measured"] == doc_raw["mean_ttft_ms"] and rows["ttft_ms"]["predicted"] > 0  # measured beside predicted
    assert doc["calibration"].startswith("src=vllm-bench;")
    assert main(["bench-import", str(DATA / "vllm_metrics.prom"), "--plan", str(plan)]) == 0
    out = capsys.readouterr().out
    assert "running requests" in out and "calibration: src=prometheus" in out
    assert main(["bench-import", str(DATA / "versions.json"), "--plan", str(plan)]) == 2  # a JSON that is no benchmark result: one line
    err = capsys.readouterr().err
    assert "is not a vllm bench serve result" in err and "an aiperf export" in err and len(err.strip().splitlines()) == 1


def test_a_disaggregated_run_is_predicted_at_its_own_load_whatever_the_plans_rate(llama):
    # plan_disagg times a plan's request_rate when it has one; the comparison of a disaggregated
    # run must stay at the run's load (its 8 clients; the rate run's fixed point on the clients):
    # with the plan's request_rate 0.5 it predicted 0.5 requests/s (32 output tok/s) for the 8
    # clients, and the rate run failed on a sequences count of 134,217,728
    for name in ("vllm_bench_c8.json", "vllm_bench_rate8.json"):
        m = read_result(raw(name))
        plain = compare(m, make_inputs(**{**PLAN, "gpu_count": 2}), llama, disagg="1P:1,1D:1")
        for rate in (0.5, 50.0):
            rated = compare(m, make_inputs(**{**PLAN, "gpu_count": 2, "request_rate": rate}), llama, disagg="1P:1,1D:1")
            assert rated.load == plain.load and [(r.figure, r.predicted) for r in rated.rows] == [(r.figure, r.predicted) for r in plain.rows], (name, rate)


def test_compare_beyond_the_pool_runs_what_the_plan_runs(llama):
    # a run of more clients than the K/V pool holds: the comparison uses the plan's own running limit
    # (stages.memory_running), the pool at the mean context of 2,048 + 2,048 / 2 = 3,072 tokens, where
    # it used to run all of them at once (up to vLLM's max_num_seqs 1,024); the rest wait for a slot
    m = read_result(raw("vllm_bench_c8.json")).model_copy(update={"max_concurrency": 4000, "input_tokens_mean": 2048.0, "output_tokens_mean": 2048.0})
    inputs = make_inputs(**{**PLAN, "input_tokens": 2048, "output_tokens": 2048})
    c = compare(m, inputs, llama)
    plan = compute_plan(inputs, llama)
    held = plan.capacity.available_for_kv_bytes // (131_072 * 3072)  # Llama-3.1-8B: 2 x 32 layers x 8 heads x 128 x 2 B a token
    assert plan._load.setup.max_running == held < 1024
    rows = {r.figure: r.predicted for r in c.rows}
    kv_at = kv_held(plan.inspect, plan.reservation)
    at = {n: latency.closed_loop(plan.roof, 2048, 0, 2048, 4000, kv_at(3072), 3072, plan.batching.tokens, n, True) for n in (held, 1024)}
    assert rows["ttft_ms"] == pytest.approx(at[held].ttft_ms) and rows["tpot_ms"] == pytest.approx(at[held].tpot_ms)
    assert at[held].tpot_ms < 0.95 * at[1024].tpot_ms  # not the 1,024 it used to run


def test_compare_spreads_the_clients_over_attention_data_parallel_ranks():
    # Qwen3-30B-A3B served DP4 + EP4 on 4 H100s (vLLM --data-parallel-size 4 --enable-expert-parallel):
    # each rank holds its own sequences, so the run's 8 clients are 2 a rank, not 8 on "one replica"
    model = prepare_model(load_preset("qwen3-30b-a3b"))
    dep = {**PLAN, "tp": 1, "dp": 4, "ep": 4, "gpu_count": 4}
    c = compare(read_result(raw("vllm_bench_c8.json")), make_inputs(**dep), model)
    rows = {r.figure: r.predicted for r in c.rows}
    plan = compute_plan(make_inputs(**{**dep, "sequences": 8}), model)
    assert plan._memory.ranks == 4 and plan._load.figures.per_rank == 2
    assert rows["ttft_ms"] == pytest.approx(plan.estimate.time_to_first_token_ms, rel=1e-9)
    assert rows["output_tokens_per_s"] == pytest.approx(4 * plan._load.figures.output_tokens_per_s, rel=1e-9)
    assert c.load == "8 concurrent clients in a closed loop over 4 ranks"
