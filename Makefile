# a2a-functions: every command a user or CI runs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
# Two install stamps: make run's (the project and its CLI: all the embedded backend needs)
# and everything's (make test's, make dev's, make emulators': the test tools, the Cloud Tasks
# emulator's venv, and checks that Java, the Firestore jar and Debian's chromium are there).
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
PORT ?= 8080
BACKEND ?= memory
HANDLER ?= functions.handlers.sample
# AGENT=~/agents/my_agent: an agent kept in a folder of its own (docs/agents.md), a package
# named after the folder. It is served (run, dev), staged and deployed by naming the folder:
# HANDLER becomes its package (unless HANDLER names a module in it on the command line), and
# the folder's parent goes on PYTHONPATH, after this checkout. A `~` the shell left is expanded.
AGENT ?=
ifneq ($(AGENT),)
AGENT_DIR := $(abspath $(patsubst ~/%,$(HOME)/%,$(patsubst %/,%,$(AGENT))))
ifneq ($(origin HANDLER),command line)
HANDLER := $(notdir $(AGENT_DIR))
endif
export PYTHONPATH := $(dir $(AGENT_DIR))$(if $(PYTHONPATH),:$(PYTHONPATH))
endif
# deploy settings (empty: the value in infra/deploy.toml)
PROJECT ?=
REGION ?=
AUTH ?=
IDENTITY ?=
OPEN_TO_EVERYONE ?=
INVOKERS ?=
# SIGN_CARD=1: sign the agent card with a key the deploy makes in Secret Manager (once)
SIGN_CARD ?=
DRY_RUN ?=
URL ?=
# make soak
SOAK_SECONDS ?= 300
SOAK_SEED ?=
SOAK_OWNERS ?= 3
# make smoke: a Google ID token (default: gcloud auth print-identity-token), or an API key
TOKEN ?=
API_KEY ?=
INFRA_ENV = PROJECT=$(PROJECT) REGION=$(REGION) HANDLER=$(HANDLER) AGENT=$(AGENT_DIR) AUTH=$(AUTH) \
  IDENTITY=$(IDENTITY) OPEN_TO_EVERYONE=$(OPEN_TO_EVERYONE) INVOKERS=$(INVOKERS) \
  SIGN_CARD=$(SIGN_CARD) DRY_RUN=$(DRY_RUN)

# `make run BACKEND=firestore` with no project set talks to `make emulators` on its default port.
ifeq ($(BACKEND),firestore)
ifeq ($(GOOGLE_CLOUD_PROJECT),)
RUN_ENV = FIRESTORE_EMULATOR_HOST=$${FIRESTORE_EMULATOR_HOST:-127.0.0.1:8085} GOOGLE_CLOUD_PROJECT=demo-a2a-functions
endif
endif

.PHONY: help install run dev test lint bench fuzz soak emulators deploy destroy stage smoke clean

help:  ## list the commands
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/'

$(RUN_STAMP): pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing the project and its CLI into $(VENV) (what make run needs)"
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[cli]'
	@touch $(RUN_STAMP)

$(STAMP): $(RUN_STAMP) pyproject.toml emulator/tasks-requirements.txt
	@echo "installing the test tools into $(VENV)"
	@$(PY) -m pip install -q -e '.[dev]'
	@echo "preparing the emulators and the browser (Cloud Tasks emulator venv, Java, the Firestore jar, Debian's chromium)"
	@$(PY) -m emulator setup
	@touch $(STAMP)

install: $(STAMP)  ## create the venv and install everything (make run needs only the project and its CLI)

# PYTHONPATH: HANDLER may name any module of this checkout (tests.handlers.tck for the TCK).
# A local agent's users run their webhook receivers on this machine: loopback webhooks are
# allowed unless A2A_PUSH_ALLOWED_HOSTS is set (empty: none); deployed functions never allow them.
# The address `make run` and `make dev` listen on: loopback, unless HOST=0.0.0.0 is asked on
# the command line (a HOST some shells export is no such request). Without credentials
# (A2A_AUTH=none) the agent serves only connections from this machine, sent to a loopback
# name or A2A_PUBLIC_URL's host, from no other page (shared/bindings/local_only.py): to serve
# the LAN, ask credentials too (make dev refuses HOST=0.0.0.0 without them).
ifneq ($(origin HOST),command line)
HOST := 127.0.0.1
endif
RUN_PATH = PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH}
LOCAL_ENV = A2A_PUSH_ALLOWED_HOSTS=$${A2A_PUSH_ALLOWED_HOSTS-localhost,127.0.0.1} A2A_CONSOLE=$${A2A_CONSOLE:-true} \
  MALLOC_ARENA_MAX=$${MALLOC_ARENA_MAX:-1}
