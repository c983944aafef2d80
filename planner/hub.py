"""Fetch a model's ``config.json`` from the Hugging Face Hub with the real ``huggingface_hub`` client.

What this module guarantees:

* Repo ids and revisions are validated locally before any request (:func:`parse_model_ref`).
* The resolved 40-hex commit sha is recorded so plans pin exactly what was read.
* Every call is bounded in time (``timeout_s``, 10 s by default) even though the client's own
  retries can take 40 s or more: the network work runs in a daemon worker thread, and every
  request of one fetch (config, ``hf_quant_config.json``, safetensors index and headers) counts
  against that one deadline (:class:`_FetchBudget`).
* Every download is streamed with a byte cap and never trusts ``Content-Length``: a config over
  16 MiB, a quantization config over 16 MiB, an index over 16 MiB or a safetensors header over the
  client's own 25 MB limit is refused after at most that many bytes, and nothing of it is written
  to the Hugging Face disk cache; one fetch reads at most :data:`MAX_FETCH_BYTES` and makes at most
  :data:`MAX_FETCH_REQUESTS` requests; an index naming more than :data:`MAX_SHARDS` shards is not
  read further. No progress bar is ever printed.
* The commit header must be 40 lowercase hex digits, and numbers read from safetensors headers
  (shapes) pass the same bounds as a config's (:func:`planner.weights.check_parameter_counts`).
* Offline (``HF_HUB_OFFLINE=1``) or on a network failure the Hugging Face disk cache is used and
  the result says so (``from_cache=True`` plus a note); with nothing cached the error points to
  the bundled presets in ``model_configs/``.
* A token is sent only in the ``Authorization`` header by the client. It never appears in an
  exception message, a note or a log line, and the in-process TTL cache is keyed by a hash of
  the token so two users with different tokens never share an entry. No repository code is ever
  executed (``trust_remote_code`` is never used).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TypeVar

import httpx2  # noqa: E402
from huggingface_hub import constants, get_hf_file_metadata, hf_hub_download, hf_hub_url
from huggingface_hub import errors as hf_errors  # noqa: E402
from huggingface_hub.file_download import repo_folder_name
from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

from planner import __version__, settings
from planner.config_keys import ATTENTION_HEAD_KEYS, LAYER_COUNT_KEYS, TEXT_CONFIG_KEYS
from planner.configio import MAX_CONFIG_BYTES, MAX_CONFIG_LABEL, parse_config_text
from planner.errors import (
    TOKEN_LIKE_RE,
    ConfigError,
    ConfigNotFoundError,
    GatedRepoError,
    HubError,
    HubOfflineError,
    HubTimeoutError,
    InvalidHubConfigError,
    InvalidModelRefError,
    PlannerError,
    RemoteCodeRequiredError,
    RepoNotFoundError,
    RevisionNotFoundError,
    remember_token,
    scrub_tokens,
)
from planner.limits import MAX_PARAMS, ByteBudgetCache, RateLimiter, parse_number_text, safe_json_loads
from planner.weights import check_parameter_counts

__all__ = [
    "ConfigNotFoundError",
    "GatedRepoError",
    "HubError",
    "HubModel",
    "HubOfflineError",
    "HubTimeoutError",
    "InvalidHubConfigError",
    "InvalidModelRefError",
    "RemoteCodeRequiredError",
    "RepoNotFoundError",
    "RevisionNotFoundError",
    "clear_cache",
    "fetch_model",
    "parse_model_ref",
    "resolve_token",
]

logger = logging.getLogger(__name__)

CONFIG_FILE = "config.json"
QUANT_CONFIG_FILE = "hf_quant_config.json"
SAFETENSORS_FILE = constants.SAFETENSORS_SINGLE_FILE
SAFETENSORS_INDEX = constants.SAFETENSORS_INDEX_FILE
MAX_QUANT_CONFIG_BYTES = MAX_CONFIG_BYTES  # the largest real one is 3,081,956 bytes (see planner/configio.py)
MAX_INDEX_BYTES = 16 << 20  # a safetensors index: DeepSeek-V3's 163-shard index is about 9 MB
MAX_SAFETENSORS_HEADER_BYTES = constants.SAFETENSORS_MAX_HEADER_LENGTH  # 25 MB, the client's own limit
MAX_SHARDS = 512  # shards an index may name (Llama 3.1 405B: 191; DeepSeek-V3: 163)
MAX_FETCH_BYTES = 64 << 20  # everything one fetch downloads together
MAX_FETCH_REQUESTS = MAX_SHARDS + 16  # every request one fetch makes together
SHARD_WORKERS = 8  # safetensors headers read at once
_FIRST_RANGE = 100_000  # the first ranged read of a safetensors file (as huggingface_hub does)
OFFLINE_TTL_S = 60.0  # a copy served from the disk cache is re-checked sooner
MAX_REPO_ID_LENGTH = 96
MAX_REVISION_LENGTH = 128
PRESETS_HINT = "choose one of the bundled presets (model_configs/) or load a config.json file instead"

_COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_PART = r"[A-Za-z0-9_](?:[A-Za-z0-9._-]*[A-Za-z0-9_])?"
_REPO_ID_RE = re.compile(rf"(?:{_PART}/)?{_PART}")
_REVISION_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]*")


# --------------------------------------------------------------------------- result
@dataclass(frozen=True)
class HubModel:
    """A config fetched from the Hub, pinned to the commit that was read."""

    repo_id: str
    revision: str
    commit_sha: str
    config: dict
    from_cache: bool
    quantization: dict | None
    parameter_counts: dict[str, int] | None
    weights_source: str
    notes: tuple[str, ...]


# --------------------------------------------------------------------------- validation
def _shown(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def _validate_repo_id(repo_id: object) -> str:
    if not isinstance(repo_id, str) or not repo_id:
        raise InvalidModelRefError("Model id is empty: enter it as ORG/NAME, e.g. meta-llama/Llama-3.1-8B.")
    if len(repo_id) > MAX_REPO_ID_LENGTH:
        raise InvalidModelRefError(
            f"Model id {_shown(repo_id)} is {len(repo_id)} characters long; Hub ids have at most "
            f"{MAX_REPO_ID_LENGTH}: enter it as ORG/NAME."
        )
    if TOKEN_LIKE_RE.search(repo_id):
        raise InvalidModelRefError(
            "The model id looks like an access token: put the token in the token field (or HF_TOKEN) "
            "and the model as ORG/NAME."
        )
    if not _REPO_ID_RE.fullmatch(repo_id) or ".." in repo_id or "--" in repo_id or repo_id.endswith(".git"):
        raise InvalidModelRefError(
            f"Model id {_shown(repo_id)} is not a valid Hub id: use ORG/NAME with letters, digits, "
            "'-', '_' and '.' only (no spaces, '..' or '--'), e.g. meta-llama/Llama-3.1-8B."
        )
    return repo_id


def _validate_revision(revision: object) -> str:
    if not isinstance(revision, str) or not revision:
        raise InvalidModelRefError(
            "Revision is empty: write ORG/NAME@REVISION with a branch, tag or commit sha, or leave out '@'."
        )
    if len(revision) > MAX_REVISION_LENGTH:
        raise InvalidModelRefError(
            f"Revision {_shown(revision)} is {len(revision)} characters long (at most {MAX_REVISION_LENGTH}): "
            "use a branch, tag or 40-character commit sha."
        )
    if (not _REVISION_RE.fullmatch(revision) or ".." in revision or "//" in revision
            or revision.endswith(("/", ".", ".lock"))):
        raise InvalidModelRefError(
            f"Revision {_shown(revision)} is not a valid branch, tag or commit: use letters, digits, "
            "'-', '_', '.' and '/' only, e.g. main, v1.0 or a 40-character commit sha."
        )
    return revision


def parse_model_ref(ref: str) -> tuple[str, str]:
    """Split ``"ORG/NAME[@REVISION]"`` into ``(repo_id, revision)``; the revision defaults to ``"main"``.

    No request is made.

    Raises:
        InvalidModelRefError: the text is empty, the repo id or revision breaks the Hub's naming
            rules or length limits, or ``@`` is followed by nothing.
    """
    if not isinstance(ref, str):
        raise InvalidModelRefError("Model reference must be text like ORG/NAME or ORG/NAME@REVISION.")
    text = ref.strip()
    repo_id, sep, revision = text.partition("@")
    _validate_repo_id(repo_id)
    if sep:
        _validate_revision(revision)
        return repo_id, revision
    return repo_id, constants.DEFAULT_REVISION


# --------------------------------------------------------------------------- per-session rate limit
_LIMITER: RateLimiter | None = None
_LIMITER_LOCK = threading.Lock()


def requests_per_minute() -> int:
    """Hub fetches one caller (an app session) may start per minute: ``KVP_HUB_REQUESTS_PER_MIN``.

    Default 20; 0 turns the limit off. A value that is not a plain non-negative integer is
    logged and the default used. Raises nothing.
    """
    return settings.kvp_hub_requests_per_min()


def request_wait_s(caller: str) -> float:
    """0.0 and the request is counted, or the seconds ``caller`` must wait (nothing counted).

    The app calls this with its session id before each Hub fetch, so one session cannot make the
    shared server hammer the Hub. Raises nothing.
    """
    global _LIMITER
    limit = requests_per_minute()
    if limit <= 0:
        return 0.0
    with _LIMITER_LOCK:
        if _LIMITER is None or _LIMITER.per_window != limit:
            _LIMITER = RateLimiter(limit, 60.0)
        limiter = _LIMITER
    if limiter.allow(caller):
        return 0.0
    return max(limiter.retry_after(caller), 0.1)


# --------------------------------------------------------------------------- token
def resolve_token(explicit: str | None = None) -> str | None:
    """Return the token to use: ``explicit`` (e.g. the session's password field), else ``HF_TOKEN``, else None.

    Blank strings count as absent. The value is never logged. Raises nothing.
    """
    for candidate in (explicit, settings.hf_token()):
        if candidate is not None and candidate.strip():
            token = candidate.strip()
            remember_token(token)
            return token
    return None


def _token_key(token: str | None) -> str | None:
    return hashlib.sha256(token.encode("utf-8")).hexdigest() if token else None


# --------------------------------------------------------------------------- in-process TTL cache
_CACHE = ByteBudgetCache(32 << 20)  # key -> (expiry, HubModel), bounded in bytes (planner/limits.py)
_CACHE_LOCK = threading.Lock()


def _copy_model(model: HubModel) -> HubModel:
    return replace(
        model,
        config=copy.deepcopy(model.config),
        quantization=copy.deepcopy(model.quantization),
        parameter_counts=dict(model.parameter_counts) if model.parameter_counts is not None else None,
    )


def _cache_get(key: tuple[str, str, str | None]) -> HubModel | None:
    now = time.monotonic()
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is None:
            return None
        if entry[0] <= now:  # type: ignore[index]
            _CACHE.pop(key)
            return None
        return _copy_model(entry[1])  # type: ignore[index]


def _cache_put(key: tuple[str, str, str | None], model: HubModel) -> None:
    ttl = settings.kvp_hub_ttl_s()
    if model.from_cache:
        ttl = min(ttl, OFFLINE_TTL_S)
    if ttl <= 0:
        return
    with _CACHE_LOCK:
        _CACHE.put(key, (time.monotonic() + ttl, _copy_model(model)))


def clear_cache() -> None:
    """Empty the in-process TTL cache (the Hugging Face disk cache is left alone). Raises nothing."""
    with _CACHE_LOCK:
        _CACHE.clear()


# --------------------------------------------------------------------------- environment
def _offline_mode() -> bool:
    return settings.hf_hub_offline() or bool(constants.HF_HUB_OFFLINE)


def _endpoint() -> str:
    return (settings.hf_endpoint() or constants.ENDPOINT).rstrip("/")


def _cache_dir() -> str:
    """The Hugging Face hub cache, read from the environment at call time (tests change it)."""
    value = settings.hf_hub_cache()
    if value:
        return os.path.expanduser(value)
    home = settings.hf_home()
    if home:
        return os.path.join(os.path.expanduser(home), "hub")
    return constants.HF_HUB_CACHE


class _TooLarge(Exception):
    """Internal: a download went over its byte cap (``size`` when the server announced it)."""

    def __init__(self, what: str, cap: int, size: int | None) -> None:
        super().__init__(what)
        self.what, self.cap, self.size = what, cap, size


class _FetchBudget:
    """One fetch's deadline, byte allowance and request count, shared by every request it makes.

    :meth:`get` streams a GET through huggingface_hub's own HTTP session and headers, counting
    each chunk against the file's cap and the fetch's total, and checks the deadline and the
    cancel event between chunks: no ``Content-Length`` (or a false one) cannot make it read more.
    """

    def __init__(self, deadline: float, cancel: threading.Event, token: str | None) -> None:
        self.deadline = deadline
        self.cancel = cancel
        self.token = token
        self.bytes = 0
        self.requests = 0
        self._lock = threading.Lock()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def check(self) -> None:
        if self.cancel.is_set() or self.remaining() <= 0:
            raise _Unreachable("timeout", "the Hub did not answer in time")

    def get(self, url: str, *, cap: int, what: str, byte_range: str | None = None) -> bytes:
        """The body of a GET (at most ``cap`` bytes). Raises huggingface_hub's HTTP errors,
        httpx2's transport errors, :class:`_TooLarge` or :class:`_Unreachable` (deadline)."""
        self.check()
        with self._lock:
            if self.requests >= MAX_FETCH_REQUESTS:
                raise _TooLarge(f"{what} (request {self.requests + 1})", MAX_FETCH_REQUESTS, None)
            self.requests += 1
        headers = build_hf_headers(token=self.token or False, library_name="kv-capacity-planner", library_version=__version__)
        if byte_range:
            headers["Range"] = byte_range
        try:
            return self._stream(url, headers, cap, what)
        except httpx2.TimeoutException:  # the read timeout is the fetch's deadline: one kind of lateness
            raise _Unreachable("timeout", "the Hub did not answer in time") from None

    def _stream(self, url: str, headers: dict, cap: int, what: str) -> bytes:
        timeout = httpx2.Timeout(max(self.remaining(), 0.1))
        with get_session().stream("GET", url, headers=headers, timeout=timeout, follow_redirects=True) as response:
            hf_raise_for_status(response)
            announced = parse_number_text(response.headers.get("Content-Length", ""), integer=True)
            if announced is not None and announced > cap:
                raise _TooLarge(what, cap, announced)
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                with self._lock:
                    self.bytes += len(chunk)
                    over_total = self.bytes > MAX_FETCH_BYTES
                if len(body) > cap or over_total:
                    raise _TooLarge(what, cap if len(body) > cap else MAX_FETCH_BYTES, None)
                self.check()
            return bytes(body)


def _store_in_disk_cache(repo_id: str, revision: str, commit: str, filename: str, data: bytes) -> str:
    """Write a downloaded file into the Hugging Face disk cache layout (``snapshots/<commit>/`` and
    ``refs/<revision>``) so offline and fallback lookups find it; returns its path. Only called
    with a validated commit, repo id, revision and a file that passed its byte cap."""
    root = Path(_cache_dir()) / repo_folder_name(repo_id=repo_id, repo_type="model")
    target = root / "snapshots" / commit / filename
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{filename}.{os.getpid()}.{threading.get_ident()}.incomplete")
    tmp.write_bytes(data)
    os.replace(tmp, target)
    _remember_ref(repo_id, revision, commit)
    return str(target)


def _remember_ref(repo_id: str, revision: str, commit: str) -> None:
    """``refs/<revision>`` in the disk cache names ``commit`` (how offline lookups resolve a branch or tag)."""
    if revision != commit:
        ref = Path(_cache_dir()) / repo_folder_name(repo_id=repo_id, repo_type="model") / "refs" / revision
        ref.parent.mkdir(parents=True, exist_ok=True)
        ref.write_text(commit)


def _cached_snapshot(repo_id: str, commit: str, filename: str) -> str | None:
    """Path of ``filename`` at ``commit`` in the disk cache, if it is there (no request)."""
    path = Path(_cache_dir()) / repo_folder_name(repo_id=repo_id, repo_type="model") / "snapshots" / commit / filename
    return str(path) if path.is_file() else None


# --------------------------------------------------------------------------- deadline helper
T = TypeVar("T")


class _Deadline(Exception):
    """Internal: the worker did not finish in time."""


class _Unreachable(Exception):
    """Internal: the network failed in a way the disk cache may cover."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(detail)
        self.kind = kind  # "timeout", "connection" or "server"
        self.detail = detail


def _run_with_deadline(fn: Callable[[threading.Event], T], seconds: float) -> T:
    """Run ``fn(cancel_event)`` in a daemon thread; raise :class:`_Deadline` after ``seconds``.

    A daemon thread (not a ThreadPoolExecutor, whose threads are joined at exit) so a stuck
    request never delays the process; ``cancel_event`` is set on timeout so the worker stops
    before its next request.
    """
    done = threading.Event()
    cancel = threading.Event()
    box: dict[str, object] = {}

    def target() -> None:
        try:
            box["value"] = fn(cancel)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=target, name="kvp-hub-fetch", daemon=True).start()
    if not done.wait(max(seconds, 0.0)):
        cancel.set()
        raise _Deadline()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]


# --------------------------------------------------------------------------- the fetch
def _model_page(repo_id: str) -> str:
    return f"{_endpoint()}/{repo_id}"


def _map_http_error(exc: Exception, repo_id: str, revision: str, token: str | None, filename: str) -> Exception:
    """Translate a huggingface_hub error into a HubError (or an _Unreachable for the cache fallback)."""
    if isinstance(exc, hf_errors.GatedRepoError):
        if token:
            return GatedRepoError(
                f"{repo_id} is gated and the token provided has not been granted access: accept the licence "
                f"on {_model_page(repo_id)} with the account that owns the token, then try again."
            )
        return GatedRepoError(
            f"{repo_id} is gated: accept the licence on {_model_page(repo_id)} and provide a Hugging Face "
            "token with read access (HF_TOKEN or the token field)."
        )
    if isinstance(exc, hf_errors.RepositoryNotFoundError):
        tail = ("the token provided may not have access to it" if token
                else "private repos need a token with read access (HF_TOKEN or the token field)")
        return RepoNotFoundError(
            f"Model repo {repo_id!r} was not found on the Hub: check the id (ORG/NAME as shown on the model "
            f"page); {tail}."
        )
    if isinstance(exc, hf_errors.RevisionNotFoundError):
        return RevisionNotFoundError(
            f"Revision {revision!r} does not exist in {repo_id}: use a branch, a tag or a full commit sha "
            f"listed on {_model_page(repo_id)}/tree/main, or leave the revision out for main."
        )
    if isinstance(exc, hf_errors.LocalEntryNotFoundError):  # the client's own HEAD failed and nothing was cached
        return _Unreachable("connection", f"the Hub at {_endpoint()} could not be reached")
    if isinstance(exc, hf_errors.RemoteEntryNotFoundError | hf_errors.EntryNotFoundError) and filename == CONFIG_FILE:
        return ConfigNotFoundError(
            f"{repo_id}@{revision} has no config.json, so it is not a transformers model repo (GGUF-only, "
            "adapter or dataset repos have none): use the base model's repo id or load a config file instead."
        )
    if isinstance(exc, httpx2.TimeoutException):
        return _Unreachable("timeout", "the Hub did not answer in time")
    if isinstance(exc, hf_errors.OfflineModeIsEnabled):
        return _Unreachable("connection", "offline mode is on")
    if isinstance(exc, httpx2.TransportError | ConnectionError):
        return _Unreachable("connection", f"the Hub at {_endpoint()} could not be reached")
    if isinstance(exc, hf_errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else None
        if status is not None and (status >= 500 or status == 429):
            return _Unreachable("server", f"the Hub answered HTTP {status}")
        return HubError(
            f"The Hub refused the request for {repo_id}@{revision} (HTTP {status}): check the id, "
            "the revision and your token's permissions."
        )
    return HubError(f"Unexpected error while fetching {repo_id}@{revision} ({type(exc).__name__}): try again.")


def _read_config_file(path: str, repo_id: str, where: str) -> dict:
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    try:
        return parse_config_text(data, source=f"{repo_id}/{CONFIG_FILE}")
    except ConfigError as exc:
        raise InvalidHubConfigError(
            f"config.json of {where} is not usable: {exc.reason}"
            f"{f' ({exc.value})' if exc.value else ''}; pick another revision or load a "
            "corrected config file instead."
        ) from None


def _commit_from_path(path: str) -> str | None:
    name = Path(path).parent.name
    return name if _COMMIT_RE.fullmatch(name) else None


@dataclass
class _Fetched:
    path: str
    commit_sha: str
    from_cache: bool
    note: str | None


def _too_large_config(repo_id: str, commit: str, size: int | None) -> InvalidHubConfigError:
    said = f"is {size:,} bytes" if size is not None else "streamed more than that"
    return InvalidHubConfigError(
        f"config.json of {repo_id}@{commit[:12]} {said}, over the {MAX_CONFIG_LABEL} limit for a config: it was "
        "not downloaded (nothing was written to the cache); load a config file instead."
    )


def _fetch_config_online(repo_id: str, revision: str, budget: _FetchBudget) -> _Fetched:
    """HEAD config.json (errors, size, commit), then stream it (capped) into the HF disk cache."""
    endpoint, token = _endpoint(), budget.token
    url = hf_hub_url(repo_id, CONFIG_FILE, revision=revision, endpoint=endpoint)
    try:
        budget.requests += 1
        meta = get_hf_file_metadata(
            url, token=token or False, timeout=max(budget.remaining(), 0.1),
            library_name="kv-capacity-planner", library_version=__version__, endpoint=endpoint,
        )
    except Exception as exc:  # noqa: BLE001 - translated below
        raise _map_http_error(exc, repo_id, revision, token, CONFIG_FILE) from None
    if meta.commit_hash is None or meta.etag is None:
        raise HubError(
            f"{endpoint} answered without the commit and ETag headers a Hugging Face Hub sends: check "
            "HF_ENDPOINT and your proxy settings."
        )
    if not _COMMIT_RE.fullmatch(meta.commit_hash):
        raise HubError(
            f"{endpoint} answered with commit {_shown(meta.commit_hash)}, which is not a 40-character hex "
            "commit sha as the Hub sends: check HF_ENDPOINT and your proxy settings."
        )
    commit = meta.commit_hash
    if meta.size is not None and meta.size > MAX_CONFIG_BYTES:
        raise _too_large_config(repo_id, commit, meta.size)
    cached = _cached_snapshot(repo_id, commit, CONFIG_FILE)  # the same commit was read before: no GET
    if cached is not None:
        _remember_ref(repo_id, revision, commit)
        return _Fetched(cached, commit, False, None)
    try:
        data = budget.get(hf_hub_url(repo_id, CONFIG_FILE, revision=commit, endpoint=endpoint), cap=MAX_CONFIG_BYTES, what=CONFIG_FILE)
    except _TooLarge as exc:
        raise _too_large_config(repo_id, commit, exc.size) from None
    except _Unreachable:
        raise
    except Exception as exc:  # noqa: BLE001 - translated below
        raise _map_http_error(exc, repo_id, revision, token, CONFIG_FILE) from None
    return _Fetched(_store_in_disk_cache(repo_id, revision, commit, CONFIG_FILE, data), commit, False, None)


def _fetch_config_from_disk(repo_id: str, revision: str) -> str | None:
    """Path of config.json in the HF disk cache for this revision, without any request, or None."""
    try:
        return hf_hub_download(repo_id, CONFIG_FILE, revision=revision, cache_dir=_cache_dir(),
                               local_files_only=True, token=False)
    except (hf_errors.LocalEntryNotFoundError, hf_errors.OfflineModeIsEnabled, FileNotFoundError, OSError):
        return None
    except Exception:  # noqa: BLE001 - a broken cache is treated as no cache
        logger.debug("disk cache lookup failed for %s@%s", repo_id, revision, exc_info=True)
        return None


def _has_required_fields(config: dict) -> bool:
    scopes = [config] + [config[k] for k in TEXT_CONFIG_KEYS if isinstance(config.get(k), dict)]
    has_layers = any(any(isinstance(s.get(k), int) for k in LAYER_COUNT_KEYS) for s in scopes)
    has_heads = any(any(isinstance(s.get(k), int) for k in ATTENTION_HEAD_KEYS) for s in scopes)
    return has_layers and has_heads


def _known_model_type(model_type: object) -> bool:
    if not isinstance(model_type, str) or not model_type:
        return False
    try:  # transformers is heavy (about 3 s): imported only for configs that lack the fields
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    except Exception:  # noqa: BLE001 - without transformers nothing counts as known
        return False
    return model_type in CONFIG_MAPPING_NAMES


def _check_config(config: dict, repo_id: str, where: str) -> list[str]:
    """Light check of the fields the planner needs; returns notes. See fetch_model for what it raises."""
    notes: list[str] = []
    custom_code = isinstance(config.get("auto_map"), dict)
    if _has_required_fields(config):
        if custom_code:
            notes.append("the architecture ships its own code (auto_map); it was not run, the geometry "
                         "comes from the config fields")
        return notes
    model_type = config.get("model_type")
    if _known_model_type(model_type):
        notes.append(f"config.json lists few fields; missing values come from the {model_type} defaults "
                     "in transformers")
        return notes
    if custom_code:
        raise RemoteCodeRequiredError(
            f"{repo_id} defines its architecture in repository code (auto_map) and its config.json has no "
            "layer or head counts; the planner never runs repository code: load a config file with "
            "num_hidden_layers and num_attention_heads instead."
        )
    raise InvalidHubConfigError(
        f"config.json of {where} lacks the required fields (a layer count such as num_hidden_layers and "
        "a head count such as num_attention_heads) and its model_type "
        f"{model_type!r} is unknown to transformers: load a complete config file instead."
    )


def _fetch_quant_config(repo_id: str, commit_sha: str, offline: bool, budget: _FetchBudget) -> tuple[dict | None, str | None]:
    """(hf_quant_config.json at the commit or None, a note when it was refused); never raises
    but :class:`_Unreachable` for the deadline. Streamed with a 16 MiB cap."""
    try:
        path = _cached_snapshot(repo_id, commit_sha, QUANT_CONFIG_FILE) if _COMMIT_RE.fullmatch(commit_sha) else None
        if path is not None:
            with open(path, "rb") as fh:
                data = fh.read(MAX_QUANT_CONFIG_BYTES + 1)
        elif offline:
            return None, None
        else:
            data = budget.get(hf_hub_url(repo_id, QUANT_CONFIG_FILE, revision=commit_sha, endpoint=_endpoint()), cap=MAX_QUANT_CONFIG_BYTES, what=QUANT_CONFIG_FILE)
            _store_in_disk_cache(repo_id, commit_sha, commit_sha, QUANT_CONFIG_FILE, data)
        return parse_config_text(data, source=QUANT_CONFIG_FILE), None
    except _TooLarge as exc:
        said = f"is {exc.size:,} bytes" if exc.size is not None else "streamed more than that"
        return None, f"{QUANT_CONFIG_FILE} {said}, over its {MAX_QUANT_CONFIG_BYTES >> 20} MiB limit: not read"
    except _Unreachable:
        raise
    except Exception:  # noqa: BLE001 - optional file: absent, unreadable or not JSON
        return None, None


class _BadHeader(Exception):
    """Internal: a safetensors header that is not one (the note says why)."""


def _safetensors_header(budget: _FetchBudget, repo_id: str, commit: str, filename: str) -> dict:
    """The JSON header of one safetensors file, by ranged GETs (at most two, each capped)."""
    url = hf_hub_url(repo_id, filename, revision=commit, endpoint=_endpoint())
    first = budget.get(url, cap=_FIRST_RANGE + 1, what=filename, byte_range=f"bytes=0-{_FIRST_RANGE}")
    if len(first) < 8:
        raise _BadHeader(f"{filename} is shorter than a safetensors header")
    length = int.from_bytes(first[:8], "little")
    if length > MAX_SAFETENSORS_HEADER_BYTES:
        raise _BadHeader(f"{filename} declares a {length:,}-byte header, over the {MAX_SAFETENSORS_HEADER_BYTES:,}-byte limit")
    raw = first[8 : 8 + length]
    if len(raw) < length:
        raw += budget.get(url, cap=length - len(raw), what=filename, byte_range=f"bytes={8 + len(raw)}-{8 + length - 1}")
    try:
        header = safe_json_loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _BadHeader(f"the header of {filename} is not JSON") from None
    if not isinstance(header, dict):
        raise _BadHeader(f"the header of {filename} is not a JSON object")
    return header


def _count_header(header: dict, filename: str, counts: dict[str, int]) -> None:
    """Add a header's element counts per dtype to ``counts``; every dimension a whole number >= 0
    and the product within the parameter limit, or InvalidHubConfigError (the config's bounds)."""
    for name, tensor in header.items():
        if name == "__metadata__":
            continue
        if not isinstance(tensor, dict) or not isinstance(tensor.get("dtype"), str) or not isinstance(tensor.get("shape"), list):
            raise _BadHeader(f"tensor {name[:60]!r} of {filename} has no dtype and shape")
        n = 1
        for dim in tensor["shape"]:
            if isinstance(dim, bool) or not isinstance(dim, int) or dim < 0:
                raise InvalidHubConfigError(
                    f"The safetensors header of {filename} gives tensor {name[:60]!r} the shape {str(tensor['shape'])[:60]}: every "
                    "dimension must be a whole number >= 0; the checkpoint cannot be planned from it."
                )
            n *= dim
            if n > MAX_PARAMS:
                break
        counts[tensor["dtype"]] = counts.get(tensor["dtype"], 0) + n
        if counts[tensor["dtype"]] > MAX_PARAMS:
            raise InvalidHubConfigError(
                f"The safetensors headers add up to more than {MAX_PARAMS:.0e} {tensor['dtype']} parameters (tensor {name[:60]!r} of "
                f"{filename}): the checkpoint is implausible; load a config file instead."
            )


def _shard_names(index_bytes: bytes) -> list[str]:
    try:
        index = safe_json_loads(index_bytes.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise _BadHeader(f"{SAFETENSORS_INDEX} is not JSON") from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise _BadHeader(f"{SAFETENSORS_INDEX} has no weight_map")
    names = {v for v in weight_map.values() if isinstance(v, str)}
    if len(names) > MAX_SHARDS:
        raise _BadHeader(f"{SAFETENSORS_INDEX} names {len(names):,} shards, more than {MAX_SHARDS:,}")
    bad = next((v for v in names if not v.endswith(".safetensors") or ".." in v or v.startswith("/") or len(v) > 200), None)
    if bad is not None or len(names) != len(set(weight_map.values())):
        raise _BadHeader(f"{SAFETENSORS_INDEX} names a shard that is not a .safetensors file in the repo")
    return sorted(names)


def _fetch_safetensors(repo_id: str, commit_sha: str, budget: _FetchBudget) -> tuple[dict[str, int] | None, str]:
    """(dtype -> element count, note) from the safetensors headers; counts None when unavailable.

    Raises InvalidHubConfigError when a header's shapes break the config's bounds, and
    :class:`_Unreachable` when the fetch's deadline passes."""
    estimated = "weights are estimated from the config"
    counts: dict[str, int] = {}
    try:
        try:
            files = [SAFETENSORS_FILE]
            headers = [_safetensors_header(budget, repo_id, commit_sha, SAFETENSORS_FILE)]
        except (hf_errors.RemoteEntryNotFoundError, hf_errors.EntryNotFoundError):
            index = budget.get(hf_hub_url(repo_id, SAFETENSORS_INDEX, revision=commit_sha, endpoint=_endpoint()), cap=MAX_INDEX_BYTES, what=SAFETENSORS_INDEX)
            files = _shard_names(index)
            with ThreadPoolExecutor(SHARD_WORKERS, thread_name_prefix="kvp-hub-shard") as pool:
                headers = list(pool.map(lambda f: _safetensors_header(budget, repo_id, commit_sha, f), files))
        for name, header in zip(files, headers, strict=True):
            _count_header(header, name, counts)
    except (hf_errors.RemoteEntryNotFoundError, hf_errors.EntryNotFoundError):
        return None, f"the repo has no safetensors weights; {estimated}"
    except _BadHeader as exc:
        return None, f"the safetensors headers could not be used ({exc}); {estimated}"
    except _TooLarge as exc:
        return None, f"the safetensors metadata is too large ({exc.what} over {exc.cap:,}); {estimated}"
    except (_Unreachable, InvalidHubConfigError):
        raise
    except Exception as exc:  # noqa: BLE001 - optional data
        return None, f"safetensors metadata could not be read ({type(exc).__name__}); {estimated}"
    try:
        checked = check_parameter_counts(dict(sorted(counts.items())), field="safetensors parameter counts")
    except PlannerError as exc:
        raise InvalidHubConfigError(f"The safetensors headers of {repo_id}@{commit_sha[:12]} are implausible: {exc}.") from None
    return checked, f"parameter counts read from the safetensors headers ({len(files)} file{'s' * (len(files) != 1)})"


def fetch_model(repo_id: str, revision: str = "main", *, token: str | None = None,
                timeout_s: float = 10.0, with_safetensors: bool = True) -> HubModel:
    """Fetch ``config.json`` (plus quantization hints and safetensors parameter counts) for a Hub model.

    ``token`` defaults to :func:`resolve_token` (``HF_TOKEN``). Results are kept in an in-process
    cache for ``KVP_HUB_TTL_S`` seconds (default 600), keyed by repo, revision and a hash of the
    token; files also go through the Hugging Face disk cache. The call answers within about
    ``timeout_s`` seconds: if the Hub is slow or unreachable the disk-cached copy is returned with
    ``from_cache=True`` and a note. Safetensors metadata is best effort: when it is missing or slow
    the result falls back to ``weights_source="config estimate"`` with a note.

    Raises:
        InvalidModelRefError: bad repo id or revision (before any request).
        GatedRepoError: the repo is gated and the token is missing or not granted access.
        RepoNotFoundError: no such repo, or private and the token cannot read it.
        RevisionNotFoundError: the branch, tag or commit does not exist.
        ConfigNotFoundError: the repo has no ``config.json`` at that revision.
        HubTimeoutError: no answer within ``timeout_s`` and nothing cached on disk.
        HubOfflineError: offline mode or network failure and nothing cached on disk.
        InvalidHubConfigError: ``config.json`` is over 16 MiB, not JSON, not an object, or lacks a
            layer and head count with an unknown ``model_type``.
        RemoteCodeRequiredError: the config only makes sense with repository code (``auto_map``
            without the fields); that code is never run.
        HubError: any other Hub failure (HTTP 5xx with nothing cached, a non-Hub endpoint).
    """
    token = resolve_token(token)  # first, so the token is scrubbed from every message below
    repo_id = _validate_repo_id(repo_id)
    revision = _validate_revision(revision)
    if token and (token in repo_id or token in revision):
        raise InvalidModelRefError(
            "The model reference contains your access token: put the token in the token field (or HF_TOKEN) "
            "and the model as ORG/NAME[@REVISION]."
        )
    key = (repo_id, revision, _token_key(token))
    cached = _cache_get(key)
    if cached is not None:
        return cached

    deadline = time.monotonic() + max(float(timeout_s), 0.1)
    offline = _offline_mode()
    fetched = _locate_config(repo_id, revision, token, deadline, timeout_s, offline)
    where = f"{repo_id}@{fetched.commit_sha[:12]}"
    config = _read_config_file(fetched.path, repo_id, where)
    notes = ([fetched.note] if fetched.note else []) + list(_check_config(config, repo_id, where))

    quantization = copy.deepcopy(config["quantization_config"]) if isinstance(config.get("quantization_config"), dict) else None
    extras_offline = offline or fetched.from_cache
    if fetched.from_cache:  # the config came from the disk cache after a timeout: the extras get a short budget of their own
        deadline = max(deadline, time.monotonic() + 1.0)
    parameter_counts: dict[str, int] | None = None
    if quantization is None or (with_safetensors and not extras_offline):
        quant, parameter_counts, extra_notes = _fetch_extras(
            repo_id, fetched.commit_sha, token, deadline,
            want_quant=quantization is None, want_counts=with_safetensors and not extras_offline, extras_offline=extras_offline)
        if quant is not None:
            quantization = quant
            notes.append("quantization settings read from hf_quant_config.json")
        notes.extend(extra_notes)
    if with_safetensors and extras_offline:
        notes.append("safetensors metadata needs the Hub; weights are estimated from the config")
    weights_source = "safetensors metadata" if parameter_counts is not None else "config estimate"

    model = HubModel(
        repo_id=repo_id,
        revision=revision,
        commit_sha=fetched.commit_sha,
        config=config,
        from_cache=fetched.from_cache,
        quantization=quantization,
        parameter_counts=parameter_counts,
        weights_source=weights_source,
        notes=tuple(scrub_tokens(n) for n in notes),
    )
    _cache_put(key, model)
    logger.debug("fetched %s@%s -> %s (from_cache=%s)", repo_id, revision, model.commit_sha, model.from_cache)
    return _copy_model(model)


def _locate_config(repo_id: str, revision: str, token: str | None, deadline: float, timeout_s: float, offline: bool) -> _Fetched:
    """Where ``config.json`` is on disk after the fetch: from the Hub within the deadline, else the
    disk cache with a note; raises the typed error when neither has it."""
    if offline:
        path = _fetch_config_from_disk(repo_id, revision)
        if path is None:
            raise HubOfflineError(
                f"Offline mode is on (HF_HUB_OFFLINE) and {repo_id}@{revision} is not in the local Hugging "
                f"Face cache: fetch it once while online, or {PRESETS_HINT}."
            )
        return _Fetched(path, _commit_from_path(path) or revision, True,
                        "served from the local cache (offline mode is on)")
    try:
        return _run_with_deadline(
            lambda cancel: _fetch_config_online(repo_id, revision, _FetchBudget(deadline, cancel, token)),
            deadline - time.monotonic(),
        )
    except (_Deadline, _Unreachable) as exc:
        return _config_from_cache_after(exc, repo_id, revision, timeout_s)


def _config_from_cache_after(exc: _Deadline | _Unreachable, repo_id: str, revision: str, timeout_s: float) -> _Fetched:
    """The disk-cached config after the Hub failed with ``exc``, or the typed error saying why."""
    kind = exc.kind if isinstance(exc, _Unreachable) else "timeout"
    path = _fetch_config_from_disk(repo_id, revision)
    if path is None:
        if kind == "timeout":
            raise HubTimeoutError(
                f"The Hub did not answer within {timeout_s:g} s for {repo_id}@{revision} and no copy "
                f"is cached: try again later, check HF_ENDPOINT or your proxy, or {PRESETS_HINT}."
            ) from None
        if kind == "server":
            raise HubError(
                f"The Hub is not available right now ({exc.detail}) and {repo_id}@{revision} is not "
                f"cached: try again in a few minutes, or {PRESETS_HINT}."
            ) from None
        raise HubOfflineError(
            f"Cannot reach the Hub ({exc.detail if isinstance(exc, _Unreachable) else 'network error'}) "
            f"and {repo_id}@{revision} is not in the local cache: check your connection, or "
            f"{PRESETS_HINT}."
        ) from None
    reason = (f"the Hub did not answer within {timeout_s:g} s" if kind == "timeout"
              else exc.detail if isinstance(exc, _Unreachable) else "network error")
    return _Fetched(path, _commit_from_path(path) or revision, True, f"served from the local cache ({reason})")


def _fetch_extras(repo_id: str, commit_sha: str, token: str | None, deadline: float, *, want_quant: bool,
                  want_counts: bool, extras_offline: bool) -> tuple[dict | None, dict[str, int] | None, list[str]]:
    """hf_quant_config.json and the safetensors parameter counts, within the config's deadline:
    (quantization, counts, notes); a slow Hub gives (None, None, one note)."""
    def extras(cancel: threading.Event) -> tuple[dict | None, dict[str, int] | None, list[str]]:
        budget = _FetchBudget(deadline, cancel, token)  # the same deadline as the config's
        quant, notes = None, []
        if want_quant:
            quant, quant_note = _fetch_quant_config(repo_id, commit_sha, extras_offline, budget)
            notes += [quant_note] if quant_note else []
        counts = None
        if want_counts:
            counts, note = _fetch_safetensors(repo_id, commit_sha, budget)
            notes.append(note)
        return quant, counts, notes

    try:
        return _run_with_deadline(extras, deadline - time.monotonic())
    except (_Deadline, _Unreachable):
        return None, None, ["the Hub was slow: safetensors metadata and hf_quant_config.json were not read in time; "
                            "weights are estimated from the config"]
