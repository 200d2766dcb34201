"""Push notifications on the emulator stack: `a2a` enqueues on the Cloud Tasks emulator, which
dispatches to `deliver` (its own functions-framework process) with a signed token; the webhook
is down (resets every connection) while the queue retries, and still gets every event, in
order, once."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from shared.dialects.v1_0 import V1
from shared.model import ArtifactUpdate, StatusUpdate
from shared.store.firestore import FirestoreTaskStore
from tests.conftest import LOCATION, SA, Server, make_queue, wait_queue_empty
from tests.webhook import Webhook

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient


@pytest.fixture(scope="module")
def push_queue(tasks_emulator: TasksEmulator, firestore_emulator: FirestoreEmulator) -> str:
    """A push queue retrying every second or two, for long enough to outlast the outage."""
    return make_queue(tasks_emulator, firestore_emulator.project, "push", 100, backoff=(0.5, 2, 2))


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, push_queue: str) -> Iterator[dict[str, Server]]:
    common = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": firestore_emulator.project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_COMMIT_INTERVAL_SECONDS": "0.05",
    }
    deliver = Server({**common, "A2A_PUSH_MAX_ATTEMPTS": "100"}, target="deliver")
    a2a = Server(
        {
            **common,
            "A2A_DELIVER_URL": f"{deliver.url}/",
            "A2A_REGION": LOCATION,
            "A2A_PUSH_QUEUE": push_queue.rsplit("/", 1)[-1],
        }
    )
    yield {"a2a": a2a, "deliver": deliver}
    a2a.stop()
    deliver.stop()


def send(server: Server, params: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    answer = server.rpc(body, {"A2A-Version": "1.0"})
    assert "result" in answer, answer
    task: dict[str, Any] = answer["result"]["task"]
    return task


def test_an_outage_loses_nothing_and_posts_nothing_twice(
    stack: dict[str, Server],
    firestore_emulator: FirestoreEmulator,
    tasks_client: CloudTasksClient,
    push_queue: str,
) -> None:
    hook = Webhook()
    hook.down()
    try:
        message = {"messageId": "m-outage", "role": "ROLE_USER", "parts": [{"text": "steps=3"}]}
        config = {"url": hook.url(), "token": "tok"}
        task = send(
            stack["a2a"],
            {"message": message, "configuration": {"taskPushNotificationConfig": config}},
        )
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        store = FirestoreTaskStore(firestore_emulator.project)
        stored = store.get("anonymous", task["id"])
        assert stored is not None
        expected = [
            V1.stream_update(e.event, stored.task)
            for e in store.events("anonymous", task["id"])
            if isinstance(e.event, StatusUpdate | ArtifactUpdate)
        ]
        # The receiver resets every connection; the config's back-off spaces the retries
        # (BACKOFF_FIRST, then double: a third refusal would cost the test 20 s more).
        hook.wait_refused(2, timeout=60)
        assert hook.received == []
        hook.up()
        got = hook.wait_accepted(len(expected), timeout=30)
        # Retries still queued must find nothing left to post: wait until none is left.
        wait_queue_empty(tasks_client, push_queue)
        assert [r.json for r in hook.accepted()] == expected
        assert all(r.headers["X-A2A-Notification-Token"] == "tok" for r in got)
    finally:
        hook.close()


def test_deliver_refuses_callers_without_a_cloud_tasks_token(stack: dict[str, Server]) -> None:
    payload = json.dumps({"owner": "anonymous", "taskId": "t", "configId": "c", "seq": 1})
    url = stack["deliver"].url
    for headers in ({}, {"Authorization": "Bearer not-a-token"}):
        response = requests.post(url, data=payload, headers=headers, timeout=10)
        assert response.status_code == 401
        assert "only Cloud Tasks may call the deliver" in response.json()["error"]
