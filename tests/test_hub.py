"""planner.hub against a real local HTTP server (tests/fakehub.py) through HF_ENDPOINT.

No test touches the internet: the fixture points the client at 127.0.0.1, turns off the client's
telemetry, and a guard refuses name resolution of any other host.
"""

from __future__ import annotations

import logging
import time

import pytest

from planner import hub as hubmod
from planner.hub import (
    ConfigNotFoundError,
    GatedRepoError,
    HubError,
    HubModel,
    HubOfflineError,
    HubTimeoutError,
    InvalidHubConfigError,
    InvalidModelRefError,
    RemoteCodeRequiredError,
    RepoNotFoundError,
    RevisionNotFoundError,
    clear_cache,
    fetch_model,
    parse_model_ref,
    resolve_token,
)
from tests.fakehub import make_safetensors

SECRET = "hf_SECRETTOKEN123"

LLAMA = {
    "model_type": "llama",
    "architectures": ["LlamaForCausalLM"],
    "num_hidden_layers": 4,
    "num_attention_heads": 8,
    "num_key_value_heads": 2,
    "hidden_size": 256,
    "intermediate_size": 512,
    "vocab_size": 1000,
    "max_position_embeddings": 2048,
    "torch_dtype": "bfloat16",
}

MULTIMODAL = {
    "model_type": "gemma3",
    "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {
        "model_type": "gemma3_text",
        "num_hidden_layers": 34,
        "num_attention_heads": 8,
        "num_key_value_heads": 4,
        "head_dim": 256,
        "sliding_window": 1024,
        "layer_types": ["sliding_attention"] * 5 + ["full_attention"],
    },
    "vision_config": {"model_type": "siglip_vision_model", "num_hidden_layers": 27, "hidden_size": 1152},
    "mm_tokens_per_image": 256,
}


pytestmark = pytest.mark.usefixtures("no_internet")  # fixtures in tests/conftest.py


def _is_sha(value: str) -> bool:
    return len(value) == 40 and all(c in "0123456789abcdef" for c in value)


# ----------------------------------------------------------------------------- success and pinning
def test_branch_resolves_to_pinned_commit(hub):
    sha = hub.add_repo("org/tiny", {"config.json": LLAMA})
    model = fetch_model("org/tiny")
    assert isinstance(model, HubModel)
    assert model.repo_id == "org/tiny" and model.revision == "main"
    assert model.commit_sha == sha and _is_sha(model.commit_sha)
    assert model.config == LLAMA
    assert model.from_cache is False
    assert model.parameter_counts is None and model.weights_source == "config estimate"
    assert any("no safetensors" in n for n in model.notes)
    # the branch is resolved once (HEAD), then the file is read at the commit the HEAD named, so a
    # branch moving in between cannot mix two commits
    assert hub.count("HEAD", "/org/tiny/resolve/main/config.json") == 1
    assert hub.count("GET", f"/org/tiny/resolve/{sha}/config.json") == 1 and hub.count("GET", "/config.json") == 1
    # no token configured: nothing sent
    assert all(r.authorization is None for r in hub.resolve_requests())


def test_tag_and_commit_revisions(hub):
    old = hub.add_repo("org/tiny", {"config.json": {**LLAMA, "num_hidden_layers": 2}}, tags=("v1.0",))
    new = hub.add_repo("org/tiny", {"config.json": LLAMA}, branches=("main",))
    assert old != new
    by_tag = fetch_model("org/tiny", "v1.0")
    by_commit = fetch_model("org/tiny", old)
    by_branch = fetch_model(*parse_model_ref("org/tiny@main"))
    assert (by_tag.commit_sha, by_tag.config["num_hidden_layers"]) == (old, 2)
    assert (by_commit.commit_sha, by_commit.config["num_hidden_layers"]) == (old, 2)
    assert by_commit.revision == old
    assert (by_branch.commit_sha, by_branch.config["num_hidden_layers"]) == (new, 4)


def test_second_call_served_from_ttl_cache_without_requests(hub):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    first = fetch_model("org/tiny")
    seen = len(hub.requests)
    second = fetch_model("org/tiny")
    assert len(hub.requests) == seen  # not a single request
    assert second == first
    second.config["num_hidden_layers"] = 99  # callers may mutate their copy ...
    assert fetch_model("org/tiny").config["num_hidden_layers"] == 4  # ... without corrupting the cache


