"""Generate the benchmark-result fixtures the importers are tested on, with the tools themselves.

The files under ``tests/data/bench/`` are real outputs of ``vllm bench serve`` (vLLM 0.33.0),
``guidellm run`` (guidellm 0.8.1), ``aiperf profile`` (aiperf 0.13.0: its ``profile_export_aiperf.json``)
and a ``/metrics`` scrape whose text vLLM's own
Prometheus logger (``vllm.v1.metrics.loggers.PrometheusStatLogger``) wrote, all run against a small
fake OpenAI-compatible server this script starts on 127.0.0.1. CI never installs these tools:
the files are committed; this script is how they were made.

The fake server answers ``/v1/models``, ``/v1/completions`` and ``/v1/chat/completions``
(streamed as server-sent events, ``max_tokens`` tokens a request) with a timing of its own:
TTFT = 20 ms + 0.02 ms a prompt token, then one token every 4 ms + 0.05 ms per running request.
Each request's TTFT, inter-token gaps and end-to-end time are recorded through vLLM's logger
with the running and waiting counts and a KV usage of running x (prompt + output) / 100,000
tokens; ``/metrics`` serves ``prometheus_client.generate_latest()``.

Run (each tool in its own throw-away venv, outside the repo)::

    python3 -m venv VLLM_VENV && VLLM_VENV/bin/pip install vllm==0.33.0
    python3 -m venv GUIDELLM_VENV && GUIDELLM_VENV/bin/pip install guidellm==0.8.1
    python3 -m venv AIPERF_VENV && AIPERF_VENV/bin/pip install aiperf==0.13.0
    VLLM_VENV/bin/python scripts/gen_bench_fixtures.py --guidellm GUIDELLM_VENV/bin/guidellm --aiperf AIPERF_VENV/bin/aiperf --out tests/data/bench

``--only aiperf`` runs aiperf alone and leaves the other files as they are (how its file was added).

(guidellm 0.8 pulls a CUDA torch build: about 6 GB in its venv.)

The tokenizer both clients use is a word-level one this script writes (``tok<i>`` words), so no
model is downloaded; ``HF_HUB_OFFLINE=1`` is set for the tools.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

MODEL = "fake/planner-bench-model"
VOCAB = 4000
ISL, OSL = 512, 64  # the workload every run sends (the plan fixture beside these files uses the same)


def write_tokenizer(folder: Path) -> None:
    """A word-level tokenizer: ``tok0`` ... ``tok3999`` plus ``<unk>`` and ``</s>`` (transformers' fast tokenizer files)."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"<unk>": 0, "</s>": 1, **{f"tok{i}": i + 2 for i in range(VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    # <unk> is not declared special: guidellm's synthetic prompts are a corpus's words, all <unk> here,
    # and decoding with skip_special_tokens would drop them all (the prompts reached the server empty)
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "</s>", "model_max_length": 1 << 20}))
    (folder / "special_tokens_map.json").write_text(json.dumps({"eos_token": "</s>"}))
    llama = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 2,
             "num_key_value_heads": 2, "vocab_size": VOCAB + 2, "max_position_embeddings": 4096, "torch_dtype": "bfloat16"}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(llama))


class Engine:
    """The fake server's timing and its vLLM metrics."""

    def __init__(self, folder: Path) -> None:
        from vllm.v1.metrics.loggers import PrometheusStatLogger

        self.lock = threading.Lock()
        self.running = 0
        self.logger = PrometheusStatLogger(_vllm_config(folder), [0])

    def ttft_s(self, prompt_tokens: int) -> float:
        return 0.020 + 0.00002 * prompt_tokens

    def itl_s(self) -> float:
        return 0.004 + 0.00005 * self.running

    def record(self, ttft: float, itls: list[float], e2e: float, prompt_tokens: int, output_tokens: int, max_tokens: int) -> None:
        from vllm.v1.engine import FinishReason
        from vllm.v1.metrics.stats import FinishedRequestStats, IterationStats, SchedulerStats

        it = IterationStats()
        it.time_to_first_tokens_iter.append(ttft)
        it.inter_token_latencies_iter.extend(itls)
        it.num_generation_tokens = output_tokens
        it.prompt_token_stats.computed = prompt_tokens
        it.finished_requests.append(
            FinishedRequestStats(
                finish_reason=FinishReason.LENGTH, e2e_latency=e2e, num_prompt_tokens=prompt_tokens, num_generation_tokens=output_tokens,
                max_tokens_param=max_tokens, prefill_time=ttft, inference_time=e2e, decode_time=e2e - ttft,
                mean_time_per_output_token=(e2e - ttft) / max(1, output_tokens - 1),
            )
        )  # fmt: skip
        with self.lock:
            sched = SchedulerStats(num_running_reqs=self.running, num_waiting_reqs=0, kv_cache_usage=min(1.0, self.running * (ISL + OSL) / 100_000))
            self.logger.record(sched, it, engine_idx=0)


