# a2a-functions: every command a user or CI runs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8080
BACKEND ?= memory
HANDLER ?= functions.handlers.sample

.PHONY: help install run test lint bench emulators deploy smoke destroy clean

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing the project and its test tools into $(VENV)"
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)  ## create the venv and install everything

run: $(STAMP)  ## serve the sample agent on localhost:$(PORT) (BACKEND=memory|firestore)
	A2A_BACKEND=$(BACKEND) A2A_HANDLER=$(HANDLER) $(VENV)/bin/functions-framework \
	  --target=a2a --source=functions/main.py --port=$(PORT)

test: $(STAMP)  ## install everything and run the whole suite
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared functions tests

bench: $(STAMP)  ## throughput, latency and cold start figures
	$(PY) -m tests.bench

clean:  ## remove the venv and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build
