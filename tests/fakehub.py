"""A small fake Hugging Face Hub for tests: a real HTTP/1.1 server on 127.0.0.1.

It answers ``HEAD``/``GET /{repo_id}/resolve/{revision}/{filename}`` the way the real Hub does
for ``huggingface_hub``: ``X-Repo-Commit``, ``ETag`` and ``Content-Length`` on success, errors
typed by the ``X-Error-Code`` header (``GatedRepo``, ``RepoNotFound``, ``RevisionNotFound``,
``EntryNotFound``), ranged GETs answered with ``206`` + ``Content-Range`` (what
``get_safetensors_metadata`` uses to read safetensors headers). Every request is recorded so a
test can assert which requests were (not) made.

Hostile modes (issue 24): a :class:`Streamed` file is served in chunks without being held in
memory, optionally with no ``Content-Length`` at all (chunked transfer encoding), so a test can
check that the client stops reading at its cap (``bytes_sent`` counts what went out);
:meth:`FakeHub.set_commit_header` makes a repo answer with any ``X-Repo-Commit`` text.

Usage::

    with FakeHub() as hub:
        sha = hub.add_repo("org/model", {"config.json": {"num_hidden_layers": 2}})
        os.environ["HF_ENDPOINT"] = hub.url
        ...
        assert hub.count("GET", "/config.json") == 1
"""

from __future__ import annotations

import hashlib
import json
import socket
import struct
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit


@dataclass(frozen=True)
class Streamed:
    """``size`` bytes of ``fill`` served in 64 KiB chunks; ``length=False``: no Content-Length on
    HEAD or GET (the GET uses chunked transfer encoding), as a hostile or broken server might."""

    size: int
    fill: bytes = b" "
    length: bool = True


FileContent = bytes | str | dict | list | Streamed


def _to_bytes(content: FileContent) -> bytes | Streamed:
    if isinstance(content, (bytes, Streamed)):
        return content
    if isinstance(content, str):
        return content.encode("utf-8")
    return json.dumps(content, indent=2).encode("utf-8")


def fake_sha(*parts: object) -> str:
    """A deterministic 40-hex commit sha built from ``parts``."""
    return hashlib.sha1("\x00".join(map(str, parts)).encode("utf-8")).hexdigest()


_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1,
                "BOOL": 1, "F8_E4M3": 1, "F8_E5M2": 1}


def make_safetensors(tensors: dict[str, tuple[str, list[int]]], *, metadata: dict | None = None, shapes: dict[str, list[int]] | None = None) -> bytes:
    """Build a real safetensors file: 8-byte little-endian header length, JSON header, zeroed data.

    ``tensors`` maps a tensor name to ``(dtype, shape)``, e.g. ``{"w": ("BF16", [4, 8])}``;
    ``shapes`` overrides the shape the header states for some tensors (a hostile header: negative
    or huge dimensions) while the data stays that of ``tensors``.
    """
    header: dict = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, (dtype, shape) in tensors.items():
        count = 1
        for dim in shape:
            count *= dim
        size = count * _DTYPE_BYTES[dtype]
        header[name] = {"dtype": dtype, "shape": list((shapes or {}).get(name, shape)), "data_offsets": [offset, offset + size]}
        offset += size
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # the format pads the header to a multiple of 8 bytes
    return struct.pack("<Q", len(raw)) + raw + bytes(offset)


@dataclass
class Recorded:
    """One request the server received."""

    method: str
    path: str
    range: str | None
    authorization: str | None
    status: int = 0


@dataclass
class _Rule:
    status: int
    code: str | None
    repo_id: str | None
    revision: str | None
    filename: str | None
    method: str | None
    message: str | None = None

    def matches(self, method: str, repo_id: str, revision: str, filename: str) -> bool:
        return all(
            want is None or want == got
            for want, got in ((self.method, method), (self.repo_id, repo_id),
                              (self.revision, revision), (self.filename, filename))
        )


@dataclass
class _Delay:
    seconds: float
    repo_id: str | None
    filename: str | None
    method: str | None

    def matches(self, method: str, repo_id: str, filename: str) -> bool:
        return all(want is None or want == got for want, got in
                   ((self.method, method), (self.repo_id, repo_id), (self.filename, filename)))


