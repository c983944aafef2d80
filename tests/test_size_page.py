"""The Size page (AppTest) and the sizing section of the PDF report."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")


def _size_page(query: dict[str, str] | None = None) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()  # the Plan page, as on a fresh start
    at.query_params.update(query or {})  # a link to the Size page (or the refused plan's page link)
    at.switch_page("pages/size.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_size_page_answers_on_a_fresh_start():
    at = _size_page()
    # One sentence at the top: the cheapest minimal deployment for the opening workload, the plan's
    # load (8 sequences) on the plan's GPU (issue 27 item 9)
    answer = at.success[0].value
    assert "holds 8 concurrent users" in answer and "TP " in answer and "$" in answer
    table = at.dataframe[0].value
    assert len(table) > 3
    assert list(table["$/h"]) == sorted(table["$/h"])  # ranked by cost per hour
    first = table.iloc[0]
    assert answer.startswith(f"**{first['GPUs']} × {first['GPU']}, TP {first['TP']}")
    # "open as plan" opens the Plan page with that deployment
    q = parse_qs(urlsplit(first["plan"]).query)
    assert q.get("gpu", ["H100-SXM-80GB"]) == [first["GPU"]] and q.get("seq", ["8"]) == ["8"] and q.get("gpus", ["1"]) == [str(first["GPUs"])]
    # the address bar is the share link: the plan's model plus the size parameters
    assert at.query_params["size_users"] == ["8"] or at.query_params["size_users"] == "8"
    link = next(c.value for c in at.code if "size_users=" in c.value)
    assert parse_qs(urlsplit(link).query)["n"] == ["llama-3.1-8b"]
    # the SLO inputs as numbers are written ("2000" ms, "7.5" ms), not "2000.00"
    assert {n.key: n.proto.format for n in at.number_input if n.key in ("size_ttft", "size_itl")} == {"size_ttft": "%g", "size_itl": "%g"}
    # the charts' axes write numbers as the tables do: "6,000" tok/s, "$20" an hour
    specs = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    layouts = {sp["layout"]["title"]["text"]: sp["layout"] for sp in specs}
    assert layouts["Throughput vs interactivity"]["yaxis"]["tickformat"] == ",~r", layouts.keys()
    cost = next(v for k, v in layouts.items() if k.startswith("Cost versus p95 ITL"))
    assert cost["xaxis"]["tickprefix"] == "$" and cost["xaxis"]["tickformat"] == ",~r" and cost["legend"]["orientation"] == "h"


def test_size_share_link_opens_on_the_size_page():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"m": "preset", "n": "qwen3-8b", "size_users": "250", "size_itl": "40"})
    at.run()
    assert not at.exception
    assert "holds 250 concurrent users" in at.success[0].value and "qwen3-8b" in at.caption[0].value


def test_size_page_follows_its_controls_and_link():
    at = _size_page({"size_users": "400", "size_itl": "30", "size_gpus": "H100-SXM-80GB,H200-141GB"})
    answer = at.success[0].value
    assert "holds 400 concurrent users" in answer and ("H100" in answer or "H200" in answer)
    assert set(at.dataframe[0].value["GPU"]) <= {"H100-SXM-80GB", "H200-141GB"}
    assert all(at.dataframe[0].value["p95 ITL ms"] <= 30)
    at.radio(key="size_mode").set_value("Requests per second").run()
    at.number_input(key="size_rate").set_value(4.0).run()
    assert not at.exception and "holds 4 requests/s" in at.success[0].value


def test_size_page_refuses_impossible_slo_in_words():
    at = _size_page({"size_users": "10", "size_itl": "0.05"})
    assert not at.success
    assert "no deployment holds 10 concurrent users" in at.error[0].value


def test_refused_plan_links_to_the_size_page():
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"m": "preset", "n": "llama-3.1-8b", "seq": "5000"})  # far above one H100's ceiling
    at.run()
    assert not at.exception
    links = [el for el in at.get("page_link")]
    assert links, "a refused plan offers the Size page"
    link = links[0].proto
    assert link.page == "size" and link.label == "Size a deployment for 5,000 sequences"
    assert parse_qs(link.query_string)["size_users"] == ["5000"]
    # following it: the Size page sizes that load for the plan's model
    at.query_params.update(parse_qs(link.query_string))
    at.switch_page("pages/size.py").run()
    assert not at.exception and "holds 5,000 concurrent users" in at.success[0].value


def test_pdf_sizing_section(tmp_path):
    from planner.plan import compute_plan, make_inputs
    from planner.report import build_pdf
    from planner.sizing import size
    from planner.source import preset_ref

    ref, model = preset_ref("llama-3.1-8b")
    result = size(model, {"input_tokens": 2048, "output_tokens": 512}, users=64, itl_p95_ms=30, gpus=["H100-SXM-80GB", "L40S-48GB"])
    best = result.recommendations[0]
    pdf = tmp_path / "s.pdf"
    pdf.write_bytes(build_pdf(compute_plan(make_inputs(**best.plan_values), model), ref, "http://localhost:8501/size?size_users=64", sizing=result))
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Sizing" in text and "holds 64 concurrent users" in text
    assert f"{best.gpu}" in text and f"{best.cost_per_hour:,.2f}" in text


@pytest.mark.parametrize("users", ["\u0661\u0660", "1_0", "\uff11\uff10"], ids=["arabic-indic", "underscore", "full-width"])
def test_size_link_digits_are_ascii(users):
    # issue 24: size_users=١٠ was read as 10; every surface reads ASCII digits only (planner/limits.py)
    at = _size_page({"size_users": users})
    assert "holds 8 concurrent users" in at.success[0].value  # the opening value (the plan's 8 sequences) kept, not 10


DISAGG_LINK = {"m": "preset", "n": "llama-3.1-70b", "in": "4000", "out": "1000", "wd": "fp8", "size_users": "256", "size_itl": "50", "size_ttft": "2000", "size_kv": "fp8", "size_disagg": "1", "size_gpus": "all"}  # every GPU kind (the page opens on the plan's GPU otherwise)


def test_size_page_disaggregated_pools_frontier_and_launch():
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(DISAGG_LINK)  # a share link: app.py opens size_* links on the Size page with the link's plan
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert "llama-3.1-70b" in at.caption[0].value
    assert at.toggle(key="size_disagg").value is True
    answer = at.success[0].value
    assert "holds 256 concurrent users" in answer and ("Disaggregated is" in answer or "Disaggregation does not pay" in answer or "Only disaggregated" in answer)
    table = at.dataframe[0].value
    assert {"pools", "KV transfer ms"} <= set(table.columns)
    # what a row is ranked by follows its links: behind TP, DP, PP and replicas, $/h and the p95s
    # were past the right edge at 1280 px once the pools column and two links came first
    # prices read as prices ($9.90, not 9.9 beside 14.75), in the ranking and in the pools box
    for shown in at.dataframe[:2]:
        config = json.loads(shown.proto.columns)
        assert config["$/h"]["type_config"]["format"] == "$%.2f", config
    assert json.loads(at.dataframe[0].proto.columns)["$/M tokens"]["type_config"]["format"] == "$%.3f"
    # the p95s to one rule a column: ITL to 0.1 ms ("3.0", not "3" under "8.4"), TTFT whole with separators
    assert json.loads(at.dataframe[0].proto.columns)["p95 ITL ms"]["type_config"]["format"] == "%.1f"
    assert json.loads(at.dataframe[0].proto.columns)["p95 TTFT ms"]["type_config"]["format"] == "localized"
    assert list(table.columns)[:11] == ["plan", "prefill pool", "decode pool", "pools", "GPU", "GPUs", "$/h", "$/M tokens", "p95 TTFT ms", "p95 ITL ms", "KV"], list(table.columns)
    dis = table[table["pools"] != "aggregated"]
    assert len(dis) and dis["KV transfer ms"].notna().all() and (table[table["pools"] == "aggregated"]["KV transfer ms"].isna()).all()
    # a disaggregated row opens pool by pool (issue 25 leftover): no single "open as plan", a link per pool
    # (an empty cell, not Streamlit's grey "None", where a row has no such link)
    assert (dis["plan"] == "").all() and dis["prefill pool"].str.startswith("http").all() and dis["decode pool"].str.startswith("http").all()
    assert (table[table["pools"] == "aggregated"]["prefill pool"] == "").all()
    pools = next(df.value for df in at.dataframe if "pool" in df.value.columns)
    assert list(pools["pool"]) == ["prefill", "decode"]
    # each pool's verdict against the page's SLOs (TTFT 2 s, ITL 50 ms), never None: the recommendation's
    # plan values carry no SLOs (the sizer searched under them), the page passes its own
    assert pools["SLO"].notna().all() and pools["SLO"].str.match(r"^(meets|misses) TTFT 2,000 ms").iloc[0] and pools["SLO"].str.match(r"^(meets|misses) ITL 50 ms").iloc[1], list(pools["SLO"])
    codes = [c.value for c in at.code]
    if table.iloc[0]["pools"] != "aggregated":  # the launch box is the first row's: per-pool serve lines
        assert any("--kv-transfer-config" in c and "NixlConnector" in c for c in codes)  # vLLM serve lines per pool
        assert any("--disaggregation-mode prefill" in c for c in codes)
    else:  # under vLLM's start-up budget an aggregated deployment can rank first (the pools box above still shows the best disaggregated one)
        assert any(c.startswith("vllm serve meta-llama/Llama-3.1-70B-Instruct") and "--max-num-batched-tokens" in c for c in codes), codes
    assert any("llm-d-modelservice" in c for c in codes)
    assert any(c.startswith("vllm bench serve") and "--input-len 4000" in c and "--max-concurrency 256" in c for c in codes)
    assert any("frontier" in c.value or "operating points" in c.value for c in at.caption)
    assert at.query_params["size_disagg"] in ("1", ["1"])  # the share link keeps the toggle


def test_pdf_has_disaggregated_pools_and_the_frontier(tmp_path):
    from planner.plan import compute_plan, make_inputs
    from planner.report import build_pdf
    from planner.sizing import size
    from planner.source import preset_ref

    ref, model = preset_ref("llama-3.1-70b")
    result = size(model, {"input_tokens": 4000, "output_tokens": 1000, "weight_dtype": "fp8"}, users=256, itl_p95_ms=50, ttft_p95_ms=2000, kv_dtypes=("fp8",), disagg=True, frontier=True)
    dis = next(r for r in result.recommendations if r.disaggregated)
    pdf = tmp_path / "d.pdf"
    pdf.write_bytes(build_pdf(compute_plan(make_inputs(**result.recommendations[0].plan_inputs()), model), ref, "http://localhost:8501/", sizing=result))
    text = subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True).stdout
    assert "Disaggregated prefill / decode deployments" in text and f"{dis.prefill.replicas} x {dis.prefill.gpu}" in text  # (the cell wraps before TP)
    assert "Throughput against interactivity" in text and f"{len(result.frontier):,} operating points" in text
    assert "REFUSED" not in text.split("Sizing")[0]  # the headline plan is the decode pool at the sequences it holds


def test_size_page_sizes_the_plans_session_workload():
    """Issue 26's gap: the Size page had no session workload; with one in the plan (the Plan page's
    cache inputs, link keys spm / turns) it opens on "The plan's sessions", sizes their turns as
    the requests (600 sessions/min x 8 turns = 80 requests/s) with CPU tiers searched, and the
    link says so; users and a rate stay one click away."""
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params.update({"m": "preset", "n": "llama-3.1-8b", "spm": "600", "turns": "8", "size_gpus": "H100-SXM-80GB"})  # a Size link
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.radio(key="size_mode").value == "The plan's sessions"
    answer = at.success[0].value
    assert "(600 sessions/min x 8 turns)" in answer and "80 requests/s" in answer, answer
    assert at.query_params["size_sessions"] in ("1", ["1"])
    at.radio(key="size_mode").set_value("Concurrent users").run()
    assert not at.exception and "concurrent users" in at.success[0].value


def test_size_page_disaggregated_row_opens_each_pool_at_its_load():
    """Issue 25 leftover: "open as plan" on a disaggregated row opened the decode pool alone, at
    no request rate. Each pool now has its own link: that pool's GPU, TP and GPU count (replicas x
    TP, from the row's pools text), the deployment's request rate (every request passes through
    both pools) and the pools; the Plan page it opens shows that pool's shape and, in its pools
    card, both pools with the numbers of the Size page's pool table, and the row's TTFT and TPOT."""
    from planner.pools import parse_pools

    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params.update(DISAGG_LINK)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    table = at.dataframe[0].value
    row = table[table["pools"] != "aggregated"].iloc[0]  # the best disaggregated row: the one the pools box shows
    size_pools = next(df.value for df in at.dataframe if "pool" in df.value.columns)  # the pools box's table
    spec_p, spec_d = parse_pools(row["pools"].replace(" + ", ","), row["GPU"])
    rates = set()
    for role, spec in (("prefill", spec_p), ("decode", spec_d)):
        q = {k: v[0] for k, v in parse_qs(urlsplit(row[f"{role} pool"]).query).items()}
        assert (q.get("gpu", "H100-SXM-80GB"), int(q.get("tp", "1")), int(q["gpus"])) == (spec.gpu, spec.tp, spec.replicas * spec.tp), (role, q)
        assert q["pools"] == row["pools"].replace(" + ", ",") and (q["itl"], q["ttft"]) == ("50", "2000")
        rates.add(float(q["request_rate"]))
        plan = AppTest.from_file(APP, default_timeout=120)
        plan.query_params.update(q)
        plan.run()
        assert not plan.exception, [e.value for e in plan.exception]
        opened = next(df.value for df in plan.dataframe if "pool" in df.value.columns)  # the Plan page's pools card
        assert opened.to_dict("records") == size_pools.to_dict("records"), (role, opened, size_pools)
        metrics = {m.label: float(m.value.split()[0].replace(",", "")) for m in plan.metric if m.label in ("TTFT p95", "TPOT")}  # the pools card's "1,713.9 ms", "36.72 ms"
        assert abs(metrics["TTFT p95"] - row["p95 TTFT ms"]) <= 0.5 and abs(metrics["TPOT"] - row["p95 ITL ms"]) <= 0.05, (metrics, row)  # the row rounds to 1 ms / 0.1 ms
        # the pools card's rate reads as the Size page's pools box's (it read 4 significant digits there, 3 here)
        (box,) = [m.value for m in at.markdown if m.value.startswith("Open as a plan at ")]
        (card,) = [c.value for c in plan.caption if "the pools in this card serve " in c.value]
        assert box.split("Open as a plan at ")[1].split(":")[0] == card.split("the pools in this card serve ")[1].split(",")[0], (box, card)
    assert len(rates) == 1 and next(iter(rates)) > 0  # one rate: the deployment's, through both pools


def test_size_page_warns_where_the_answer_breaks_an_slo_at_its_runs_medians():
    # Llama-3.3-70B at 5 requests/s of 2,048 / 512 with a 2 s p95 TTFT: the cheapest is on MI300X, whose
    # runs like it all measured TTFT 3.5x longer (tests/test_sizing.py checks the figures): the answer
    # box keeps the answer, and a warning beside it says the SLO breaks at that factor and what holds
    def opened(gpus: str) -> AppTest:  # a share link straight to the Size page (the plan's model with it)
        at = AppTest.from_file(APP, default_timeout=120)
        at.query_params.update({"m": "preset", "n": "llama-3.3-70b", "in": "2048", "out": "512", "size_rate": "5", "size_ttft": "2000", "size_itl": "60", "size_gpus": gpus})
        at.run()
        assert not at.exception, [e.value for e in at.exception]
        return at

    at = opened("all")
    answer = at.success[0].value
    assert "MI300X-192GB" in answer and "Scaled by those medians" not in answer
    (warn,) = [w.value for w in at.warning if "Scaled by those medians" in w.value]
    assert warn.startswith("Scaled by those medians, its p95 TTFT would be about 2,") and "over the 2,000 ms SLO: the cheapest deployment searched" in warn
    # the NVIDIA-only search holds at its runs' medians: no such warning
    at = opened("H100-SXM-80GB")
    assert at.success and not [w for w in at.warning if "Scaled by those medians" in w.value]
