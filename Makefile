# autopar developer entry points. Every target works on a fresh machine: the virtual
# environment is created and the project installed (with dev extras) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PROFILE_STAMP := $(VENV)/.installed-profile

.PHONY: test test-fast test-browser lint validate bench bench-api bench-api-wrk bench-request bench-burst bench-search run clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

# Tests also cover the PyTorch profiler: the 'profile' extra (torch, pinned in pyproject.toml).
$(PROFILE_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[dev,profile]'
	touch $(PROFILE_STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: lint $(PROFILE_STAMP)
	$(BIN)/python -m pytest

# The inner loop: everything but the torch, end-to-end, fault and browser tests (`slow`,
# `browser` markers); `make test` runs them all.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not slow and not browser"

# The dashboard's end-to-end tests in Debian's Chromium (the fixture apt-installs it when missing).
test-browser: $(STAMP)
	$(BIN)/python -m pytest -m browser tests/app/dashboard

validate: $(STAMP)
	$(BIN)/autopar validate

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_costmodel.py

# The API on http://127.0.0.1:8000 (OpenAPI at /docs): migrates the database named by
# AUTOPAR_DATABASE_URL (default ./autopar.db) and loads the built-in catalog first.
run: $(STAMP)
	$(BIN)/autopar serve

# POST /v1/estimate latency under load; BENCH_ARGS="--database-url postgresql+psycopg://..."
bench-api: $(STAMP)
	$(BIN)/python benchmarks/bench_api.py $(BENCH_ARGS)

# The same load from wrk (C client: it does not compete with the server for Python CPU), for
# POST /v1/estimate and GET /v1/searches/{id}/plans. WRK_ARGS="URL WORKERS CONNECTIONS SCENARIOS
# SECONDS", e.g. "postgresql+psycopg://postgres@127.0.0.1:5432/test 2 64" (default: SQLite, 2, 64).
bench-api-wrk: $(STAMP)
	benchmarks/bench_api_wrk.sh $(WRK_ARGS)

# CPU per request of the app alone (raw ASGI calls in one process: no server, no sockets), for
# a cached estimate and /healthz; BENCH_ARGS="--database-url postgresql+psycopg://...".
bench-request: $(STAMP)
	$(BIN)/python benchmarks/bench_request_cpu.py $(BENCH_ARGS)

# 200 small searches submitted at once to `autopar serve` and 2 `autopar worker` processes:
# all must succeed with their plans; prints queue wait, run time and throughput (a few minutes).
# BENCH_ARGS="--database-url postgresql+psycopg://..." for an empty PostgreSQL database.
bench-burst: $(STAMP)
	$(BIN)/python benchmarks/bench_search_burst.py $(BENCH_ARGS)

# Search quality and speed (about 14 minutes); BENCH_ARGS=--quick for a 4-minute variant.
bench-search: $(STAMP)
	$(BIN)/python benchmarks/bench_search.py $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
