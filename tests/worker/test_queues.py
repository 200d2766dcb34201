"""The TaskQueue adapters: named (idempotent) enqueue, the 100 KB cap, what a target receives."""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.http_target import HttpTarget
from shared.ports import Delivery, TaskTooLarge
from shared.queue import MAX_TASK_BYTES
from shared.queue.inline import InlineQueue
from shared.tasks_auth import EmulatorTokens, bearer
from tests.worker.conftest import SA

JOB = {"taskId": "t-1", "owner": "alice", "turn": 1, "messageId": "m-1"}
TOO_BIG = {"owner": "x" * MAX_TASK_BYTES}


@pytest.mark.emulator
def test_cloud_tasks_enqueue_is_named_authenticated_json_and_capped(
    tasks_emulator: TasksEmulator, work_queue: str
) -> None:
    from shared.queue.cloud_tasks import CloudTasksQueue

    with HttpTarget.start() as target:
        url = target.url(f"/worker/{uuid.uuid4().hex}")
        queue = CloudTasksQueue(work_queue, url, SA, emulator_host=tasks_emulator.address)
        name = f"t-{uuid.uuid4()}-1"
        assert queue.enqueue(name, JOB) is True
        assert queue.enqueue(name, JOB) is False  # a retried request adds nothing
        [hit] = target.wait_for("/worker/", 1)
        time.sleep(0.3)
        assert len(target.received("/worker/")) == 1
    assert hit.method == "POST"
    assert hit.headers["Content-Type"] == "application/json"
    assert json.loads(hit.body) == JOB
    assert tasks_emulator.secret
    token = bearer(hit.headers["Authorization"])
    assert EmulatorTokens(tasks_emulator.secret, SA).verify(token, url)["email"] == SA
    with pytest.raises(TaskTooLarge, match=f"at most {MAX_TASK_BYTES}"):
        queue.enqueue(f"t-{uuid.uuid4()}-1", TOO_BIG)


def recording(answers: list[bool]) -> tuple[Callable[..., bool], list[Delivery], threading.Event]:
    """A target answering `answers` in turn (then True), recording each delivery."""
    seen: list[Delivery] = []
    done = threading.Event()

    def target(payload: dict[str, object], delivery: Delivery) -> bool:
        seen.append(delivery)
        accepted = answers.pop(0) if answers else True
        if accepted:
            done.set()
        return accepted

    return target, seen, done


def test_the_inline_queue_takes_a_name_once_and_caps_payloads() -> None:
    target, seen, done = recording([])
    queue = InlineQueue(target)
    assert queue.enqueue("t-1-1", JOB) is True
    assert queue.enqueue("t-1-1", JOB) is False
    assert done.wait(5)
    time.sleep(0.1)
    assert seen == [Delivery(0, False)]
    with pytest.raises(TaskTooLarge):
        queue.enqueue("t-2-1", TOO_BIG)


def test_the_inline_queue_retries_with_backoff_and_marks_the_last_attempt() -> None:
    def crash(payload: dict[str, object], delivery: Delivery) -> bool:
        raise RuntimeError("the worker died")

    target, seen, done = recording([False, False])
    queue = InlineQueue(target, max_attempts=3, min_backoff=0.05)
    started = time.monotonic()
    queue.enqueue("t-1-1", JOB)
    assert done.wait(5)
    assert time.monotonic() - started >= 0.05 + 0.1
    assert seen == [Delivery(0, False), Delivery(1, False), Delivery(2, True)]

    failing = InlineQueue(crash, max_attempts=2, min_backoff=0.01)
    failing.enqueue("t-1-1", JOB)  # raising is retried too, then given up: nothing escapes
