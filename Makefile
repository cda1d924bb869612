SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# What serving needs (`make run`), and everything (the tests, the linters, CDK, the benchmarks).
RUNTIME_STAMP := $(VENV)/.installed-runtime
STAMP := $(VENV)/.installed
# Defined before `test`, whose prerequisites are expanded as the rule is read.
NODE_MODULES := node_modules/.installed
CHROMIUM := /usr/bin/chromium
CHROMIUM_STAMP := $(VENV)/.installed-chromium

# jsii (behind aws-cdk-lib) prints a Node 20 end-of-life banner on every import.
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export CDK_DISABLE_CLI_TELEMETRY := true

.PHONY: help install run lint format test test-fuzz synth bench mutation validate-rules reliability-report clean

help:
	@echo "make run             the service on 127.0.0.1:\$${PORT:-8000} over an embedded AWS emulation"
	@echo "make install         .venv with every pinned requirement (make run needs only requirements.txt)"
	@echo "make test            lint, then every test"
	@echo "make test-fuzz       schemathesis against a local runner, deeper than make test's run"
	@echo "make lint            ruff (lint + format check) and mypy"
	@echo "make bench           the benchmarks: bench/results.json, docs/prompt-tokens.png, docs/prompt-cost.png"
	@echo "make mutation        mutation testing of the domain: mutation/results.json, docs/mutation.md"
	@echo "make synth           the CloudFormation template in cdk.out, offline, no credentials"
	@echo "make format          apply ruff's fixes and formatting"
	@echo "make validate-rules  check a rules file: make validate-rules RULES=rules.json"
	@echo "make reliability-report  the reliability suite, then docs/reliability.md from its counts"

# A first `make run` installs only requirements.txt, with pip's progress shown: the
# service and its emulation, not the test and deployment tooling.
$(RUNTIME_STAMP): requirements.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@echo "Installing what the local service needs (requirements.txt)..."
	$(BIN)/python -m pip install --disable-pip-version-check -r requirements.txt
	touch $@

$(STAMP): $(RUNTIME_STAMP) requirements-dev.txt
	@echo "Installing the test, lint, deployment and benchmark tools (requirements-dev.txt)..."
	$(BIN)/python -m pip install --quiet --disable-pip-version-check \
		-r requirements.txt -r requirements-dev.txt
	touch $@

install: $(STAMP)

# The Lambdas' own handlers over an embedded moto, in the foreground until
# Ctrl-C (SIGINT) or SIGTERM; SIGHUP re-reads RULES_FILE. See local/runner.py.
run: $(RUNTIME_STAMP)
	PYTHONPATH=functions:. $(BIN)/python -m local

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

test: lint $(NODE_MODULES) $(CHROMIUM_STAMP)
	$(BIN)/pytest

# The schemathesis run of tests/e2e/test_fuzz_api.py (a runner of its own, every route,
# the checks not_a_server_error, response_schema_conformance, negative_data_rejection),
# with more examples per route and mode than make test's bounded run, and a fresh seed
# each time unless FUZZ_SEED is given (a failure prints the seed to replay it with).
FUZZ_MAX_EXAMPLES ?= 1000
FUZZ_SEED ?= random
test-fuzz: install
	FUZZ_MAX_EXAMPLES=$(FUZZ_MAX_EXAMPLES) FUZZ_SEED=$(FUZZ_SEED) \
		$(BIN)/pytest -p no:cacheprovider -s tests/e2e/test_fuzz_api.py

# The Node tooling pinned in package.json/package-lock.json, installed into the repo: the
# CDK CLI, and aws-local-stepfunctions, which the workflow tests run definitions with.
CDK := node_modules/.bin/cdk

$(NODE_MODULES): package.json package-lock.json
	npm ci --no-audit --no-fund --silent
	touch $@

$(CDK): $(NODE_MODULES)

# Debian's Chromium, which Playwright drives in tests/e2e/test_inspector_page.py (Playwright
# downloads no browser of its own). Installed once when missing, with sudo unless root; where
# it cannot be installed, the browser tests are skipped, saying so, and the next run tries again.
$(CHROMIUM_STAMP):
	@mkdir -p $(@D)
	@if [ ! -x $(CHROMIUM) ]; then \
		sudo=$$([ "$$(id -u)" -eq 0 ] || echo sudo); \
		echo "Installing Chromium for the browser tests (apt-get install chromium)..."; \
		$$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium \
			|| { $$sudo apt-get update && $$sudo env DEBIAN_FRONTEND=noninteractive \
				apt-get install -y --no-install-recommends chromium; } \
			|| true; \
	fi
	@if [ -x $(CHROMIUM) ]; then touch $@; \
	else echo "warning: $(CHROMIUM) could not be installed: the browser tests will be skipped"; fi

SYNTH_OUTDIR ?= cdk.out
SYNTH_ARGS ?=
synth: install $(CDK)
	$(CDK) synth --no-notices --quiet --output $(SYNTH_OUTDIR) $(SYNTH_ARGS)

# The figures of docs/performance.md: writes bench/results.json, docs/prompt-tokens.png and
# docs/prompt-cost.png.
bench: install
	PYTHONPATH=functions:. $(BIN)/python -m bench

# Mutates functions/memory_core one change at a time and runs the unit tests that execute
# each changed line (mutation/). Many minutes; not part of `make test`. MODULES=window.py
# mutates only the named modules and keeps the others' figures.
MODULES ?=
mutation: install
	PYTHONPATH=functions:. $(BIN)/python -m mutation $(foreach module,$(MODULES),--module $(module))

# Runs the reliability groups, then writes docs/reliability.md from their counts.
RELIABILITY_TESTS := tests/integration/test_faults.py tests/integration/test_parallel_writers.py \
	tests/integration/test_misconfiguration.py tests/integration/test_input_limits.py \
	tests/integration/test_stateful_memory.py tests/integration/test_late_turns.py \
	tests/integration/test_tool_conversations.py tests/e2e/test_tool_conversations.py \
	tests/e2e/test_fuzz_api.py
reliability-report: install
	$(BIN)/pytest -p no:cacheprovider $(RELIABILITY_TESTS)
	$(BIN)/python -m tests.support.reliability_report

RULES ?= rules.example.json
validate-rules: install
	PYTHONPATH=functions $(BIN)/python -m rules_cli validate $(RULES)

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache .hypothesis
