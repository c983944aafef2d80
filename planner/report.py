"""PDF sizing report (reportlab, vector charts drawn with ``reportlab.graphics``; no browser).

``build_pdf(plan, ref, share_link)`` lays out: title and date; model identity; device; the
inputs; results (K/V per token and per sequence, capacity, admission and the binding
constraint, latency by phase); three charts (memory per GPU, K/V bytes vs context per layer
kind, latency by phase); the formulas with this plan's numbers, the assumptions and what is not
modelled (all three from :mod:`planner.explain`, as the Plan page and the CLI show them); the
share link. Every number is read from the :class:`~planner.plan.Plan` (the K/V-vs-context curve
evaluates the plan's own per-layer specs at other lengths).

The command ``python -m planner report [plan options | --plan FILE] --out report.pdf`` lives in
:mod:`planner.cli`; this module only takes a plan, a model reference and a link.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from xml.sax.saxutils import escape

from planner.capacity import LIMIT_LABELS
from planner.explain import pool_figures
from planner.hardware import GIB
from planner.labels import label as input_label
from planner.limits import safe_text
from planner.plan import Plan, PlanInputs, memory_basis
from planner.plan.sections import COST_BASIS_NAME
from planner.source import ModelRef
from planner.units import fmt_bytes, fmt_bytes_exact, fmt_money, fmt_ms_step, fmt_ms_whole, fmt_num, fmt_value, gib, mib

DEFAULT_SHARE_BASE = "http://localhost:8501/"
CHART_TITLES = ("Memory per GPU", "K/V bytes per sequence vs context", "Latency by phase")
_PALETTE = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")


# --------------------------------------------------------------------------- text


def _safe(text: object) -> str:
    """Text the standard PDF fonts can show (cp1252), XML-escaped for Paragraph."""
    return escape(_safe_plain(text))


# --------------------------------------------------------------------------- charts


def _color(i: int):
    from reportlab.lib import colors

    return colors.HexColor(_PALETTE[i % len(_PALETTE)])


def _legend(drawing, x: float, y: float, items: list[tuple[object, str]], columns: int = 1, col_width: float = 160) -> None:
    from reportlab.graphics.shapes import Rect, String

    for i, (color, label) in enumerate(items):
        cx = x + (i % columns) * col_width
        cy = y - (i // columns) * 11
        drawing.add(Rect(cx, cy, 7, 7, fillColor=color, strokeColor=None))
        drawing.add(String(cx + 10, cy + 0.5, label, fontName="Helvetica", fontSize=7))


def _title(drawing, text: str, width: float, height: float) -> None:
    from reportlab.graphics.shapes import String

    drawing.add(String(0, height - 11, text, fontName="Helvetica-Bold", fontSize=10))


def memory_chart(plan: Plan, width: float = 480, height: float = 150):
    """Stacked bar of one GPU's memory: model, workspace, K/V at the requested load, free, headroom."""
    from reportlab.graphics.charts.barcharts import HorizontalBarChart
    from reportlab.graphics.shapes import Drawing, String
    from reportlab.lib import colors

    cap = plan.capacity
    kv_req = cap.kv_bytes_at_requested_load
    available = cap.available_for_kv_bytes
    shown_kv = min(kv_req, available)
    segments = [
        ("model weights", cap.model_resident_bytes),
        ("workspace", cap.workspace_bytes),
        ("K/V at requested load", shown_kv),
        ("free for more K/V", max(0, available - shown_kv)),
        ("headroom", cap.device_bytes - cap.usable_bytes),
    ]
    d = Drawing(width, height)
    _title(d, f"{CHART_TITLES[0]} ({cap.device}, {fmt_bytes(cap.device_bytes)})", width, height)
    bc = HorizontalBarChart()
    bc.x, bc.y, bc.width, bc.height = 70, 62, width - 90, 50
    bc.data = [[gib(v)] for _, v in segments]
    bc.categoryAxis.style = "stacked"
    bc.categoryAxis.categoryNames = ["per GPU"]
    bc.categoryAxis.labels.fontSize = 8
    bc.valueAxis.valueMin = 0
    bc.valueAxis.valueMax = gib(cap.device_bytes)
    bc.valueAxis.labels.fontSize = 7
    bc.valueAxis.labelTextFormat = lambda v: f"{fmt_num(v)} GiB"
    bc.barWidth = 30
    bc.bars.strokeColor = None
    fills = [_color(0), _color(1), _color(2), colors.HexColor("#D9D9D9"), colors.HexColor("#8C8C8C")]
    for i, fill in enumerate(fills):
        bc.bars[i].fillColor = fill
    d.add(bc)
    _legend(d, 0, 32, [(fills[i], f"{name}: {fmt_bytes(v)}") for i, (name, v) in enumerate(segments)], columns=3)
    if kv_req > available:
        d.add(String(0, 2, f"requested load needs {fmt_bytes(kv_req)} of K/V, more than the {fmt_bytes(available)} available", fontName="Helvetica-Oblique", fontSize=7))
    return d


def _tokens_label(v: float) -> str:
    if v >= 1_000_000:
        return f"{fmt_num(v / 1_000_000)}M"
    if v >= 1000:
        return f"{fmt_num(v / 1000)}k"
    return f"{v:,.0f}"


