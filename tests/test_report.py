"""PDF sizing report: the plan's numbers in the text, it renders, it has vector charts, the CLI agrees."""

from __future__ import annotations

import base64
import re
import subprocess
import sys
import time
import zlib
from datetime import UTC, datetime
from pathlib import Path

import pytest
from PIL import Image, ImageChops

from planner.plan import EXAMPLE_INPUTS, PlanInputs, compute_plan, example_model
from planner.report import CHART_TITLES, DEFAULT_SHARE_BASE, build_pdf
from planner.share import TOKEN_RE, encode_query, plan_file_json, share_url
from planner.source import example_ref, preset_ref, upload_ref
from planner.units import fmt_bytes_exact

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "artifacts"
WHEN = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def pdftotext(path: Path) -> str:
    """Layout text with runs of spaces collapsed (table cells end up 'label value')."""
    out = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True, timeout=60).stdout
    return "\n".join(re.sub(r"[ \t]+", " ", line).strip() for line in out.splitlines())


def without_date(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("Generated "))


def content_streams(pdf: bytes) -> str:
    """The page drawing operators (reportlab writes ASCII85 + Flate streams)."""
    out = []
    for raw in re.findall(rb"stream\r?\n(.*?)endstream", pdf, re.S):
        data = raw.strip()
        try:
            if data.endswith(b"~>"):
                data = base64.a85decode(data[:-2])
            out.append(zlib.decompress(data).decode("latin-1"))
        except (ValueError, zlib.error):
            continue
    return "\n".join(out)


@pytest.fixture(scope="module")
def example(tmp_path_factory):
    ref, _ = example_ref()
    plan = compute_plan(EXAMPLE_INPUTS, example_model())
    link = share_url(DEFAULT_SHARE_BASE, encode_query(ref, EXAMPLE_INPUTS))
    pdf = build_pdf(plan, ref, link, now=WHEN)
    path = tmp_path_factory.mktemp("report") / "example.pdf"
    path.write_bytes(pdf)
    return {"plan": plan, "ref": ref, "link": link, "pdf": pdf, "path": path, "text": pdftotext(path)}


@pytest.fixture(scope="module")
def gemma(tmp_path_factory):
    ref, model = preset_ref("gemma-2-9b")
    plan = compute_plan(PlanInputs(), model)
    pdf = build_pdf(plan, ref, share_url(DEFAULT_SHARE_BASE, encode_query(ref, PlanInputs())), now=WHEN)
    path = tmp_path_factory.mktemp("report") / "gemma.pdf"
    path.write_bytes(pdf)
    return {"plan": plan, "ref": ref, "pdf": pdf, "path": path, "text": pdftotext(path)}


# --------------------------------------------------------------------------- numbers


def test_example_report_carries_the_plans_numbers(example):
    text = example["text"]
    assert "Generated 2026-11-29 12:00 UTC" in text
    # K/V per token: 32 layers x 8 KV heads x (128 K + 128 V) x 2 B = 131,072 B
    assert "K/V per token 131,072 B (128 KiB) per sequence per GPU (bf16, vllm)" in text
    # per sequence: 131,072 B x (2,048 input + 512 output) = 335,544,320 B = 320 MiB
    assert "K/V per reserved sequence 335,544,320 B (320 MiB) (dynamic, 2,560 tokens)" in text
    # usable: floor(17,179,869,184 x 9,000 / 10,000) = 15,461,882,265; minus 4 GiB + 1 GiB = 10,093,173,145
    assert "Usable memory per GPU 15,461,882,265 B (14.4 GiB) after 10 % headroom" in text
    assert "Available for K/V per GPU 10,093,173,145 B (9.4 GiB)" in text
    # floor(10,093,173,145 / 335,544,320) = floor(30.08) = 30
    assert "Maximum sequences by memory 30 (30 per replica x 1; vLLM 0.33 block reservation; steady state 30)" in text
    assert "Admissible sequences 30 (bound by KV-cache memory)" in text
    assert "Admission ADMITTED" in text
    # TTFT 20 + 10 + 400 + 20 = 450 ms; ITL 2,560 / 128 = 20 ms; end-to-end 450 + 2,560 = 3,010 ms
    # beside it the roofline estimate's TTFT, as the plan computed it
    est = example["plan"].estimate.time_to_first_token_ms
    assert re.search(rf"time to first token \(TTFT\) 450\.0 ms {re.escape(f'{est:,.1f}')} ms", text)
    assert "TTFT = queue 20.0 + preprocessing 10.0 + prefill 400.0 + first decode 20.0 = 450.0 ms" in text
    assert "ITL = remaining decode 2,560.0 / (129 - 1) = 20.0 ms" in text
    assert "end-to-end = TTFT 450.0 + remaining decode 2,560.0 = 3,010.0 ms" in text
    assert "max sequences = floor(10,093,173,145 / 335,544,320) x 1 replica(s) = 30 x 1 = 30" in text
    # model identity and device
    assert example["ref"].config_hash in text
    assert "Device custom-16GiB" in text and "Memory per GPU 17,179,869,184 B (16 GiB)" in text
    # inputs: changed ones are marked with their defaults
    flat = " ".join(text.split())
    assert "Custom device memory (GiB) * 16 (default (none))" in flat and "Generated tokens * 129 (default (none))" in flat


