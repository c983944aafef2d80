"""Share links and plan files: exact round trips, field-by-field fallback, bounded decoding, no secrets."""

from __future__ import annotations

import base64
import json
import time
import typing
import zlib
from urllib.parse import parse_qs, urlsplit

import annotated_types
import pytest
from hypothesis import HealthCheck, Phase, find, given, settings
from hypothesis import strategies as st

from planner.errors import PlannerError
from planner.geometry import config_hash
from planner.hardware import CATALOG
from planner.plan import EXAMPLE_CONFIG, EXAMPLE_INPUTS, PlanInputs, compute_plan, example_model
from planner.plan.inputs import WORKLOAD_DETAILS
from planner.presets import preset_names
from planner.share import (
    INPUT_KEYS,
    REF_KEYS,
    SCHEMA_VERSION,
    TOKEN_RE,
    decode_query,
    encode_query,
    load_plan_file,
    plan_file_json,
    share_url,
)
from planner.source import ModelRef, example_ref, preset_ref, resolve, upload_ref

BASE = "http://localhost:8501/"
FAKE_TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"  # token-shaped, not a real token
EX_REF = example_ref()[0]


# --------------------------------------------------------------------------- strategies


def _bounds(name: str) -> dict:
    out = {}
    for meta in PlanInputs.model_fields[name].metadata:
        for cls, key in ((annotated_types.Ge, "ge"), (annotated_types.Gt, "gt"), (annotated_types.Le, "le")):
            if isinstance(meta, cls):
                out[key] = getattr(meta, key)
    return out


_POSITIVE = st.floats(min_value=1e-6, max_value=1e9, allow_nan=False, allow_infinity=False)


@st.composite
def _calibration(draw) -> str:
    """A benchmark calibration text (planner.bench_calibration): a tool, then up to three figures."""
    from planner.bench_calibration import SOURCES

    figures = draw(st.lists(st.sampled_from(["ttft_ms", "tpot_ms", "itl_ms", "output_tokens_per_s"]), max_size=3, unique=True))
    return ";".join([f"src={draw(st.sampled_from(sorted(SOURCES)))}"] + [f"{f}={draw(_POSITIVE):.4g}/{draw(_POSITIVE):.4g}" for f in figures])


CALIBRATION = _calibration()


@st.composite
def _pools(draw) -> str:
    """A disaggregated pools text (planner.pools): replicas, TP and an optional catalog GPU per pool."""
    from planner.pools import MAX_POOL_REPLICAS, MAX_POOL_TP

    def one(role: str) -> str:
        gpu = draw(st.one_of(st.just(""), st.sampled_from(sorted(CATALOG)).map(lambda g: "@" + g)))
        return f"{draw(st.integers(1, MAX_POOL_REPLICAS))}{role}:{draw(st.integers(1, MAX_POOL_TP))}{gpu}"

    return f"{one('P')},{one('D')}"


POOLS = _pools()


def _value_strategy(name: str) -> st.SearchStrategy:
    """Valid values of one PlanInputs field from its own annotation and Field bounds."""
    ann = PlanInputs.model_fields[name].annotation
    args = typing.get_args(ann)
    nullable = type(None) in args
    base = next((a for a in args if a is not type(None)), ann) if args and typing.get_origin(ann) is not typing.Literal else ann
    if typing.get_origin(base) is typing.Literal:
        strat = st.sampled_from(typing.get_args(base))
    elif base is bool:
        strat = st.booleans()
    elif base is int:
        b = _bounds(name)
        strat = st.integers(min_value=b.get("ge", b.get("gt", 0) + 1), max_value=b["le"])
    elif base is float:
        b = _bounds(name)
        lo = b.get("ge", b.get("gt"))
        strat = st.floats(min_value=lo, max_value=b["le"], exclude_min="gt" in b, allow_nan=False, allow_infinity=False)
    elif name == "bench_calibration":
        strat = CALIBRATION
    elif name == "disagg":
        strat = POOLS
    elif base is str:  # a preset's name (spec_draft: the draft model)
        strat = st.sampled_from(preset_names())
    else:
        raise AssertionError(f"no strategy for {name}: {ann}")
    default = PlanInputs.model_fields[name].default
    return st.one_of(st.just(default), strat, st.none()) if nullable else st.one_of(st.just(default), strat)


