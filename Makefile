# The two commands a new user runs are `make run` and `make test`; both build
# what they need first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./data

.PHONY: run test soak proto proto-check lint typecheck bench venv clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

venv: $(STAMP)

run: $(STAMP)
	$(BIN)/nexus-grpc serve --listen $(LISTEN) --data-dir $(DATA_DIR)

test: $(STAMP) proto-check
	$(BIN)/python -m pytest -q -m "not slow"

soak: $(STAMP)
	NEXUS_SOAK=1 $(BIN)/python -m pytest -q -m slow --timeout 3600

proto: $(STAMP)
	$(BIN)/python proto/generate.py

# Regenerates into a scratch tree and compares, so a stale commit fails CI
# without touching the working copy.
proto-check: $(STAMP)
	$(BIN)/python proto/generate.py --check

lint: $(STAMP)
	$(BIN)/ruff check nexus_grpc tests bench
	$(BIN)/mypy nexus_grpc

typecheck: $(STAMP)
	$(BIN)/mypy nexus_grpc

bench: $(STAMP)
	$(BIN)/python bench/run_benchmarks.py

clean:
	rm -rf $(VENV) build *.egg-info
