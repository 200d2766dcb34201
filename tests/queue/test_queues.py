"""The TaskQueue adapters: named (idempotent) enqueue, the 100 KB cap, what a target receives."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.http_target import HttpTarget
from shared.ports import Delivery, TaskTooLarge
from shared.queue import MAX_TASK_BYTES
from shared.queue.inline import InlineQueue
from shared.queue.off_path import OffPathQueue
from shared.tasks_auth import EmulatorTokens, bearer
from tests.clock import ManualClock
from tests.conftest import ROOT, SA, wait_queue_empty, wait_until

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

JOB = {"taskId": "t-1", "owner": "alice", "turn": 1, "messageId": "m-1"}
TOO_BIG = {"owner": "x" * MAX_TASK_BYTES}


@pytest.mark.emulator
def test_cloud_tasks_enqueue_is_named_authenticated_json_and_capped(
    tasks_emulator: TasksEmulator, tasks_client: CloudTasksClient, work_queue: str
) -> None:
    from shared.queue.cloud_tasks import CloudTasksQueue

    with HttpTarget.start() as target:
        url = target.url(f"/worker/{uuid.uuid4().hex}")
        queue = CloudTasksQueue(work_queue, url, SA, emulator_host=tasks_emulator.address)
        name = f"t-{uuid.uuid4()}-1"
        assert queue.enqueue(name, JOB) is True
        assert queue.enqueue(name, JOB) is False  # a retried request adds nothing
        [hit] = target.wait_for("/worker/", 1)
        wait_queue_empty(tasks_client, work_queue)  # nothing more will be dispatched
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


class Backoffs:
    """A Clock whose waits return at once (unless the event is set), recording how long each
    was asked to last: the backoff schedule, without waiting it out."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return 0.0

    def wait(self, event: threading.Event, timeout: float) -> bool:
        self.waits.append(timeout)
        return event.is_set()

    def loop_delay(self, seconds: float) -> float:
        return seconds


def test_the_inline_queue_takes_a_name_once_and_caps_payloads() -> None:
    target, seen, done = recording([])
    queue = InlineQueue(target)
    assert queue.enqueue("t-1-1", JOB) is True
    assert queue.enqueue("t-1-1", JOB) is False
    assert queue.join(5)
    assert done.is_set()
    assert seen == [Delivery(0, False)]
    with pytest.raises(TaskTooLarge):
        queue.enqueue("t-2-1", TOO_BIG)
    assert queue.join(0)  # a refused payload leaves nothing behind


def test_the_inline_queue_retries_with_backoff_and_marks_the_last_attempt() -> None:
    def crash(payload: dict[str, object], delivery: Delivery) -> bool:
        raise RuntimeError("the worker died")

    target, seen, done = recording([False, False, False])
    clock = Backoffs()
    queue = InlineQueue(target, max_attempts=4, min_backoff=0.05, max_backoff=0.15, clock=clock)
    queue.enqueue("t-1-1", JOB)
    assert queue.join(5)
    assert done.is_set()
    assert seen == [Delivery(0, False), Delivery(1, False), Delivery(2, False), Delivery(3, True)]
    assert clock.waits == [0.05, 0.1, 0.15]  # doubling, capped; none after the success

    clock = Backoffs()
    failing = InlineQueue(crash, max_attempts=2, min_backoff=0.01, clock=clock)
    failing.enqueue("t-1-1", JOB)  # raising is retried too, then given up: nothing escapes
    assert failing.join(5)
    assert clock.waits == [0.01]  # no backoff after the last attempt


def test_the_inline_queue_runs_deliveries_side_by_side() -> None:
    started = threading.Barrier(3, timeout=5)

    def meet(payload: dict[str, object], delivery: Delivery) -> bool:
        started.wait()  # breaks (and the delivery fails) unless three run at once
        return True

    queue = InlineQueue(meet, threads=3, max_attempts=1)
    for n in range(3):
        queue.enqueue(f"t-{n}-1", JOB)
    assert queue.join(5)
    assert not started.broken


def test_a_closed_inline_queue_stops_at_once() -> None:
    attempts: list[Delivery] = []
    refused, running, release = threading.Event(), threading.Event(), threading.Event()

    def refuse(payload: dict[str, object], delivery: Delivery) -> bool:
        attempts.append(delivery)
        if payload.get("hold"):
            running.set()
            release.wait(5)
        else:
            refused.set()
        return False

    # One delivery waiting out a long backoff, one in its target, one queued behind them.
    queue = InlineQueue(refuse, threads=2, min_backoff=3600, max_backoff=3600)
    queue.enqueue("backing-off", JOB)
    queue.enqueue("running", {**JOB, "hold": True})
    assert running.wait(5) and refused.wait(5)
    queue.enqueue("queued", JOB)
    started = time.monotonic()
    queue.close()
    assert time.monotonic() - started < 1  # close() waits for nothing
    assert not queue.join(0)  # the running one is still in its target...
    release.set()
    assert queue.join(5)  # ...and ends with that attempt: no backoff, no retry
    assert len(attempts) == 2
    assert queue.enqueue("after", JOB) is True  # taken and dropped: nothing runs any more
    assert queue.join(0) and len(attempts) == 2


