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

.PHONY: install run test lint bench
install: $(VENV)/.installed

run: install
	$(VENV)/bin/streamlit run app.py --server.headless true --server.port $(PORT) --browser.gatherUsageStats false -- --preset $(PRESET)

test: install
	$(VENV)/bin/ruff check .
	$(PY) -m pytest -q -p no:cacheprovider

bench: install
	for f in benchmarks/bench_*.py; do $(PY) $$f || exit 1; done
