"""One trace across every hop on the emulator stack: a client's `traceparent` on a send to
`a2a`, the Cloud Tasks (emulator) entry that queues the turn, the `worker` running it, the push
entry, `deliver` posting it, and the webhook, which is told the same trace. Each process logs
JSON (A2A_LOG_FORMAT=json, as on Cloud Functions), and every line of the flow carries Cloud
Logging's trace field of that trace."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from shared.observability.context import owner_tag
from tests.conftest import LOCATION, SA, Server, make_queue, wait_queue_empty
from tests.webhook import Webhook

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

pytestmark = pytest.mark.emulator

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
OWNER_KEY = "trace-test-key"


@dataclass
class Stack:
    a2a: Server
    worker: Server
    deliver: Server
    queues: tuple[str, str]
    project: str

    def lines(self, server: Server) -> list[dict[str, Any]]:
        """The server's JSON log lines (gunicorn's own start-up lines are not ours)."""
        found = []
        for line in server.output().splitlines():
            if line.startswith("{"):
                found.append(json.loads(line))
        return found


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, tasks_emulator: TasksEmulator) -> Iterator[Stack]:
    project = firestore_emulator.project
    work = make_queue(tasks_emulator, project, "trace-work", 5, backoff=(0.2, 1, 2))
    push = make_queue(tasks_emulator, project, "trace-push", 5, backoff=(0.2, 1, 2))
    common = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.logs",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
        "A2A_PUSH_QUEUE": push.rsplit("/", 1)[-1],
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_COMMIT_INTERVAL_SECONDS": "0.05",
        "A2A_LOG_FORMAT": "json",
        "A2A_LOG_OWNER_KEY": OWNER_KEY,
    }
    deliver = Server(common, target="deliver")
    common["A2A_DELIVER_URL"] = f"{deliver.url}/"
    worker = Server(common, target="worker")
    a2a = Server({**common, "A2A_WORKER_URL": f"{worker.url}/"})
    try:
        yield Stack(a2a, worker, deliver, (work, push), project)
    finally:
        for server in (a2a, worker, deliver):
            server.stop()


def test_one_trace_from_the_client_through_both_queues_to_the_webhook(
    stack: Stack, tasks_client: CloudTasksClient
) -> None:
    hook = Webhook()
    try:
        message = {"messageId": "m-traced", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {
                "message": message,
                "configuration": {
                    "returnImmediately": True,
                    "taskPushNotificationConfig": {"url": hook.url()},
                },
            },
        }
        headers = {
            "Content-Type": "application/json",
            "A2A-Version": "1.0",
            "traceparent": f"00-{TRACE}-{PARENT}-01",
        }
        answer = requests.post(stack.a2a.url, data=json.dumps(body), headers=headers, timeout=30)
        task_id = answer.json()["result"]["task"]["id"]

        def completed(received: list[Any]) -> bool:
            return any(
                r.json.get("statusUpdate", {}).get("status", {}).get("state")
                == "TASK_STATE_COMPLETED"
                for r in received
            )

        hook.wait_until(completed, timeout=30)
        for queue in stack.queues:
            wait_queue_empty(tasks_client, queue)
        posted = hook.accepted()
    finally:
        hook.close()
    # The webhook heard the trace on every POST.
    assert {r.headers["traceparent"].split("-")[1] for r in posted} == {TRACE}
    trace_field = f"projects/{stack.project}/traces/{TRACE}"
    a2a, worker, deliver = (stack.lines(s) for s in (stack.a2a, stack.worker, stack.deliver))
    [send] = [x for x in a2a if x.get("method") == "SendMessage"]
    assert send["taskId"] == task_id and send["httpRequest"]["status"] == 200
    [turn] = [x for x in worker if x.get("kind") == "worker" and x.get("outcome") == "completed"]
    assert turn["taskId"] == task_id and turn["queueLagSeconds"] >= 0
    assert turn["owner"] == owner_tag_with(OWNER_KEY, "anonymous")
    [handled] = [x for x in worker if x["logger"] == "tests.handlers.logs"]
    delivered = [x for x in deliver if x.get("outcome") == "delivered"]
    assert delivered and all(x["taskId"] == task_id for x in delivered)
    # Every line of the flow, in each of the three processes, is in the client's trace: the
    # lines about the task, the handler's own, and every call Cloud Tasks made.
    every = a2a + worker + deliver
    flow = [x for x in every if x.get("taskId") == task_id or x is handled]
    flow += [x for x in worker + deliver if x.get("httpRequest", {}).get("requestMethod") == "POST"]
    assert len(flow) >= 4
    assert {x["logging.googleapis.com/trace"] for x in flow} == {trace_field}, flow
    # Each hop logs a span of its own.
    hops = {x["logging.googleapis.com/spanId"] for x in [send, turn, *delivered]}
    assert len(hops) == 2 + len(delivered)


def owner_tag_with(key: str, owner: str) -> str:
    from shared.observability import context

    try:
        context.set_owner_key(key)
        return owner_tag(owner)
    finally:
        context.set_owner_key(None)