def test_every_headline_number_comes_from_the_plan(example, gemma):
    for case in (example, gemma):
        plan, text = case["plan"], case["text"]
        kv, cap = plan.kv_cache, plan.capacity
        for n in (kv.bytes_per_token_per_sequence, kv.kv_bytes_per_reserved_sequence, cap.usable_bytes, cap.available_for_kv_bytes, cap.model_resident_bytes):
            assert fmt_bytes_exact(n) in text, n
        assert f"Maximum sequences by memory {kv.maximum_sequences_by_memory:,}" in text
        assert f"{plan.latency.time_to_first_token_ms:,.1f} ms" in text
        assert f"{plan.latency.mean_inter_token_latency_ms:,.1f} ms" in text


def test_preset_report_identity_and_sliding_layers(gemma):
    text, ref = gemma["text"], gemma["ref"]
    assert "Preset gemma-2-9b" in text and "Hub id google/gemma-2-9b" in text
    assert f"Config hash (sha256) {ref.config_hash}" in text
    assert "Windows sliding 4,096 tokens" in text
    # 21 full + 21 sliding layers x 8 KV heads x (256 + 256) x 2 B = 8,192 B per layer and token
    assert "K/V per token, full: 21 layers x 8,192 B = 172,032 B" in text
    assert "K/V per token 172,032 B (168 KiB)" in text  # only the full layers grow past 4,096
    # 2,560 reserved tokens < the 4,096 window: 42 x 8,192 x 2,560 = 880,803,840 B = 840 MiB
    assert "880,803,840 B (840 MiB)" in text
    # runtime vllm, vLLM 0.33's budget on an H100: 79.18 GiB as CUDA reports it = 85,018,877,624 B x 0.9
    # = 76,516,989,861; less weights 18,487,606,272 ((9,241,100,288 parameters + 605,696 norm weights:
    # 42 layers x 4 x 3,584 + 3,584) x 2 B, the float32 checkpoint served in 16-bit, + RoPE cos/sin
    # 8,192 x 256 x 2 B), the profiling peak 3,917,239,025 (1,024 x 256,000 x 14 B + 132 SMs x 256,000
    # x 4 B + 2 x 3,584 x (8,192 + 2,048) + the 0.036 GiB rest), non-torch 0.133 GiB = 142,807,662 and
    # CUDA graphs 0.39 GiB = 418,759,311: 22,966,412,270 taken, 53,550,577,591 B for the cache
    assert "available for K/V = 76,516,989,861 - 22,966,412,270 = 53,550,577,591 B" in text
    # vLLM 0.33: 21 sliding + 21 full layers, 16-token pages of 131,072 B, 21 x 131,072 = 2,752,512 B a
    # block, floor(53,550,577,591 / 2,752,512) = 19,455 blocks; a request reserves 160 full blocks and
    # cdiv(min(4,095 + 16,384, 2,560), 16) + 1 = 161 sliding blocks: floor(19,455 / 321) = 60; steady
    # state floor(53,550,577,591 / 880,803,840) = 60 too
    assert "Maximum sequences by memory 60 (60 per replica x 1; vLLM 0.33 block reservation; steady state 60)" in text
    # every latency figure names the load it assumes: the requested sequences as clients of a closed loop
    assert "(roofline estimate, closed loop of " in text and "accuracy of TTFT" in text


