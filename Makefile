# a2a-functions: every command a user or CI runs. `make help` lists them.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PORT ?= 8080
BACKEND ?= memory
HANDLER ?= functions.handlers.sample
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
INFRA_ENV = PROJECT=$(PROJECT) REGION=$(REGION) HANDLER=$(HANDLER) AUTH=$(AUTH) \
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

$(STAMP): pyproject.toml emulator/tasks-requirements.txt
	@test -x $(PY) || { echo "creating $(VENV) with $(PYTHON)"; $(PYTHON) -m venv $(VENV); }
	@echo "installing the project and its test tools into $(VENV)"
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@echo "preparing the emulators and the browser (Cloud Tasks emulator venv, Java, the Firestore jar, Debian's chromium)"
	@$(PY) -m emulator setup
	@touch $(STAMP)

install: $(STAMP)  ## create the venv and install everything

# PYTHONPATH: HANDLER may name any module of this checkout (tests.handlers.tck for the TCK).
# A local agent's users run their webhook receivers on this machine: loopback webhooks are
# allowed unless A2A_PUSH_ALLOWED_HOSTS is set (empty: none); deployed functions never allow them.
# The address `make run` listens on: loopback, unless HOST=0.0.0.0 is asked on the command
# line (a HOST some shells export is no such request). Without credentials (A2A_AUTH=none) the
# agent answers only requests sent to a loopback name or A2A_PUBLIC_URL's host, from no other
# page (shared/bindings/local_only.py): to serve the LAN, ask credentials too.
ifneq ($(origin HOST),command line)
HOST := 127.0.0.1
endif
LOCAL_ENV = A2A_PUSH_ALLOWED_HOSTS=$${A2A_PUSH_ALLOWED_HOSTS-localhost,127.0.0.1} A2A_CONSOLE=$${A2A_CONSOLE:-true}
run: $(STAMP)  ## serve the sample agent on localhost:$(PORT) (BACKEND=memory|firestore, HOST=0.0.0.0), in one process
	@echo "serving $(HANDLER) on http://localhost:$(PORT) ($(BACKEND) backend);" \
	  "card: http://localhost:$(PORT)/.well-known/agent-card.json; Ctrl-C stops it"
	@echo "A2A_AUTH=$${A2A_AUTH:-none}$$([ "$${A2A_AUTH:-none}" = none ] && echo ': no credentials asked, every caller is the same owner (local development only)')"
	@echo "webhooks allowed on: $${A2A_PUSH_ALLOWED_HOSTS-localhost,127.0.0.1} (A2A_PUSH_ALLOWED_HOSTS; deployed functions allow no loopback host)"
	@echo "console: http://localhost:$(PORT)/console (A2A_CONSOLE); client: A2ACLI_AGENT_CARD=http://localhost:$(PORT) .venv/bin/a2a send hello"
	@case "$(HOST)" in 127.*|localhost|::1) ;; *) [ "$${A2A_AUTH:-none}" != none ] || echo \
	  "WARNING: HOST=$(HOST) listens beyond this machine, but A2A_AUTH=none asks no credentials:" \
	  "requests sent to any name but localhost (or A2A_PUBLIC_URL's host) are refused;" \
	  "to serve the LAN, set A2A_AUTH=api-key and A2A_API_KEYS";; esac
	@# "ready" once the card answers (emulator/ready.py): the watcher gets the server's PID,
	@# which `exec` keeps, and stops with it.
	@$(PY) -m emulator.ready --pid $$$$ --say "ready: http://localhost:$(PORT) answers" \
	  http://127.0.0.1:$(PORT)/.well-known/agent-card.json & \
	PYTHONPATH=$(CURDIR)$${PYTHONPATH:+:$$PYTHONPATH} \
	  $(RUN_ENV) $(LOCAL_ENV) A2A_BACKEND=$(BACKEND) A2A_HANDLER=$(HANDLER) exec $(VENV)/bin/functions-framework \
	  --target=a2a --source=functions/main.py --host=$(HOST) --port=$(PORT)

# The three functions on the emulators, wired as `make deploy` wires them (emulator/dev.py).
# Every port follows PORT (worker +1, deliver +2, Firestore +5, Cloud Tasks +942; DEV_ARGS
# sets one); HANDLER is looked up on PYTHONPATH after this checkout, as `make run` does.
dev: $(STAMP)  ## a2a, worker and deliver on the Firestore and Cloud Tasks emulators, reloading on changes
	$(PY) -m emulator dev --port $(PORT) --handler $(HANDLER) $(DEV_ARGS)

emulators: $(STAMP)  ## run the Firestore (8085) and Cloud Tasks (9022) emulators until Ctrl-C
	$(PY) -m emulator $(EMULATOR_ARGS)

# Two workers: most of the suite waits on other processes (emulators, servers, the browser,
# injected faults); a test module runs whole on one worker, with its own fixtures.
TEST_WORKERS ?= 2
test: $(STAMP)  ## install everything and run the whole suite (emulators included; TEST_WORKERS=2)
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

stage: $(STAMP)  ## build the per-function staging folders in build/stage
	HANDLER=$(HANDLER) $(PY) -m infra stage

smoke: $(STAMP)  ## check a deployed agent end to end: make smoke URL=https://... [TOKEN=... | API_KEY=...]
	@TOKEN='$(TOKEN)' API_KEY='$(API_KEY)' $(PY) -m infra.smoke $(URL) $(SMOKE_ARGS)

clean:  ## remove the venv, caches, staging folders and emulator state
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache build .emulators
