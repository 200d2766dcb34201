"""The worker's decisions, one delivery at a time, on the memory store: duplicate deliveries,
take-over by a later attempt, and the queue's last attempt."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from shared.agent import load_handler_module
from shared.model import Task, TaskState
from shared.ports import Delivery
from shared.requests import TaskSelector
from shared.service import A2AService
from shared.store.memory import MemoryTaskStore
from shared.worker import LOST_TEXT, Outcome, Worker
from tests.handlers.long import Crash
from tests.test_runtime import request

OWNER = "anonymous"


class Recorder:
    """A queue that keeps what it is given: the test delivers it by hand."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        self.payloads.append(payload)
        return True

    def close(self) -> None:
        self.payloads.clear()


def queued(text: str, lease: float = 1.5) -> tuple[A2AService, Worker, dict[str, Any], str]:
    store = MemoryTaskStore()
    module = load_handler_module("tests.handlers.long")
    recorder = Recorder()
    service = A2AService(store, module, queue=recorder)
    task = service.send(OWNER, request(text, blocking=False), dialect="1.0", message_results=True)
    assert isinstance(task, Task) and task.status.state is TaskState.SUBMITTED
    worker = Worker(store, module, commit_interval=0.05, lease_seconds=lease)
    return service, worker, recorder.payloads[0], task.id


def test_two_deliveries_of_one_attempt_run_the_handler_once() -> None:
    service, worker, job, task_id = queued("artifacts=5 delay=0.1")
    outcomes: list[Outcome] = []
    barrier = threading.Barrier(2)

    def deliver() -> None:
        barrier.wait()
        outcomes.append(worker.deliver(job, Delivery(0)))

    threads = [threading.Thread(target=deliver) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert sorted(o.value for o in outcomes) == ["busy", "ran"]
    done = service.get(OWNER, TaskSelector(task_id)).task
    assert done.status.state is TaskState.COMPLETED and len(done.artifacts) == 5
    assert worker.deliver(job, Delivery(1)) is Outcome.NOTHING_TO_DO  # a late one: done


def test_a_later_attempt_takes_over_and_the_earlier_run_stops_without_writing() -> None:
    service, worker, job, task_id = queued("artifacts=6 delay=0.1")
    first = threading.Thread(target=worker.deliver, args=(job, Delivery(0)))
    first.start()
    time.sleep(0.25)  # the first run stored some artifacts and holds a live lease
    assert worker.deliver(job, Delivery(1)) is Outcome.RAN
    first.join(10)
    done = service.get(OWNER, TaskSelector(task_id)).task
    assert done.status.state is TaskState.COMPLETED
    assert [a.name for a in done.artifacts] == [f"part-{n}" for n in range(6)]


def test_a_run_that_dies_on_the_last_attempt_leaves_the_task_failed() -> None:
    service, worker, job, task_id = queued("artifacts=4 delay=0.05 crash", lease=0.3)
    with pytest.raises(Crash):  # the process "died": nothing ran after the crash
        worker.deliver(job, Delivery(0, final=True))
    assert service.store.get(OWNER, task_id).task.status.state is TaskState.WORKING  # type: ignore[union-attr]
    time.sleep(0.35)  # the final lease expires: nobody will retry
    task = service.get(OWNER, TaskSelector(task_id)).task
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None and task.status.message.parts[0].text == LOST_TEXT
    assert service.store.get(OWNER, task_id).lease is None  # type: ignore[union-attr]


def test_a_busy_last_attempt_marks_the_lease_final() -> None:
    service, worker, job, task_id = queued("artifacts=3 delay=0.1")
    first = threading.Thread(target=worker.deliver, args=(job, Delivery(0)))
    first.start()
    time.sleep(0.1)
    assert worker.deliver(job, Delivery(0, final=True)) is Outcome.BUSY
    time.sleep(0.15)  # the running turn commits meanwhile, and keeps the mark
    lease = service.store.get(OWNER, task_id).lease  # type: ignore[union-attr]
    first.join(10)
    assert lease is not None and lease.final
    assert service.get(OWNER, TaskSelector(task_id)).task.status.state is TaskState.COMPLETED