GPU_NAMES = sorted(CATALOG) + [n.lower() for n in CATALOG]
FREE_TEXT = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs")), min_size=1, max_size=64).filter(
    lambda s: s.strip() and s.isprintable() and not TOKEN_RE.search(s)
)


@st.composite
def plan_inputs(draw) -> PlanInputs:
    values = {}
    for name in PlanInputs.model_fields:
        if name in ("gpu", "gpu_count", "tp", "dp", "pp"):
            continue
        values[name] = draw(_value_strategy(name))
    if values["sessions_per_min"] is None:  # a session workload's details need its rate (the tiers stand alone)
        values.update(dict.fromkeys(WORKLOAD_DETAILS))
    tp = draw(st.one_of(st.just(1), st.integers(1, 4096)))
    dp = draw(st.one_of(st.just(1), st.integers(1, 4096 // tp)))
    pp = draw(st.one_of(st.just(1), st.integers(1, min(512, 4096 // (tp * dp)))))
    values.update(tp=tp, dp=dp, pp=pp)
    values["gpu_count"] = tp * dp * pp * draw(st.integers(1, 4096 // (tp * dp * pp)))  # gpu_count % (tp x dp x pp) == 0
    # a catalog GPU; with a custom device size the name is free text
    values["gpu"] = draw(st.sampled_from(GPU_NAMES) if values["device_gib"] is None else st.one_of(st.sampled_from(GPU_NAMES), FREE_TEXT))
    return PlanInputs(**values)


HEX = "0123456789abcdef"
REPO_PART = st.from_regex(r"[A-Za-z0-9_](?:[A-Za-z0-9_]|[._-][A-Za-z0-9_]){0,20}", fullmatch=True)


@st.composite
def model_refs(draw) -> ModelRef:
    kind = draw(st.sampled_from(["preset", "hub", "upload", "example"]))
    digest = draw(st.text(HEX, min_size=64, max_size=64))
    if kind == "preset":
        return ModelRef(kind="preset", name=draw(st.sampled_from(preset_names())), repo_id=draw(st.none() | st.just("google/gemma-2-9b")), config_hash=digest)
    if kind == "hub":
        repo = draw(REPO_PART) + "/" + draw(REPO_PART)
        rev = draw(st.sampled_from(["main", "v1.0", "refs/pr/1"]) | st.none())
        return ModelRef(kind="hub", repo_id=repo, revision=rev, commit=draw(st.text(HEX, min_size=40, max_size=40)), config_hash=digest)
    if kind == "upload":
        return ModelRef(kind="upload", name=draw(st.none() | FREE_TEXT), config_hash=digest)
    return ModelRef(kind="example", config_hash=digest)


def _browser_params(url: str) -> dict[str, list[str]]:
    """What a browser + Streamlit hand back: the query string parsed (lists of values)."""
    return parse_qs(urlsplit(url).query, keep_blank_values=True)


# --------------------------------------------------------------------------- key table


def test_key_table_covers_every_input_and_keys_are_unique():
    assert set(INPUT_KEYS) == set(PlanInputs.model_fields)
    keys = list(INPUT_KEYS.values()) + list(REF_KEYS.values()) + ["v", "cfg"]
    assert len(keys) == len(set(keys))
    assert set(REF_KEYS) == set(ModelRef.model_fields)


def test_strategy_draws_a_non_default_value_for_every_field():
    # a field added to PlanInputs with a type the strategy cannot draw fails here
    quick = settings(phases=[Phase.generate], database=None, max_examples=500)
    for name in PlanInputs.model_fields:
        default = PlanInputs.model_fields[name].default
        if name == "gpu":
            value = find(plan_inputs(), lambda p, d=default: p.gpu != d, settings=quick).gpu
        elif name in ("gpu_count", "tp", "dp", "pp"):
            value = getattr(find(plan_inputs(), lambda p, n=name: getattr(p, n) != 1, settings=quick), name)
        else:
            value = find(_value_strategy(name), lambda v, d=default: v != d, settings=quick)
        assert value != default, name


# --------------------------------------------------------------------------- round trips


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=plan_inputs(), ref=model_refs())
def test_url_round_trip_restores_every_field(inputs, ref):
    url = share_url(BASE, encode_query(ref, inputs))
    state = decode_query(_browser_params(url))
    assert state.inputs == inputs
    for name in PlanInputs.model_fields:  # field by field, so a failure names the field
        assert getattr(state.inputs, name) == getattr(inputs, name), name
    assert state.ref == ref
    if ref.kind == "upload":  # no config given: the recipient is told to upload it
        assert state.needs_upload and any("upload the same config.json" in w for w in state.warnings)
    else:
        assert state.warnings == []
    assert not TOKEN_RE.search(url)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inputs=plan_inputs(), ref=model_refs())
def test_plan_file_round_trip_restores_every_field(inputs, ref):
    text = plan_file_json(ref, inputs)
    doc = json.loads(text)
    assert doc["schema"] == "kv-capacity-plan" and doc["version"] == 3
    state = load_plan_file(text)
    assert state.inputs == inputs
    assert state.ref == ref
    if ref.kind != "upload":
        assert state.warnings == []


def test_only_non_default_inputs_are_written():
    assert encode_query(EX_REF, PlanInputs()) == {"v": "3", "m": "example", "h": EX_REF.config_hash}
    params = encode_query(EX_REF, EXAMPLE_INPUTS)
    # EXAMPLE_INPUTS sets device 16 GiB, model 4 GiB, a 1 GiB workspace (the default is vLLM's
    # predicted terms since version 3) and the observed timings; 1,000 bp headroom and 8 sequences
    # are the defaults, so they are not written.
    assert {k: v for k, v in params.items() if k not in ("v", "m", "h")} == {
        "dev": "16", "mres": "4", "ws": "1", "q": "20", "pre": "10", "pf": "400", "fd": "20", "rd": "2560", "gen": "129",
    }


def test_example_link_is_compact_and_exact():
    url = share_url(BASE, encode_query(EX_REF, EXAMPLE_INPUTS))
    assert url == (
        f"http://localhost:8501/?v=3&m=example&h={EX_REF.config_hash}"
        "&dev=16&mres=4&ws=1&q=20&pre=10&pf=400&fd=20&rd=2560&gen=129"
    )
    assert len(url) < 200


def test_share_url_replaces_query_and_fragment():
    assert share_url("https://plan.example/app?old=1#frag", {"v": "1", "seq": "4"}) == "https://plan.example/app?v=1&seq=4"
    assert share_url("https://plan.example", {"v": "1"}) == "https://plan.example/?v=1"


def test_non_integral_floats_round_trip_exactly():
    inputs = PlanInputs(mfu=0.1 + 0.2, device_gib=0.1 + 0.7, gpu="anything", workspace_gib=99_999.99999999999)
    params = encode_query(EX_REF, inputs)
    assert params["mfu"] == "0.30000000000000004"  # repr of 0.1 + 0.2
    state = decode_query(params)
    assert (state.inputs.mfu, state.inputs.device_gib, state.inputs.workspace_gib) == (0.1 + 0.2, 0.1 + 0.7, 99_999.99999999999)


# --------------------------------------------------------------------------- tampered links

# (key, bad value, expected warning text); every link also carries seq=20, which must survive.
TAMPERED = [
    ("hr", "abc", "headroom_bp (hr) 'abc' is not a whole number; using the default 1,000 bp (10 %)"),
    ("hr", "10000", "headroom_bp (hr) '10000' is out of range (must be >= 0 and <= 9,999)"),
    ("hr", "-1", "headroom_bp (hr) '-1' is out of range"),
    ("dev", "nan", "device_gib (dev) 'nan' is not a finite number"),
    ("dev", "inf", "device_gib (dev) 'inf' is not a finite number"),
    ("dev", "-Infinity", "device_gib (dev) '-Infinity' is not a finite number"),
    ("dev", "1e999", "device_gib (dev) '1e999' is not a finite number"),  # float('1e999') is inf
    ("dev", "0", "device_gib (dev) '0' is out of range (must be >= 0.01 and <= 4,096)"),
    ("dev", "16GiB", "device_gib (dev) '16GiB' is not a number"),
    ("dev", "1_6", "device_gib (dev) '1_6' is not a number"),  # Python's float() would accept it
    ("tp", "2.5", "tp (tp) '2.5' is not a whole number"),
    ("tp", "", "tp (tp) '' is not a whole number"),
    ("tp", "9" * 5000, f"tp (tp) '{'9' * 37}...' is far out of range"),  # shown cut to 37 characters + ...
    ("mfu", "0", "mfu (mfu) '0' is out of range (must be >= 1e-06 and <= 1)"),
    ("hit", "1.5", "prefix_hit_rate (hit) '1.5' is out of range (must be >= 0 and <= 1)"),
    ("kvd", "fp7", "kv_dtype (kvd) 'fp7' is not one of auto, fp32, fp16, bf16, fp8, int8, int4; using the default auto"),
    ("mtp", "yes", "mtp (mtp) 'yes' is not 1 or 0; using the default 0 (off)"),
    ("rt", "TRANSFORMERS", "runtime (rt) 'TRANSFORMERS' is not one of vllm, sglang, transformers"),
    ("res", "<script>", "reservation (res) '<script>' is not one of dynamic, static, paged"),
    ("gpu", "Z100", "gpu (gpu) 'Z100' is an unknown GPU; using the default H100-SXM-80GB"),
    ("gpu", "\x00\x1b[31m", "is not a plain name"),
    ("in", "0", "input_tokens (in) '0' is out of range (must be >= 1"),
    ("ttft", "1e10", "ttft_slo_ms (ttft) '1e10' is out of range (must be > 0 and <= 1,000,000,000)"),
]


@pytest.mark.parametrize(("key", "value", "expected"), TAMPERED)
def test_tampered_value_falls_back_field_by_field(key, value, expected):
    state = decode_query({"v": "2", "m": "example", key: value, "seq": "20"})
    field = next(f for f, k in INPUT_KEYS.items() if k == key)
    assert getattr(state.inputs, field) == PlanInputs.model_fields[field].default
    assert state.inputs.sequences == 20  # the good field next to it is kept
    assert state.ref == ModelRef(kind="example")
    assert any(expected in w for w in state.warnings), state.warnings
    assert all(len(w) < 300 for w in state.warnings)


def test_gpu_count_not_a_multiple_of_tp_is_dropped_but_tp_kept():
    state = decode_query({"v": "1", "gpus": "6", "tp": "4"})
    assert (state.inputs.tp, state.inputs.gpu_count) == (4, 4)  # 6 % 4 = 2: one replica of tp 4
    assert state.warnings == ["gpu_count (gpus) 6 must be a multiple of tp 4 (each replica uses tp GPUs); using 4 (one replica)"]
    state = decode_query({"v": "1", "gpus": "3", "tp": "1.5"})  # bad tp -> 1, then 3 % 1 == 0 stays
    assert (state.inputs.tp, state.inputs.gpu_count) == (1, 3)


def test_custom_device_makes_any_gpu_name_valid():
    state = decode_query({"v": "1", "gpu": "MyChip", "dev": "48"})
    assert (state.inputs.gpu, state.inputs.device_gib, state.warnings) == ("MyChip", 48.0, [])


@pytest.mark.parametrize("version", ["4", "0", "abc", "1.0", ""])
def test_unknown_version_gives_defaults_and_a_warning(version):
    state = decode_query({"v": version, "seq": "20", "m": "example"})
    assert state.inputs == PlanInputs() and state.ref is None
    assert state.warnings == [f"link version (v) {version!r} is not supported (this planner reads versions 1, 2, 3); using the defaults"]


def test_missing_version_is_read_as_version_3_with_a_warning():
    state = decode_query({"seq": "20"})
    assert state.inputs.sequences == 20
    assert state.warnings[0] == "the link has no version (v); reading it as version 3"


def test_version_1_links_and_files_keep_their_bf16_kv_dtype():
    # before version 2 the KV dtype defaulted to bf16: an old link without kvd still plans bf16
    assert decode_query({"v": "1", "m": "example", "seq": "20"}).inputs.kv_dtype == "bf16"
    assert decode_query({"v": "1", "m": "example", "kvd": "fp8"}).inputs.kv_dtype == "fp8"
    state = decode_query({"v": "1", "m": "example", "kvd": "fp7"})
    assert state.inputs.kv_dtype == "bf16" and "using the default bf16" in state.warnings[0]
    doc = {"schema": "kv-capacity-plan", "version": 1, "model": {"kind": "example"}, "inputs": {"sequences": 3}}
    assert load_plan_file(json.dumps(doc)).inputs.kv_dtype == "bf16"
    # version 2: absent means today's default, auto (resolved from the checkpoint)
    assert decode_query({"v": "2", "m": "example"}).inputs.kv_dtype == "auto"
    assert load_plan_file(json.dumps({**doc, "version": 2})).inputs.kv_dtype == "auto"
    # a v2 link of a bf16 plan says so, and MTP travels as 1/0
    params = encode_query(EX_REF, PlanInputs(kv_dtype="bf16", mtp=True))
    assert (params["kvd"], params["mtp"]) == ("bf16", "1")
    assert decode_query(params).inputs == PlanInputs(kv_dtype="bf16", mtp=True)


def test_empty_and_foreign_params_give_defaults_silently():
    assert decode_query({}).warnings == [] and decode_query({}).inputs == PlanInputs()
    state = decode_query({"utm_source": "mail", "page": "compare"})
    assert state.inputs == PlanInputs() and state.ref is None and state.warnings == []


def test_repeated_parameter_uses_the_last_value():
    state = decode_query({"v": "1", "seq": ["4", "20"]})
    assert state.inputs.sequences == 20
    assert state.warnings == ["parameter 'seq' is given more than once; using the last value '20'"]


@pytest.mark.parametrize(
    ("params", "ref", "expected"),
    [
        ({"m": "preset", "n": "no-such-model"}, None, "preset (n) 'no-such-model' is not a bundled preset; using the default model"),
        ({"m": "preset", "n": "../../etc/passwd"}, None, "is not a bundled preset"),
        ({"m": "preset"}, None, "preset link without a preset name (n); using the default model"),
        ({"m": "alien", "n": "x"}, None, "model kind (m) 'alien' is not one of preset, hub, upload, example; ignored"),
        ({"n": "gemma-2-9b"}, None, "the model kind (m) is missing; using the default model"),
        ({"m": "hub", "r": "acme/llama", "c": "abc123"}, ModelRef(kind="hub", repo_id="acme/llama"), "commit (c) 'abc123' is not a 40-character hex commit; ignored"),
        ({"m": "hub", "r": "acme/llama"}, ModelRef(kind="hub", repo_id="acme/llama"), "Hub link without a pinned commit (c)"),
        ({"m": "hub", "r": "not a repo!"}, None, "Hub id (r) 'not a repo!' is not a Hub id (ORG/NAME); ignored"),
        ({"m": "example", "h": "xyz"}, ModelRef(kind="example"), "config hash (h) 'xyz' is not a 64-character hex sha256; ignored"),
    ],
)
def test_bad_model_reference_fields(params, ref, expected):
    state = decode_query({"v": "1", **params, "seq": "20"})
    assert state.ref == ref
    assert state.inputs.sequences == 20
    assert any(expected in w for w in state.warnings), state.warnings


def test_a_preset_link_restores_the_preset():
    ref, model = preset_ref("gemma-2-9b")
    state = decode_query(_browser_params(share_url(BASE, encode_query(ref, PlanInputs(sequences=30)))))
    assert state.ref == ref and state.warnings == []
    assert compute_plan(state.inputs, resolve(state.ref)).kv_cache == compute_plan(PlanInputs(sequences=30), model).kv_cache


@settings(max_examples=60, deadline=None)
@given(inputs=plan_inputs(), data=st.data())
def test_truncated_link_never_raises_and_missing_fields_are_defaults(inputs, data):
    ref, _ = upload_ref(EXAMPLE_CONFIG, "cfg.json")
    url = share_url(BASE, encode_query(ref, inputs, EXAMPLE_CONFIG))
    cut = data.draw(st.integers(0, len(url)))
    params = _browser_params(url[:cut])
    state = decode_query(params)
    assert isinstance(state.inputs, PlanInputs)
    for name, key in INPUT_KEYS.items():
        if key not in params:
            allowed = {PlanInputs.model_fields[name].default}
            if name == "gpu_count":  # a cut between tp and gpus: one replica of tp GPUs
                allowed.add(state.inputs.tp)
            assert getattr(state.inputs, name) in allowed, name


@settings(max_examples=300, deadline=None)
@given(
    st.dictionaries(
        st.one_of(st.sampled_from([*INPUT_KEYS.values(), *REF_KEYS.values(), "v", "cfg"]), st.text(max_size=5)),
        st.one_of(st.text(max_size=30), st.lists(st.text(max_size=10), max_size=3), st.integers(), st.none(), st.floats()),
        max_size=12,
    )
)
def test_arbitrary_params_never_raise(params):
    state = decode_query(params)
    assert isinstance(state.inputs, PlanInputs)
    assert state.ref is None or isinstance(state.ref, ModelRef)
    assert all(isinstance(w, str) and len(w) < 400 for w in state.warnings)


def test_a_mapping_that_fails_to_iterate_does_not_raise():
    class Broken(dict):
        def items(self):
            raise RuntimeError("boom")

    state = decode_query(Broken(v="1"))
    assert state.inputs == PlanInputs() and state.warnings == ["the link's parameters could not be read; using the defaults"]


# --------------------------------------------------------------------------- embedded configs


def test_small_uploaded_config_is_embedded_and_restored():
    ref, model = upload_ref(EXAMPLE_CONFIG, "my-config.json")
    params = encode_query(ref, EXAMPLE_INPUTS, EXAMPLE_CONFIG)
    assert 0 < len(params["cfg"]) < 2048
    state = decode_query(_browser_params(share_url(BASE, params)))
    assert state.upload_config == EXAMPLE_CONFIG and state.ref == ref and not state.needs_upload and state.warnings == []
    plan = compute_plan(state.inputs, resolve(state.ref, config=state.upload_config))
    assert plan.kv_cache.maximum_sequences_by_memory == 30  # floor(10,093,173,145 / 335,544,320)
    # the plan file carries it too
    file_state = load_plan_file(plan_file_json(ref, EXAMPLE_INPUTS, EXAMPLE_CONFIG))
    assert file_state.upload_config == EXAMPLE_CONFIG and file_state.warnings == []


def _big_config() -> dict:
    # 400 keys with pseudo-random hex values: about 20 KB that compresses poorly
    noise = {f"field_{i:03d}": config_hash({"i": i})[:40] for i in range(400)}
    return {**EXAMPLE_CONFIG, **noise}


def test_big_uploaded_config_is_left_out_with_a_clear_message():
    big = _big_config()
    ref, _ = upload_ref(big, "big.json")
    params = encode_query(ref, EXAMPLE_INPUTS, big)
    assert "cfg" not in params and params["h"] == config_hash(big)
    state = decode_query(params)
    assert state.needs_upload and state.upload_config is None and state.ref == ref
    assert state.warnings == [
        f"this plan was made from an uploaded config (big.json, sha256 {config_hash(big)[:12]}) that is not embedded in the link (too large for a URL): upload the same config.json to reproduce it"
    ]
    assert state.inputs == EXAMPLE_INPUTS
    assert load_plan_file(plan_file_json(ref, EXAMPLE_INPUTS, big)).upload_config == big  # the file can carry it


def test_mismatched_upload_config_is_refused_when_encoding():
    ref, _ = upload_ref(EXAMPLE_CONFIG, "a.json")
    with pytest.raises(PlannerError, match="does not match"):
        encode_query(ref, PlanInputs(), {**EXAMPLE_CONFIG, "num_hidden_layers": 2})


def _cfg(raw: bytes) -> str:
    return base64.urlsafe_b64encode(zlib.compress(raw)).decode().rstrip("=")


def test_tampered_embedded_configs_are_ignored_with_a_reason():
    ref, _ = upload_ref(EXAMPLE_CONFIG, "a.json")
    good = encode_query(ref, PlanInputs(), EXAMPLE_CONFIG)
    other = _cfg(json.dumps({**EXAMPLE_CONFIG, "num_hidden_layers": 2}).encode())
    cases = {
        "@@not base64@@": "is not urlsafe base64",
        good["cfg"][:-12]: "truncated",
        _cfg(b"[1, 2, 3]"): "is not a valid config (config must be a JSON object",
        _cfg(b"{not json"): "is not a valid config (not valid JSON",
        base64.urlsafe_b64encode(b"plain bytes, no zlib").decode(): "is not zlib-compressed data",
        other: "does not match the config hash",
    }
    for cfg, expected in cases.items():
        state = decode_query({**good, "cfg": cfg})
        assert state.upload_config is None and state.needs_upload, cfg
        assert any(expected in w for w in state.warnings), (cfg, state.warnings)
        assert any("upload the same config.json" in w for w in state.warnings)


def test_zip_bomb_and_oversized_configs_are_refused_quickly():
    ref, _ = upload_ref(EXAMPLE_CONFIG, "a.json")
    base = encode_query(ref, PlanInputs(), EXAMPLE_CONFIG)
    bomb = _cfg(b"0" * (64 << 20))  # 64 MiB of zeros -> about 87 KiB of text
    assert len(bomb) < 120_000
    pad = _cfg(json.dumps({"pad": "x" * 70_000}).encode())  # valid JSON, 70,011 bytes > 64 KiB
    for cfg, expected in ((bomb, "characters long (at most 65,536)"), (_cfg(b"0" * (16 << 20)), "decompresses to more than 64 KiB"), (pad, "decompresses to more than 64 KiB")):
        t = time.perf_counter()
        state = decode_query({**base, "cfg": cfg})
        assert time.perf_counter() - t < 1.0
        assert state.upload_config is None
        assert any(expected in w for w in state.warnings), state.warnings


def test_cfg_without_an_upload_reference_is_ignored():
    state = decode_query({"v": "1", "m": "example", "cfg": _cfg(json.dumps(EXAMPLE_CONFIG).encode())})
    assert state.upload_config is None and state.ref == ModelRef(kind="example")
    assert state.warnings == ["an embedded config (cfg) is only used with an uploaded model; ignored"]


# --------------------------------------------------------------------------- secrets


def test_no_token_is_ever_encoded():
    refs = [
        ModelRef(kind="upload", name=FAKE_TOKEN, config_hash=config_hash(EXAMPLE_CONFIG)),
        ModelRef(kind="hub", repo_id="acme/llama", revision=FAKE_TOKEN, commit="a" * 40),
        ModelRef(kind="hub", repo_id=f"acme/{FAKE_TOKEN}", commit="a" * 40),
    ]
    inputs = PlanInputs(gpu=FAKE_TOKEN, device_gib=16)
    secret_config = {**EXAMPLE_CONFIG, "_auth": FAKE_TOKEN}
    secret_ref = ModelRef(kind="upload", name="c.json", config_hash=config_hash(secret_config))
    for ref in [*refs, secret_ref]:
        cfg = secret_config if ref is secret_ref else None
        url = share_url(BASE, encode_query(ref, inputs, cfg))
        text = plan_file_json(ref, inputs, cfg)
        for out in (url, text):
            assert FAKE_TOKEN not in out and not TOKEN_RE.search(out)
    assert "cfg" not in encode_query(secret_ref, inputs, secret_config)  # compressed text could hide it
    assert "config" not in json.loads(plan_file_json(secret_ref, inputs, secret_config))


def test_a_token_in_a_link_is_refused_and_not_echoed():
    state = decode_query({"v": "1", "gpu": FAKE_TOKEN, "dev": "16", "m": "upload", "n": FAKE_TOKEN, "h": "a" * 64})
    assert state.inputs.gpu == PlanInputs().gpu
    assert state.ref == ModelRef(kind="upload", config_hash="a" * 64)
    assert any("looks like an access token" in w for w in state.warnings)
    assert not any(FAKE_TOKEN in w or TOKEN_RE.search(w) for w in state.warnings)


# --------------------------------------------------------------------------- plan files


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("not json at all", "is not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"schema": "something-else", "version": 1}', "is not a KV capacity plan"),
        ('{"version": 1, "inputs": {}}', "is not a KV capacity plan"),
        ('{"schema": "kv-capacity-plan", "version": 4}', "plan file version=4: this planner reads plan files of versions 1, 2, 3"),
        ('{"schema": "kv-capacity-plan", "version": true}', "version"),
        ("[" * 100_000, "nested too deeply"),
        ('{"schema": "kv-capacity-plan", "pad": "' + "x" * (1 << 20) + '"}', "larger than 1,048,576 bytes"),
        (b"\xff\xfe{}", "is not UTF-8 text"),
    ],
)
def test_not_a_plan_file_raises_a_planner_error(text, expected):
    with pytest.raises(PlannerError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        load_plan_file(text)


def test_bad_fields_in_a_plan_file_fall_back_with_warnings():
    doc = {
        "schema": "kv-capacity-plan",
        "version": SCHEMA_VERSION,
        "model": {"kind": "preset", "name": "gemma-2-9b", "colour": "red"},
        "inputs": {"headroom_bp": "abc", "sequences": 1.5, "tp": True, "mfu": 0.25, "kv_dtype": "fp8", "made_up": 1, "device_gib": None},
        "extra": 1,
    }
    state = load_plan_file(json.dumps(doc))
    assert state.ref == ModelRef(kind="preset", name="gemma-2-9b")
    assert (state.inputs.mfu, state.inputs.kv_dtype) == (0.25, "fp8")  # good fields kept
    assert (state.inputs.headroom_bp, state.inputs.sequences, state.inputs.tp) == (1000, 8, 1)
    assert state.warnings == [
        "unknown top-level key 'extra' in the plan file; ignored",
        "unknown model field 'colour'; ignored",
        "inputs.headroom_bp 'abc' is not a whole number; using the default 1,000 bp (10 %)",
        "inputs.sequences 1.5 is not a whole number; using the default 8",
        "inputs.tp True is not a whole number; using the default 1",
        "unknown input 'made_up'; ignored",
    ]


def test_plan_file_with_wrong_types_for_sections():
    doc = {"schema": "kv-capacity-plan", "version": 3, "model": "gemma", "inputs": [1, 2]}
    state = load_plan_file(json.dumps(doc))
    assert state.ref is None and state.inputs == PlanInputs()
    assert state.warnings == ["model 'gemma' is not an object; using the default model", "inputs [1, 2] is not an object; using the defaults"]


def test_plan_file_with_a_config_that_does_not_match_its_hash():
    ref, _ = upload_ref(EXAMPLE_CONFIG, "a.json")
    doc = json.loads(plan_file_json(ref, PlanInputs(), EXAMPLE_CONFIG))
    doc["config"]["num_hidden_layers"] = 2
    state = load_plan_file(json.dumps(doc))
    assert state.upload_config is None and state.needs_upload
    assert state.warnings[0] == f"the embedded config (config) does not match the config hash {ref.config_hash[:12]}; ignored"


def test_plan_file_of_the_example_is_readable_json():
    doc = json.loads(plan_file_json(EX_REF, EXAMPLE_INPUTS))
    assert doc == {
        "schema": "kv-capacity-plan",
        "version": 3,
        "model": {"kind": "example", "config_hash": EX_REF.config_hash},
        "inputs": {"device_gib": 16.0, "model_resident_gib": 4.0, "workspace_gib": 1.0, "queue_ms": 20.0, "preprocessing_ms": 10.0, "prefill_ms": 400.0, "first_decode_ms": 20.0, "remaining_decode_ms": 2560.0, "generated_tokens": 129},
    }
    state = load_plan_file(json.dumps(doc).encode())
    plan = compute_plan(state.inputs, resolve(state.ref))
    assert plan.latency.time_to_first_token_ms == 450.0  # 20 + 10 + 400 + 20
    assert compute_plan(state.inputs, example_model()).kv_cache.bytes_per_token_per_sequence == 131_072  # 32 x 8 x (128 + 128) x 2
