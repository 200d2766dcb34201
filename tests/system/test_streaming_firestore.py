"""Streams across processes on the Firestore emulator: one `a2a` process runs a task in the
background, another streams it, in listener mode and in polling mode alike.

A dropped connection resumed with Last-Event-ID gets every event exactly once, in order;
twenty concurrent subscribers get identical sequences.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest
import requests

from emulator.firestore import FirestoreEmulator
from shared.model import Message
from shared.store.firestore import FirestoreTaskStore
from tests import sse
from tests.conftest import Server

pytestmark = pytest.mark.emulator

V1 = {"A2A-Version": "1.0"}


@pytest.fixture(params=["listener", "polling"])
def pair(
    request: pytest.FixtureRequest,
    clean_firestore: FirestoreEmulator,
    start_server: Callable[..., Server],
) -> tuple[Server, Server, FirestoreTaskStore]:
    """The process that runs tasks, the one that streams them, and the store they share."""
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": clean_firestore.project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_STREAM_TAIL": request.param,
        # Twenty subscribers hold twenty threads.
        "THREADS": "32",
        "A2A_MAX_STREAMS": "24",
    }
    runner = start_server(**env)
    streamer = start_server(**env)
    return runner, streamer, FirestoreTaskStore(clean_firestore.project)


def start_task(server: Server, text: str) -> str:
    message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
    params = {"message": message, "configuration": {"returnImmediately": True}}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
    task_id: str = server.rpc(body, V1)["result"]["task"]["id"]
    return task_id


def subscribe(server: Server, task_id: str, last_event_id: str | None = None) -> Any:
    headers = dict(V1)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    return sse.stream(server.url, body, headers)


def logged(store: FirestoreTaskStore, task_id: str, after: int) -> list[int]:
    events = store.events("anonymous", task_id, after)
    return [e.seq for e in events if not isinstance(e.event, Message)]


def test_drop_mid_task_and_resume(pair: tuple[Server, Server, FirestoreTaskStore]) -> None:
    runner, streamer, store = pair
    task_id = start_task(runner, "steps=30 delay=0.05")
    response = subscribe(streamer, task_id)
    stream = sse.read(response)
    first = [next(stream) for _ in range(5)]
    response.close()  # the connection drops mid-task
    snapshot = first[0].data["result"]["task"]
    assert snapshot["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    rest = list(sse.read(subscribe(streamer, task_id, first[-1].id)))
    assert rest[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    got = [int(e.id or "") for e in first[1:] + rest]
    assert got == logged(store, task_id, int(first[0].id or ""))  # exactly once, in order
    # Ended, its latest events are in its task's document: a resume from inside them reads
    # them there (and those before from event documents, were there any), once, in order.
    again = list(sse.read(subscribe(streamer, task_id, first[2].id)))
    assert [int(e.id or "") for e in again] == logged(store, task_id, int(first[2].id or ""))
    assert again[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_twenty_subscribers_see_the_same_sequence(
    pair: tuple[Server, Server, FirestoreTaskStore],
) -> None:
    runner, streamer, store = pair
    task_id = start_task(runner, "steps=20 delay=0.05")
    seen: list[list[tuple[str | None, Any]]] = [[] for _ in range(20)]
    errors: list[BaseException] = []

    def consume(index: int) -> None:
        try:
            for event in sse.read(subscribe(streamer, task_id, "0")):
                seen[index].append((event.id, event.data["result"]))
        except (requests.RequestException, AssertionError) as exc:
            errors.append(exc)

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    assert all(s == seen[0] for s in seen)
    assert [int(i or "") for i, _ in seen[0]] == logged(store, task_id, 0)
    assert seen[0][-1][1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
