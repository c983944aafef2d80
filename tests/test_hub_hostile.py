"""A hostile Hub (issue 24): every download streamed with a byte cap and one deadline per fetch.

Against tests/fakehub.py on 127.0.0.1 (its Streamed files and commit-header override): a config
served without Content-Length, a 100 MiB hf_quant_config.json, an index naming 3,000 shards, a
slow 400-shard index, a non-hex commit header, safetensors shapes with a negative dimension or
adding to ~1e30 parameters, and a --json run that must print nothing on stderr.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import time
from pathlib import Path

import pytest

from planner.cli import main
from planner.hub import MAX_SHARDS, HubError, InvalidHubConfigError, fetch_model
from tests.fakehub import Streamed, make_safetensors

pytestmark = pytest.mark.usefixtures("no_internet")

MiB = 1 << 20
LLAMA = {"model_type": "llama", "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "hidden_size": 256,
         "intermediate_size": 512, "vocab_size": 1000, "max_position_embeddings": 2048, "torch_dtype": "bfloat16"}


def _cache_bytes() -> int:
    root = Path(os.environ["HF_HUB_CACHE"])
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) if root.exists() else 0


@pytest.mark.parametrize("length", [False, True], ids=["no-content-length", "content-length"])
def test_huge_config_refused_without_filling_the_cache(hub, length):
    hub.add_repo("org/huge", {"config.json": Streamed(100 * MiB, length=length)})
    with pytest.raises(InvalidHubConfigError) as err:
        fetch_model("org/huge")
    message = str(err.value)
    assert "16 MiB" in message and "\n" not in message and "nothing was written" in message
    assert _cache_bytes() < MiB  # not 100 MiB (before: the client wrote the whole body, then refused)
    assert hub.bytes_sent < 40 * MiB  # the client hung up at its cap (plus what the sockets buffered)


@pytest.mark.parametrize("length", [False, True], ids=["no-content-length", "content-length"])
def test_huge_quant_config_refused_by_size(hub, length):
    hub.add_repo("org/bigquant", {"config.json": LLAMA, "hf_quant_config.json": Streamed(100 * MiB, length=length)})
    model = fetch_model("org/bigquant")
    assert model.quantization is None and model.config == LLAMA
    assert any("hf_quant_config.json" in n and "16 MiB limit" in n for n in model.notes), model.notes
    assert hub.bytes_sent < 40 * MiB and _cache_bytes() < MiB


def test_index_of_3000_shards_is_not_read_shard_by_shard(hub):
    index = {"weight_map": {f"t{i}": f"model-{i:05d}-of-03000.safetensors" for i in range(3000)}}
    hub.add_repo("org/shards", {"config.json": LLAMA, "model.safetensors.index.json": index})
    start = time.monotonic()
    model = fetch_model("org/shards")
    assert time.monotonic() - start < 10
    assert model.parameter_counts is None
    assert any(f"3,000 shards, more than {MAX_SHARDS}" in n for n in model.notes), model.notes
    assert len(hub.resolve_requests()) <= 6  # HEAD + GET config, quant config, model.safetensors, the index (before: 3,008)


def test_slow_shards_stop_at_the_one_deadline(hub):
    shard = make_safetensors({"w": ("BF16", [4, 4])})
    files = {f"model-{i:03d}.safetensors": shard for i in range(400)}
    index = {"weight_map": {f"t{i}": name for i, name in enumerate(files)}}
    hub.add_repo("org/slowshards", {"config.json": LLAMA, "model.safetensors.index.json": index, **files})
    hub.set_delay(0.2, filename=None, method="GET", repo_id="org/slowshards")
    start = time.monotonic()
    model = fetch_model("org/slowshards", timeout_s=2.0)
    elapsed = time.monotonic() - start
    assert elapsed < 3.5  # the config, the quant config and the headers share the 2 s deadline
    assert model.parameter_counts is None and any("not read in time" in n for n in model.notes)
    time.sleep(0.5)  # the workers stop at the deadline: no request after it
    seen = len(hub.resolve_requests())
    time.sleep(1.0)
    assert len(hub.resolve_requests()) == seen < 60


def test_non_hex_commit_header_refused(hub):
    hub.add_repo("org/badsha", {"config.json": LLAMA})
    hub.set_commit_header("org/badsha", "z" * 40)
    with pytest.raises(HubError) as err:
        fetch_model("org/badsha")
    assert "not a 40-character hex commit sha" in str(err.value) and "\n" not in str(err.value)
    assert hub.count("GET", "/config.json") == 0


@pytest.mark.parametrize(("shape", "words"), [([-10_000_000, 1], "whole number >= 0"), ([10**15, 10**15], "more than 1e+14")])
def test_implausible_safetensors_shapes_refused(hub, shape, words):
    hub.add_repo("org/shape", {"config.json": LLAMA, "model.safetensors": make_safetensors({"w": ("BF16", [1])}, shapes={"w": shape})})
    with pytest.raises(InvalidHubConfigError) as err:
        fetch_model("org/shape")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_json_run_prints_no_progress_bars(hub):
    shards = {f"model-{i}.safetensors": make_safetensors({f"w{i}": ("BF16", [16, 16])}) for i in range(3)}
    index = {"weight_map": {f"w{i}": f"model-{i}.safetensors" for i in range(3)}}
    hub.add_repo("org/sharded", {"config.json": LLAMA, "model.safetensors.index.json": index, **shards})
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["inspect", "--model", "org/sharded", "--json"])
    assert code == 0, err.getvalue()
    assert err.getvalue() == ""  # before: "Parse safetensors files: 100%|..." on stderr
    assert json.loads(out.getvalue())["source"]["parameter_counts"] == {"BF16": 3 * 256}
