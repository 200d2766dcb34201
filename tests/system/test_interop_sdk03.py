"""Interop: the official SDKs' 0.3 releases as clients of a running `a2a` function, over
JSON-RPC and over v0.3's HTTP+JSON binding (`/v1/...`).

Each client runs a script of ours in its own environment, set up here on first use and reused
(both under .emulators/, gitignored): a2a-sdk 0.3.x in a venv (`tests/system/sdk03/client.py`),
@a2a-js/sdk 0.3.x in an npm prefix (`tests/system/js/client03.mjs`). Each does what a user of
that release does: read the card, send, stream, get, cancel, resubscribe, and push config CRUD
(a2a-sdk 0.3's client offers set and get only); the webhook then receives the task; and
a2a-sdk 0.3 reads the authenticated extended card with its API key; and the JS client does
it all again against an agent reached under a path (A2A_PUBLIC_URL=.../agents/x).
A missing tool or a failed install fails with the command that fixes it: never skipped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from shared.identity.api_key import hashed
from tests.conftest import ROOT, Server, free_port
from tests.system.npm import npm_package
from tests.webhook import Webhook

PYTHON_SDK = "a2a-sdk==0.3.26"  # the newest 0.3.x on PyPI
JS_SDK = ("@a2a-js/sdk", "0.3.14")  # the newest 0.3.x on npm
VENV = ROOT / ".emulators" / "a2a-sdk-0.3"
PYTHON_SCRIPT = Path(__file__).parent / "sdk03" / "client.py"
JS_SCRIPT = Path(__file__).parent / "js" / "client03.mjs"
TRANSPORTS = ["JSONRPC", "HTTP+JSON"]


def _setup(argv: list[str], fix: str) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        pytest.fail(f"{' '.join(argv)} failed (run it by hand: {fix}):\n{result.stderr[-2000:]}")


@pytest.fixture(scope="session")
def python_sdk() -> Path:
    """The venv's python, with a2a-sdk 0.3 (installed on first use: about 30 s)."""
    python = VENV / "bin" / "python"
    wanted = PYTHON_SDK.split("==")[1]
    check = [str(python), "-c", "import importlib.metadata as m; print(m.version('a2a-sdk'))"]
    if python.exists():
        found = subprocess.run(check, capture_output=True, text=True, check=False).stdout.strip()
        if found == wanted:
            return python
    fix = f"{sys.executable} -m venv {VENV} && {python} -m pip install {PYTHON_SDK}"
    _setup([sys.executable, "-m", "venv", str(VENV)], fix)
    _setup([str(python), "-m", "pip", "install", "--quiet", PYTHON_SDK], fix)
    return python


@pytest.fixture(scope="session")
def js_sdk() -> Path:
    """The npm prefix where `node` finds @a2a-js/sdk 0.3 (installed on first use)."""
    return npm_package(*JS_SDK, "npm-0.3")


@pytest.fixture(scope="module")
def webhook() -> Iterator[Webhook]:
    hook = Webhook()
    yield hook
    hook.close()


@pytest.fixture(scope="module")
def agent(webhook: Webhook) -> Iterator[Server]:
    """One sample-agent server for the module, its webhooks allowed on this machine."""
    started = Server(
        {"A2A_HANDLER": "functions.handlers.sample", "A2A_PUSH_ALLOWED_HOSTS": "localhost"}
    )
    yield started
    started.stop()


