"""The worker's decisions, one delivery at a time, on the memory store: duplicate deliveries,
take-over by a later attempt, and the queue's last attempt.

The handler is scripted: its first run pauses after chosen artifacts until the test lets it go
on, and the worker's clock is a manual one, so a lease expires when the test says so. Every
action of the handler is committed at once (commit interval 0), by the turn's timer, off the
handler's thread: a test waits for it (`committed`) before reading what the store holds.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from shared.agent import AgentInfo, Context, HandlerModule
from shared.engine import Engine
from shared.jobs import Outcome
from shared.limits import DEFAULT_LIMITS
from shared.model import Task, TaskState, utc_now
from shared.pause import wait_out
from shared.ports import Delivery, StoredTask
from shared.requests import TaskSelector
from shared.runtime import Runner, TurnSettings
from shared.service import A2AService
from shared.service.base import Ports
from shared.store.memory import MemoryTaskStore
from shared.turn_queue import LOST_TEXT, TurnQueue, abandoned
from shared.worker import Worker
from tests.clock import ManualClock
from tests.handlers.long import Crash
from tests.test_runtime import request

OWNER = "anonymous"
LEASE = 1.5
WAIT = 10  # seconds before a test gives up on an event that should come at once


class Recorder:
    """A queue that keeps what it is given: the test delivers it by hand."""

    def __init__(self) -> None:
        self.payloads: list[dict[str, Any]] = []

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        self.payloads.append(payload)
        return True

    def close(self) -> None:
        self.payloads.clear()


@dataclass
class Script:
    """A handler adding `artifacts` artifacts; its first run pauses after each artifact in
    `pause_after` (until `resume`) and dies after `crash_after`, as a killed process would."""

    artifacts: int
    pause_after: frozenset[int] = frozenset()
    crash_after: int | None = None
    runs: int = 0
    _paused: queue.Queue[int] = field(default_factory=queue.Queue)
    _go_on: threading.Semaphore = field(default_factory=lambda: threading.Semaphore(0))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def handle(self, ctx: Context) -> None:
        with self._lock:
            self.runs += 1
            first = self.runs == 1
        for n in range(self.artifacts):
            ctx.artifact(text=f"part {n}", name=f"part-{n}")
            if first and n == self.crash_after:
                raise Crash
            if first and n in self.pause_after:
                self._paused.put(n)
                if not self._go_on.acquire(timeout=WAIT):
                    raise RuntimeError("the test never resumed the handler")

    def wait_paused(self) -> int:
        """The artifact the first run paused after (it waits for `resume`)."""
        return self._paused.get(timeout=WAIT)

    def resume(self) -> None:
        self._go_on.release()


@dataclass
class Queued:
    service: A2AService
    worker: Worker
    clock: ManualClock
    job: dict[str, Any]
    task_id: str

    def stored(self) -> StoredTask:
        stored = self.service.ports.store.get(OWNER, self.task_id)
        assert stored is not None
        return stored

    def committed(self, artifacts: int) -> StoredTask:
        """The stored task once it holds `artifacts` artifacts (following its log)."""
        stored = self.stored()
        tail = self.service.ports.store.tail(OWNER, self.task_id, stored.last_seq)
        deadline = time.monotonic() + WAIT
        try:
            while len(stored.task.artifacts) < artifacts:
                left = deadline - time.monotonic()
                assert left > 0, f"{names(stored.task)} committed within {WAIT} s"
                tail.next(left)
                stored = self.stored()
        finally:
            tail.close()
        return stored

    def deliver_in_background(
        self, delivery: Delivery
    ) -> tuple[threading.Thread, queue.Queue[Outcome]]:
        outcomes: queue.Queue[Outcome] = queue.Queue()
        thread = threading.Thread(
            target=lambda: outcomes.put(wait_out(self.worker.deliver(self.job, delivery))),
            daemon=True,
        )
        thread.start()
        return thread, outcomes


def queued(script: Script, clock: ManualClock | None = None) -> Queued:
    """A task whose turn is queued for `script`, and a worker on the same store."""
    store = MemoryTaskStore()
    module = HandlerModule(name="script", handle=script.handle, info=AgentInfo(), skills=())
    recorder = Recorder()
    turns = TurnQueue(store, recorder, lease_seconds=LEASE, queue_span=LEASE)
    service = A2AService(Ports(store, module, turns))
    task = wait_out(
        service.sending.send(
            OWNER, request("go", blocking=False), dialect="1.0", message_results=True
        )
    )
    assert isinstance(task, Task) and task.status.state is TaskState.SUBMITTED
    clock = clock or ManualClock()
    settings = TurnSettings(window=0, commit_interval=0, lease_seconds=LEASE, limits=DEFAULT_LIMITS)
    runner = Runner(store, module, Engine(sync_turns=4), turns.hand_over, settings, clock)
    worker = Worker(runner, turns)
    return Queued(service, worker, clock, recorder.payloads[0], task.id)


def names(task: Task) -> list[str | None]:
    return [a.name for a in task.artifacts]


def test_two_deliveries_of_one_attempt_run_the_handler_once() -> None:
    script = Script(5, pause_after=frozenset({0}))
    q = queued(script)
    barrier = threading.Barrier(2)
    outcomes: queue.Queue[Outcome] = queue.Queue()

    def deliver() -> None:
        barrier.wait()
        outcomes.put(wait_out(q.worker.deliver(q.job, Delivery(0))))

    threads = [threading.Thread(target=deliver, daemon=True) for _ in range(2)]
    for thread in threads:
        thread.start()
    # The run that took the lease waits for the test: the other delivery answered first.
    assert outcomes.get(timeout=WAIT) is Outcome.BUSY
    script.resume()
    assert outcomes.get(timeout=WAIT) is Outcome.RAN
    for thread in threads:
        thread.join(WAIT)
    assert script.runs == 1
    done = q.stored().task
    assert done.status.state is TaskState.COMPLETED and len(done.artifacts) == 5
    assert (
        wait_out(q.worker.deliver(q.job, Delivery(1))) is Outcome.NOTHING_TO_DO
    )  # a late one: done


def test_a_later_attempt_takes_over_and_the_earlier_run_stops_without_writing() -> None:
    script = Script(6, pause_after=frozenset({1}))
    q = queued(script)
    first, outcomes = q.deliver_in_background(Delivery(0))
    assert script.wait_paused() == 1
    held = q.committed(2)
    assert names(held.task) == ["part-0", "part-1"]
    assert held.lease is not None and held.lease.expires is not None
    assert held.lease.expires > q.clock.now()  # a live lease, of an earlier attempt
    assert wait_out(q.worker.deliver(q.job, Delivery(1))) is Outcome.RAN
    done = q.stored()
    script.resume()
    first.join(WAIT)
    assert outcomes.get(timeout=WAIT) is Outcome.RAN
    assert q.stored() == done  # the earlier run found its lease taken and wrote nothing
    assert done.task.status.state is TaskState.COMPLETED and done.lease is None
    assert names(done.task) == [f"part-{n}" for n in range(6)]  # each once, in order


def test_a_run_that_dies_on_the_last_attempt_leaves_the_task_failed() -> None:
    # The worker's clock runs an hour behind the service's (the system clock), so the lease
    # it writes has expired for the service, whatever this test does with its own clock.
    clock = ManualClock(start=utc_now() - timedelta(hours=1))
    q = queued(Script(4, crash_after=1), clock)
    with pytest.raises(Crash):  # the process "died": nothing ran after the crash
        wait_out(q.worker.deliver(q.job, Delivery(0, final=True)))
    stored = q.stored()
    assert stored.task.status.state is TaskState.WORKING
    assert not abandoned(stored, clock)  # its holder may still come back within the lease
    clock.advance(LEASE + 0.01)
    assert abandoned(stored, clock)  # the final lease expired: nobody will retry
    task = q.service.tasks.get(OWNER, TaskSelector(q.task_id)).task  # a reader fails it
    assert task.status.state is TaskState.FAILED
    assert task.status.message is not None and task.status.message.parts[0].text == LOST_TEXT
    assert q.stored().lease is None


def test_a_busy_last_attempt_marks_the_lease_final() -> None:
    script = Script(3, pause_after=frozenset({0, 1}))
    q = queued(script)
    first, outcomes = q.deliver_in_background(Delivery(0))
    assert script.wait_paused() == 0
    holder = q.stored().lease.holder  # type: ignore[union-attr]
    assert wait_out(q.worker.deliver(q.job, Delivery(0, final=True))) is Outcome.BUSY
    assert q.stored().lease.final  # type: ignore[union-attr]
    script.resume()
    assert script.wait_paused() == 1  # the running turn committed meanwhile, and kept the mark
    running = q.committed(2)
    assert names(running.task) == ["part-0", "part-1"]
    assert running.lease is not None and running.lease.final and running.lease.holder == holder
    script.resume()
    first.join(WAIT)
    assert outcomes.get(timeout=WAIT) is Outcome.RAN
    assert q.stored().task.status.state is TaskState.COMPLETED