def test_a_process_with_a_retrying_inline_queue_exits_at_once() -> None:
    # The in-process push queue retrying an unreachable webhook must not hold up an exiting
    # process (Ctrl-C under `make run`, SIGTERM to a server): nothing calls close() there.
    code = (
        "from shared.queue.inline import InlineQueue\n"
        "queue = InlineQueue(lambda payload, delivery: False, max_attempts=100)\n"
        "queue.enqueue('p-1', {})\n"
        "raise SystemExit(0)\n"
    )
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True, timeout=30)
    assert time.monotonic() - started < 5  # retrying for ~2 min would hold it up otherwise


def test_a_delayed_inline_delivery_waits_its_time_and_close_drops_it() -> None:
    target, seen, _ = recording([])
    clock = ManualClock()
    queue = InlineQueue(target, clock=clock)
    assert queue.enqueue("later", JOB, delay=5) is True
    assert queue.enqueue("later", JOB) is False  # the name is taken at once
    assert not queue.join(0.05) and seen == []  # due in 5 s of the clock's time
    clock.advance(5)
    assert queue.join(5) and seen == [Delivery(0, False)]

    dropped = InlineQueue(target, clock=clock)
    dropped.enqueue("much-later", JOB, delay=3600)
    dropped.close()
    assert dropped.join(5)  # dropped, not waited out
    assert len(seen) == 1


class Stalling:
    """A DelayingTaskQueue whose enqueue fails `failures` times, then blocks until released."""

    def __init__(self, failures: int = 0) -> None:
        self.failures = failures
        self.release = threading.Event()
        self.entries: list[tuple[str, float]] = []
        self.closed = False

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        if self.failures:
            self.failures -= 1
            raise RuntimeError("503 the queue is unavailable")
        self.release.wait(5)
        self.entries.append((name, delay))
        return True

    def close(self) -> None:
        self.closed = True


def test_the_off_path_queue_never_makes_its_caller_wait_and_retries_with_backoff() -> None:
    inner = Stalling(failures=2)
    clock = Backoffs()
    # One thread: both failures are p-1's (with more, p-2 could take the second one, and its
    # first backoff would be 0.5 again).
    queue = OffPathQueue(inner, threads=1, min_backoff=0.5, max_backoff=8, clock=clock)
    started = time.monotonic()
    assert queue.enqueue("p-1", JOB, delay=2) is True
    assert queue.enqueue("p-2", JOB) is True
    assert time.monotonic() - started < 0.5  # the inner queue stalls; the caller does not
    assert not queue.join(0.05)
    inner.release.set()
    assert queue.join(5)
    assert sorted(inner.entries) == [("p-1", 2), ("p-2", 0)]
    assert clock.waits == [0.5, 1.0]  # two failures, doubling
    with pytest.raises(TaskTooLarge):
        queue.enqueue("p-3", TOO_BIG)  # the size limit is checked before it is taken


class Elapsing(Backoffs):
    """Backoffs whose monotonic time is the sum of the waits asked for."""

    def monotonic(self) -> float:
        return sum(self.waits)


def test_the_off_path_queue_gives_up_loudly_and_bounds_what_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    inner = Stalling(failures=1000)
    clock = Elapsing()
    queue = OffPathQueue(inner, threads=1, max_waiting=1, give_up_after=3, clock=clock)
    queue.enqueue("p-1", JOB)
    assert queue.join(5)
    assert clock.waits == [0.5, 1.0]  # the next pause would pass the 3 s
    assert "p-1: not enqueued after 3 attempts" in caplog.text
    assert "a sweep re-drives it" in caplog.text

    stuck = Stalling()
    bounded = OffPathQueue(stuck, threads=1, max_waiting=1)
    bounded.enqueue("a", JOB)  # taken by the thread, which stalls
    wait_until(lambda: not bounded._waiting, 5, lambda: "the thread did not take it")
    bounded.enqueue("b", JOB)  # waits
    bounded.enqueue("c", JOB)  # over the bound: logged, dropped
    assert "c: not enqueued, 1 entries already wait" in caplog.text
    bounded.close()
    stuck.release.set()
    assert bounded.join(5)
    assert stuck.entries == [("a", 0)] and stuck.closed


@pytest.mark.emulator
def test_a_delayed_cloud_tasks_entry_is_scheduled_for_later(
    tasks_emulator: TasksEmulator, tasks_client: CloudTasksClient, work_queue: str
) -> None:
    from shared.queue.cloud_tasks import CloudTasksQueue

    with HttpTarget.start() as target:
        url = target.url(f"/later/{uuid.uuid4().hex}")
        queue = CloudTasksQueue(work_queue, url, SA, emulator_host=tasks_emulator.address)
        name = f"t-{uuid.uuid4()}-1"
        enqueued = datetime.now(UTC)
        assert queue.enqueue(name, JOB, delay=1.5) is True
        scheduled = tasks_client.get_task(name=f"{work_queue}/tasks/{name}").schedule_time
        assert 1.4 <= (scheduled - enqueued).total_seconds() <= 2.5
        [hit] = target.wait_for("/later/", 1, timeout=10)
        assert json.loads(hit.body) == JOB
        assert hit.started - enqueued.timestamp() >= 1.4  # not dispatched before its time
        queue.close()