def steps(result: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    assert result.returncode == 0, result.stderr[-3000:]
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    return {line.pop("step"): line for line in lines}


def spoke(requests: list[str], transport: str, prefix: str = "") -> None:
    """The client really used the binding under test: 0.3's methods, or the /v1 paths."""
    if transport == "JSONRPC":
        assert all(r.startswith(("message/", "tasks/")) for r in requests), requests
    else:
        assert all(r.split(" ")[1].startswith(f"{prefix}/v1/") for r in requests), requests


def delivered(webhook: Webhook, task_id: str) -> dict[str, Any]:
    """The v0.3 push of the finished task: the Task (v0.3 JSON), with the config's token."""
    received = webhook.wait_until(
        lambda got: any(
            r.json.get("id") == task_id and r.json["status"]["state"] == "completed" for r in got
        )
    )
    push = next(
        r
        for r in received
        if r.json.get("id") == task_id and r.json["status"]["state"] == "completed"
    )
    assert push.headers.get("X-A2A-Notification-Token") == "tok"
    task: dict[str, Any] = push.json
    assert task["kind"] == "task"
    return task


def common(got: dict[str, dict[str, Any]], url: str, webhook: Webhook, transport: str) -> str:
    """What both clients see alike over either binding at the agent's `url`; the streamed
    task's id."""
    interfaces = [["JSONRPC", url], ["HTTP+JSON", url]]
    assert got["card"]["interfaces"] == interfaces
    assert got["get"] == {"state": "input-required", "history": 1}
    assert got["cancel"] == {"state": "canceled"}
    assert [(e["kind"], e["state"]) for e in got["stream"]["events"]] == [
        ("task", "working"),
        ("status-update", "input-required"),
    ]
    # A subscriber opens with the task, then follows the next turn to its end.
    assert [(e["kind"], e["state"]) for e in got["resubscribe"]["events"]] == [
        ("task", "input-required"),
        ("status-update", "working"),
        ("artifact-update", None),
        ("status-update", "completed"),
    ]
    assert got["resubscribe"]["answered"] == "completed"
    spoke(got["sent"]["requests"], transport, urlsplit(url).path.rstrip("/"))
    task_id: str = got["stream"]["events"][0]["id"]
    assert delivered(webhook, task_id)["status"]["state"] == "completed"
    return task_id


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a2a_sdk_0_3(agent: Server, python_sdk: Path, webhook: Webhook, transport: str) -> None:
    argv = [str(python_sdk), str(PYTHON_SCRIPT), agent.url, transport, webhook.url()]
    got = steps(subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False))
    task_id = common(got, f"{agent.url}/", webhook, transport)
    assert got["send"] == {"state": "completed", "text": "héllo"}
    # A refusal: REST's HTTP status, or JSON-RPC's code.
    refused = {
        "JSONRPC": ({"code": -32002}, {"code": -32001}),
        "HTTP+JSON": ({"status": 400}, {"status": 404}),
    }
    assert (got["cancel-again"], got["get-unknown"]) == refused[transport]
    assert got["push"] == {"created": [task_id, "cfg"], "read": [task_id, webhook.url()]}


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a2a_js_sdk_0_3(agent: Server, js_sdk: Path, webhook: Webhook, transport: str) -> None:
    script = js_sdk / JS_SCRIPT.name  # next to node_modules, where ESM imports resolve
    shutil.copyfile(JS_SCRIPT, script)
    argv = ["node", str(script), agent.url, transport, webhook.url()]
    got = steps(subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False))
    task_id = common(got, f"{agent.url}/", webhook, transport)
    assert got["send"] == {"kind": "task", "state": "completed", "text": "héllo"}
    # Both bindings' errors reach the client as its typed errors.
    suffix = "JSONRPCError" if transport == "JSONRPC" else "Error"
    assert got["cancel-again"]["error"] == f"TaskNotCancelable{suffix}"
    assert got["get-unknown"]["error"] == f"TaskNotFound{suffix}"
    assert got["push"] == {
        "created": [task_id, "cfg"],
        "read": [task_id, webhook.url()],
        "listed": ["cfg", "other"],
        "left": ["cfg"],
    }


KEY = "alice-key-" + "k" * 32


@pytest.fixture(scope="module")
def members() -> Iterator[Server]:
    """A server with skills for signed-in callers only: it has an extended card."""
    started = Server(
        {
            "A2A_HANDLER": "tests.handlers.members",
            "A2A_AUTH": "api-key",
            "A2A_API_KEYS": f"alice:{hashed(KEY)}",
        }
    )
    yield started
    started.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a2a_sdk_0_3_reads_the_extended_card(
    members: Server, python_sdk: Path, transport: str
) -> None:
    argv = [str(python_sdk), str(PYTHON_SCRIPT), "extended", members.url, transport, KEY]
    got = steps(subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False))
    assert got["extended"] == {"public": ["hello"], "full": ["hello", "vault"]}


@pytest.fixture(scope="module")
def under_a_path(webhook: Webhook) -> Iterator[str]:
    """A server reached under a path (A2A_PUBLIC_URL's): the URL its card names."""
    port = free_port()
    url = f"http://localhost:{port}/agents/x"
    env = {
        "A2A_HANDLER": "functions.handlers.sample",
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_PUBLIC_URL": url,
    }
    started = Server(env, port=port)
    yield url
    started.stop()


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a2a_js_sdk_0_3_under_a_path(
    under_a_path: str, js_sdk: Path, webhook: Webhook, transport: str
) -> None:
    """The client finds the card under the path and follows the card's URLs (with the path)."""
    script = js_sdk / JS_SCRIPT.name
    shutil.copyfile(JS_SCRIPT, script)
    # The card's resolver takes a base URL: with the final `/`, as a user gives it.
    argv = ["node", str(script), f"{under_a_path}/", transport, webhook.url()]
    got = steps(subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False))
    common(got, under_a_path, webhook, transport)  # REST: every path is /agents/x/v1/...
