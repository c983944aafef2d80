"""Hostile numbers (issue 15): every reproducer is refused with one line naming the field.

The CLI runs in-process (``planner.cli.main``) so each case costs milliseconds; one case runs
as a real subprocess to show the exit code and that no traceback reaches stderr.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from planner.cli import main
from planner.errors import ConfigError, PlannerError, shorten
from planner.geometry import parse_geometry
from planner.limits import ByteBudgetCache, RateLimiter, check_number, ensure_finite_json, parse_number_text, size_of
from planner.plan import prepare_model
from planner.share import load_plan_file

ROOT = Path(__file__).resolve().parents[1]
SMALL = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "hidden_size": 64, "vocab_size": 1000, "max_position_embeddings": 4096}


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path: Path, obj: object, name: str = "config.json") -> str:
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return str(path)


# --------------------------------------------------------------------------- config overflow


@pytest.mark.parametrize(
    ("extra", "field", "reason"),
    [
        ('"n_shared_experts": Infinity, "num_experts": 4', "n_shared_experts", "finite"),
        ('"ffn_hidden_size": 1e308', "ffn_hidden_size", "absurdly large"),
        ('"moe_intermediate_size": NaN, "num_experts": 4', "moe_intermediate_size", "finite"),
    ],
)
@pytest.mark.parametrize("command", ["plan", "report", "simulate"])
def test_overflowing_config_fields_are_refused_in_one_line(tmp_path, capsys, extra, field, reason, command):
    text = json.dumps(SMALL)[:-1] + ", " + extra + "}"
    argv = [command, "--config", write(tmp_path, text), "--input-tokens", "100", "--output-tokens", "100"]
    if command == "report":
        argv += ["--out", str(tmp_path / "r.pdf")]
    if command == "simulate":
        argv += ["--requests", "5"]
    code, out, err = cli(capsys, *argv)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"error: {field}=") and reason in err


def test_overflow_is_refused_by_the_library_too():
    with pytest.raises(ConfigError) as exc:
        prepare_model({**SMALL, "n_shared_experts": float("inf"), "num_experts": 4}).weights("auto")
    assert exc.value.field == "n_shared_experts"


def test_absurd_geometry_is_refused():
    # 100,000 layers x 65,536 heads x head_dim 1,048,576 once gave 2.7e16 bytes per token, exit 0
    with pytest.raises(ConfigError) as exc:
        parse_geometry({**SMALL, "num_hidden_layers": 100_000, "num_attention_heads": 65_536, "num_key_value_heads": 65_536, "head_dim": 1 << 20})
    assert exc.value.field == "num_hidden_layers" and "limit 10,000" in str(exc.value)
    # within every per-field limit, but 9,000 x 16,000 x 1,048,576 x 2 x 4 bytes = 1.2e15 > 1 TiB per token
    with pytest.raises(ConfigError, match="limit 1 TiB"):
        parse_geometry({**SMALL, "num_hidden_layers": 9_000, "num_attention_heads": 16_000, "num_key_value_heads": 16_000, "head_dim": 1 << 20, "hidden_size": 16_000})  # hidden >= heads (issue 24 refuses fewer)


def test_parameter_count_ceiling():
    # 64 experts x 3 x 1,048,576 x 1,048,576 x 2 layers = 4.2e14 parameters > 1e14
    config = {**SMALL, "hidden_size": 1 << 20, "head_dim": 16, "num_experts": 64, "moe_intermediate_size": 1 << 20}
    with pytest.raises(ConfigError, match="absurdly large"):
        prepare_model(config).weights("auto")


def test_absurd_geometry_exits_2_from_the_cli(tmp_path, capsys):
    path = write(tmp_path, {**SMALL, "num_hidden_layers": 100_000, "num_attention_heads": 65_536, "head_dim": 1 << 20})
    code, out, err = cli(capsys, "inspect", "--config", path)
    assert (code, out) == (2, "") and err.startswith("error: num_hidden_layers=100000:")


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--preset", "llama-3.1-8b", "--mfu", "5e-324"], "mfu=5e-324: Input should be greater than or equal to 0.000001"),
        (["--example", "--prefill-ms", "5e-324"], "prefill_ms=5e-324"),
        (["--example", "--first-decode-ms", "5e-324"], "first_decode_ms=5e-324"),
        (["--example", "--mbu", "1e-300"], "mbu=1e-300"),
        (["--example", "--device-gib", "5e-324"], "device_gib=5e-324"),
        (["--example", "--tp", "1_000"], "'1_000' is not an integer"),
        (["--example", "--sequences", "\u0663"], "is not an integer"),
        (["--example", "--sequences", " 5 "], "' 5 ' is not an integer"),
        (["--example", "--mfu", "nan"], "'nan' is not a finite number"),
        (["--example", "--mfu", "1e400"], "'1e400' is not a finite number"),
        (["--example", "--sequences", "9" * 5001], "is not an integer"),
    ],
)
def test_hostile_flags_exit_2_with_one_line(capsys, argv, needle):
    code, out, err = cli(capsys, "plan", *argv, "--json")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and needle in err
    assert len(err) < 300  # a 5,001-digit value is shown shortened


def test_smallest_accepted_floats_give_finite_json(capsys):
    # the floors themselves: times grow a million-fold at MFU/MBU 1e-6 but stay finite, valid JSON
    code, out, _ = cli(capsys, "plan", "--preset", "deepseek-v3", "--tp", "16", "--gpu-count", "16", "--mfu", "1e-6", "--mbu", "1e-6", "--json")
    assert code == 0
    doc = json.loads(out, parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert 0 < doc["latency"]["time_to_first_token_ms"] < 1e15
    code, out, _ = cli(capsys, "plan", "--example", "--prefill-ms", "0.001", "--json")
    assert code == 0 and "Infinity" not in out and json.loads(out)["latency"]["time_to_first_token_ms"] == pytest.approx(20 + 10 + 0.001 + 20)  # queue + preprocessing + prefill + first decode


def test_a_real_subprocess_prints_no_traceback(tmp_path):
    path = write(tmp_path, json.dumps(SMALL)[:-1] + ', "n_shared_experts": Infinity, "num_experts": 4}')
    proc = subprocess.run([sys.executable, "-m", "planner", "plan", "--config", path, "--input-tokens", "10", "--output-tokens", "10", "--json"], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 2 and proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr == "error: n_shared_experts=inf: must be a finite number\n"


# --------------------------------------------------------------------------- plan files


def test_plan_file_with_a_4300_digit_integer(tmp_path, capsys):
    text = '{"schema": "kv-capacity-plan", "version": 1, "model": {"kind": "example"}, "inputs": {"sequences": ' + "9" * 4400 + "}}"
    with pytest.raises(PlannerError, match="more than 4,300 digits"):
        load_plan_file(text)
    code, out, err = cli(capsys, "report", "--plan", write(tmp_path, text, "plan.json"), "--out", str(tmp_path / "r.pdf"))
    assert (code, out) == (2, "") and err.count("\n") == 1


def test_report_plan_prints_no_warnings_before_its_error(tmp_path, capsys):
    # three bad fields and no usable model: one error line, no "warning:" lines first
    doc = {"schema": "kv-capacity-plan", "version": 1, "model": {"kind": "nope"}, "inputs": {"sequences": "x", "mfu": 7, "zzz": 1}}
    code, out, err = cli(capsys, "report", "--plan", write(tmp_path, doc, "plan.json"), "--out", str(tmp_path / "r.pdf"))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("error: --plan ") and "warning:" not in err


# --------------------------------------------------------------------------- the limits module


def test_shorten_never_raises_and_stays_short():
    assert shorten(10**5000) == "<an integer of about 5,001 digits>"
    assert shorten("x" * 1000).endswith("...") and len(shorten("x" * 1000)) == 80
    assert str(PlannerError("sequences", 10**5000, "too big")) == "sequences=<an integer of about 5,001 digits>: too big"


def test_number_text_is_plain_ascii():
    assert [parse_number_text(t, True) for t in ("4096", "-3", "+7")] == [4096, -3, 7]
    assert [parse_number_text(t, True) for t in ("1_000", "\u0663", " 5 ", "5.0", "", "1" * 21)] == [None] * 6
    assert [parse_number_text(t, False) for t in ("0.5", "1e-3", ".5", "5.")] == [0.5, 1e-3, 0.5, 5.0]
    assert [parse_number_text(t, False) for t in ("inf", "nan", "1e400", "1_0.5", "0x10", "\u0663.5")] == [None] * 6


def test_check_number():
    assert check_number("f", 4096.0, lo=1, hi=5000, integer=True) == 4096
    for bad, reason in ((True, "integer"), ("4", "integer"), (float("nan"), "finite"), (1.5, "whole"), (0, "at least 1"), (5001, "limit 5,000")):
        with pytest.raises(PlannerError, match=reason):
            check_number("f", bad, lo=1, hi=5000, integer=True)


def test_ensure_finite_json_names_the_path():
    ensure_finite_json({"a": [1.0, {"b": 2}]})
    with pytest.raises(PlannerError) as exc:
        ensure_finite_json({"latency": {"ttft_ms": float("inf")}})
    assert exc.value.field == "result.latency.ttft_ms"


def test_byte_budget_cache_evicts_by_bytes():
    cache = ByteBudgetCache(10_000, sizer=lambda v: len(v))
    for i in range(20):
        cache.put(i, "x" * 1_000)
    assert cache.nbytes <= 10_000 and len(cache) < 10 and 19 in cache and 0 not in cache
    cache.get(12)  # recently used: survives the next eviction
    cache.put("big", "y" * 5_000)
    assert 12 in cache and cache.nbytes <= 10_000
    cache.put("huge", "z" * 20_000)  # larger than the whole budget: not kept, nothing evicted for it
    assert "huge" not in cache and 12 in cache


def test_process_caches_stay_within_their_byte_budgets():
    from planner.geometry import _GEOMETRIES
    from planner.plan import _PREPARED

    before = set(_GEOMETRIES.keys())
    for i in range(16):  # sixteen distinct 5,000-layer configs: ~5.6 MB of geometry each
        prepare_model({**SMALL, "num_hidden_layers": 5_000, "vocab_size": 1000 + i})
    assert _GEOMETRIES.nbytes <= _GEOMETRIES.max_bytes and _PREPARED.nbytes <= _PREPARED.max_bytes
    assert len(set(_GEOMETRIES.keys()) - before) < 16  # some were evicted: the budget, not the count, decided
    assert size_of(parse_geometry({**SMALL, "num_hidden_layers": 5_000})) > 1_000_000


def test_rate_limiter():
    now = [0.0]
    limiter = RateLimiter(2, 10.0, clock=lambda: now[0])
    assert [limiter.allow("s1"), limiter.allow("s1"), limiter.allow("s1"), limiter.allow("s2")] == [True, True, False, True]
    assert limiter.retry_after("s1") == pytest.approx(10.0)
    now[0] = 10.5
    assert limiter.allow("s1") and limiter.retry_after("s2") == 0.0



def test_report_plan_reads_at_most_1_mib(tmp_path, capsys):
    code, out, err = cli(capsys, "report", "--plan", "/dev/zero", "--out", str(tmp_path / "r.pdf"))
    assert (code, out) == (2, "") and "larger than 1 MiB" in err and err.count("\n") == 1


def test_upload_cap_matches_the_config_cap():
    import tomllib

    from planner.configio import MAX_CONFIG_BYTES

    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert settings["server"]["maxUploadSize"] * 1024 * 1024 == MAX_CONFIG_BYTES  # one cap, in MiB there
    assert settings["server"]["enableXsrfProtection"] is True