def test_disk_cache_avoids_second_get_after_clear_cache(hub):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    first = fetch_model("org/tiny")
    heads = hub.count("HEAD", "/resolve/main/config.json")
    clear_cache()
    again = fetch_model("org/tiny")
    assert again.commit_sha == first.commit_sha and again.from_cache is False
    # the client re-validates with HEAD but does not download the body again
    assert hub.count("GET", "/config.json") == 1
    assert hub.count("HEAD", "/resolve/main/config.json") > heads


def test_ttl_zero_disables_in_process_cache(hub, monkeypatch):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    monkeypatch.setenv("KVP_HUB_TTL_S", "0")
    fetch_model("org/tiny")
    heads = hub.count("HEAD", "/config.json")
    fetch_model("org/tiny")
    assert hub.count("HEAD", "/config.json") > heads


# ----------------------------------------------------------------------------- errors
def test_gated_without_token_is_401(hub):
    hub.add_repo("org/gated", {"config.json": LLAMA})
    hub.gate("org/gated", allowed_tokens=("hf_GOODTOKEN0000",))
    with pytest.raises(GatedRepoError) as err:
        fetch_model("org/gated")
    assert [r.status for r in hub.resolve_requests()] == [401]
    message = str(err.value)
    assert "licence" in message and "token" in message and "org/gated" in message
    assert "\n" not in message


def test_gated_with_token_not_granted_is_403(hub):
    hub.add_repo("org/gated", {"config.json": LLAMA})
    hub.gate("org/gated", allowed_tokens=("hf_GOODTOKEN0000",))
    with pytest.raises(GatedRepoError) as err:
        fetch_model("org/gated", token=SECRET)
    assert [r.status for r in hub.resolve_requests()] == [403]
    assert hub.resolve_requests()[0].authorization == f"Bearer {SECRET}"
    assert "licence" in str(err.value)
    assert SECRET not in str(err.value) and SECRET not in repr(err.value)


def test_cache_never_shared_between_tokens(hub):
    hub.add_repo("org/gated", {"config.json": LLAMA})
    hub.gate("org/gated", allowed_tokens=("hf_GOODTOKEN0000",))
    ok = fetch_model("org/gated", token="hf_GOODTOKEN0000")
    assert ok.config == LLAMA
    # the config is now in both the TTL cache and the disk cache; another user must not get it
    with pytest.raises(GatedRepoError):
        fetch_model("org/gated", token=SECRET)
    with pytest.raises(GatedRepoError):
        fetch_model("org/gated")


def test_token_from_environment(hub, monkeypatch):
    hub.add_repo("org/gated", {"config.json": LLAMA})
    hub.gate("org/gated", allowed_tokens=("hf_GOODTOKEN0000",))
    monkeypatch.setenv("HF_TOKEN", "hf_GOODTOKEN0000")
    assert fetch_model("org/gated").config == LLAMA
    assert "?" not in "".join(r.path for r in hub.requests)  # never in a URL


def test_missing_repo(hub):
    with pytest.raises(RepoNotFoundError) as err:
        fetch_model("org/absent")
    assert "check the id" in str(err.value) and "private" in str(err.value)


def test_missing_revision(hub):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    with pytest.raises(RevisionNotFoundError) as err:
        fetch_model("org/tiny", "no-such-branch")
    assert "'no-such-branch'" in str(err.value)


def test_missing_config_json(hub):
    hub.add_repo("org/gguf-only", {"model.gguf": b"GGUF"})
    with pytest.raises(ConfigNotFoundError) as err:
        fetch_model("org/gguf-only")
    assert "config.json" in str(err.value)


def test_server_error_without_cache(hub):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    hub.set_error(503, repo_id="org/tiny")
    with pytest.raises(HubError) as err:
        fetch_model("org/tiny")
    assert "503" in str(err.value) and "try again" in str(err.value)


def test_malformed_json(hub):
    hub.add_repo("org/broken", {"config.json": b'{"num_hidden_layers": 4,'})
    with pytest.raises(InvalidHubConfigError) as err:
        fetch_model("org/broken")
    assert "not valid JSON" in str(err.value)


def test_config_not_an_object(hub):
    hub.add_repo("org/list", {"config.json": [1, 2, 3]})
    with pytest.raises(InvalidHubConfigError, match="JSON object"):
        fetch_model("org/list")