run: $(RUN_STAMP)  ## serve the sample agent on http://localhost:8080 (PORT, HANDLER, BACKEND=memory|firestore, HOST=0.0.0.0), in one process
	@# Before anything is said or started: a busy port or a missing handler is one line.
	@$(RUN_PATH) $(PY) -m emulator.run --host $(HOST) --port $(PORT) $(HANDLER)
	@echo "serving $(HANDLER) on http://localhost:$(PORT) ($(BACKEND) backend);" \
	  "card: http://localhost:$(PORT)/.well-known/agent-card.json; Ctrl-C stops it"
	@echo "A2A_AUTH=$${A2A_AUTH:-none}$$([ "$${A2A_AUTH:-none}" = none ] && echo ': no credentials asked, every caller is the same owner (local development only)')"
	@echo "webhooks allowed on: $${A2A_PUSH_ALLOWED_HOSTS-localhost,127.0.0.1} (A2A_PUSH_ALLOWED_HOSTS; deployed functions allow no loopback host)"
	@echo "console: http://localhost:$(PORT)/console (A2A_CONSOLE); client: A2ACLI_AGENT_CARD=http://localhost:$(PORT) .venv/bin/a2a send hello"
	@case "$(HOST)" in 127.*|localhost|::1) ;; *) [ "$${A2A_AUTH:-none}" != none ] || echo \
	  "WARNING: HOST=$(HOST) listens on every address, but A2A_AUTH=none asks no credentials:" \
	  "only connections from this machine are served (other machines get 403);" \
	  "to serve the LAN, set A2A_AUTH=api-key and A2A_API_KEYS";; esac
	@# "ready" once the card answers from this server (emulator/ready.py): the watcher gets
	@# the server's PID, which `exec` keeps, and stops with it.
	@$(PY) -m emulator.ready --pid $$$$ --say "ready: http://localhost:$(PORT) answers" \
	  --host $(HOST) --port $(PORT) & \
	$(RUN_PATH) $(RUN_ENV) $(LOCAL_ENV) A2A_BACKEND=$(BACKEND) A2A_HANDLER=$(HANDLER) exec $(VENV)/bin/functions-framework \
	  --target=a2a --source=functions/main.py --host=$(HOST) --port=$(PORT)

# The three functions on the emulators, wired as `make deploy` wires them (emulator/dev.py).
# Every port follows PORT (worker +1, deliver +2, Cloud Tasks +3, Firestore +5; DEV_ARGS sets
# one); HANDLER is looked up on PYTHONPATH after this checkout, as `make run` does; a2a
# listens on HOST (worker, deliver and the emulators on loopback only).
dev: $(STAMP)  ## a2a, worker and deliver on the Firestore and Cloud Tasks emulators, reloading on changes (PORT, HANDLER, HOST)
	$(PY) -m emulator dev --host $(HOST) --port $(PORT) --handler $(HANDLER) $(DEV_ARGS)

emulators: $(STAMP)  ## run the Firestore (8085) and Cloud Tasks (9022) emulators until Ctrl-C
	$(PY) -m emulator $(EMULATOR_ARGS)

# Three workers on 2 cores: most of the suite waits on other processes (emulators, servers,
# the browser, injected faults); a test module runs whole on one worker, with its own fixtures
# (three runs: 226-241 s, where two workers took 276-302 s).
TEST_WORKERS ?= 3
test: $(STAMP)  ## install everything and run the whole suite (emulators included; TEST_WORKERS=3)
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: $(STAMP)  ## ruff and mypy
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy shared functions infra emulator tests

bench: $(STAMP)  ## throughput, latency, cold start, memory and Firestore costs
	$(PY) -m tests.bench $(BENCH_ARGS)

fuzz: $(STAMP)  ## hostile requests on both backends, FUZZ_EXAMPLES each (default 3000), with counts
	FUZZ_EXAMPLES=$${FUZZ_EXAMPLES:-3000} $(PY) -m pytest -q -s -p no:cacheprovider \
	  tests/test_fuzz.py -k hostile_requests $(PYTEST_ARGS)

# The chaos soak (tests/soak): the three functions, several processes each, on the emulators,
# a mixed load of SOAK_OWNERS owners and faults drawn from SOAK_SEED, then the ledger's check.
soak: $(STAMP)  ## chaos soak on the emulators: SOAK_SECONDS (300), SOAK_SEED, SOAK_OWNERS; fails on a violation
	SOAK_SECONDS=$(SOAK_SECONDS) SOAK_SEED=$(SOAK_SEED) SOAK_OWNERS=$(SOAK_OWNERS) $(PY) -m tests.soak

deploy: $(STAMP)  ## create or update everything in PROJECT (DRY_RUN=1 prints the commands)
	$(INFRA_ENV) $(PY) -m infra deploy

destroy: $(STAMP)  ## remove what deploy created, after confirmation (YES=1, DELETE_DATABASE=1)
	$(INFRA_ENV) $(PY) -m infra destroy $(if $(YES),--yes) $(if $(DELETE_DATABASE),--delete-database)

stage: $(STAMP)  ## build the per-function staging folders in build/stage (AGENT=folder: with it)
	HANDLER=$(HANDLER) AGENT=$(AGENT_DIR) $(PY) -m infra stage

smoke: $(STAMP)  ## check a deployed agent end to end: make smoke URL=https://... [TOKEN=... | API_KEY=...]
	@TOKEN='$(TOKEN)' API_KEY='$(API_KEY)' $(PY) -m infra.smoke $(URL) $(SMOKE_ARGS)

clean:  ## remove the venv, caches, staging folders, emulator state and Python's build leftovers
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build .emulators *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
