"""Two stacks for the same worker scenarios: the embedded backend in this process, and the
emulator stack (two `a2a` processes and one `worker` process under functions-framework, the
Firestore emulator, the Cloud Tasks emulator dispatching to the worker over HTTP).

Both serve tests.handlers.long, a LONG_RUNNING handler that logs what it sees to a file.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
import requests

from emulator.firestore import FirestoreEmulator
from shared.app import build
from shared.queue.inline import InlineQueue
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

from tests.conftest import (
    LOCATION,
    SA,
    WORK_MAX_ATTEMPTS,
    Client,
    Server,
    wait_queue_empty,
    wait_until,
)

BUDGET = 1.5  # seconds a blocking send waits for the worker
LEASE = 1.5  # seconds; the worker heartbeats every LEASE / 3


class Stack:
    """Sends JSON-RPC 1.0 requests to an `a2a` instance (0 or 1) and reads the handler's log."""

    name: str
    log: Path

    def post(self, body: dict[str, Any], instance: int = 0) -> dict[str, Any]:
        raise NotImplementedError

    def crash_worker(self) -> None:
        """Kill the worker mid-run and bring it back (the emulator stack only)."""
        raise NotImplementedError

    def rpc(self, method: str, params: dict[str, Any], instance: int = 0) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = self.post(body, instance)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def send(
        self, text: str, *, blocking: bool = False, message_id: str | None = None
    ) -> dict[str, Any]:
        message = {
            "messageId": message_id or str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        params = {"message": message, "configuration": {"returnImmediately": not blocking}}
        task: dict[str, Any] = self.rpc("SendMessage", params)["task"]
        return task

    def get(self, task_id: str) -> dict[str, Any]:
        return self.rpc("GetTask", {"id": task_id})

    def wait_for(
        self,
        task_id: str,
        done: Callable[[dict[str, Any]], bool],
        timeout: float = 20,
    ) -> dict[str, Any]:
        seen: list[dict[str, Any]] = []

        def arrived() -> bool:
            seen.append(self.get(task_id))
            return done(seen[-1])

        wait_until(arrived, timeout, lambda: f"{self.name}: task never got there: {seen[-1]}")
        return seen[-1]

    def wait_state(self, task_id: str, state: str, timeout: float = 20) -> dict[str, Any]:
        return self.wait_for(task_id, lambda t: t["status"]["state"] == state, timeout)

    def settle(self, timeout: float = 20) -> None:
        """Wait until the work queue holds nothing: every queued turn ran (or ended), so
        nothing more will be written unless someone sends again."""
        raise NotImplementedError

    def seen(self, task_id: str) -> list[tuple[float, str]]:
        """What the handler logged for this task: (time, start|canceled|end)."""
        if not self.log.exists():
            return []
        lines = [line.split() for line in self.log.read_text().splitlines()]
        return [(float(t), what) for t, what, task in lines if task == task_id]


class Embedded(Stack):
    name = "embedded"

    def __init__(self, log: Path) -> None:
        self.log = log
        settings = Settings(
            handler="tests.handlers.long",
            blocking_budget=BUDGET,
            lease_seconds=LEASE,
            commit_interval=0.1,
        )
        self.client = Client(build(settings, store=MemoryTaskStore()))

    def settle(self, timeout: float = 20) -> None:
        queue = self.client.app.service.ports.turns.queue
        assert isinstance(queue, InlineQueue)
        assert queue.join(timeout), f"the in-process work queue did not drain in {timeout} s"

    def post(self, body: dict[str, Any], instance: int = 0) -> dict[str, Any]:
        response = self.client.post(body, {"A2A-Version": "1.0"})
        assert response.status_code == 200, response.content
        answer: dict[str, Any] = response.json()
        return answer


class Emulated(Stack):
    name = "emulators"

    def __init__(self, log: Path, project: str, queue: str, tasks: CloudTasksClient) -> None:
        self.log = log
        self.queue = queue
        self.tasks = tasks
        common = {
            "A2A_BACKEND": "firestore",
            "GOOGLE_CLOUD_PROJECT": project,
            "A2A_HANDLER": "tests.handlers.long",
            "A2A_TASKS_SERVICE_ACCOUNT": SA,
            "A2A_LEASE_SECONDS": str(LEASE),
            "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
            "A2A_WORK_MAX_ATTEMPTS": str(WORK_MAX_ATTEMPTS),
            "TEST_HANDLER_LOG": str(log),
        }
        # No A2A_WORKER_URL on the worker (the emulator allows it): it takes its audience from
        # the request, and runs the turns it hands over itself (shared.app.build_worker).
        self.worker_env = common
        self.worker = Server(common, target="worker")
        a2a_env = {
            **common,
            "A2A_WORKER_URL": f"{self.worker.url}/",
            "A2A_REGION": LOCATION,
            "A2A_WORK_QUEUE": queue.rsplit("/", 1)[-1],
            "A2A_BLOCKING_BUDGET_SECONDS": str(BUDGET),
        }
        self.a2a = [Server(a2a_env), Server(a2a_env)]

    def post(self, body: dict[str, Any], instance: int = 0) -> dict[str, Any]:
        server = self.a2a[instance]
        response = requests.post(
            server.url,
            data=json.dumps(body),
            headers={"Content-Type": "application/json", "A2A-Version": "1.0"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def settle(self, timeout: float = 20) -> None:
        wait_queue_empty(self.tasks, self.queue, timeout)

    def crash_worker(self) -> None:
        self.worker.kill()
        self.worker.log.close()
        self.worker = Server(self.worker_env, target="worker", port=self.worker.port)

    def stop(self) -> None:
        for server in [*self.a2a, self.worker]:
            server.stop()


@pytest.fixture(scope="module")
def handler_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    log = tmp_path_factory.mktemp("worker") / "handler.log"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TEST_HANDLER_LOG", str(log))  # the embedded stack's handler reads it
        yield log


@pytest.fixture(scope="module")
def emulated(
    handler_log: Path,
    firestore_emulator: FirestoreEmulator,
    work_queue: str,
    tasks_client: CloudTasksClient,
) -> Iterator[Emulated]:
    stack = Emulated(handler_log, firestore_emulator.project, work_queue, tasks_client)
    try:
        yield stack
    finally:
        stack.stop()


@pytest.fixture(scope="module", params=["embedded", "emulators"])
def stack(request: pytest.FixtureRequest, handler_log: Path) -> Stack:
    if request.param == "embedded":
        return Embedded(handler_log)
    emulated: Emulated = request.getfixturevalue("emulated")
    return emulated