def test_oversized_config_refused_before_download(hub):
    big = b'{"model_type": "llama", "pad": "' + b"x" * (16 * 1024 * 1024 + 10) + b'"}'
    hub.add_repo("org/huge", {"config.json": big})
    with pytest.raises(InvalidHubConfigError) as err:
        fetch_model("org/huge")
    assert "16 MiB" in str(err.value)
    assert hub.count("HEAD", "/config.json") == 1
    assert hub.count("GET", "/config.json") == 0  # refused from the HEAD size, never downloaded


def test_missing_required_fields(hub):
    hub.add_repo("org/odd", {"config.json": {"model_type": "not-a-real-arch", "hidden_size": 8}})
    with pytest.raises(InvalidHubConfigError, match="required fields"):
        fetch_model("org/odd")


def test_required_fields_are_the_names_the_geometry_reads(hub):
    # GPT-Neo, T5 and Mamba-2 name a head count num_heads, which the geometry does not read (in
    # Mamba-2 it counts SSM heads): such a config lacks the required fields at the Hub already
    config = {"model_type": "not-a-real-arch", "num_hidden_layers": 4, "num_heads": 8, "hidden_size": 64}
    hub.add_repo("org/num-heads", {"config.json": config})
    with pytest.raises(InvalidHubConfigError, match="required fields"):
        fetch_model("org/num-heads")
    renamed = {"n_heads" if k == "num_heads" else k: v for k, v in config.items()}  # MPT's name
    hub.add_repo("org/n-heads", {"config.json": renamed})
    assert fetch_model("org/n-heads").config["n_heads"] == 8


def test_remote_code_without_fields_refused(hub):
    config = {"model_type": "my_custom_arch", "auto_map": {"AutoConfig": "configuration_x.XConfig"}}
    hub.add_repo("org/custom", {"config.json": config, "configuration_x.py": "raise SystemExit('ran!')"})
    with pytest.raises(RemoteCodeRequiredError, match="never runs repository code"):
        fetch_model("org/custom")
    assert hub.count(path_contains=".py") == 0  # repository code is not even downloaded


def test_remote_code_with_fields_computed_from_config(hub):
    config = {**LLAMA, "model_type": "my_custom_arch", "auto_map": {"AutoConfig": "configuration_x.XConfig"}}
    hub.add_repo("org/custom", {"config.json": config})
    model = fetch_model("org/custom")
    assert model.config == config
    assert any("auto_map" in n and "not run" in n for n in model.notes)


# ----------------------------------------------------------------------------- time bound
def test_slow_server_bounded_by_default_timeout(hub):
    hub.add_repo("org/slow", {"config.json": LLAMA})
    hub.set_delay(30, repo_id="org/slow")
    start = time.monotonic()
    with pytest.raises(HubTimeoutError) as err:
        fetch_model("org/slow")  # default timeout_s=10
    elapsed = time.monotonic() - start
    assert 9 <= elapsed < 15
    assert "10 s" in str(err.value) and "model_configs" in str(err.value)


def test_slow_server_with_disk_cache_serves_cached_copy(hub):
    sha = hub.add_repo("org/slow", {"config.json": LLAMA})
    fetch_model("org/slow")
    clear_cache()
    hub.set_delay(30, repo_id="org/slow")
    start = time.monotonic()
    model = fetch_model("org/slow", timeout_s=1.5)
    assert time.monotonic() - start < 4
    assert model.from_cache is True and model.commit_sha == sha and model.config == LLAMA
    assert any("local cache" in n and "1.5 s" in n for n in model.notes)


def test_slow_safetensors_falls_back_to_config_estimate(hub):
    st = make_safetensors({"w": ("BF16", [8, 8])})
    hub.add_repo("org/slowst", {"config.json": LLAMA, "model.safetensors": st})
    hub.set_delay(30, repo_id="org/slowst", filename="model.safetensors")
    start = time.monotonic()
    model = fetch_model("org/slowst", timeout_s=1.5)
    assert time.monotonic() - start < 4
    assert model.parameter_counts is None and model.weights_source == "config estimate"
    assert any("not read in time" in n for n in model.notes)


