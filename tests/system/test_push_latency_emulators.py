"""How soon a worker turn's last commit reaches its webhook, on the emulator stack: `a2a`
queues the turn on the Cloud Tasks emulator, `worker` runs it and commits in windows, each
commit queues a delivery that `deliver` posts. The turn's commits follow one another closer
than a delivery takes, so its last one's delivery finds the config busy with the one before:
it used to come back 2 s later (issue 35: committed at :01.612, at the webhook at :03.688);
now the delivery that holds the config sends it before letting the config go.

Measured: each task's terminal commit (the task document's `updatedAt`, written by the
worker) against the webhook's receipt of its `completed` status, same machine's clock.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from shared.store.firestore import FirestoreTaskStore
from tests.conftest import LOCATION, SA, Server, free_port, make_queue
from tests.webhook import Received, Webhook

pytestmark = pytest.mark.emulator

TASKS = 50
AT_ONCE = 5  # sends in flight together


@dataclass
class Stack:
    a2a: Server
    worker: Server
    deliver: Server
    project: str


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, tasks_emulator: TasksEmulator) -> Iterator[Stack]:
    project = firestore_emulator.project
    work = make_queue(tasks_emulator, project, "latency-work", 5, backoff=(0.2, 1, 2))
    push = make_queue(tasks_emulator, project, "latency-push", 5, backoff=(0.2, 1, 2))
    common = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
        "A2A_PUSH_QUEUE": push.rsplit("/", 1)[-1],
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
    }
    # As deployed, `deliver` knows its own URL: a delivery it queues again comes back to it.
    port = free_port()
    common["A2A_DELIVER_URL"] = f"http://localhost:{port}/"
    deliver = Server(common, target="deliver", port=port)
    worker = Server(common, target="worker")
    a2a = Server({**common, "A2A_WORKER_URL": f"{worker.url}/"})
    try:
        yield Stack(a2a, worker, deliver, project)
    finally:
        for server in (a2a, worker, deliver):
            server.stop()


def _completed(received: list[Received], task_id: str) -> Received | None:
    for r in received:
        update = r.json.get("statusUpdate", {})
        if update.get("taskId") == task_id and update["status"]["state"] == "TASK_STATE_COMPLETED":
            return r
    return None


def test_a_worker_turns_last_commit_reaches_the_webhook_without_waiting(stack: Stack) -> None:
    hook = Webhook()
    store = FirestoreTaskStore(stack.project)
    try:

        def send(n: int) -> str:
            message = {"messageId": f"lat-{n}", "role": "ROLE_USER", "parts": [{"text": "steps=2"}]}
            body = {
                "jsonrpc": "2.0",
                "id": n,
                "method": "SendMessage",
                "params": {
                    "message": message,
                    "configuration": {
                        "returnImmediately": True,
                        "taskPushNotificationConfig": {"url": hook.url()},
                    },
                },
            }
            answer = stack.a2a.rpc(body, {"A2A-Version": "1.0"})
            task_id: str = answer["result"]["task"]["id"]
            # Each task's turn ends before the next batch: the latency is the stack's, not
            # a queue of 50 turns on two cores.
            hook.wait_until(lambda got: _completed(got, task_id) is not None, timeout=60)
            return task_id

        with ThreadPoolExecutor(AT_ONCE) as pool:
            task_ids = list(pool.map(send, range(TASKS)))
        received = hook.accepted()
        latencies = []
        for task_id in task_ids:
            stored = store.get("anonymous", task_id)
            arrived = _completed(received, task_id)
            assert stored is not None and arrived is not None
            latencies.append(arrived.at - stored.updated_at.timestamp())
        latencies.sort()
        p50 = statistics.median(latencies)
        p99 = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]
        print(
            f"\ncommit -> webhook over {TASKS} worker turns: p50 {p50 * 1000:.0f} ms, "
            f"p99 {p99 * 1000:.0f} ms, max {latencies[-1] * 1000:.0f} ms"
        )
        # The 2 s re-queue would put a good share past a second.
        assert p99 < 1.0, latencies
    finally:
        hook.close()
