"""Cold start, as counts: what importing `functions.main` and serving the first request may load
and compile on the embedded backend. Every module and method kept off this path is time a new
instance does not spend before its first answer (`make bench` times it against a bare
functions-framework function; times stay out of the suite, counts stay in it)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT
from tests.first_send import SERVE_FIRST_SEND

HEAVY = (
    "google.cloud.firestore",
    "google.cloud.tasks",
    "google.api_core",
    "grpc",
    "google.auth",
    "jwt",
    "cryptography",
    # The client CLI and its HTTP stack: never deployed, never loaded by a function.
    "shared.client",
    "httpx",
    # The ADK adapter (the `adk` extra, ~3 s to import): only an ADK handler module loads it.
    "shared.adk",
    "google.adk",
    "google.genai",
    # Tracing (A2A_TRACING, the otel extra) is off unless asked for: nothing of it loads.
    "opentelemetry",
    # ~85 ms at import: the settings and the model check with the standard library alone
    # (only the ADK adapter and make deploy's settings use it).
    "pydantic",
    # The Cloud Tasks targets' face and token check, and the queue decorator for Cloud Tasks:
    # the worker and deliver functions build them (shared.app), the a2a function never does.
    "shared.bindings.queue_target",
    "shared.tasks_auth",
    "shared.queue.off_path",
)
# Not for the first request either: an SSL context (loading the system's certificates, ~60 ms;
# only https webhooks need one). And what the import made is frozen (gc.freeze) before
# gunicorn forks its worker from the arbiter, so the worker's collections leave those pages
# shared (~8 MiB less memory per instance); the collector, off during the import (nothing it
# makes is garbage), is on again.

# Methods compiled from source while a process imports and serves its first request: the
# dataclass decorator compiles each method it makes (~0.1 ms each, ~300 of them before
# shared.frozen); a value class declared with shared.frozen costs one, its __init__.
MAX_COMPILED = 60

FIRST_REQUEST = """
import builtins, gc, json, ssl, sys
contexts = []
make_context = ssl.create_default_context
ssl.create_default_context = lambda *a, **k: contexts.append(1) or make_context(*a, **k)
# What the floor, a bare aio function, loads too: functions-framework, its ASGI stack.
import functions_framework.aio, uvicorn_worker
compiled = []
run = builtins.exec
builtins.exec = lambda code, *a, **k: compiled.append(isinstance(code, str)) or run(code, *a, **k)
import functions.main
frozen, collecting = gc.get_freeze_count(), gc.isenabled()
MAIN = "functions/main.py"
%s
print(json.dumps({
    "state": answer["result"]["task"]["status"]["state"],
    "heavy": sorted(m for m in sys.modules if m.startswith(%r)),
    "ssl_contexts": len(contexts),
    "frozen at import": frozen > 10_000,
    "collector on after import": collecting,
    "compiled": sum(compiled),
}))
"""


def test_importing_main_on_the_embedded_backend_loads_no_google_client() -> None:
    code = (
        "import sys, json, functions.main; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={"A2A_BACKEND": "memory", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(out.stdout) == []


def test_the_first_request_loads_no_client_no_certificates_and_compiles_little() -> None:
    out = subprocess.run(
        [sys.executable, "-c", FIRST_REQUEST % (SERVE_FIRST_SEND, HEAVY)],
        cwd=ROOT,
        env={"A2A_BACKEND": "memory", "A2A_HANDLER": "functions.handlers.echo", "PATH": ""},
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(out.stdout)
    assert 0 < found.pop("compiled") <= MAX_COMPILED
    assert found == {
        "state": "TASK_STATE_COMPLETED",
        "heavy": [],
        "ssl_contexts": 0,
        "frozen at import": True,
        "collector on after import": True,
    }


def test_bad_settings_stop_start_up_naming_the_variable() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import functions.main"],
        check=False,
        cwd=ROOT,
        env={"A2A_BACKEND": "mongodb", "PATH": ""},
        capture_output=True,
        text=True,
    )
    assert out.returncode != 0
    assert "A2A_BACKEND" in out.stderr
    assert "Traceback" in out.stderr  # start-up errors go to the log; no request is served