# ----------------------------------------------------------------------------- safetensors, quantization
def test_safetensors_metadata_by_ranged_get(hub):
    st = make_safetensors({
        "model.embed_tokens.weight": ("BF16", [1000, 256]),  # 512,000 bytes: larger than the first range
        "model.layers.0.self_attn.q_proj.weight": ("BF16", [256, 256]),
        "model.norm.weight": ("F32", [256]),
    }, metadata={"format": "pt"})
    hub.add_repo("org/st", {"config.json": LLAMA, "model.safetensors": st})
    model = fetch_model("org/st")
    assert model.parameter_counts == {"BF16": 1000 * 256 + 256 * 256, "F32": 256}
    assert model.weights_source == "safetensors metadata"
    ranged = [r for r in hub.requests if r.method == "GET" and "model.safetensors" in r.path]
    assert ranged and all(r.range and r.status == 206 for r in ranged)
    assert all(f"/resolve/{model.commit_sha}/" in r.path for r in ranged)  # pinned to the same commit


def test_sharded_safetensors_counts_summed(hub):
    shard1 = make_safetensors({"a": ("BF16", [16, 16])})
    shard2 = make_safetensors({"b": ("BF16", [16]), "c": ("F8_E4M3", [32, 4])})
    index = {"metadata": {"total_size": 1}, "weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors",
                                                           "c": "model-2.safetensors"}}
    hub.add_repo("org/sharded", {"config.json": LLAMA, "model.safetensors.index.json": index,
                                 "model-1.safetensors": shard1, "model-2.safetensors": shard2})
    model = fetch_model("org/sharded")
    assert model.parameter_counts == {"BF16": 256 + 16, "F8_E4M3": 128}
    assert any("2 files" in n for n in model.notes)


def test_without_safetensors_flag_makes_no_weight_requests(hub):
    hub.add_repo("org/st", {"config.json": LLAMA, "model.safetensors": make_safetensors({"w": ("F32", [4])})})
    model = fetch_model("org/st", with_safetensors=False)
    assert model.parameter_counts is None and model.weights_source == "config estimate"
    assert hub.count(path_contains="safetensors") == 0


def test_quantization_from_config(hub):
    quant = {"quant_method": "fp8", "weight_block_size": [128, 128]}
    hub.add_repo("org/fp8", {"config.json": {**LLAMA, "quantization_config": quant}})
    model = fetch_model("org/fp8")
    assert model.quantization == quant
    assert hub.count(path_contains="hf_quant_config.json") == 0


def test_quantization_from_hf_quant_config(hub):
    quant = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
    hub.add_repo("org/modelopt", {"config.json": LLAMA, "hf_quant_config.json": quant})
    model = fetch_model("org/modelopt")
    assert model.quantization == quant
    assert any("hf_quant_config.json" in n for n in model.notes)
    assert fetch_model.__module__ == "planner.hub"


# ----------------------------------------------------------------------------- multimodal
def test_nested_multimodal_config_intact(hub):
    hub.add_repo("org/mm", {"config.json": MULTIMODAL})
    model = fetch_model("org/mm")
    assert model.config == MULTIMODAL
    assert model.config["text_config"]["layer_types"][-1] == "full_attention"


def test_sparse_multimodal_config_accepted_by_model_type(hub):
    sparse = {"model_type": "llava", "text_config": {"model_type": "llama"}, "vision_config": {}}
    hub.add_repo("org/llava", {"config.json": sparse})
    model = fetch_model("org/llava")
    assert model.config == sparse
    assert any("llava defaults" in n for n in model.notes)


# ----------------------------------------------------------------------------- validation
@pytest.mark.parametrize("ref", ["../etc", "a" * 200, "org/na me", "org/name@", "", "org/name/extra",
                                 "org--x/name", "org/name@../main", "org/name@" + "r" * 200, "org/näme",
                                 "hf_" + "Ab1" * 12])
def test_invalid_refs_refused_before_any_request(hub, ref):
    with pytest.raises(InvalidModelRefError) as err:
        parse_model_ref(ref)
    assert "\n" not in str(err.value)
    repo_id, _, revision = ref.partition("@")
    with pytest.raises(InvalidModelRefError):
        fetch_model(repo_id, revision if "@" in ref else "main")
    assert hub.requests == []


def test_invalid_revision_argument_refused(hub):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    for bad in ("", "main/", "a b", "-x", "v1..2"):
        with pytest.raises(InvalidModelRefError):
            fetch_model("org/tiny", bad)
    assert hub.requests == []