def kv_context_chart(plan: Plan, width: float = 480, height: float = 210):
    """K/V bytes one sequence holds vs context, one line per layer kind plus the total."""
    from reportlab.graphics.charts.lineplots import LinePlot
    from reportlab.graphics.shapes import Drawing, Line, String

    specs = [s for s in plan.inspect.specs if s.kind != "cross"]
    max_ctx = plan.context.maximum_context_tokens
    reserved = plan.context.reserved_total_tokens
    points = {round(max_ctx * i / 48) for i in range(49)} | {reserved}
    # chunked layers drop their cache at every chunk boundary: draw the exact sawtooth when it
    # has few teeth, otherwise its peak (one full chunk), so sampling cannot alias it
    envelope = set()
    for i, s in enumerate(specs):
        if s.kind == "chunked" and s.window:
            if max_ctx // s.window <= 100:
                points |= {x for k in range(1, max_ctx // s.window + 1) for x in (k * s.window - 1, k * s.window) if x <= max_ctx}
            else:
                envelope.add(i)
    xs = sorted(points)
    state = plan.reservation.state_bytes

    def held(i: int, s, x: int) -> int:
        return s.bytes_at(min(x, s.window)) if i in envelope else s.bytes_at(x)

    lines = [[(x, mib(held(i, s, x))) for x in xs] for i, s in enumerate(specs)]
    labels = [
        f"{s.kind}{'-' + format(s.window, ',') if s.window else ''} ({s.num_layers} layers, {s.bytes_per_token:,} B/token)" + (", peak per chunk" if i in envelope else "")
        for i, s in enumerate(specs)
    ]
    if len(specs) > 1 or state:
        lines.append([(x, mib(sum(held(i, s, x) for i, s in enumerate(specs)) + state)) for x in xs])
        labels.append("total" + (f" incl. {fmt_bytes(state)} recurrent state" if state else "") + (" (chunked at peak)" if envelope else ""))
    d = Drawing(width, height)
    _title(d, f"{CHART_TITLES[1]} ({plan.inspect.kv_dtype}, per GPU)", width, height)
    lp = LinePlot()
    lp.x, lp.y, lp.width, lp.height = 60, 30 + 11 * ((len(labels) + 1) // 2), width - 80, height - 60 - 11 * ((len(labels) + 1) // 2)
    lp.data = lines
    lp.xValueAxis.valueMin = 0
    lp.xValueAxis.valueMax = max_ctx
    lp.xValueAxis.labelTextFormat = _tokens_label
    lp.xValueAxis.labels.fontSize = 7
    lp.yValueAxis.valueMin = 0
    top = max((p[1] for line in lines for p in line), default=1.0) or 1.0
    lp.yValueAxis.valueMax = top * 1.05
    lp.yValueAxis.labels.fontSize = 7
    lp.yValueAxis.labelTextFormat = lambda v: f"{v:,.0f} MiB" if top >= 10 else f"{v:,.2f} MiB"
    for i in range(len(lines)):
        lp.lines[i].strokeColor = _color(i)
        lp.lines[i].strokeWidth = 1.6
    d.add(lp)
    # the reserved context of this plan
    rx = lp.x + lp.width * reserved / max_ctx if max_ctx else lp.x
    d.add(Line(rx, lp.y, rx, lp.y + lp.height, strokeColor=_color(3), strokeDashArray=[3, 2], strokeWidth=0.8))
    d.add(String(min(rx + 3, lp.x + lp.width - 90), lp.y + lp.height - 9, f"reserved {reserved:,} tokens", fontName="Helvetica", fontSize=7))
    d.add(String(lp.x + lp.width / 2, lp.y - 18, "context (tokens)", fontName="Helvetica", fontSize=7, textAnchor="middle"))
    _legend(d, 0, 6 + 11 * ((len(labels) - 1) // 2), [(_color(i), label) for i, label in enumerate(labels)], columns=2, col_width=240)
    return d


_PHASES = (("queue", "queue_ms"), ("preprocessing", "preprocessing_ms"), ("prefill", "prefill_ms"), ("first decode", "first_decode_ms"), ("remaining decode", "remaining_decode_ms"))


def latency_chart(plan: Plan, width: float = 480, height: float = 150):
    """Stacked phase bars for the plan's latency (observed or estimated) and the roofline estimate."""
    from reportlab.graphics.charts.barcharts import HorizontalBarChart
    from reportlab.graphics.shapes import Drawing

    reports = [plan.latency] if plan.latency.source == plan.estimate.source else [plan.latency, plan.estimate]
    d = Drawing(width, height)
    # each bar's load: an observation is one request, the estimate is timed at the plan's load
    loads = "; ".join(f"{r.source}: one request" if r.source == "observed" else f"{r.source}, {plan.roofline.load_label}" for r in reports)
    _title(d, f"{CHART_TITLES[2]} (ms, {loads})", width, height)
    bc = HorizontalBarChart()
    bc.x, bc.y, bc.width, bc.height = 100, 55, width - 120, 22 * len(reports) + 10
    bc.data = [[getattr(r, attr) for r in reports] for _, attr in _PHASES]
    bc.categoryAxis.style = "stacked"
    bc.categoryAxis.categoryNames = [r.source for r in reports]
    bc.categoryAxis.labels.fontSize = 8
    bc.valueAxis.valueMin = 0
    bc.valueAxis.labels.fontSize = 7
    bc.valueAxis.labelTextFormat = lambda v: f"{v:,.0f}"
    bc.barWidth = 14
    bc.bars.strokeColor = None
    for i in range(len(_PHASES)):
        bc.bars[i].fillColor = _color(i)
    d.add(bc)
    first = reports[0]
    _legend(d, 0, 30, [(_color(i), f"{name}: {fmt_ms_step(getattr(first, attr))}") for i, (name, attr) in enumerate(_PHASES)], columns=3)
    return d


# --------------------------------------------------------------------------- sections


def _model_rows(plan: Plan, ref: ModelRef) -> list[tuple[str, str]]:
    insp = plan.inspect
    rows = [("Source", {"preset": "bundled preset", "hub": "Hugging Face Hub", "upload": "uploaded config.json", "example": "seed example"}[ref.kind])]
    if ref.kind == "preset":
        rows.append(("Preset", ref.name or ""))
    if ref.kind == "upload":
        rows.append(("File", ref.name or "config.json"))
    if ref.repo_id:
        rows.append(("Hub id", ref.repo_id))
    if ref.kind == "hub":
        rows.append(("Revision", ref.revision or "main"))
        rows.append(("Commit", ref.commit or "(not pinned)"))
    rows.append(("Config hash (sha256)", ref.config_hash or "(not recorded)"))
    rows.append(("Architecture", f"{insp.model_type}: " + ", ".join(f"{n} {k}" for k, n in insp.layers.items()) + " layers"))
    heads = f"{insp.head_dim}" + (f" (V {insp.v_head_dim})" if insp.v_head_dim != insp.head_dim else "")
    if insp.mla_latent_dim:  # MLA caches one latent a layer and token, not K/V heads (DeepSeek-V3: 512 + 64 rope = 576)
        rows.append(("MLA latent", f"{insp.mla_latent_dim:,} elements per layer and token, shared by every head; the heads attend with head dim {heads}"))
    else:
        rows.append(("K/V heads per GPU, head dim", f"{insp.kv_heads_per_gpu} x {heads}"))
    if insp.windows:
        rows.append(("Windows", ", ".join(f"{k} {w:,} tokens" for k, w in insp.windows.items())))
    rows.append(("Weights", f"{plan.weights.total_params:,} parameters ({plan.weights.active_params:,} active), {fmt_bytes_exact(plan.weights.bytes)} ({plan.weights.source})"))
    return rows


def _device_rows(plan: Plan) -> list[tuple[str, str]]:
    dev, cap = plan.device, plan.capacity
    peak = f"{dev.bf16_tflops:,g} TFLOP/s bf16" + (f", {dev.fp8_tflops:,g} fp8" if dev.fp8_tflops else "")
    return [
        ("Device", dev.name),
        ("Memory per GPU", fmt_bytes_exact(cap.device_bytes)),
        ("HBM bandwidth", f"{dev.bandwidth_gb_s:,g} GB/s"),
        ("Dense peak", peak),
        ("Figures from", dev.source or "(not stated)"),
        ("GPUs, parallelism, replicas", f"{cap.gpu_count:,} GPU(s), tp {cap.tp}" + (f", dp {cap.dp}" if cap.dp > 1 else "") + (f", pp {cap.pp}" if cap.pp > 1 else "") + (f", ep {cap.ep}" if cap.ep > 1 else "") + f", {cap.replicas:,} replica(s)"),
    ]


def _result_rows(plan: Plan) -> list[tuple[str, str]]:
    kv, cap, ctx, res = plan.kv_cache, plan.capacity, plan.context, plan.reservation
    rows = [
        ("Context", f"input {ctx.input_tokens:,} + output {ctx.reserved_output_tokens:,} = {ctx.reserved_total_tokens:,} of {ctx.maximum_context_tokens:,} tokens ({ctx.unreserved_tokens:,} unreserved)"),
        ("K/V per token", f"{fmt_bytes_exact(kv.bytes_per_token_per_sequence)} per sequence per GPU ({kv.kv_dtype}, {kv.runtime})"),
        ("K/V per reserved sequence", f"{fmt_bytes_exact(kv.kv_bytes_per_reserved_sequence)} ({kv.reservation}, {kv.reserved_tokens_per_sequence:,} tokens)"),
    ]
    if kv.state_bytes_per_sequence:
        rows.append(("Recurrent state per sequence", fmt_bytes_exact(kv.state_bytes_per_sequence)))
    rows.append(("Reserved per sequence", f"{kv.bytes_per_reserved_sequence:,} B = {fmt_value(kv.mib_per_reserved_sequence)} MiB"))
    if res.waste_bytes:
        rows.append((f"{res.mode.capitalize()} waste per sequence", fmt_bytes_exact(res.waste_bytes)))
    rows += [
        ("Usable memory per GPU", f"{fmt_bytes_exact(cap.usable_bytes)} after {cap.headroom_bp / 100:g} % headroom"),
        ("Model resident per GPU", f"{fmt_bytes_exact(cap.model_resident_bytes)} ({cap.model_resident_source})"),
        ("Workspace per GPU", fmt_bytes_exact(cap.workspace_bytes)),
        ("Available for K/V per GPU", fmt_bytes_exact(cap.available_for_kv_bytes)),
        ("Maximum sequences by memory", f"{kv.maximum_sequences_by_memory:,} ({cap.sequences_per_replica:,} per replica x {cap.replicas:,}; {memory_basis(plan)})"),
        ("KV pool, in words", pool_figures(plan)),  # the Plan page's sentence under its memory chart
    ]
    if plan.prefix.shared_blocks:
        rows.append(("With prefix sharing", f"{plan.prefix.maximum_sequences_with_sharing:,} sequences ({plan.prefix.shared_blocks:,} shared blocks, {fmt_bytes_exact(plan.prefix.bytes_saved_per_extra_sequence)} saved per extra sequence)"))
    limits = ", ".join(f"{LIMIT_LABELS.get(name, name)} {value:,}" for name, value in kv.limits.items())
    rows += [
        ("Requested sequences", f"{kv.requested_sequences:,}"),
        ("Limits", limits),
        ("Admissible sequences", f"{kv.admissible_sequences:,} (bound by {_binding(plan)})"),
        ("Admission", "ADMITTED" if kv.admitted else f"REFUSED: requested {kv.requested_sequences:,} sequences, but the {_binding(plan)} admits at most {kv.admissible_sequences:,}"),
    ]
    rows += _cost_rows(plan)
    return rows


def _binding(plan: Plan) -> str:
    return LIMIT_LABELS.get(plan.kv_cache.binding_constraint, plan.kv_cache.binding_constraint)


def _cost_rows(plan: Plan) -> list[tuple[str, str]]:
    """Cost per hour and per million tokens, when a GPU-hour price is given."""
    c = plan.cost
    if c.per_million_output_tokens is None:
        return []
    return [
        ("Cost per hour", f"{fmt_money(c.deployment_per_hour)} ({plan.inputs.gpu_count:,} GPUs x {fmt_money(c.gpu_hour_price)} per GPU-hour, {c.price_source})"),
        ("Cost per million tokens", f"{fmt_money(c.per_million_output_tokens)} output, {fmt_money(c.per_million_input_tokens)} input ({c.basis})"),
    ]


def _latency_rows(plan: Plan) -> list[list[str]]:
    lat, est, r = plan.latency, plan.estimate, plan.roofline
    two = lat.source != est.source
    head = ["Phase", lat.source if two else f"{lat.source}, {r.load_label}"] + ([f"roofline estimate, {r.load_label}"] if two else [])
    rows = [head]
    for label, attr, fmt in (
        ("queue", "queue_ms", fmt_ms_step),
        ("preprocessing", "preprocessing_ms", fmt_ms_step),
        ("prefill", "prefill_ms", fmt_ms_step),
        ("first decode", "first_decode_ms", fmt_ms_step),
        ("time to first token (TTFT)", "time_to_first_token_ms", fmt_ms_step),
        ("remaining decode", "remaining_decode_ms", fmt_ms_step),
        ("mean inter-token latency (ITL)", "mean_inter_token_latency_ms", fmt_ms_step),
        ("end-to-end", "end_to_end_ms", fmt_ms_step),
        ("prefill rate", "prefill_tokens_per_second", lambda v: f"{v:,.1f} tok/s"),
        ("output rate", "output_tokens_per_second", lambda v: f"{v:,.1f} tok/s"),
    ):
        rows.append([label, fmt(getattr(lat, attr))] + ([fmt(getattr(est, attr))] if two else []))
    # the SLOs bound the 95th percentiles, which only the estimate's load model gives
    for label, p95 in (("p95 TTFT (what a TTFT SLO bounds)", r.ttft_p95_ms), ("p95 ITL (what an ITL SLO bounds)", r.itl_p95_ms)):
        rows.append([label] + (["-", fmt_ms_step(p95)] if two else [fmt_ms_step(p95)]))
    for label, value in (
        ("output throughput a GPU", f"{r.output_tokens_per_second_per_gpu:,.1f} tok/s"),
        (f"{r.max_throughput_label} a GPU", f"{r.max_throughput_tokens_per_second_per_gpu:,.1f} tok/s"),
    ):
        rows.append([label] + (["-", value] if two else [value]))
    from planner.explain import band_texts, benchmark_sentence  # here, not above: explain reads this module's formatters

    for metric, text in band_texts(plan).items():  # how far published runs like this one landed from the model
        rows.append([f"accuracy of {metric}"] + (["-", text] if two else [text]))
    if bench := benchmark_sentence(plan):  # the benchmark that checks the plan
        rows.append(["benchmark check"] + (["-", bench] if two else [bench]))
    if r.accuracy_caveat:
        rows.append(["published runs like this one"] + (["-", r.accuracy_caveat] if two else [r.accuracy_caveat]))
    return rows


def _input_value(name: str, value: object) -> str:
    """An input as the app shows it: headroom in %, the rest in its own unit."""
    if name == "headroom_bp" and isinstance(value, int):
        return f"{value / 100:g} %"
    return fmt_value(value)


def _input_rows(inputs: PlanInputs) -> list[list[str]]:
    """Every control, two per row; a changed one is marked * and shows its default."""
    defaults = PlanInputs()
    cells: list[tuple[str, str]] = []
    for name in PlanInputs.model_fields:
        value, default = getattr(inputs, name), getattr(defaults, name)
        if name == "bench_calibration":  # its own table ("Measured beside predicted")
            continue
        shown = _input_value(name, value)
        name_shown = "Headroom" if name == "headroom_bp" else input_label(name)  # shown in %
        if value != default:
            cells.append((f"{name_shown} *", f"{shown} (default {_input_value(name, default)})"))
        else:
            cells.append((name_shown, shown))
    if len(cells) % 2:
        cells.append(("", ""))
    half = len(cells) // 2
    rows = [["Input", "Value", "Input", "Value"]]
    for left, right in zip(cells[:half], cells[half:], strict=True):
        rows.append([left[0], left[1], right[0], right[1]])
    return rows


# --------------------------------------------------------------------------- PDF


class _Kit:
    """Styles and table helpers shared by the plan report and the comparison report."""

    def __init__(self) -> None:
        from reportlab.lib import colors
        from reportlab.lib.enums import TA_LEFT
        from reportlab.lib.pagesizes import A4
        from reportlab.lib.styles import ParagraphStyle, getSampleStyleSheet
        from reportlab.lib.units import mm
        from reportlab.platypus import Table, TableStyle

        styles = getSampleStyleSheet()
        self.body = ParagraphStyle("body", parent=styles["BodyText"], fontSize=8.5, leading=11)
        self.small = ParagraphStyle("small", parent=self.body, fontSize=7.5, leading=9.5)
        self.cell = ParagraphStyle("cell", parent=self.body, fontSize=8, leading=10, alignment=TA_LEFT)
        self.mono = ParagraphStyle("mono", parent=self.body, fontName="Courier", fontSize=7.2, leading=9.2, splitLongWords=1)
        self.h1 = ParagraphStyle("h1", parent=styles["Title"], fontSize=18, leading=22, alignment=TA_LEFT, spaceAfter=2)
        self.h2 = ParagraphStyle("h2", parent=styles["Heading2"], fontSize=12, leading=15, spaceBefore=8, spaceAfter=4)
        self.h3 = ParagraphStyle("h3", parent=self.body, fontName="Helvetica-Bold", spaceBefore=4, spaceAfter=1)
        self.grid = TableStyle(
            [
                ("GRID", (0, 0), (-1, -1), 0.25, colors.HexColor("#BBBBBB")),
                ("VALIGN", (0, 0), (-1, -1), "TOP"),
                ("TOPPADDING", (0, 0), (-1, -1), 1.5),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 1.5),
            ]
        )
        self.head_grid = TableStyle(self.grid.getCommands() + [("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#E8EEF7")), ("FONTNAME", (0, 0), (-1, 0), "Helvetica-Bold")])
        self.width = A4[0] - 36 * mm
        self._table = Table

    def para(self, text: object, style=None):
        from reportlab.platypus import Paragraph

        return Paragraph(_safe(text), style or self.body)

    def cell_para(self, text: object, width: float):
        """A table cell ``width`` points wide: its lines are broken where :func:`wrap_cell` breaks
        them (at spaces, else after a hyphen, slash or @), never mid-word as reportlab does when a
        word is wider than the cell ("GB200-NVL72-186 / GB")."""
        from reportlab.platypus import Paragraph

        lines = wrap_cell(_safe_plain(text), width - CELL_PADDING, self.cell.fontName, self.cell.fontSize)
        return Paragraph("<br/>".join(escape(line) for line in lines), self.cell)

    def kv_table(self, rows: list[tuple[str, str]]):
        from reportlab.lib.units import mm

        widths = [48 * mm, self.width - 48 * mm]
        t = self._table([[self.cell_para(k, widths[0]), self.cell_para(v, widths[1])] for k, v in rows], colWidths=widths)
        t.setStyle(self.grid)
        return t

    def grid_table(self, rows: list[list[str]], widths: list[float], shade: list[tuple[int, int]] = ()):
        from reportlab.lib import colors

        t = self._table([[self.cell_para(c, w) for c, w in zip(row, widths, strict=True)] for row in rows], colWidths=widths, repeatRows=1)
        t.setStyle(self.head_grid)
        for col, row in shade:
            t.setStyle([("BACKGROUND", (col, row), (col, row), colors.HexColor("#D9EED5"))])
        return t


CELL_PADDING = 12.0  # reportlab's Table: 6 pt of padding left and right of every cell
_BREAK_AFTER = "-/@_"


def wrap_cell(text: str, width: float, font: str = "Helvetica", size: float = 8) -> list[str]:
    """``text`` in lines at most ``width`` points wide in ``font``: words fill lines greedily, a word
    wider than a line is broken after its last hyphen, slash, @ or underscore that fits, and only a
    run with no such place left is broken between characters."""
    from reportlab.pdfbase.pdfmetrics import stringWidth

    def fits(part: str) -> bool:
        return stringWidth(part, font, size) <= width

    lines: list[str] = []
    line = ""
    for word in text.split():  # any run of white space is one space, as in a Paragraph
        joined = f"{line} {word}" if line else word
        if fits(joined):
            line = joined
            continue
        if line:
            lines.append(line)
        while not fits(word):
            cut = max((i + 1 for i, ch in enumerate(word[:-1]) if ch in _BREAK_AFTER and fits(word[: i + 1])), default=0)
            if not cut:  # no separator fits: as many characters as fit
                cut = max((i for i in range(1, len(word)) if fits(word[:i])), default=1)
            lines.append(word[:cut])
            word = word[cut:]
        line = word
    lines.append(line)
    return lines


def _document(buf, title: str, subject: str, footer_text: str):
    """An A4 document with the report's margins, and its page footer."""
    from reportlab.lib import colors
    from reportlab.lib.pagesizes import A4
    from reportlab.lib.units import mm
    from reportlab.platypus import SimpleDocTemplate

    def footer(canvas, doc) -> None:
        canvas.saveState()
        canvas.setFont("Helvetica", 7)
        canvas.setFillColor(colors.HexColor("#666666"))
        canvas.drawString(18 * mm, 10 * mm, _safe_plain(footer_text))
        canvas.drawRightString(A4[0] - 18 * mm, 10 * mm, f"page {doc.page}")
        canvas.restoreState()

    doc = SimpleDocTemplate(buf, pagesize=A4, leftMargin=18 * mm, rightMargin=18 * mm, topMargin=16 * mm, bottomMargin=16 * mm, title=_safe_plain(title), author="KV Capacity Planner", subject=_safe_plain(subject))
    return doc, footer


def _link_story(k: _Kit, share_link: str | None, what: str) -> list:
    from reportlab.platypus import Paragraph

    from planner.share import looks_like_token

    out = [k.para("Share link", k.h2)]
    if share_link and not looks_like_token(share_link):
        safe = _safe(share_link)
        out.append(Paragraph(f'<link href="{safe}" color="blue">{safe}</link>', k.mono))
        out.append(k.para(f"Open the link in the planner to restore {what}.", k.small))
    elif share_link:
        out.append(k.para("(omitted: the link contained text that looks like an access token)", k.small))
    else:
        out.append(k.para("(none given)", k.small))
    return out


def build_comparison_pdf(entries: list[tuple[str, Plan, ModelRef]], share_link: str | None = None, *, now: datetime | None = None) -> bytes:
    """A comparison of 2-4 plans as PDF bytes: one headline per plan, then every row of
    :func:`planner.compare.compare_rows` with the better plan named (and shaded) per row."""
    from reportlab.lib.units import mm
    from reportlab.platypus import Spacer

    from planner.compare import compare_rows

    if not 2 <= len(entries) <= 4:
        raise ValueError("a comparison holds 2 to 4 plans")
    now = now or datetime.now(UTC)
    k = _Kit()
    names = [name for name, _p, _r in entries]
    rows = compare_rows([(name, plan, ref.label()) for name, plan, ref in entries])
    story = [
        k.para("KV capacity comparison", k.h1),
        k.para(f"Generated {now.strftime('%Y-%m-%d %H:%M UTC')} by KV Capacity Planner", k.small),
        Spacer(1, 4),
    ]
    for name, plan, ref in entries:
        story.append(k.para(f"{name}: {_headline(plan, ref)}"))
        if plan.serve.applies:
            story.append(k.para(serve_text(plan), k.mono))
    story.append(k.para("Side by side", k.h2))
    label_w, better_w = (42 * mm, 34 * mm) if len(entries) < 4 else (34 * mm, 27 * mm)  # four plans: each gets 28 mm, not 24
    col_w = (k.width - label_w - better_w) / len(entries)
    table = [["", *names, "Better"]] + [[r.label, *r.cells, r.verdict(names)] for r in rows]
    shade = [(1 + j, 1 + i) for i, r in enumerate(rows) for j in r.best]
    story.append(k.grid_table(table, [label_w] + [col_w] * len(entries) + [better_w], shade))
    story.append(k.para("Shaded: the better plan on that row (more sequences or headroom, lower latency or cost). " + _shared_settings(names, [p for _n, p, _r in entries]), k.small))
    story += _link_story(k, share_link, "this comparison")
    buf = io.BytesIO()
    doc, footer = _document(buf, "KV capacity comparison", " vs ".join(ref.label() for _n, _p, ref in entries), "KV capacity comparison")
    doc.build(story, onFirstPage=footer, onLaterPages=footer)
    return buf.getvalue()


def _shared_settings(names: list[str], plans: list[Plan]) -> str:
    """The context, load, SLOs and GPU-hour price of the compared plans, stated: once when every
    plan has the same, per plan where they differ (the PDF once claimed them equal without
    giving them, and a catalog price differs per GPU)."""

    def slo(ms: float | None) -> str:
        return fmt_ms_step(ms) if ms else "none"

    settings = (
        ("context", lambda p: f"{p.context.input_tokens:,} prompt + {p.context.reserved_output_tokens:,} output tokens"),
        ("load", lambda p: f"{p.kv_cache.requested_sequences:,} sequences"),
        ("ITL SLO", lambda p: slo(p.inputs.itl_slo_ms)),
        ("TTFT SLO", lambda p: slo(p.inputs.ttft_slo_ms)),
        ("price", lambda p: f"{fmt_money(p.cost.gpu_hour_price)} per GPU-hour" if p.cost.gpu_hour_price is not None else "none"),
    )
    same, differ = [], []
    for label, show in settings:
        values = [show(p) for p in plans]
        if len(set(values)) == 1:
            same.append(f"{label} {values[0]}")
        else:
            differ.append(f"{label} (" + ", ".join(f"{n} {v}" for n, v in zip(names, values, strict=True)) + ")")
    text = "Every plan uses " + "; ".join(same) + "." if same else ""
    return text + (" They differ in " + "; ".join(differ) + "." if differ else "")


def _headline(plan: Plan, ref: ModelRef) -> str:
    """One sentence a plan: model, deployment, admission and its binding limit, latency, cost."""
    kv = plan.kv_cache
    verdict = "admitted" if kv.admitted else "REFUSED"
    text = (
        f"{ref.label()} on {plan.capacity.gpu_count:,} x {plan.device.name} (TP {plan.inputs.tp}" + (f", DP {plan.inputs.dp}" if plan.inputs.dp > 1 else "") + (f", PP {plan.inputs.pp}" if plan.inputs.pp > 1 else "") + "): "
        f"at most {kv.admissible_sequences:,} concurrent sequences (bound by {_binding(plan)}; memory alone {kv.maximum_sequences_by_memory:,}); "
        f"{kv.requested_sequences:,} requested: {verdict}. TTFT {fmt_ms_step(plan.latency.time_to_first_token_ms)}, "
        f"ITL {fmt_ms_step(plan.latency.mean_inter_token_latency_ms)} ({plan.latency.source}, {plan.roofline.load_label})."
    )
    if plan.cost.per_million_output_tokens is not None:
        text += f" Cost {fmt_money(plan.cost.deployment_per_hour)} per hour, {fmt_money(plan.cost.per_million_output_tokens)} per million output tokens."
    return text


SIZING_COLUMNS = ("GPU", "shape", "reps", "GPUs", "KV", "max seqs", "$/h", "$/M tok", "p95 TTFT ms", "p95 ITL ms", "req/s", "sim req/s")


def sizing_rows(sizing, top: int = 12) -> list[list[str]]:
    """Header and one row per recommendation (the PDF's sizing table)."""
    rows = [list(SIZING_COLUMNS)]
    for r in sizing.recommendations[:top]:
        sim_rate = f"{r.capacity.max_rate_per_s:,.3g}" if r.capacity else "-"
        shape = f"TP{r.tp}" + (f" DP{r.dp}" if r.dp > 1 else "") + (f" PP{r.pp}" if r.pp > 1 else "") + (f" EP{r.ep}" if r.ep > 1 else "")
        rows.append([f"{r.gpu} (decode of P/D)" if r.disaggregated else r.gpu + (" (SGLang)" if r.runtime == "sglang" else ""), shape, str(r.replicas), str(r.gpu_count), r.kv_dtype, f"{r.max_num_seqs:,}", f"{r.cost_per_hour:,.2f}", f"{r.cost_per_million_tokens:,.2f}",
                     f"{r.ttft_p95_ms:,.0f}", f"{r.itl_p95_ms:,.1f}", f"{r.sustainable_rate:,.3g}", sim_rate])  # fmt: skip
    return rows


def frontier_chart(points: list, itl_slo_ms: float | None = None, width: float = 480, height: float = 230):
    """The throughput-interactivity frontier: output tokens/s per GPU against tokens/s per user,
    aggregated and disaggregated points (faint where they miss the SLOs), the Pareto front as a line."""
    from reportlab.graphics.charts.lineplots import ScatterPlot
    from reportlab.graphics.shapes import Drawing, Rect, String
    from reportlab.graphics.widgets.markers import makeMarker
    from reportlab.lib import colors

    d = Drawing(width, height)
    _title(d, "Throughput against interactivity (output tokens/s per GPU vs tokens/s per user)", width, height)
    sp = ScatterPlot()
    sp.x, sp.y, sp.width, sp.height = 45, 40, width - 60, height - 75
    groups = [
        ([(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu) for p in points if not p.disaggregated and p.meets_slo], colors.HexColor(_PALETTE[0]), "aggregated, inside the SLOs"),
        ([(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu) for p in points if p.disaggregated and p.meets_slo], colors.HexColor(_PALETTE[3]), "disaggregated, inside the SLOs"),
        ([(p.tokens_per_s_per_user, p.tokens_per_s_per_gpu) for p in points if not p.meets_slo], colors.HexColor("#BBBBBB"), "misses the SLOs"),
        (sorted((p.tokens_per_s_per_user, p.tokens_per_s_per_gpu) for p in points if p.pareto), colors.black, "Pareto front"),
    ]  # fmt: skip
    groups = [g for g in groups if g[0]]
    if not groups:
        return d
    sp.data = [g[0] for g in groups]
    for i, (_data, color, label) in enumerate(groups):
        line = sp.lines[i]
        line.strokeColor = color
        if label == "Pareto front":
            line.strokeWidth = 1
            line.symbol = makeMarker("Circle", size=3, fillColor=color)
        else:
            line.strokeWidth = 0
            line.strokeColor = None
            line.symbol = makeMarker("Circle", size=2.5, fillColor=color, strokeColor=None)
    sp.joinedLines = 1  # only the front has a stroke
    sp.lineLabelFormat = None
    sp.xLabel, sp.yLabel = "", ""
    sp.xValueAxis.labels.fontSize = sp.yValueAxis.labels.fontSize = 7
    sp.xValueAxis.valueMin = sp.yValueAxis.valueMin = 0
    sp.xValueAxis.labelTextFormat = lambda v: f"{v:,.0f}"
    sp.yValueAxis.labelTextFormat = lambda v: f"{v:,.0f}"
    x_max = max(p.tokens_per_s_per_user for p in points) * 1.05 or 1.0
    sp.xValueAxis.valueMax = x_max
    sp.xValueAxis.avoidBoundFrac = 0  # the axis ends at x_max, so the shaded region's fraction is of it
    sp.xValueAxis.rangeRound = "none"
    d.add(String(sp.x + sp.width / 2, 28, "tokens/s per user (1000 / TPOT)", fontName="Helvetica", fontSize=7, textAnchor="middle"))
    d.add(String(sp.x + 4, sp.y + sp.height + 9, "output tokens/s per GPU", fontName="Helvetica", fontSize=7))
    if itl_slo_ms:  # the ITL SLO's region: tokens/s per user at or above 1000 / ITL
        x0 = 1000.0 / itl_slo_ms
        if x0 < x_max:
            frac = x0 / x_max
            d.add(Rect(sp.x + sp.width * frac, sp.y, sp.width * (1 - frac), sp.height, fillColor=colors.HexColor("#E6F4EA"), strokeColor=None))
    d.add(sp)
    _legend(d, 0, 10, [(color, label) for _data, color, label in groups], columns=4, col_width=120)
    return d


def disagg_rows(sizing, top: int = 6) -> list[list[str]]:
    """Header and one row per disaggregated recommendation: both pools and the KV transfer."""
    rows = [["prefill pool", "decode pool", "GPUs", "$/h", "$/M tok", "KV transfer ms", "p95 TTFT ms", "p95 ITL ms"]]
    for r in [r for r in sizing.recommendations if r.disaggregated][:top]:
        rows.append([f"{r.prefill.replicas} x {r.prefill.gpu} TP {r.prefill.tp}", f"{r.decode.replicas} x {r.decode.gpu} TP {r.decode.tp}", str(r.gpu_count), f"{r.cost_per_hour:,.2f}",
                     f"{r.cost_per_million_tokens:,.2f}", f"{r.kv_transfer_ms:,.1f}", f"{r.ttft_p95_ms:,.0f}", f"{r.itl_p95_ms:,.1f}"])  # fmt: skip
    return rows


def _sizing_story(k: _Kit, sizing) -> list:
    """The "Sizing" section: the answer, the ranked alternatives and the capacity notes."""
    rows = sizing_rows(sizing)
    first = 30 * 72 / 25.4  # 30 mm for the GPU name
    story = [k.para("Sizing", k.h2), k.para(sizing.answer), k.grid_table(rows, [first] + [(k.width - first) / (len(rows[0]) - 1)] * (len(rows[0]) - 1))]
    searched = sizing.searched
    story.append(
        k.para(
            f"Searched {searched['candidates']} GPU x parallel shape x KV dtype candidates ({searched['feasible']} hold the workload), ranked by {searched['ranking']}. "
            "p95 TTFT and ITL are the load model's at the workload (users: clients of a closed loop; a rate: Poisson arrivals), prompts queueing for the prefill budget; 'sim req/s' is the simulator's capacity search where it ran. "
            f"$/M tok: per million output tokens at {COST_BASIS_NAME}, as in the plan. Prices: planner/prices.py (sourced and dated) unless given.",
            k.small,
        )
    )
    for r in sizing.recommendations[:12]:
        if r.capacity:
            story.append(k.para(f"Capacity search {r.gpu} TP {r.tp}{f' DP {r.dp}' if r.dp > 1 else ''}{f' PP {r.pp}' if r.pp > 1 else ''} x {r.replicas}: {r.capacity.note}", k.small))
    serve = [r for r in sizing.recommendations[:3] if r.serve_command]
    if serve:
        story.append(k.para("Start the top deployments (vLLM):", k.small))
        story += [k.para(f"{r.gpu_count} x {r.gpu} TP {r.tp}: {r.serve_command}", k.mono) for r in serve]
    rows = disagg_rows(sizing)
    if len(rows) > 1:
        story += [k.para("Disaggregated prefill / decode deployments", k.h3), k.grid_table(rows, [k.width / len(rows[0]) * w for w in (1.6, 1.6, 0.6, 0.7, 0.8, 0.9, 0.9, 0.9)])]
    if sizing.frontier:
        front = sum(p.pareto for p in sizing.frontier)
        from reportlab.platypus import KeepTogether

        story.append(
            KeepTogether(
                [
                    k.para("The frontier", k.h3),
                    frontier_chart(sizing.frontier, sizing.searched["workload"].get("itl_p95_ms")),
                    k.para(f"{len(sizing.frontier):,} operating points the search visited ({front} on the Pareto front); shaded: inside the p95 ITL SLO.", k.small),
                ]
            )
        )
    return story


def build_pdf(plan: Plan, ref: ModelRef, share_link: str | None = None, *, now: datetime | None = None, sizing=None, model=None) -> bytes:
    """The sizing report as PDF bytes (A4, vector charts, no browser).

    ``sizing`` (a :class:`planner.sizing.SizingResult`) adds a "Sizing" section after the
    headline: the answer and the ranked alternatives; ``plan`` is then the recommended deployment's.
    ``model`` (the plan's :class:`~planner.plan.PreparedModel`) adds what needs it: the plan's
    disaggregated pools (its ``disagg`` input) and its kept calibration applied (planner.benchimport.calibrate).
    """
    from reportlab.lib.units import mm
    from reportlab.platypus import KeepTogether, Spacer

    now = now or datetime.now(UTC)
    k = _Kit()
    para, width = k.para, k.width
    latency_rows = _latency_rows(plan)
    story = [
        para("KV capacity sizing report", k.h1),
        para(f"Generated {now.strftime('%Y-%m-%d %H:%M UTC')} by KV Capacity Planner", k.small),
        Spacer(1, 4),
        para(_headline(plan, ref)),
        *(_sizing_story(k, sizing) if sizing is not None else []),
        para("Model", k.h2),
        k.kv_table(_model_rows(plan, ref)),
        para("Device", k.h2),
        k.kv_table(_device_rows(plan)),
        para("Results", k.h2),
        k.kv_table(_result_rows(plan)),
        *_sglang_story(k, plan),
        *_startup_story(k, plan),
        KeepTogether([para("Latency by phase", k.h2), k.grid_table(latency_rows, [70 * mm] + [(width - 70 * mm) / (len(latency_rows[0]) - 1)] * (len(latency_rows[0]) - 1))]),
        *_calibration_story(k, plan, model),
        *_pools_story(k, plan, model),
        *_cache_story(k, plan),
        KeepTogether([para("Charts", k.h2), memory_chart(plan, width=width)]),
        Spacer(1, 8),
        kv_context_chart(plan, width=width),
        Spacer(1, 8),
        latency_chart(plan, width=width),
        para("Inputs", k.h2),
        para("* differs from the default (shown in parentheses)", k.small),
        k.grid_table(_input_rows(plan.inputs), [48 * mm, width / 2 - 48 * mm, 48 * mm, width / 2 - 48 * mm]),
    ]
    story += _explanation_story(k, plan)
    story += _link_story(k, share_link, "every input of this plan")
    buf = io.BytesIO()
    doc, footer = _document(buf, "KV capacity sizing report", ref.label(), f"KV capacity sizing report - {ref.label()}")
    doc.build(story, onFirstPage=footer, onLaterPages=footer)
    return buf.getvalue()


def calibration_table(plan: Plan) -> list[list[str]] | None:
    """The plan's kept benchmark calibration as a table (None without one)."""
    from planner.bench_calibration import calibration_rows

    if not plan.inputs.bench_calibration:
        return None
    rows = calibration_rows(plan.inputs.bench_calibration)
    return [["Figure", "Measured", "Predicted", "Measured / predicted"]] + [[r["figure"], f"{r['measured']:,.4g}", f"{r['predicted']:,.4g}", f"{r['ratio']:.2f}x"] for r in rows]


def _calibration_story(k: _Kit, plan: Plan, model=None) -> list:
    from reportlab.platypus import KeepTogether

    table = calibration_table(plan)
    if table is None:
        return []
    source = plan.inputs.bench_calibration.split(";", 1)[0].removeprefix("src=")
    parts = [
        k.para("Measured beside predicted", k.h2),
        k.grid_table(table, [k.width * 0.4] + [k.width * 0.2] * 3),
        k.para(f"A {source} run of this deployment, kept as the plan's calibration: predicted at the run's own load, as the plan stood when it was measured.", k.small),
    ]
    if model is not None:
        from planner.benchimport.calibrate import SHORT, calibrate

        cal = calibrate(plan, model)
        text = cal.label[:1].upper() + cal.label[1:] + "."
        if cal.applied:
            text += " " + "; ".join(f"{SHORT.get(f, f)} {v:,.4g} (model {m:,.4g})" for f, (m, v) in cal.figures.items()) + ". The figures above stay the model's."
        parts.append(k.para(text, k.small))
    return [KeepTogether(parts)]


def _pools_story(k: _Kit, plan: Plan, model) -> list:
    """The plan's workload on its disaggregated pools (``disagg``): the pool table and the transfer paragraph."""
    if model is None or not plan.inputs.disagg:
        return []
    from reportlab.platypus import KeepTogether

    from planner import disagg
    from planner.errors import PlannerError

    try:
        d = disagg.plan_of(plan, model)
    except PlannerError as exc:
        return [k.para(f"Disaggregated pools {plan.inputs.disagg}: {exc.reason}", k.small)]
    rows = disagg.pool_rows(d)
    cols = ("pool", "SLO", "GPU", "TP", "replicas", "KV pool GiB/GPU", "seqs/replica", "utilisation", "step ms")
    table = [list(cols)] + [[str(r[c]) for c in cols] for r in rows]
    return [
        KeepTogether(
            [
                k.para(f"Disaggregated prefill / decode: {d.spec}", k.h2),
                k.para(f"The same workload, {disagg.load_text(d, plan.inputs)}, on {d.gpus:,} GPUs: TTFT p95 {fmt_ms_whole(d.ttft_p95_ms)}, TPOT {d.tpot_ms:,.2f} ms, {d.output_tokens_per_s:,.0f} output tokens/s, ${d.cost_per_hour:,.2f}/h."),
                k.grid_table(table, [k.width * w for w in (0.08, 0.22, 0.17, 0.05, 0.09, 0.1, 0.1, 0.1, 0.09)]),
                k.para(disagg.describe(d), k.small),
            ]
        )
    ]


def sglang_rows(plan: Plan) -> list[tuple[str, str]]:
    """The PDF's "SGLang start-up preview" table (runtime sglang): the resolved server arguments,
    the pools, the memory terms, the admission; empty for other runtimes."""
    v = plan.sglang
    if v is None:
        return []
    rows = [
        ("Server arguments", f"mem_fraction_static {v.capacity.mem_fraction_static:g}, chunked_prefill_size {v.capacity.chunked_prefill_size:,}, max_prefill_tokens {v.capacity.max_prefill_tokens:,}, page_size {v.capacity.page_size}, cuda_graph_max_bs {v.capacity.cuda_graph_max_bs}, attention backend {v.capacity.attention_backend}, KV {v.capacity.kv_dtype} (--kv-cache-dtype {v.capacity.kv_cache_dtype}), context_len {v.capacity.context_len:,}"),
        ("Token pool", f"{v.capacity.max_total_num_tokens:,} tokens of {v.capacity.cell_bytes:,.6g} B" + (f"; SWA pool {v.capacity.swa_max_total_num_tokens:,} tokens" if v.capacity.swa_max_total_num_tokens is not None else "") + (f"; Mamba state slots {v.capacity.max_mamba_cache_size:,}" if v.capacity.max_mamba_cache_size is not None else "") + f"; max_running_requests {v.capacity.max_running_requests:,}"),
    ]  # fmt: skip
    rows += [(f"Memory: {name}", f"{gib:,.2f} GiB ({source})") for name, gib, source in ((t.name, t.gib, t.source) for t in v.memory.terms)]
    rows.append(("KV budget", f"{fmt_bytes(v.capacity.available_kv_bytes)}: free after the weights {v.memory.available_gib:,.2f} GiB less {v.memory.pre_load_free_gib:,.2f} GiB x (1 - {v.capacity.mem_fraction_static:g}), the VLM cache and any Mamba pool"))
    rows.append(("Admission", v.why))
    return rows


def _sglang_story(k: _Kit, plan: Plan) -> list:
    """The "SGLang start-up preview" section: the table, the log lines and the launch command."""
    v = plan.sglang
    if v is None:
        return []
    return [
        k.para(f"SGLang start-up preview (SGLang {v.capacity.sglang_version})", k.h2), k.kv_table(sglang_rows(plan)),
        k.para("What SGLang logs at start-up:", k.small), *[k.para(line, k.mono) for line in v.capacity.log_lines], k.para("Launch command:", k.small), k.para(v.command, k.mono),
    ]  # fmt: skip
def _startup_story(k: _Kit, plan: Plan) -> list:
    """Runtime vllm: vLLM's start-up budget term by term with each term's source, the start-up log
    at the serve line's --max-model-len, and that line (it starts: see ServeSection)."""
    from reportlab.lib.units import mm

    budget, serve, engine = plan.capacity.budget, plan.serve, plan.kv_cache.engine
    if budget is None or not serve.applies:
        return []
    rows = [["Term", "GiB", "Source"]]
    for i, t in enumerate(budget.terms):
        shown = t.bytes if i < 2 or not t.in_budget else -t.bytes
        rows.append([t.name + ("" if t.in_budget else " (outside the budget)"), f"{shown / GIB:,.2f}", t.source])
    rows.append(["= Available KV cache memory", f"{budget.available_kv_bytes / GIB:,.2f}", "what vLLM will log"])
    story = [k.para(f"vLLM {budget.release} start-up", k.h2), k.grid_table(rows, [44 * mm, 16 * mm, k.width - 60 * mm])]
    story.append(k.para(f"Batching: {serve.max_num_batched_tokens:,} tokens a step" + (f", {serve.max_num_seqs:,} sequences a replica" if serve.max_num_seqs else "") + f" ({serve.batching_source}).", k.small))
    if engine is not None and engine.log_lines:
        story += [k.para(line, k.mono) for line in engine.log_lines]
    story.append(k.para(serve_text(plan), k.mono))
    if serve.note:
        story.append(k.para(serve.note, k.small))
    return story


def serve_text(plan: Plan) -> str:
    """The serve line a report prints: the command, else why none starts."""
    serve = plan.serve
    return serve.command if serve.command else f"(no vLLM command starts: {serve.note})"


def _cache_story(k: _Kit, plan: Plan) -> list:
    """The session workload's cache: TTFT with and without the tiers, and the tiers (none
    without a workload)."""
    from reportlab.lib.units import mm
    from reportlab.platypus import KeepTogether

    from planner.cache.explain import tier_rows, ttft_rows

    rows = ttft_rows(plan)
    if not rows:
        return []
    tiers = tier_rows(plan)
    width = k.width
    return [
        KeepTogether([
            k.para("Prefix cache under sessions", k.h2),
            k.grid_table(rows, [44 * mm] + [(width - 44 * mm) / 6] * 6),
            k.grid_table(tiers, [44 * mm] + [(width - 44 * mm) / 5] * 5),
            *(k.para(f"{part}: {who}", k.small) for part, who in plan.cache.shareable),
        ])
    ]  # fmt: skip


def _explanation_story(k: _Kit, plan: Plan) -> list:
    """The formulas, assumptions and what is not modelled, as :mod:`planner.explain` words them
    (the Plan page and the CLI show the same), and the plan's own notes."""
    from planner import explain  # here, not above: explain reads this module's formatters

    terms = explain.model_terms(plan)
    story = [k.para("Formulas with this plan's numbers", k.h2)]
    for group in explain.formula_steps(plan):
        story.append(k.para(group.title, k.h3))
        story += [k.para(line, k.mono) for line in group.lines]
    story.append(k.para("Assumptions", k.h2))
    story += [k.para(f"- {n.title}: {n.text}", k.body) for n in explain.assumptions(plan, terms)]
    story += [k.para(f"- {note}", k.body) for note in plan.notes]
    story.append(k.para("Not modelled", k.h2))
    story += [k.para(f"- {n.title}: {n.text}", k.body) for n in explain.not_modelled(plan, terms)]
    return story


def _safe_plain(text: object) -> str:
    """Text the standard PDF fonts can show: :func:`planner.limits.safe_text`, then cp1252."""
    return safe_text(text).encode("cp1252", "replace").decode("cp1252")


__all__ = ["CHART_TITLES", "DEFAULT_SHARE_BASE", "build_comparison_pdf", "build_pdf"]
