"""Live progress on the emulator stack, as `make dev` runs it: two `a2a` processes, `worker`
and `deliver`, the Firestore and Cloud Tasks emulators. A LONG_RUNNING handler
(tests.handlers.live) reports `phase 1 at <time>` in the worker, then works until the test,
having seen the progress, lets it go on: the progress reaches a stream on the other `a2a`
process, GetTask polling there, and a webhook, while the handler still works (before the
heartbeat, a third of the lease, would have committed it).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from tests import sse
from tests.conftest import LOCATION, SA, Server, free_port, make_queue, wait_until
from tests.handlers import live
from tests.webhook import Webhook

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

pytestmark = pytest.mark.emulator

V1_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
LEASE = 60.0  # seconds: its heartbeat (20 s) is far later than any figure below
LATE = 1.0  # seconds from ctx.progress: later, a stream or GetTask did not see it live
PUSH_LATE = 5.0  # the webhook's: a commit, the push queue's dispatch, deliver, the POST


@dataclass
class Stack:
    a2a: Server  # where the client sends
    other: Server  # another a2a instance: streams and reads go here
    gates: Path  # the handler's FIFOs (tests.handlers.live)

    def send(self, push: dict[str, Any] | None = None) -> str:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": "go"}]}
        configuration: dict[str, Any] = {"returnImmediately": True}
        if push is not None:
            configuration["taskPushNotificationConfig"] = push
        task: dict[str, Any] = self.rpc(
            self.a2a, "SendMessage", {"message": message, "configuration": configuration}
        )["task"]
        return str(task["id"])

    def rpc(self, server: Server, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = server.rpc(body, V1_HEADERS)
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
        return result

    def release(self, task_id: str) -> None:
        """Let the handler go on, and wait for its task to complete (GetTask on a2a)."""
        live.release(task_id, self.gates)
        wait_until(
            lambda: (
                self.rpc(self.a2a, "GetTask", {"id": task_id})["status"]["state"]
                == "TASK_STATE_COMPLETED"
            ),
            30,
            lambda: f"task {task_id} did not complete",
        )


def said_at(document: Any) -> float | None:
    """When the handler said the progress found in `document` (any JSON), if it is there."""
    if isinstance(document, dict):
        text = document.get("text")
        if isinstance(text, str) and (at := live.said_at(text)) is not None:
            return at
        document = list(document.values())
    if isinstance(document, list):
        for item in document:
            if (at := said_at(item)) is not None:
                return at
    return None


@pytest.fixture(scope="module")
def stack(
    firestore_emulator: FirestoreEmulator,
    tasks_emulator: TasksEmulator,
    tasks_client: CloudTasksClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    project = firestore_emulator.project
    work = make_queue(tasks_emulator, project, "work-live", 3, backoff=(0.2, 1, 1))
    push = make_queue(tasks_emulator, project, "push-live", 3, backoff=(0.2, 1, 1))
    worker_port, deliver_port = free_port(), free_port()
    gates = tmp_path_factory.mktemp("gates")
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.live",
        "TEST_HANDLER_GATES": str(gates),
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_REGION": LOCATION,
        "A2A_LEASE_SECONDS": str(LEASE),
        "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
        "A2A_PUSH_QUEUE": push.rsplit("/", 1)[-1],
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_DELIVER_URL": f"http://localhost:{deliver_port}/",
    }
    a2a_env = {**env, "A2A_WORKER_URL": f"http://localhost:{worker_port}/"}
    started: list[Server] = []
    try:
        started.append(Server(env, target="worker", port=worker_port))
        started.append(Server(env, target="deliver", port=deliver_port))
        started.append(Server(a2a_env))
        started.append(Server(a2a_env))
        yield Stack(started[2], started[3], gates)
    finally:
        for server in started:
            server.stop()


def test_progress_reaches_a_stream_on_another_instance_while_the_handler_works(
    stack: Stack,
) -> None:
    task_id = stack.send()
    subscribe = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    response = sse.stream(stack.other.url, subscribe, V1_HEADERS, timeout=LATE + 5)
    try:
        # The opening snapshot holds it if the handler spoke before the stream opened.
        for event in sse.read(response):
            if (at := said_at(event.data)) is not None:
                assert time.time() - at < LATE
                break
        else:
            raise AssertionError("the stream ended without the progress")
    finally:
        response.close()
    stack.release(task_id)


def test_progress_reaches_get_task_on_another_instance_while_the_handler_works(
    stack: Stack,
) -> None:
    task_id = stack.send()
    seen: list[float] = []

    def reported() -> bool:
        task = stack.rpc(stack.other, "GetTask", {"id": task_id})
        at = said_at(task.get("status"))
        if at is not None:
            seen.append(time.time() - at)
        return at is not None

    wait_until(reported, LATE + 5, lambda: f"GetTask never showed the progress of {task_id}")
    assert seen[0] < LATE
    stack.release(task_id)


def test_progress_reaches_a_webhook_while_the_handler_works(stack: Stack) -> None:
    webhook = Webhook()
    try:
        task_id = stack.send(push={"url": webhook.url()})
        [progress] = [
            r
            for r in webhook.wait_until(
                lambda got: any(said_at(r.json) is not None for r in got), PUSH_LATE + 5
            )
            if said_at(r.json) is not None
        ]
        at = said_at(progress.json)
        assert at is not None and progress.at - at < PUSH_LATE
        stack.release(task_id)
    finally:
        webhook.close()
