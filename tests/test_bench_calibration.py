"""A benchmark run kept in the plan as its calibration: the ``bench_calibration`` input.

It is a PlanInputs field, so the CLI flag, the share-link key (``cal``) and the Plan page's box come
from the declaration (planner.controls); these tests check what is particular to it: the text's
form and limits, that it changes no figure of the plan, that a link and a plan file carry it back,
and the "Measured beside predicted" table of the PDF. The figures are the vllm bench fixture's own
means (tests/data/bench/vllm_bench_c8.json: mean_ttft_ms 77.54, mean_tpot_ms 4.594, output_throughput 1370).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from planner.bench_calibration import KEPT_FIGURES, MAX_CALIBRATION_CHARS, calibration_rows, format_calibration
from planner.benchimport import compare, read_result
from planner.errors import PlannerError
from planner.plan import compute_plan, make_inputs, prepare_model
from planner.share import MAX_TEXT, decode_query, encode_query, load_plan_file, plan_file_json
from planner.source import ModelRef

DATA = Path(__file__).parent / "data" / "bench"
REF = ModelRef(kind="preset", name="llama-3.1-8b")
PLAN = {"input_tokens": 512, "output_tokens": 64, "gpu": "H100-SXM-80GB", "tp": 1, "gpu_count": 1, "sequences": 8}
CAL = "src=vllm-bench;ttft_ms=77.54/59.58;tpot_ms=4.594/8.73;output_tokens_per_s=1370/839.9;at=c8"  # predicted: the closed-loop plan of PLAN, at the run's 8 clients (the fitted serving constants: scripts/fit_serving.py)


@pytest.fixture(scope="module")
def llama():
    cfg = json.loads((Path(__file__).resolve().parent.parent / "model_configs" / "llama-3.1-8b.json").read_text())
    return prepare_model(cfg)


class _Row:
    def __init__(self, figure, measured, predicted):
        self.figure, self.measured, self.predicted = figure, measured, predicted


def test_the_text_keeps_three_figures_and_fits_a_link():
    assert MAX_CALIBRATION_CHARS <= MAX_TEXT  # the share link's limit on a text value
    worst = [_Row(f, 1.2346e-5, 9.8766e11) for f in ("ttft_ms", "ttft_p95_ms", "tpot_ms", "itl_ms", "itl_p95_ms", "e2e_ms", "output_tokens_per_s", "requests_per_s")]
    text = format_calibration("prometheus", worst)
    assert len(text) <= MAX_CALIBRATION_CHARS and text.count("=") == 1 + len(KEPT_FIGURES)
    assert text.startswith("src=prometheus;ttft_ms=1.235e-05/9.877e+11;tpot_ms=") and "itl_ms" not in text  # TPOT first, ITL only without it
    assert "itl_ms=" in format_calibration("guidellm", [_Row("itl_ms", 8.0, 8.3)])
    make_inputs(bench_calibration=text)  # the longest it writes is a valid input


def test_the_kept_figures_from_a_real_run(llama):
    c = compare(read_result((DATA / "vllm_bench_c8.json").read_bytes()), make_inputs(**PLAN), llama)
    assert c.calibration == CAL
    rows = calibration_rows(c.calibration)
    assert [r["figure"] for r in rows] == ["TTFT mean (ms)", "TPOT mean (ms)", "output tokens/s"]
    assert rows[0]["ratio"] == pytest.approx(77.54 / 59.58)


@pytest.mark.parametrize(
    ("text", "why"),
    [("ttft_ms=1/2", "src="), ("src=nope;ttft_ms=1/2", "source"), ("src=guidellm;evil=1/2", "figure"), ("src=guidellm;ttft_ms=-1/2", "positive"), ("src=guidellm;ttft_ms=inf/2", "figure=measured/predicted"), ("s" * 129, "at most 128")],
)
def test_a_bad_text_is_one_line_naming_the_field(text, why):
    with pytest.raises(PlannerError) as exc:
        make_inputs(bench_calibration=text)
    assert exc.value.field == "bench_calibration" and why in str(exc.value) and "\n" not in str(exc.value)


def test_it_changes_no_figure_of_the_plan(llama):
    a = compute_plan(make_inputs(**PLAN), llama).model_dump()
    b = compute_plan(make_inputs(**PLAN, bench_calibration=CAL), llama).model_dump()
    assert b.pop("inputs")["bench_calibration"] == CAL
    a.pop("inputs")
    assert a == b


def test_link_and_plan_file_carry_it_back():
    inputs = make_inputs(**PLAN, bench_calibration=CAL)
    q = encode_query(REF, inputs)
    assert q["cal"] == CAL
    back = decode_query(q)
    assert back.inputs.bench_calibration == CAL and not back.warnings
    assert "cal" not in encode_query(REF, make_inputs(**PLAN))  # a plan without one: its link as before
    doc = json.loads(plan_file_json(REF, inputs))
    assert doc["inputs"]["bench_calibration"] == CAL
    assert load_plan_file(json.dumps(doc)).inputs.bench_calibration == CAL
    bad = decode_query({**q, "cal": "src=evil;x=1/2"})  # a bad one in a link: dropped with a warning, the rest opens
    assert bad.inputs.bench_calibration is None and any("calibration" in w.lower() for w in bad.warnings)


def test_cli_plan_takes_it_and_refuses_bad_text_in_one_line(capsys):
    from planner.cli import main

    assert main(["plan", "--preset", "llama-3.1-8b", "--bench-calibration", "src=nope", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "bench_calibration" in err and "source" in err


def test_pdf_shows_measured_beside_predicted(llama, tmp_path):
    from planner.report import build_pdf, calibration_table

    plan = compute_plan(make_inputs(**PLAN, bench_calibration=CAL), llama)
    assert calibration_table(plan)[1] == ["TTFT mean (ms)", "77.54", "59.58", "1.30x"]  # 77.54 / 59.58 = 1.301
    assert calibration_table(compute_plan(make_inputs(**PLAN), llama)) is None
    path = tmp_path / "plan.pdf"
    path.write_bytes(build_pdf(plan, REF))
    text = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "Measured beside predicted" in text and "1.30x" in text and "vllm-bench run" in text
    path.write_bytes(build_pdf(compute_plan(make_inputs(**PLAN), llama), REF))
    plain = subprocess.run(["pdftotext", "-layout", str(path), "-"], capture_output=True, text=True, check=True, timeout=60).stdout
    assert "Measured beside predicted" not in plain and "Benchmark calibration" not in plain


# --------------------------------------------------------------------------- the Plan page (AppTest)


def _page(query: dict[str, str]):
    pytest.importorskip("streamlit")
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(Path(__file__).resolve().parent.parent / "app.py"), default_timeout=60)
    at.query_params.update(query)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _tables(at) -> list:
    """The measured-beside-predicted tables on the page: the upload's first, then the kept calibration's."""
    return [d.value for d in at.dataframe if "ratio" in getattr(d.value, "columns", ())]


def _uploader(at):
    return next(u for u in at.get("file_uploader") if u.key == "bench_upload")


def test_plan_page_upload_shows_measured_beside_predicted_and_keeps_the_calibration():
    # the plan the fixture ran: Llama-3.1-8B on one H100, ISL 512 / OSL 64, 8 clients
    at = _page({"v": "2", "m": "preset", "n": "llama-3.1-8b", "in": "512", "out": "64", "gpu": "H100-SXM-80GB", "seq": "8"})
    _uploader(at).set_value(("vllm_bench_c8.json", (DATA / "vllm_bench_c8.json").read_bytes(), "application/json"))
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert any("8 concurrent clients in a closed loop on one replica" in m.value for m in at.markdown)
    (table,) = _tables(at)
    # a closed loop now predicts the TTFT p95 too (the plan's own serving.closed figures, as its SLO judges them)
    assert list(table["figure"])[:4] == ["TTFT mean (ms)", "TTFT p95 (ms)", "TPOT mean (ms)", "ITL mean (ms)"] and "77.54" in list(table["measured"])
    keep = next(b for b in at.button if b.key == "bench_keep")
    keep.click()
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert at.session_state["bench_calibration"] == CAL and at.query_params["cal"] in (CAL, [CAL])  # the share link carries it
    assert not [b for b in at.button if b.key == "bench_keep"]  # kept: no button to keep it again
    _upload, kept = _tables(at)
    assert list(kept["ratio"]) == ["1.30x", "0.53x", "1.63x"]  # 77.54/59.58, 4.594/8.73, 1370/839.9


def test_plan_page_bad_upload_is_one_line():
    at = _page({"v": "2", "m": "preset", "n": "llama-3.1-8b"})
    _uploader(at).set_value(("versions.json", (DATA / "versions.json").read_bytes(), "application/json"))
    at.run()
    assert not at.exception
    errs = [e.value for e in at.error]
    assert len(errs) == 1 and "is not a vllm bench serve result" in errs[0] and "\n" not in errs[0]


def test_plan_page_opens_a_link_with_a_calibration():
    at = _page({"v": "2", "m": "preset", "n": "llama-3.1-8b", "cal": CAL})
    (kept,) = _tables(at)
    assert list(kept["measured"]) == ["77.54", "4.594", "1,370"]
    assert at.query_params["cal"] in (CAL, [CAL])  # the address bar keeps it
