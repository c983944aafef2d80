# Two entry points (see README): `make run` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PRESET ?= llama-3.1-8b
PORT ?= 8501

$(VENV)/.installed: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	touch $@

.PHONY: install system-deps run serve test lint bench
install: $(VENV)/.installed

# Debian chromium (browser tests, kaleido), poppler-utils (PDF checks) and nginx (the reverse proxy
# of `make serve WORKERS=N`), when missing
SYSTEM_PACKAGES := chromium chromium-driver poppler-utils nginx
system-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v pdftotext >/dev/null 2>&1 || ! { command -v nginx || test -x /usr/sbin/nginx; } >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PACKAGES); \
		else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q $(SYSTEM_PACKAGES); fi; \
	fi

# The app is served by scripts/run_app.py: `streamlit run` with the first session's imports done
# once the server listens, before it answers its first request (a fresh server's first user does not wait for them).
APP := $(PY) scripts/run_app.py app.py

run: install
	$(APP) --server.headless true --server.port $(PORT) --browser.gatherUsageStats false -- --preset $(PRESET)

# Shared deployment (README, "Shared deployment"): every interface, probe off, Hub fetches
# rate-limited per session, error details kept in the server log; XSRF protection and the upload
# cap come from .streamlit/config.toml.
# Health check: GET /_stcore/health answers "ok".
# WORKERS=N (N > 1): N Streamlit processes behind nginx with websocket upgrade and session
# affinity, health-checked (scripts/serve.py; nginx from `make system-deps`). deploy/ holds the
# container image and the Kubernetes manifest for more than one machine.
HOST ?= 0.0.0.0
HUB_REQUESTS_PER_MIN ?= 20
WORKERS ?= 1
SERVE_ENV = KVP_DISABLE_PROBE=1 KVP_HUB_REQUESTS_PER_MIN=$(HUB_REQUESTS_PER_MIN)
SERVE_FLAGS = --server.headless true --client.showErrorDetails none --browser.gatherUsageStats false
ifeq ($(WORKERS),1)
serve: install
	$(SERVE_ENV) $(APP) $(SERVE_FLAGS) --server.address $(HOST) --server.port $(PORT) -- --preset $(PRESET)
else
serve: install
	$(SERVE_ENV) $(PY) scripts/serve.py --workers $(WORKERS) --host $(HOST) --port $(PORT) -- $(APP) $(SERVE_FLAGS) -- --preset $(PRESET)
endif

test: install system-deps
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider

bench: install
	for f in benchmarks/bench_*.py; do $(PY) -m benchmarks.$$(basename $$f .py) || exit 1; done
