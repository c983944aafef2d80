"""``make serve WORKERS=N``: N Streamlit processes behind nginx, as Streamlit is deployed for a team.

    python scripts/serve.py --workers 2 --host 0.0.0.0 --port 8501 -- streamlit run app.py [flags] [-- app args]

* Each worker is the given Streamlit command on its own loopback port (``--port`` + 1 ... + N),
  all with one shared ``server.cookieSecret`` (XSRF tokens signed by one worker are valid on all).
* nginx (Debian's package; ``make system-deps`` installs it) listens on ``--host:--port`` and
  proxies HTTP and the ``/_stcore/stream`` websocket (``Upgrade`` and ``Connection`` headers, an
  idle timeout of a day). A Streamlit session lives in one process, so requests are routed with
  session affinity: nginx sets a ``kvp_route`` cookie on the first response (a fresh request id)
  and hashes on it (``hash ... consistent``), so a browser's page, websocket, uploads and media
  always reach the same worker; clients behind one address still spread over the workers.
* Health: the script waits until every worker answers ``/_stcore/health`` before nginx starts,
  nginx stops routing to a worker that fails (``max_fails=1 fail_timeout=5s``), and the script
  polls every worker's health every ``--check-s`` seconds and restarts one that died or stopped
  answering three times in a row. ``GET /_stcore/health`` through nginx answers ``ok``.
* Ctrl-C or SIGTERM stops nginx and every worker. Nothing is written outside a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MAX_WORKERS = 64

NGINX_CONF = """\
worker_processes 1;
{user}pid {tmp}/nginx.pid;
error_log {tmp}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    client_max_body_size 17m;  # .streamlit/config.toml maxUploadSize = 16 (MiB), plus the form
    map $cookie_kvp_route $kvp_route {{
        "" $request_id;
        default $cookie_kvp_route;
    }}
    map $http_upgrade $connection_upgrade {{
        default upgrade;
        "" close;
    }}
    upstream streamlit {{
        hash $kvp_route consistent;  # session affinity: one browser, one worker
{servers}
    }}
    server {{
        listen {listen};
        location / {{
            proxy_pass http://streamlit;
            proxy_http_version 1.1;
            proxy_set_header Host $host;
            proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
            proxy_set_header X-Forwarded-Proto $scheme;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 86400s;
            proxy_send_timeout 86400s;
            proxy_buffering off;
            add_header Set-Cookie "kvp_route=$kvp_route; Path=/; HttpOnly; SameSite=Lax" always;
        }}
    }}
}}
"""


def nginx_config(tmp: str, listen: str, ports: list[int]) -> str:
    """The nginx configuration for workers on ``ports`` (loopback), listening on ``listen``."""
    servers = "\n".join(f"        server 127.0.0.1:{p} max_fails=1 fail_timeout=5s;" for p in ports)
    user = "user root;\n" if os.geteuid() == 0 else ""  # as root, nginx's workers would run as nobody and lose the temp folder
    return NGINX_CONF.format(tmp=tmp, listen=listen, servers=servers, user=user)


def worker_command(command: list[str], port: int) -> list[str]:
    """``command`` (``streamlit run app.py ...``) on a loopback ``port``."""
    at = command.index("app.py") + 1 if "app.py" in command else len(command)
    flags = ["--server.address", "127.0.0.1", "--server.port", str(port)]
    return [*command[:at], *flags, *command[at:]]


def healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=timeout) as r:
            return r.read().strip() == b"ok"
    except OSError:
        return False


def wait_healthy(port: int, proc: subprocess.Popen, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        if healthy(port, 1.0):
            return True
        time.sleep(0.2)
    return False


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--" not in argv:
        print("error: give the worker command after --, e.g. -- streamlit run app.py", file=sys.stderr)
        return 2
    split = argv.index("--")
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2, help=f"Streamlit processes, 1 to {MAX_WORKERS} (default 2)")
    ap.add_argument("--host", default="0.0.0.0", help="address nginx listens on (default 0.0.0.0)")
    ap.add_argument("--port", type=int, default=8501, help="port nginx listens on; workers use the next N ports (default 8501)")
    ap.add_argument("--check-s", type=float, default=10.0, help="seconds between health checks of the workers (default 10)")
    ap.add_argument("--start-timeout-s", type=float, default=90.0, help="seconds a worker may take to answer its health check (default 90)")
    args = ap.parse_args(argv[:split])
    command = argv[split + 1 :]
    if not 1 <= args.workers <= MAX_WORKERS or not 1 <= args.port <= 65535 - args.workers:
        print(f"error: --workers must be 1 to {MAX_WORKERS} and the ports --port .. --port+workers must exist", file=sys.stderr)
        return 2
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None:
        print("error: nginx is not installed: run `make system-deps` (Debian's nginx package)", file=sys.stderr)
        return 2
    tmp = tempfile.mkdtemp(prefix="kvp-serve-")
    secret = secrets.token_hex(32)
    ports = [args.port + 1 + i for i in range(args.workers)]
    workers: dict[int, subprocess.Popen] = {}
    proxy: subprocess.Popen | None = None
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    def start(port: int) -> subprocess.Popen:
        env = {**os.environ, "STREAMLIT_SERVER_COOKIE_SECRET": secret}  # Streamlit takes it from the environment only
        return subprocess.Popen(worker_command(command, port), cwd=ROOT, env=env)

    try:
        for port in ports:
            workers[port] = start(port)
        for port in ports:
            if not wait_healthy(port, workers[port], args.start_timeout_s):
                print(f"error: the worker on port {port} did not answer /_stcore/health", file=sys.stderr)
                return 1
        listen = f"{args.host}:{args.port}" if ":" not in args.host else f"[{args.host}]:{args.port}"
        conf = Path(tmp) / "nginx.conf"
        conf.write_text(nginx_config(tmp, listen, ports))
        proxy = subprocess.Popen([nginx, "-p", tmp, "-c", str(conf), "-g", "daemon off;"])
        print(f"serving {args.workers} workers (ports {ports[0]}-{ports[-1]}) behind nginx on http://{listen}/", flush=True)
        misses = dict.fromkeys(ports, 0)
        next_check = time.monotonic() + args.check_s
        while not stopping:
            time.sleep(0.2)
            if proxy.poll() is not None:
                print(f"error: nginx exited ({proxy.returncode}); see {tmp}/error.log", file=sys.stderr)
                return 1
            if time.monotonic() < next_check:
                continue
            next_check = time.monotonic() + args.check_s
            for port, proc in list(workers.items()):
                misses[port] = 0 if proc.poll() is None and healthy(port) else misses[port] + 1
                if proc.poll() is not None or misses[port] >= 3:
                    print(f"worker on port {port} is not healthy: restarting it", file=sys.stderr, flush=True)
                    if proc.poll() is None:
                        proc.kill()
                        proc.wait()
                    workers[port], misses[port] = start(port), 0
        return 0
    finally:
        for proc in ([proxy] if proxy else []) + list(workers.values()):
            if proc.poll() is None:
                proc.terminate()
        for proc in ([proxy] if proxy else []) + list(workers.values()):
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