def test_a_plan_like_runs_that_all_ran_slower_says_so_in_the_report(tmp_path):
    # the plan's accuracy caveat (planner.accuracy.caveat) is a row of the PDF's latency table: Kimi-K2
    # INT4 on 8 x H200 under SGLang, whose published int4 runs all measured TPOT about 4.6x the plan's;
    # the benchmark that checks it is a row too
    ref, model = preset_ref("kimi-k2")
    inputs = PlanInputs(gpu="H200-141GB", tp=8, gpu_count=8, sequences=16, weight_dtype="int4", input_tokens=500, output_tokens=500, serving_engine="sglang")
    plan = compute_plan(inputs, model)
    path = tmp_path / "kimi.pdf"
    path.write_bytes(build_pdf(plan, ref, None, now=WHEN))
    flat = " ".join(pdftotext(path).split())
    assert plan.roofline.accuracy_caveat and "published runs like this one" in flat
    assert "benchmark check A benchmark of 1,000 prompts from 16 clients started at once" in flat
    assert plan.roofline.accuracy_caveat in flat and "Published runs like this one measured TTFT" in flat and "TPOT 4.6x longer than planned" in flat


def test_refused_plan_says_why(tmp_path):
    ref, _ = example_ref()
    plan = compute_plan(EXAMPLE_INPUTS.model_copy(update={"sequences": 100}), example_model())
    path = tmp_path / "refused.pdf"
    path.write_bytes(build_pdf(plan, ref, None, now=WHEN))
    text = pdftotext(path)
    assert "REFUSED: requested 100 sequences, but the KV-cache memory admits at most 30" in text
    # 100 x 320 MiB = 32,000 MiB = 31.25 GiB of K/V wanted vs 9.4 GiB available
    assert "requested load needs 31.25 GiB of K/V, more than the 9.4 GiB available" in text
    assert "requested 100 > 30: refused" in text
    assert "(none given)" in text


# --------------------------------------------------------------------------- charts and rendering


def test_report_has_the_three_charts_as_vector_drawings(example):
    text = example["text"]
    for title in CHART_TITLES:
        assert title in text, title
    # legends carry the values: 8 x 320 MiB = 2.5 GiB at the requested load
    assert "K/V at requested load: 2.5 GiB" in text and "model weights: 4 GiB" in text
    assert "prefill: 400.0 ms" in text and "remaining decode: 2,560.0 ms" in text
    assert "full (32 layers, 131,072 B/token)" in text and "reserved 2,560 tokens" in text
    ops = content_streams(example["pdf"])
    assert len(re.findall(r"\bre\b", ops)) >= 20  # rectangles: 5 + 5 stacked bars, 5 + 1 + 5 legend swatches
    assert len(re.findall(r"\bl\b", ops)) >= 40  # line segments: axes, ticks, the K/V polyline
    # the chart fill colours are set as RGB fills (#4C72B0 = 0.298 0.447 0.690)
    assert re.search(r"\.29\d+ \.44\d+ \.6[89]\d* rg", ops)


def test_pages_render_and_are_not_blank(example, gemma):
    ARTIFACTS.mkdir(exist_ok=True)
    for name, case in (("example", example), ("gemma", gemma)):
        prefix = case["path"].with_suffix("")
        subprocess.run(["pdftoppm", "-png", "-r", "60", str(case["path"]), str(prefix)], check=True, timeout=60)
        pages = sorted(case["path"].parent.glob(f"{prefix.name}-*.png"))
        info = subprocess.run(["pdfinfo", str(case["path"])], capture_output=True, text=True, check=True).stdout
        assert len(pages) == int(re.search(r"Pages:\s+(\d+)", info).group(1)) >= 2
        for i, page in enumerate(pages):
            img = Image.open(page).convert("L")
            assert img.size[0] >= 450 and img.size[1] >= 650  # A4 at 60 dpi is 496 x 702
            dark = sum(img.histogram()[:200])
            # ink on every page; the last may hold only the end of the notes (a few lines: > 0.1 %)
            assert dark / (img.size[0] * img.size[1]) > (0.001 if i == len(pages) - 1 else 0.01), page
        # the charts (from the page with the memory chart on; the second, or the third when the cost
        # rows push the tables on; the latency chart may fall on the next page) have coloured
        # (saturated) pixels: bars and lines, not just text
        texts = [subprocess.run(["pdftotext", "-f", str(k + 1), "-l", str(k + 1), str(case["path"]), "-"], capture_output=True, text=True, check=True).stdout for k in range(len(pages))]
        chart_page = next(k for k, t in enumerate(texts) if "Memory per GPU (" in t)
        assert chart_page in (1, 2), chart_page
        coloured = 0
        for png in pages[chart_page : chart_page + 2]:
            _, sat, val = Image.open(png).convert("HSV").split()
            mask = ImageChops.multiply(sat.point(lambda x: 255 if x > 80 else 0), val.point(lambda x: 255 if x > 60 else 0))
            coloured += mask.histogram()[255]
        assert coloured > 0.03 * mask.size[0] * mask.size[1]
        # a readable copy of the charts page for people to look at
        subprocess.run(["pdftoppm", "-png", "-r", "110", "-f", str(chart_page + 1), "-l", str(chart_page + 1), "-singlefile", str(case["path"]), str(ARTIFACTS / f"report-{name}-page2")], check=True, timeout=60)
        assert (ARTIFACTS / f"report-{name}-page2.png").stat().st_size > 20_000