@dataclass
class _Repo:
    refs: dict[str, str] = field(default_factory=dict)  # branch or tag -> commit sha
    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)  # sha -> filename -> content
    gated: bool = False
    allowed_tokens: set[str] = field(default_factory=set)
    commit_header: str | None = None  # answer with this X-Repo-Commit instead of the real sha


class FakeHub:
    """A configurable fake Hub served by ``ThreadingHTTPServer`` in a background thread."""

    def __init__(self) -> None:
        self._repos: dict[str, _Repo] = {}
        self._rules: list[_Rule] = []
        self._delays: list[_Delay] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.requests: list[Recorded] = []
        self.bytes_sent = 0  # body bytes written for Streamed files
        self._conns: list = []  # open client sockets, closed by stop()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ----------------------------------------------------------------- configuration
    def add_repo(self, repo_id: str, files: dict[str, FileContent], *, sha: str | None = None,
                 branches: tuple[str, ...] = ("main",), tags: tuple[str, ...] = ()) -> str:
        """Add (or extend) ``repo_id`` with one commit holding ``files``; point refs at it. Returns the sha."""
        with self._lock:
            repo = self._repos.setdefault(repo_id, _Repo())
            commit = sha or fake_sha(repo_id, len(repo.commits), sorted(files))
            repo.commits[commit] = {name: _to_bytes(content) for name, content in files.items()}
            for ref in (*branches, *tags):
                repo.refs[ref] = commit
            return commit

    def gate(self, repo_id: str, *, allowed_tokens: tuple[str, ...] = ()) -> None:
        """Make ``repo_id`` gated: 401 without a token, 403 with a token not in ``allowed_tokens``."""
        with self._lock:
            repo = self._repos[repo_id]
            repo.gated = True
            repo.allowed_tokens = set(allowed_tokens)

    def set_commit_header(self, repo_id: str, value: str) -> None:
        """Answer every file of ``repo_id`` with ``X-Repo-Commit: value`` (e.g. 40 non-hex characters)."""
        with self._lock:
            self._repos[repo_id].commit_header = value

    def set_error(self, status: int, code: str | None = None, *, repo_id: str | None = None,
                  revision: str | None = None, filename: str | None = None, method: str | None = None,
                  message: str | None = None) -> None:
        """Answer matching resolve requests with ``status`` and ``X-Error-Code: code`` (None fields match all)."""
        with self._lock:
            self._rules.append(_Rule(status, code, repo_id, revision, filename, method, message))

    def set_delay(self, seconds: float, *, repo_id: str | None = None, filename: str | None = None,
                  method: str | None = None) -> None:
        """Sleep ``seconds`` before answering matching requests (interrupted when the server stops)."""
        with self._lock:
            self._delays.append(_Delay(seconds, repo_id, filename, method))

    # ----------------------------------------------------------------- inspection
    def count(self, method: str | None = None, path_contains: str | None = None) -> int:
        """Number of recorded requests with this method (any if None) whose path contains the text."""
        with self._lock:
            return sum(1 for r in self.requests
                       if (method is None or r.method == method)
                       and (path_contains is None or path_contains in r.path))

    def resolve_requests(self) -> list[Recorded]:
        """Requests for repository files (``/resolve/``), ignoring client telemetry."""
        with self._lock:
            return [r for r in self.requests if "/resolve/" in r.path]

    def reset_log(self) -> None:
        with self._lock:
            self.requests.clear()

    # ----------------------------------------------------------------- lifecycle
    @property
    def url(self) -> str:
        assert self._server is not None, "FakeHub not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fakehub", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every open (keep-alive) connection: the Hub is gone."""
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        with self._lock:
            conns, self._conns = self._conns, []
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------- request logic
    def _record(self, entry: Recorded) -> None:
        with self._lock:
            self.requests.append(entry)

    def _answer(self, method: str, path: str, authorization: str | None):
        """Return (status, headers, body, delay) for a request; body is the full file for 200."""
        if "/resolve/" not in path:
            return 404, {}, b"Not Found", 0.0
        repo_id, _, rest = path.lstrip("/").partition("/resolve/")
        revision_quoted, _, filename_quoted = rest.partition("/")
        revision, filename = unquote(revision_quoted), unquote(filename_quoted)
        with self._lock:
            delay = sum(d.seconds for d in self._delays if d.matches(method, repo_id, filename))
            rule = next((r for r in self._rules if r.matches(method, repo_id, revision, filename)), None)
            repo = self._repos.get(repo_id)
            if rule is not None:
                headers = {"X-Error-Code": rule.code} if rule.code else {}
                if rule.message:
                    headers["X-Error-Message"] = rule.message
                return rule.status, headers, b"error", delay
            if repo is None:
                return 401, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, b"", delay
            if repo.gated:
                token = (authorization or "").removeprefix("Bearer ").strip()
                if not token:
                    return 401, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Access restricted"}, b"", delay
                if token not in repo.allowed_tokens:
                    return 403, {"X-Error-Code": "GatedRepo", "X-Error-Message": "Not in authorized list"}, b"", delay
            commit = repo.refs.get(revision) or (revision if revision in repo.commits else None)
            if commit is None:
                return 404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"}, b"", delay
            content = repo.commits[commit].get(filename)
            if content is None:
                return 404, {"X-Error-Code": "EntryNotFound", "X-Error-Message": "Entry not found",
                             "X-Repo-Commit": commit}, b"", delay
            if isinstance(content, Streamed):
                etag = '"' + hashlib.sha1(b"streamed %d" % content.size + content.fill).hexdigest() + '"'
            else:
                etag = '"' + hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest() + '"'
            return 200, {"X-Repo-Commit": repo.commit_header or commit, "ETag": etag, "Accept-Ranges": "bytes",
                         "Content-Type": "application/octet-stream"}, content, delay


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeHub

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep test output quiet
        pass

    def setup(self) -> None:
        super().setup()
        with self.fake._lock:
            self.fake._conns.append(self.connection)

    def do_HEAD(self) -> None:  # noqa: N802
        self._serve("HEAD")

    def do_GET(self) -> None:  # noqa: N802
        self._serve("GET")

    def _serve(self, method: str) -> None:
        if self.fake._stop.is_set():  # stopped: a kept-alive connection must not be answered either
            self.close_connection = True
            return
        path = urlsplit(self.path).path
        entry = Recorded(method, path, self.headers.get("Range"), self.headers.get("Authorization"))
        self.fake._record(entry)
        status, headers, body, delay = self.fake._answer(method, path, entry.authorization)
        if delay and self.fake._stop.wait(delay):
            self.close_connection = True  # server stopping: drop the connection unanswered
            return
        if isinstance(body, Streamed):
            entry.status = status
            self._stream(method, status, headers, body)
            return
        if status == 200 and method == "GET" and entry.range:
            status, body, headers = self._ranged(entry.range, body, headers)
        entry.status = status
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if method == "GET":
            self.wfile.write(body)

    def _stream(self, method: str, status: int, headers: dict, body: Streamed) -> None:
        """Send a Streamed file chunk by chunk; stop quietly when the client hangs up."""
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        if body.length:
            self.send_header("Content-Length", str(body.size))
        elif method == "GET":
            self.send_header("Transfer-Encoding", "chunked")
        else:  # a HEAD without a length: nothing else on this connection, and the client is told so
            self.send_header("Connection", "close")  # (without it a pooled connection raced the close)
            self.close_connection = True
        self.end_headers()
        if method != "GET":
            return
        chunk = (body.fill * (65536 // len(body.fill) + 1))[:65536]
        left = body.size
        try:
            while left > 0 and not self.fake._stop.is_set():
                part = chunk[: min(left, len(chunk))]
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part) if not body.length else part)
                left -= len(part)
                with self.fake._lock:
                    self.fake.bytes_sent += len(part)
            if not body.length:
                self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True

    @staticmethod
    def _ranged(spec: str, body: bytes, headers: dict) -> tuple[int, bytes, dict]:
        unit, _, span = spec.partition("=")
        start_text, _, end_text = span.partition("-")
        total = len(body)
        try:
            if unit.strip() != "bytes":
                raise ValueError(unit)
            if start_text == "":  # suffix range: last N bytes
                start, end = max(total - int(end_text), 0), total - 1
            else:
                start = int(start_text)
                end = min(int(end_text), total - 1) if end_text else total - 1
        except ValueError:
            return 416, b"", {"Content-Range": f"bytes */{total}"}
        if start >= total or start > end:
            return 416, b"", {"Content-Range": f"bytes */{total}"}
        headers = {**headers, "Content-Range": f"bytes {start}-{end}/{total}"}
        return 206, body[start:end + 1], headers
