# autopar developer entry points. Every target works on a fresh machine: the virtual
# environment is created and the project installed (with dev extras) on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test lint validate bench run clean

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

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
