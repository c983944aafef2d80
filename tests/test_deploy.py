"""The team deployment (issue 24): the Kubernetes manifest, the container image and the nginx
configuration of ``make serve WORKERS=N``, checked without a cluster or a Docker daemon.

The manifest is parsed with PyYAML and its required fields, probes and sticky-session annotations
are checked here; when the ``kubernetes-validate`` package (it ships the Kubernetes JSON schemas,
so no download) is installed, every document is also validated against the 1.37 schemas in
strict mode (unknown fields refused). The generated nginx configuration is checked by
``nginx -t`` when nginx is installed (``make system-deps``). The running proxy is tested in a
real browser in tests/test_browser_hostile.py.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import serve  # noqa: E402  (scripts/serve.py)

DOCS = list(yaml.safe_load_all((ROOT / "deploy" / "k8s.yaml").read_text()))
BY_KIND = {d["kind"]: d for d in DOCS}
HEALTH = "/_stcore/health"


def test_manifest_has_deployment_service_and_ingress():
    assert sorted(BY_KIND) == ["Deployment", "Ingress", "Service"]
    for doc in DOCS:
        assert doc["apiVersion"] and doc["metadata"]["name"] == "kv-capacity-planner"
    dep = BY_KIND["Deployment"]
    assert dep["apiVersion"] == "apps/v1" and dep["spec"]["replicas"] >= 2
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert BY_KIND["Service"]["spec"]["selector"].items() <= labels.items()  # the Service reaches the pods


def test_pods_are_probed_on_the_health_endpoint_and_share_the_cookie_secret():
    (container,) = BY_KIND["Deployment"]["spec"]["template"]["spec"]["containers"]
    port = container["ports"][0]
    assert port["containerPort"] == 8501
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["path"] == HEALTH and container[probe]["httpGet"]["port"] in (port["name"], 8501)
    env = {e["name"]: e for e in container["env"]}
    assert env["KVP_DISABLE_PROBE"]["value"] == "1"
    assert env["STREAMLIT_SERVER_COOKIE_SECRET"]["valueFrom"]["secretKeyRef"]["key"]  # one XSRF secret for every replica


def test_ingress_routes_to_the_service_with_sticky_sessions():
    ing = BY_KIND["Ingress"]
    notes = ing["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/affinity-mode"] == "persistent"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"]
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) >= 3600  # the websocket outlives 60 s of silence
    backend = ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    service = BY_KIND["Service"]
    assert backend["name"] == service["metadata"]["name"] and backend["port"]["name"] in [p["name"] for p in service["spec"]["ports"]]
    assert service["spec"]["sessionAffinity"] == "ClientIP"


def test_manifest_validates_against_the_kubernetes_schemas():
    kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate (requirements.txt) is not installed")
    for doc in DOCS:
        kv.validate(doc, "1.37.0", strict=True)  # raises ValidationError on a missing or unknown field


def test_dockerfile_runs_the_shared_deployment_settings():
    text = (ROOT / "deploy" / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", text, re.M)
    for path in ("planner/", "pages/", "model_configs/", "assets/", ".streamlit/", "app.py"):
        assert f"COPY {path}" in text or f" {path}" in text, path
    assert "KVP_DISABLE_PROBE=1" in text and "--client.showErrorDetails" in text and HEALTH in text
    assert re.search(r"^USER \d+", text, re.M)  # not root


def test_worker_command_and_nginx_config(tmp_path):
    command = serve.worker_command(["streamlit", "run", "app.py", "--server.headless", "true", "--", "--preset", "x"], 9001)
    assert command[:3] == ["streamlit", "run", "app.py"] and command[-3:] == ["--", "--preset", "x"]
    assert command[command.index("--server.port") + 1] == "9001" and command[command.index("--server.address") + 1] == "127.0.0.1"
    conf = serve.nginx_config(str(tmp_path), "127.0.0.1:9000", [9001, 9002])
    assert "hash $kvp_route consistent" in conf and "server 127.0.0.1:9002 max_fails=1" in conf
    assert "proxy_set_header Upgrade $http_upgrade" in conf and "proxy_read_timeout 86400s" in conf
    nginx = shutil.which("nginx") or ("/usr/sbin/nginx" if os.path.exists("/usr/sbin/nginx") else None)
    if nginx is None:
        pytest.skip("nginx is not installed (make system-deps)")
    (tmp_path / "nginx.conf").write_text(conf)
    out = subprocess.run([nginx, "-t", "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")], capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr


def test_make_serve_workers_runs_the_proxy_script():
    out = subprocess.run(["make", "-s", "-n", "serve", "WORKERS=3", "PORT=9100", "HOST=127.0.0.1"], cwd=ROOT, capture_output=True, text=True, timeout=30, check=True)
    line = out.stdout.strip().splitlines()[-1]
    assert "scripts/serve.py --workers 3 --host 127.0.0.1 --port 9100 -- " in line and "scripts/run_app.py app.py" in line and "KVP_DISABLE_PROBE=1" in line