def test_share_link_is_in_the_pdf_and_no_token_is(example):
    flat = re.sub(r"\s+", "", example["text"])
    assert example["link"] in flat
    assert example["link"].encode() in example["pdf"]  # the clickable link annotation
    assert not TOKEN_RE.search(example["text"])


def test_a_token_looking_link_is_left_out(tmp_path):
    ref, _ = example_ref()
    plan = compute_plan(EXAMPLE_INPUTS, example_model())
    secret = "hf_" + "Zz9" * 12
    pdf = build_pdf(plan, ref, f"http://x/?t={secret}", now=WHEN)
    path = tmp_path / "t.pdf"
    path.write_bytes(pdf)
    assert secret.encode() not in pdf
    assert "(omitted: the link contained text that looks like an access token)" in pdftotext(path)


def test_unusual_names_do_not_break_the_pdf(tmp_path):
    ref, model = upload_ref(example_model().config, "模型 <b>&amp; config.json")
    pdf = build_pdf(compute_plan(EXAMPLE_INPUTS, model), ref, None, now=WHEN)
    path = tmp_path / "u.pdf"
    path.write_bytes(pdf)
    assert "<b>&amp; config.json" in pdftotext(path)  # shown literally, not as markup


def test_build_pdf_is_fast(example):
    t = time.perf_counter()
    build_pdf(example["plan"], example["ref"], example["link"], now=WHEN)
    assert time.perf_counter() - t < 3.0


# --------------------------------------------------------------------------- CLI


def run(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *argv], capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_cli_report_matches_build_pdf(example, tmp_path):
    out = tmp_path / "cli.pdf"
    proc = run("-m", "planner", "report", "--example", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"wrote {out}")
    assert without_date(pdftotext(out)) == without_date(example["text"])


