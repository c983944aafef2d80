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

# Debian chromium (browser tests, kaleido) and poppler-utils (PDF checks), when missing
system-deps:
	@if ! command -v chromium >/dev/null 2>&1 || ! command -v pdftotext >/dev/null 2>&1; then \
		if [ "$$(id -u)" = 0 ]; then apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver poppler-utils; \
		else sudo apt-get update -q && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver poppler-utils; fi; \
	fi

run: install
	$(VENV)/bin/streamlit run app.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false -- --preset $(PRESET)

# Shared deployment (README, "Shared deployment"): every interface, probe off, Hub fetches
# rate-limited per session, error details kept in the server log; XSRF protection and the upload
# cap come from .streamlit/config.toml.
# Health check: GET /_stcore/health answers "ok".
HOST ?= 0.0.0.0
HUB_REQUESTS_PER_MIN ?= 20
serve: install
	KVP_DISABLE_PROBE=1 KVP_HUB_REQUESTS_PER_MIN=$(HUB_REQUESTS_PER_MIN) $(VENV)/bin/streamlit run app.py --server.headless true --server.address $(HOST) --server.port $(PORT) --client.showErrorDetails none --browser.gatherUsageStats false -- --preset $(PRESET)

test: install system-deps
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider

bench: install
	for f in benchmarks/bench_*.py; do $(PY) -m benchmarks.$$(basename $$f .py) || exit 1; done
