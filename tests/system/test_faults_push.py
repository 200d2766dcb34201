"""Push notifications through faults on the emulator stack (`a2a` and `deliver` processes, the
Cloud Tasks and Firestore emulators): a Cloud Tasks outage (the emulator paused with SIGSTOP,
which keeps its data) neither stalls the sends nor loses a notification; a webhook that hangs
for 40 s gets everything once it recovers (deliveries waiting for its config spend no
attempt), and one that never answers has its failure recorded on its config. The push queue
retries as the deploy's does, only sooner: its retry settings and A2A_PUSH_MAX_ATTEMPTS are
the ones a user sets."""

from __future__ import annotations

import os
import signal
import socketserver
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from shared.dialects.v1_0 import V1
from shared.model import ArtifactUpdate, StatusUpdate
from shared.store.firestore import FirestoreTaskStore
from tests.conftest import (
    LOCATION,
    SA,
    Server,
    free_port,
    make_queue,
    wait_queue_empty,
    wait_until,
)
from tests.webhook import Webhook

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

ATTEMPTS = 4  # the push queue's max_attempts, and the deliver function's setting to match
OUTAGE = 12.0  # seconds Cloud Tasks is paused
HANG = 40.0  # seconds the webhook hangs


@pytest.fixture(scope="module")
def push_queue(tasks_emulator: TasksEmulator, firestore_emulator: FirestoreEmulator) -> str:
    """Four attempts, 1 s apart at first, doubling twice (the deploy's: 30, from 5 s)."""
    project = firestore_emulator.project
    return make_queue(tasks_emulator, project, "push-faults", ATTEMPTS, backoff=(1, 4, 2))


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, push_queue: str) -> Iterator[dict[str, Server]]:
    port = free_port()
    deliver_url = f"http://localhost:{port}/"
    common = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": firestore_emulator.project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_COMMIT_INTERVAL_SECONDS": "0.05",
        "A2A_DELIVER_URL": deliver_url,
        "A2A_REGION": LOCATION,
        "A2A_PUSH_QUEUE": push_queue.rsplit("/", 1)[-1],
        "A2A_PUSH_MAX_ATTEMPTS": str(ATTEMPTS),
    }
    # As deployed (infra/deploy.toml): deliver's timeout bounds its sending lease.
    deliver = Server({**common, "A2A_FUNCTION_TIMEOUT": "60"}, target="deliver", port=port)
    a2a = Server(common)
    yield {"a2a": a2a, "deliver": deliver}
    a2a.stop()
    deliver.stop()


class HangingWebhook(Webhook):
    """A Webhook that can also hang: take each connection and never answer, until `up()`."""

    _release: threading.Event | None = None

    def hang(self) -> None:
        release = self._release = threading.Event()

        class Hang(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                release.wait(120)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Hang, False)
        server.allow_reuse_address = True
        server.daemon_threads = True
        self.close()
        server.server_bind()
        server.server_activate()
        self._serve(server)

    def up(self) -> None:
        if self._release is not None:
            self._release.set()
        super().up()


def send(server: Server, text: str, config: dict[str, Any]) -> str:
    message = {
        "messageId": f"m-{time.monotonic_ns()}",
        "role": "ROLE_USER",
        "parts": [{"text": text}],
    }
    params = {"message": message, "configuration": {"taskPushNotificationConfig": config}}
    answer = server.rpc(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
        {"A2A-Version": "1.0"},
    )
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    return str(task["id"])


def expected(store: FirestoreTaskStore, task_id: str) -> list[dict[str, Any]]:
    """The task's notifications as its v1.0 webhook must receive them, in order."""
    stored = store.get("anonymous", task_id)
    assert stored is not None
    return [
        V1.stream_update(e.event, stored.task)
        for e in store.events("anonymous", task_id)
        if isinstance(e.event, StatusUpdate | ArtifactUpdate)
    ]


def task_of(payload: dict[str, Any]) -> str:
    """The task a v1.0 StreamResponse is about."""
    (update,) = payload.values()
    return str(update["taskId"])


def test_an_outage_a_hanging_webhook_and_a_dead_one_lose_no_notification(
    stack: dict[str, Server],
    tasks_emulator: TasksEmulator,
    firestore_emulator: FirestoreEmulator,
    tasks_client: CloudTasksClient,
    push_queue: str,
) -> None:
    """The three faults at once, so that the suite waits out the longest (the 40 s hang)
    only once: each is checked on its own webhook and tasks."""
    steady, hanging = Webhook(), HangingWebhook()
    hanging.hang()
    dead = f"http://localhost:{free_port()}/hook"  # nothing listens: every POST is refused
    a2a = stack["a2a"]
    try:
        # The first send builds the app (a cold start): before the outage, as are the tasks
        # of the hanging and the dead webhook.
        steady_tasks = [send(a2a, "steps=1 delay=0", {"url": steady.url()})]
        hung = send(a2a, "steps=4 delay=0.2", {"url": hanging.url(), "id": "hangs"})
        hung_at = time.monotonic()
        refused = send(a2a, "steps=1 delay=0", {"url": dead, "id": "dead"})

        # 1. Cloud Tasks paused 12 s: no send waits for it, no notification is lost.
        os.kill(tasks_emulator.pid, signal.SIGSTOP)
        paused = time.monotonic()
        try:
            for n in range(5):
                started = time.monotonic()
                steady_tasks.append(send(a2a, f"steps=2 delay=0 n={n}", {"url": steady.url()}))
                # Before, each commit waited out the enqueue's 10 s timeout (8: a loaded machine).
                assert time.monotonic() - started < 8
            # The outage lasts its length whatever the sends took (the fault, not a wait for
            # something to happen).
            time.sleep(max(0.0, OUTAGE - (time.monotonic() - paused)))
        finally:
            os.kill(tasks_emulator.pid, signal.SIGCONT)
        resumed = time.monotonic()
        store = FirestoreTaskStore(firestore_emulator.project)
        wanted = {task_id: expected(store, task_id) for task_id in steady_tasks}
        steady.wait_accepted(sum(len(updates) for updates in wanted.values()), timeout=60)
        assert time.monotonic() - resumed < 60

        # 2. The dead webhook: the queue's last attempt fails, and its config says so.
        def dead_config() -> dict[str, Any]:
            params = {"id": refused, "pushNotificationConfigId": "dead"}
            body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/pushNotificationConfig/get"}
            answer: dict[str, Any] = a2a.rpc({**body, "params": params})["result"]
            return answer

        wait_until(lambda: "metadata" in dead_config(), 30, lambda: f"{dead_config()}")
        failure = dead_config()["metadata"]
        assert failure["lastError"].startswith("no answer from the webhook")
        assert failure["failedAt"].endswith("Z")

        # 3. The hanging webhook recovers after 40 s and gets everything.
        time.sleep(max(0.0, HANG - (time.monotonic() - hung_at)))  # the fault's length
        hanging.up()
        recovered = time.monotonic()
        updates = expected(store, hung)
        hanging.wait_accepted(len(updates), timeout=30)
        assert time.monotonic() - recovered < 30

        wait_queue_empty(tasks_client, push_queue)  # nothing more will be posted
        assert [r.json for r in hanging.accepted()] == updates
        got = [r.json for r in steady.accepted()]
        for task_id, updates in wanted.items():
            assert [p for p in got if task_of(p) == task_id] == updates  # once, in order
    finally:
        steady.close()
        hanging.close()