@pytest.mark.parametrize("ref,expected", [
    ("meta-llama/Llama-3.1-8B", ("meta-llama/Llama-3.1-8B", "main")),
    ("  org/name@v1.0 ", ("org/name", "v1.0")),
    ("org/name@refs/pr/12", ("org/name", "refs/pr/12")),
    ("gpt2", ("gpt2", "main")),
    ("org/name@" + "0" * 40, ("org/name", "0" * 40)),
])
def test_parse_model_ref_valid(ref, expected):
    assert parse_model_ref(ref) == expected


def test_resolve_token_precedence(monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert resolve_token() is None
    assert resolve_token("  ") is None
    monkeypatch.setenv("HF_TOKEN", "hf_FROMENV")
    assert resolve_token() == "hf_FROMENV"
    assert resolve_token("hf_EXPLICIT") == "hf_EXPLICIT"
    assert resolve_token("") == "hf_FROMENV"


# ----------------------------------------------------------------------------- token secrecy
def test_token_never_in_error_messages_or_logs(hub, caplog, monkeypatch):
    caplog.set_level(logging.DEBUG)
    hub.add_repo("org/gated", {"config.json": LLAMA})
    hub.gate("org/gated")
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    hub.add_repo("org/broken", {"config.json": b"{oops"})
    hub.add_repo("org/noconf", {"README.md": "hi"})
    hub.add_repo("org/down", {"config.json": LLAMA})
    hub.set_error(500, repo_id="org/down")
    cases = [("org/gated", "main"), ("org/absent", "main"), ("org/tiny", "nope"), ("org/noconf", "main"),
             ("org/broken", "main"), ("org/down", "main"), (SECRET, "main"), ("org/tiny", SECRET + "/")]
    messages = []
    for repo_id, revision in cases:
        with pytest.raises(HubError) as err:
            fetch_model(repo_id, revision, token=SECRET)
        messages += [str(err.value), repr(err.value), str(err.value.__cause__ or "")]
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOfflineError) as err:
        fetch_model("org/other", token=SECRET)
    messages.append(str(err.value))
    assert all(SECRET not in m for m in messages), [m for m in messages if SECRET in m]
    assert SECRET not in caplog.text
    assert all(SECRET not in r.path for r in hub.requests)


# ----------------------------------------------------------------------------- offline
def test_offline_mode_served_from_cache(hub, monkeypatch):
    sha = hub.add_repo("org/tiny", {"config.json": LLAMA}, tags=("v1.0",))
    fetch_model("org/tiny")
    fetch_model("org/tiny", "v1.0")
    clear_cache()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    seen = len(hub.requests)
    for revision in ("main", "v1.0", sha):
        model = fetch_model("org/tiny", revision)
        assert model.from_cache is True and model.commit_sha == sha and model.config == LLAMA
        assert any("local cache" in n and "offline" in n for n in model.notes)
    assert len(hub.requests) == seen  # offline: no request at all


def test_offline_mode_nothing_cached_points_to_presets(hub, monkeypatch):
    hub.add_repo("org/tiny", {"config.json": LLAMA})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(HubOfflineError) as err:
        fetch_model("org/tiny")
    assert "model_configs" in str(err.value)
    assert hub.requests == []


def test_network_failure_falls_back_to_cache(hub, monkeypatch):
    sha = hub.add_repo("org/tiny", {"config.json": LLAMA})
    fetch_model("org/tiny")
    clear_cache()
    hub.stop()  # the Hub goes away: connections are refused
    start = time.monotonic()
    model = fetch_model("org/tiny")
    assert model.from_cache is True and model.commit_sha == sha
    assert any("local cache" in n for n in model.notes)
    with pytest.raises(HubOfflineError, match="model_configs"):
        fetch_model("org/never-fetched")
    assert time.monotonic() - start < 10


def test_module_exports_match_brief():
    for name in ("HubError", "InvalidModelRefError", "GatedRepoError", "RepoNotFoundError",
                 "RevisionNotFoundError", "ConfigNotFoundError", "HubTimeoutError", "HubOfflineError",
                 "InvalidHubConfigError", "RemoteCodeRequiredError"):
        cls = getattr(hubmod, name)
        assert issubclass(cls, HubError) and cls.__doc__
    for fn in (hubmod.fetch_model, hubmod.parse_model_ref):
        assert "Raises:" in fn.__doc__