def _vllm_config(folder: Path):
    """A real VllmConfig for the logger (its labels and the cache config), from the tiny config.json
    beside the tokenizer (RECIPES: EngineArgs(...).create_engine_config() on a CPU, device type "cuda")."""
    from vllm.engine.arg_utils import EngineArgs
    from vllm.platforms import current_platform

    current_platform.device_type = "cuda"
    args = EngineArgs(model=str(folder), tokenizer=str(folder), skip_tokenizer_init=True, max_model_len=ISL + OSL + 64, served_model_name=[MODEL], enforce_eager=True)
    return args.create_engine_config()


def _text(content: object) -> str:
    """A chat message's text: a string, or the text parts of a list of content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


def make_handler(engine: Engine):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_):  # quiet
            pass

        def _json(self, code: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # noqa: N802
            if self.path.startswith("/v1/models"):
                return self._json(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "owned_by": "planner", "max_model_len": 1 << 16}]})
            if self.path.startswith("/health"):
                return self._json(200, {})
            if self.path.startswith("/metrics"):
                import prometheus_client

                data = prometheus_client.generate_latest()
                self.send_response(200)
                self.send_header("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
                return None
            return self._json(404, {"error": "not found"})

        def do_POST(self):  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
            chat = self.path.startswith("/v1/chat/completions")
            if not (chat or self.path.startswith("/v1/completions")):
                return self._json(404, {"error": "not found"})
            prompt = " ".join(_text(m.get("content")) for m in body.get("messages", [])) if chat else body.get("prompt", "")
            prompt_tokens = len(str(prompt).split())
            max_tokens = int(body.get("max_tokens") or body.get("max_completion_tokens") or 16)
            start = time.perf_counter()
            with engine.lock:
                engine.running += 1
            try:
                self._stream(body, chat, prompt_tokens, max_tokens, start)
            finally:
                with engine.lock:
                    engine.running -= 1
            return None

        def _stream(self, body: dict, chat: bool, prompt_tokens: int, max_tokens: int, start: float) -> None:
            stream = bool(body.get("stream"))
            rid = f"cmpl-{int(start * 1e6)}"
            kind = "chat.completion.chunk" if chat else "text_completion"
            time.sleep(engine.ttft_s(prompt_tokens))
            first = time.perf_counter()
            stamps = [first]
            if stream:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
            for i in range(max_tokens):
                if i:
                    time.sleep(engine.itl_s())
                    stamps.append(time.perf_counter())
                if stream:
                    piece = f"tok{(i * 7) % VOCAB} "
                    choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
                    choice["finish_reason"] = "length" if i == max_tokens - 1 else None
                    self._chunk({"id": rid, "object": kind, "created": int(start), "model": MODEL, "choices": [choice]})
            usage = {"prompt_tokens": prompt_tokens, "completion_tokens": max_tokens, "total_tokens": prompt_tokens + max_tokens}
            end = time.perf_counter()
            if stream:
                self._chunk({"id": rid, "object": kind, "created": int(start), "model": MODEL, "choices": [], "usage": usage})
                done = b"data: [DONE]\n\n"
                self.wfile.write(f"{len(done):x}\r\n".encode() + done + b"\r\n0\r\n\r\n")
            else:
                text = " ".join(f"tok{(i * 7) % VOCAB}" for i in range(max_tokens))
                choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "length"} if chat else {"index": 0, "text": text, "finish_reason": "length"}
                self._json(200, {"id": rid, "object": "chat.completion" if chat else "text_completion", "created": int(start), "model": MODEL, "choices": [choice], "usage": usage})
            gaps = [b - a for a, b in zip(stamps, stamps[1:], strict=False)]
            engine.record(first - start, gaps, end - start, prompt_tokens, max_tokens, max_tokens)

        def _chunk(self, payload: dict) -> None:
            line = b"data: " + json.dumps(payload).encode() + b"\n\n"
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()

    return Handler


class Scraper(threading.Thread):
    """Scrapes ``/metrics`` every 0.2 s and keeps the text with the most running requests."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url, self.best, self.most, self.done = url, b"", -1.0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.2):
            with urllib.request.urlopen(self.url, timeout=10) as resp:  # noqa: S310 - loopback
                text = resp.read()
            running = [float(line.rsplit(b" ", 1)[1]) for line in text.splitlines() if line.startswith(b"vllm:num_requests_running{")]
            if running and running[0] > self.most:
                self.best, self.most = text, running[0]

    def stop(self) -> None:
        self.done.set()
        self.join()


