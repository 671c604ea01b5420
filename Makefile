# autopar developer entry points. Every target works on a fresh machine: the virtual
# environment is created and the project installed (with dev extras) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint validate bench bench-api run clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

test: lint
	$(BIN)/python -m pytest

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

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
