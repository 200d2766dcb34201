"""Shared fixtures: the app in process, through its front (fast), and as a real
functions-framework server."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import hypothesis
import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from shared.app import build
from shared.bindings.asgi import App, Front
from shared.bindings.http import HttpApp
from shared.model import StatusUpdate, TaskState
from shared.ports import TaskStore
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests.asgi_transport import AsgiTransport, HttpClient

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

# The emulator fixtures: firestore_emulator, clean_firestore, tasks_emulator, tasks_client.
pytest_plugins = ["emulator.pytest_plugin"]

# Property tests draw the same examples on every run of the suite, so CI cannot fail on an
# example no earlier run met; HYPOTHESIS_PROFILE=explore draws new ones (and `make fuzz`
# explores the hostile requests at length).
hypothesis.settings.register_profile("suite", derandomize=True, deadline=None)
hypothesis.settings.register_profile("explore", deadline=None)
hypothesis.settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))

# httpx logs each request it sends at INFO: an in-process client's would mix with the lines
# the app logs, which tests read.
logging.getLogger("httpx").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent
FUNCTIONS_FRAMEWORK = Path(sys.executable).with_name("functions-framework")


# What every answer of an in-process client is checked by, for the test's length (the
# schema_checked fixture adds the schema's check).
CHECKS: list[Callable[[httpx.Response], None]] = []


class _Checked(httpx.BaseTransport):
    """A transport whose every answer passes CHECKS before the test sees it (a stream's as
    the test reads it: a check wraps the answer's stream)."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        for check in CHECKS:
            check(response)
        return response

    def close(self) -> None:
        self.inner.close()


def served(app: App, settings: Settings | None = None) -> HttpClient:
    """An httpx client of `app` served as a function serves it (its front,
    shared.bindings.asgi, with the settings' threads and body limits), in process."""
    settings = settings or Settings()
    front = Front.of(lambda: app, settings)
    return HttpClient(transport=_Checked(AsgiTransport(front)), base_url="http://localhost")


class Client:
    """A JSON-RPC caller of an `a2a` app, through its front in process."""

    def __init__(self, app: HttpApp) -> None:
        self.app = app
        self.http = served(app, app.settings)

    def post(self, body: Any, headers: dict[str, str] | None = None, path: str = "/") -> Any:
        data = body if isinstance(body, bytes | str) else json.dumps(body)
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        return self.http.post(path, content=data, headers=hdrs)

    def rpc(
        self,
        method: str,
        params: Any = None,
        *,
        version: str | None = None,
        request_id: Any = 1,
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            body["params"] = params
        hdrs = dict(headers or {})
        if version is not None:
            hdrs["A2A-Version"] = version
        response = self.post(body, hdrs)
        assert response.status_code == 200, response.content
        payload: dict[str, Any] = response.json()
        return payload

    def result(self, method: str, params: Any = None, **kwargs: Any) -> Any:
        payload = self.rpc(method, params, **kwargs)
        assert "error" not in payload, payload
        return payload["result"]

    def error(self, method: str, params: Any = None, **kwargs: Any) -> dict[str, Any]:
        payload = self.rpc(method, params, **kwargs)
        assert "result" not in payload, payload
        error: dict[str, Any] = payload["error"]
        return error


@pytest.fixture
def make_client() -> Iterator[Callable[..., Client]]:
    """A client over a fresh in-process app; keyword arguments are Settings fields. The apps'
    background queues stop after the test."""
    made: list[Client] = []

    def make(**settings: Any) -> Client:
        values = {"handler": "functions.handlers.sample", **settings}
        client = Client(build(Settings(**values), store=MemoryTaskStore()))
        made.append(client)
        return client

    yield make
    for client in made:
        client.http.close()  # answers a test left open: their clients go away
        client.app.close()


@pytest.fixture
def client(make_client: Callable[..., Client]) -> Client:
    return make_client()


@pytest.fixture
def schema_checked() -> Iterator[None]:
    """Every answer a test gets through an in-process client is checked against its
    version's official schema (`tests/schema.py`) before the test sees it; stream frames as
    it reads them."""
    from tests import schema

    CHECKS.append(schema.check)
    yield
    CHECKS.remove(schema.check)


SA = "a2a-tasks@demo-a2a-functions.iam.gserviceaccount.com"  # whose Cloud Tasks tokens count
LOCATION = "local"  # the emulated Cloud Tasks location
WORK_MAX_ATTEMPTS = 10  # the test work queues' attempts, and the worker's setting to match
POLL = 0.02  # seconds between two looks at another process's state


def wait_until(check: Callable[[], bool], timeout: float, failure: Callable[[], str]) -> None:
    """Look again until `check()` holds; AssertionError with `failure()` after `timeout`.

    For what another process does (a server, an emulator, a handler that reports only through
    the A2A API and a log file): there is no event to wait on, so the test looks again. In
    this process, wait on an event instead."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(failure())
        time.sleep(POLL)


def wait_for_state(
    store: TaskStore, owner: str, task_id: str, state: TaskState, timeout: float = 10
) -> None:
    """Follow the task's log until a status event puts it in `state` (in this process: the
    store's tail wakes at each commit, nothing polls)."""
    stored = store.get(owner, task_id)
    if stored is not None and stored.task.status.state is state:
        return
    tail = store.tail(owner, task_id, stored.last_seq if stored is not None else 0)
    deadline = time.monotonic() + timeout
    try:
        while (left := deadline - time.monotonic()) > 0:
            for logged in tail.next(left):
                event = logged.event
                if isinstance(event, StatusUpdate) and event.status.state is state:
                    return
    finally:
        tail.close()
    raise AssertionError(f"task {task_id} was not {state.value} within {timeout} s")


def make_queue(
    emulator: TasksEmulator,
    project: str,
    prefix: str,
    max_attempts: int,
    *,
    backoff: tuple[float, float, int],
) -> str:
    """A Cloud Tasks (emulator) queue of a test module's own: `max_attempts`, and `backoff` as
    (min seconds, max seconds, doublings), short where the deploy's lasts minutes."""
    from google.cloud import tasks_v2

    low, high, doublings = backoff
    parent = f"projects/{project}/locations/{LOCATION}"
    name = f"{parent}/queues/{prefix}-{uuid.uuid4().hex[:8]}"
    retry = tasks_v2.RetryConfig(
        max_attempts=max_attempts,
        min_backoff=timedelta(seconds=low),
        max_backoff=timedelta(seconds=high),
        max_doublings=doublings,
    )
    client = emulator.client()
    try:
        client.create_queue(parent=parent, queue=tasks_v2.Queue(name=name, retry_config=retry))
    finally:
        client.transport.close()  # type: ignore[no-untyped-call]
    return name


@pytest.fixture(scope="module")
def work_queue(tasks_emulator: TasksEmulator, firestore_emulator: FirestoreEmulator) -> str:
    """A work queue of the module's own, retrying quickly (the deploy's backs off for
    minutes)."""
    project = firestore_emulator.project
    return make_queue(tasks_emulator, project, "work", WORK_MAX_ATTEMPTS, backoff=(0.2, 1, 3))


def wait_queue_empty(client: CloudTasksClient, queue: str, timeout: float = 30) -> None:
    """Wait until the Cloud Tasks (emulator) queue holds no task: every one was accepted by its
    target or given up, so nothing more will be dispatched."""
    wait_until(
        lambda: not list(client.list_tasks(parent=queue)),
        timeout,
        lambda: f"{queue} still holds tasks after {timeout} s",
    )


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server:
    """`functions-framework --target=<target>` in its own process, as `make run` starts `a2a`.

    Its output goes to a temporary file (`output()`): a pipe nobody reads would block a
    chatty server once full. `port` reuses a port, to restart a killed server in its place.
    """

    def __init__(self, env: dict[str, str], target: str = "a2a", port: int | None = None) -> None:
        self.target = target
        self.port = port or free_port()
        self.url = f"http://localhost:{self.port}"
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the server
        self.process = subprocess.Popen(
            [
                str(FUNCTIONS_FRAMEWORK),
                f"--target={target}",
                f"--source={ROOT / 'functions' / 'main.py'}",
                f"--port={self.port}",
            ],
            cwd=ROOT,
            env=full_env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            # Its own process group: gunicorn serves from a forked child, which kill() must
            # reach too.
            start_new_session=True,
        )
        self._wait()

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def _wait(self) -> None:
        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited at start:\n{self.output()}")
            try:
                # Any answer will do: the worker answers this GET with 405.
                # A loaded machine may take longer than that to answer the first request
                # (imports, the app's build): a read timeout means "not yet", like a refusal.
                requests.get(f"{self.url}/.well-known/agent-card.json", timeout=5)
                return True
            except (requests.ConnectionError, requests.Timeout):
                return False

        try:
            wait_until(answers, 30, lambda: "the server did not answer within 30 s")
        except BaseException:  # never leave the process behind, whatever ended the wait
            self.stop()
            raise

    def rpc(self, body: Any, headers: dict[str, str] | None = None, path: str = "/") -> Any:
        hdrs = {"Content-Type": "application/json", **(headers or {})}
        response = requests.post(
            f"{self.url}{path}", data=json.dumps(body), headers=hdrs, timeout=30
        )
        assert response.status_code == 200, response.text
        return response.json()

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()

    def kill(self) -> None:
        """SIGKILL to the whole server, as an instance that dies mid-request: nothing cleans up."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that used a server (a fixture's value) shows the server's output: what
    it logged is often the cause, and the process is gone once the test ends."""
    report = yield
    if report.failed:
        for name, value in getattr(item, "funcargs", {}).items():
            if isinstance(value, Server):
                try:
                    text = value.output()
                except ValueError:  # its log is closed: the server was stopped
                    continue
                report.sections.append((f"server {name} ({value.url}) output", text[-20_000:]))
    return report


@pytest.fixture
def start_server() -> Iterator[Callable[..., Server]]:
    """Start servers with extra environment variables; all are stopped after the test."""
    servers: list[Server] = []

    def start(**env: str) -> Server:
        server = Server(env)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    """One sample-agent server for a test module."""
    started = Server({"A2A_HANDLER": "functions.handlers.sample"})
    yield started
    started.stop()