def run(cmd: list[str], env: dict, log: Path) -> None:
    print("+", " ".join(cmd), flush=True)
    with log.open("a") as fh:
        fh.write("+ " + " ".join(cmd) + "\n")
        fh.flush()
        subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT, check=True, timeout=900)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/bench")
    ap.add_argument("--guidellm", help="the guidellm executable of its venv (skipped when absent)")
    ap.add_argument("--aiperf", help="the aiperf executable of its venv (skipped when absent)")
    ap.add_argument("--only", choices=["aiperf"], help="run this tool alone, keeping the other files (default: every tool)")
    ap.add_argument("--port", type=int, default=18731)
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    base = f"http://127.0.0.1:{args.port}"
    with tempfile.TemporaryDirectory() as tmp:
        tok = Path(tmp) / "tokenizer"
        write_tokenizer(tok)
        engine = Engine(tok)
        server = ThreadingHTTPServer(("127.0.0.1", args.port), make_handler(engine))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
        log = out / "generate.log"
        log.write_text("")
        if args.aiperf:
            run_aiperf(args.aiperf, base, tok, out, env, log)
        if args.only:
            server.shutdown()
            versions = json.loads((out / "versions.json").read_text()) | {"aiperf": _tool_version(args.aiperf, "aiperf")}
            (out / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
            print(json.dumps(versions))
            return 0
        vllm = [sys.executable, "-m", "vllm.entrypoints.cli.main", "bench", "serve", "--backend", "openai", "--base-url", base, "--model", MODEL, "--tokenizer", str(tok),
                "--dataset-name", "random", "--input-len", str(ISL), "--output-len", str(OSL), "--ignore-eos", "--save-result", "--result-dir", str(out),
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99", "--seed", "0"]  # fmt: skip
        run([*vllm, "--num-prompts", "48", "--request-rate", "8", "--result-filename", "vllm_bench_rate8.json"], env, log)
        busiest = Scraper(base + "/metrics")  # a scrape under load: the one that saw the most running requests
        busiest.start()
        run([*vllm, "--num-prompts", "48", "--max-concurrency", "8", "--result-filename", "vllm_bench_c8.json"], env, log)
        busiest.stop()
        (out / "vllm_metrics.prom").write_bytes(busiest.best)
        if args.guidellm:
            gl = [args.guidellm, "run", "--backend", f"kind=openai_http,target={base},model={MODEL}", "--tokenizer", f"kind=hf_auto,model={tok}",
                  "--data", f"kind=synthetic_text,prompt_tokens={ISL},output_tokens={OSL}", "--profile", "kind=constant,rate=4",
                  "--constraint", "kind=max_requests,count=32", "--output", f"kind=json,path={out / 'guidellm_rate4.json'}", "--disable-progress"]  # fmt: skip
            run(gl, env, log)
    server.shutdown()
    versions = {"vllm": _version("vllm"), "guidellm": _tool_version(args.guidellm, "guidellm"), "aiperf": _tool_version(args.aiperf, "aiperf"), "isl": ISL, "osl": OSL, "model": MODEL}
    (out / "versions.json").write_text(json.dumps(versions, indent=2) + "\n")
    print(json.dumps(versions))
    return 0


def _version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _tool_version(exe: str | None, name: str) -> str | None:
    """The version of ``name`` in the venv of its executable ``exe`` (None when not run)."""
    if not exe:
        return None
    py = Path(exe).with_name("python")
    return subprocess.run([str(py), "-c", f"from importlib.metadata import version; print(version({name!r}))"], capture_output=True, text=True, check=True).stdout.strip()


def run_aiperf(exe: str, base: str, tok: Path, out: Path, env: dict, log: Path) -> None:
    """``aiperf profile`` at 4 concurrent streamed chat requests, 32 of them; its
    ``profile_export_aiperf.json`` is kept as ``aiperf_c4.json`` (the CSV, JSONL records and logs are not), its
    temporary folders' paths replaced by ``TOKENIZER_DIR`` and ``ARTIFACT_DIR``."""
    with tempfile.TemporaryDirectory() as art:
        cmd = [exe, "profile", "--model", MODEL, "--url", base, "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tok),
               "--isl", str(ISL), "--isl-stddev", "0", "--osl", str(OSL), "--extra-inputs", "ignore_eos:true", "--concurrency", "4", "--request-count", "32",
               "--random-seed", "0", "--ui-type", "none", "--no-server-metrics", "--no-gpu-telemetry", "--artifact-dir", art]  # fmt: skip
        # aiperf 0.13 reads HF_HUB_OFFLINE=1 as "a Hub repo id in the cache" and refuses a local tokenizer folder;
        # online it loads the folder as a path: point the Hub at a closed loopback port so nothing leaves the machine
        run(cmd, {k: v for k, v in env.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")} | {"HF_ENDPOINT": "http://127.0.0.1:9"}, log)
        found = sorted(Path(art).rglob("profile_export_aiperf.json"))
        if not found:
            raise SystemExit(f"aiperf wrote no profile_export_aiperf.json under {art}")
        # the run's temporary folders (tokenizer, artifacts) are the only paths of the machine in it: placeholders instead
        text = found[0].read_text(encoding="utf-8").replace(str(tok), "TOKENIZER_DIR").replace(art, "ARTIFACT_DIR")
        (out / "aiperf_c4.json").write_text(text, encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