def test_report_module_entry_and_plan_file_give_the_same_report(example, tmp_path):
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan_file_json(example["ref"], EXAMPLE_INPUTS))
    out = tmp_path / "from-file.pdf"
    proc = run("-m", "planner", "report", "--plan", str(plan_file), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert without_date(pdftotext(out)) == without_date(example["text"])


def test_cli_report_for_a_preset_and_an_uploaded_config(tmp_path):
    out = tmp_path / "p.pdf"
    proc = run("-m", "planner", "report", "--preset", "gemma-2-9b", "--sequences", "70", "--share-base", "https://plans.example/", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    text = pdftotext(out)
    # 70 requested > 60 by memory (see the preset test): refused, binding memory
    assert "REFUSED: requested 70 sequences, but the KV-cache memory admits at most 60" in text
    assert "https://plans.example/?v=3&m=preset&n=gemma-2-9b" in re.sub(r"\s+", "", text)
    cfg = tmp_path / "config.json"
    cfg.write_text('{"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 256, "max_position_embeddings": 4096, "vocab_size": 1000, "intermediate_size": 512}')
    out2 = tmp_path / "u.pdf"
    proc = run("-m", "planner", "report", "--config", str(cfg), "--out", str(out2))
    assert proc.returncode == 0, proc.stderr
    text = re.sub(r"\s+", "", pdftotext(out2))
    assert "m=upload&n=config.json" in text and "&cfg=" in text  # small config embedded in the link
    # 2 layers x 2 KV heads x (64 + 64) x 2 B = 1,024 B per token
    assert "1,024B(1KiB)persequenceperGPU" in text


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--out", "x.pdf"], "error: give a model: --example, --config PATH, --preset NAME or --model ORG/NAME"),
        (["--example"], "error: the following arguments are required: --out"),
        (["--plan", "/nonexistent/plan.json", "--out", "x.pdf"], "error: --plan /nonexistent/plan.json: cannot read file (No such file or directory)"),
        (["--plan", "{plan}", "--sequences", "3", "--out", "x.pdf"], "error: --plan FILE cannot be combined with plan options (got --sequences)"),
        (["--plan", "{garbage}", "--out", "x.pdf"], "error: plan file='line 1 column 1': is not valid JSON"),
        (["--example", "--share-base", "ftp://x/", "--out", "x.pdf"], "is not an http(s) URL"),
        (["--example", "--share-base", "https://user:pw@x/", "--out", "x.pdf"], "must not carry credentials"),
        (["--example", "--out", "/nonexistent/dir/x.pdf"], "error: --out /nonexistent/dir/x.pdf: cannot write file"),
        (["--example", "--sequences", "0", "--out", "x.pdf"], "must be a positive integer"),
    ],
)
def test_cli_report_bad_input_is_one_line(argv, expected, tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(plan_file_json(example_ref()[0], EXAMPLE_INPUTS))
    garbage = tmp_path / "garbage.json"
    garbage.write_text("not json")
    argv = [a.replace("{plan}", str(plan)).replace("{garbage}", str(garbage)) for a in argv]
    argv = [str(tmp_path / a) if a == "x.pdf" else a for a in argv]
    proc = run("-m", "planner", "report", *argv)
    assert proc.returncode == 2
    assert expected in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_plan_file_warnings_go_to_stderr(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text('{"schema": "kv-capacity-plan", "version": 1, "model": {"kind": "example"}, "inputs": {"sequences": "many", "device_gib": 16, "model_resident_gib": 4}}')
    out = tmp_path / "w.pdf"
    proc = run("-m", "planner", "report", "--plan", str(plan), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == "warning: inputs.sequences 'many' is not a whole number; using the default 8\n"
    assert out.stat().st_size > 5000


def test_report_headline_has_cost_and_inputs_use_labels(tmp_path):
    """Issue 14, defects 6 and 11: cost in the headline and results; inputs by their labels."""
    inputs = EXAMPLE_INPUTS.model_copy(update={"gpu_hour_price": 2.5, "gpu": "H100-SXM-80GB", "device_gib": None, "gpu_count": 4, "tp": 1})
    ref, _ = example_ref()
    plan = compute_plan(inputs, example_model())
    path = tmp_path / "cost.pdf"
    path.write_bytes(build_pdf(plan, ref, None, now=WHEN))
    text = pdftotext(path)
    flat = " ".join(text.split())
    # 4 GPUs x $2.50 per GPU-hour = $10.00 per hour
    assert "Cost $10.00 per hour" in flat
    assert "Cost per hour $10.00 (4 GPUs x $2.50 per GPU-hour, given)" in flat
    per_m = plan.cost.per_million_output_tokens
    assert "per million output tokens" in flat and (f"${per_m:,.2f}" in flat or f"${per_m:.4g}" in flat)
    assert "Headroom 10 %" in flat and "GPU-hour price ($) * 2.5" in flat
    assert "headroom_bp" not in text and "gpu_hour_price" not in text and "conservative KV-memory plan" not in text


def test_vllm_plan_report_has_the_startup_budget_term_by_term_and_a_serve_line(gemma):
    # runtime vllm (the default): the PDF's start-up table is the plan's own budget, every term with
    # its source; the available memory it ends on is the one the admission used (53,550,577,591 B,
    # see test_preset_report_identity_and_sliding_layers)
    text, plan = " ".join(gemma["text"].split()), gemma["plan"]
    budget = plan.capacity.budget
    assert budget.available_kv_bytes == plan.capacity.available_for_kv_bytes == 53_550_577_591
    assert "vLLM 0.33 start-up" in text
    # 79.18 GiB as CUDA reports on an H100 SXM (published vLLM logs), x 0.9 = 71.26 GiB
    assert "device memory 79.18" in text and "x gpu_memory_utilization 0.9 -7.92" in text
    for t in budget.terms:
        assert t.name in text and t.source.split()[0] in text
    assert "= Available KV cache memory 49.87 what vLLM will log" in text
    assert "Batching: 8,192 tokens a step, 1,024 sequences a replica (vLLM 0.33 EngineArgs.get_batch_defaults" in text
    # the serve line: gemma-2-9b's 8,192-token maximum fits, vLLM's default batching is spelled out
    assert "vllm serve google/gemma-2-9b --tensor-parallel-size 1 --max-model-len 8192 --max-num-batched-tokens 8192 --gpu-memory-utilization 0.9" in text


def test_other_runtimes_have_no_vllm_startup_section(tmp_path):
    ref, model = preset_ref("gemma-2-9b")
    plan = compute_plan(PlanInputs(runtime="transformers"), model)
    path = tmp_path / "transformers.pdf"
    path.write_bytes(build_pdf(plan, ref, None, now=WHEN))
    text = pdftotext(path)
    assert plan.capacity.budget is None and "Results" in text
    assert "start-up" not in text and "vllm serve" not in text
