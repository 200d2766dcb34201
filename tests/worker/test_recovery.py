"""Turns whose owner vanished, recovered by whoever reads the task first (worker.TurnQueue):
an inline turn whose instance died, a worker turn the queue gave up on, a queued turn no
worker ever took, an enqueue the queue refused (the outbox), and the sweep over all owners.

The store holds what a dead run left (a lease nobody renews); a manual clock moves past its
expiry; a recording queue stands for Cloud Tasks, and the test delivers its jobs by hand.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest

from shared.agent import AgentInfo, Context, HandlerModule
from shared.engine import Engine
from shared.jobs import Outcome, TurnJob
from shared.lifecycle import apply_all
from shared.limits import DEFAULT_LIMITS
from shared.model import (
    Event,
    Message,
    Part,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
)
from shared.pause import wait_out
from shared.ports import Delivery, Lease, StoredTask, TaskQuery
from shared.requests import SubscribeRequest, TaskSelector
from shared.runtime import Runner, TurnSettings
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings, TurnNotQueuedError
from shared.store.memory import MemoryTaskStore
from shared.stream_slots import StreamSlots
from shared.streaming import StreamPolicy
from shared.turn_queue import (
    LOST_TEXT,
    NOT_RERUN_TEXT,
    REDRIVE_LIMIT,
    REDRIVEN_TEXT,
    SWEEP_BATCH,
    TurnQueue,
)
from shared.worker import Worker
from tests.clock import ManualClock
from tests.conftest import Client
from tests.pauses import waited
from tests.test_runtime import request

OWNER = "anonymous"
LEASE = 2.0
SPAN = 60.0  # the queue's retries, all told


@dataclass
class Recorder:
    """A queue that keeps what it is given (or refuses everything while `down`)."""

    down: bool = False
    jobs: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        if self.down:
            raise ConnectionError("the queue is down")
        if any(n == name for n, _ in self.jobs):
            return False
        self.jobs.append((name, payload))
        return True

    def close(self) -> None:
        pass


def handle(ctx: Context) -> None:
    for n in range(3):
        ctx.artifact(text=f"part {n}", name=f"part-{n}")


MODULE = HandlerModule(name="parts", handle=handle, info=AgentInfo(), skills=())


@dataclass
class Rig:
    store: MemoryTaskStore
    clock: ManualClock
    queue: Recorder
    turns: TurnQueue
    service: A2AService
    worker: Worker

    def left_by_a_dead_run(self, task_id: str, lease: Lease, owner: str = OWNER) -> StoredTask:
        return left_by_a_dead_run(self.store, task_id, lease, owner)

    def read(self, task_id: str) -> StoredTask:
        return self.service.tasks.get(OWNER, TaskSelector(task_id))

    def deliver_all(self) -> list[Outcome]:
        jobs, self.queue.jobs = self.queue.jobs, []
        return [wait_out(self.worker.deliver(payload, Delivery(0))) for _, payload in jobs]


def left_by_a_dead_run(
    store: MemoryTaskStore, task_id: str, lease: Lease, owner: str = OWNER
) -> StoredTask:
    """A task `working` on message `m`, with the lease its vanished run left."""
    message = Message(
        message_id="m", role=Role.USER, parts=(Part(text="go"),), task_id=task_id, context_id="c"
    )
    working = StatusUpdate(
        task_id=task_id, context_id="c", status=TaskStatus(state=TaskState.WORKING)
    )
    events: list[Event] = [message, working]
    task = Task(id=task_id, context_id="c", status=TaskStatus(state=TaskState.SUBMITTED))
    return store.create(owner, apply_all(task, events), events, dialect="1.0", lease=lease)


def _handing_over(turns: TurnQueue) -> Callable[[StoredTask], None]:
    """The turn queue's own hand_over, looked up at each hand-over: a test may replace it."""

    def hand_over(queued: StoredTask) -> None:
        turns.hand_over(queued)

    return hand_over


def rig(module: HandlerModule = MODULE) -> Rig:
    store, clock, queue = MemoryTaskStore(), ManualClock(), Recorder()
    turns = TurnQueue(
        store,
        queue,
        lease_seconds=LEASE,
        queue_span=SPAN,
        rerun_safe=module.rerun_safe,
        clock=clock,
    )
    service = A2AService(
        Ports(store, module, turns, clock=clock),
        ServiceSettings(commit_interval=0, lease_seconds=LEASE),
    )
    settings = TurnSettings(window=0, commit_interval=0, lease_seconds=LEASE, limits=DEFAULT_LIMITS)
    runner = Runner(store, module, Engine(sync_turns=4), _handing_over(turns), settings, clock)
    worker = Worker(runner, turns)
    return Rig(store, clock, queue, turns, service, worker)


def test_an_inline_turn_whose_instance_died_is_run_again_by_the_worker() -> None:
    r = rig()
    dead = Lease(turn=1, holder="gone", expires=r.clock.now(), message_id="m", inline=True)
    r.left_by_a_dead_run("t1", dead)
    r.clock.advance(LEASE - 0.1)  # within the grace: the run may only be slow
    assert r.read("t1").lease == dead and r.queue.jobs == []
    r.clock.advance(0.2)
    recovered = r.read("t1")
    assert recovered.lease is not None
    assert (recovered.lease.holder, recovered.lease.turn, recovered.lease.redrives) == ("", 1, 1)
    assert [name for name, _ in r.queue.jobs] == [TurnJob("t1", OWNER, 1, "m", 1).name]
    assert r.deliver_all() == [Outcome.RAN]
    done = r.read("t1").task
    assert done.status.state is TaskState.COMPLETED
    assert [a.name for a in done.artifacts] == ["part-0", "part-1", "part-2"]


def not_rerun(stored: StoredTask) -> None:
    assert stored.task.status.state is TaskState.FAILED and stored.lease is None
    message = stored.task.status.message
    assert message is not None and message.parts[0].text == NOT_RERUN_TEXT
    assert stored.task.artifacts == ()  # the handler did not run again


def test_a_dead_inline_turn_of_a_handler_not_safe_to_rerun_is_failed_not_requeued() -> None:
    r = rig(replace(MODULE, rerun_safe=False))
    dead = Lease(turn=1, holder="gone", expires=r.clock.now(), message_id="m", inline=True)
    r.left_by_a_dead_run("t1", dead)
    r.clock.advance(LEASE + 0.1)
    not_rerun(r.read("t1"))
    assert r.queue.jobs == []


def test_a_later_attempt_does_not_rerun_a_turn_not_safe_to_rerun() -> None:
    """The worker running it died: the queue's next attempt finds its lease, and fails the
    task rather than run the handler again."""
    r = rig(replace(MODULE, rerun_safe=False))
    held = Lease(turn=1, holder="w", expires=r.clock.now() + timedelta(hours=1), message_id="m")
    r.left_by_a_dead_run("t1", held)
    job = TurnJob("t1", OWNER, 1, "m")
    assert wait_out(r.worker.deliver(job.payload(), Delivery(attempt=1))) is Outcome.NOTHING_TO_DO
    not_rerun(r.read("t1"))


def test_a_turn_no_run_started_is_queued_again_even_when_not_safe_to_rerun() -> None:
    r = rig(replace(MODULE, rerun_safe=False))
    r.left_by_a_dead_run("t1", r.turns.queued_lease(1, "m"))  # the queue gave it up, unrun
    r.clock.advance(LEASE + SPAN + 1)
    assert r.read("t1").lease.redrives == 1  # type: ignore[union-attr]
    assert r.deliver_all() == [Outcome.RAN]
    assert r.read("t1").task.status.state is TaskState.COMPLETED


def test_a_worker_turn_is_left_to_the_queue_while_it_may_retry() -> None:
    r = rig()
    held = Lease(turn=1, holder="w", expires=r.clock.now(), attempt=2, message_id="m")
    r.left_by_a_dead_run("t1", held)
    r.clock.advance(SPAN - 1)
    assert r.read("t1").lease == held and r.queue.jobs == []
    r.clock.advance(2)  # no attempt left: the queue gave up on it
    assert r.read("t1").lease.redrives == 1  # type: ignore[union-attr]
    assert r.deliver_all() == [Outcome.RAN]
    assert r.read("t1").task.status.state is TaskState.COMPLETED


def test_a_turn_no_worker_ever_takes_is_failed_after_its_redrives() -> None:
    r = rig()
    r.left_by_a_dead_run("t1", r.turns.queued_lease(1, "m"))
    names: set[str] = set()
    for redrive in range(1, REDRIVE_LIMIT + 1):
        r.clock.advance(LEASE + SPAN + 1)
        stored = r.read("t1")
        assert stored.lease is not None and stored.lease.redrives == redrive
        names.update(name for name, _ in r.queue.jobs)
    assert len(names) == REDRIVE_LIMIT  # a new entry each time: the queue keeps used names
    r.clock.advance(LEASE + SPAN + 1)
    failed = r.read("t1")
    assert failed.task.status.state is TaskState.FAILED and failed.lease is None
    message = failed.task.status.message
    assert message is not None
    assert message.parts[0].text == REDRIVEN_TEXT.format(count=REDRIVE_LIMIT + 1)


def test_a_hand_over_whose_process_died_before_its_enqueue_is_swept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker died between the commit handing the task over to a waiting message and the
    enqueue of that message's turn (issue 27): the queued turn has no entry, and the sweep
    re-drives it once the queue could have no attempt of it left."""
    r = rig()
    task = wait_out(
        r.service.sending.send(
            OWNER, request("go", blocking=False), dialect="1.0", message_results=True
        )
    )
    assert isinstance(task, Task)
    more = request("more", message_id="m2", task_id=task.id, blocking=False)
    wait_out(r.service.sending.send(OWNER, more, dialect="1.0", message_results=True))
    monkeypatch.setattr(r.turns, "hand_over", lambda queued: None)  # died right after
    assert r.deliver_all() == [Outcome.RAN]
    handed = r.store.get(OWNER, task.id)
    assert handed is not None and handed.task.status.state is TaskState.SUBMITTED
    assert handed.lease is not None and handed.lease.message_id == "m2" and not r.queue.jobs
    r.clock.advance(LEASE + SPAN + 1)
    assert r.turns.sweep(r.clock.now()) == 1
    assert r.deliver_all() == [Outcome.RAN]
    done = r.store.get(OWNER, task.id)
    assert done is not None and done.task.status.state is TaskState.COMPLETED
    assert done.lease is None and done.pending == ()


def test_a_final_lease_that_expired_is_failed_not_rerun() -> None:
    r = rig()
    final = Lease(turn=1, holder="w", expires=r.clock.now(), final=True, message_id="m")
    r.left_by_a_dead_run("t1", final)
    r.clock.advance(0.1)
    failed = r.read("t1").task
    assert failed.status.state is TaskState.FAILED
    assert failed.status.message is not None and failed.status.message.parts[0].text == LOST_TEXT
    assert r.queue.jobs == []


def test_an_enqueue_the_queue_refuses_waits_in_the_outbox() -> None:
    r = rig()
    r.queue.down = True
    with pytest.raises(TurnNotQueuedError) as refused:
        wait_out(
            r.service.sending.send(
                OWNER, request("go", blocking=False), dialect="1.0", message_results=True
            )
        )
    task_id = refused.value.metadata["taskId"]
    assert task_id in refused.value.message and "send the same message again" in (
        refused.value.message
    )
    stored = r.store.get(OWNER, task_id)
    assert stored is not None and stored.lease is not None and stored.lease.outbox
    assert stored.task.status.state is TaskState.SUBMITTED
    assert r.read(task_id).lease.outbox  # type: ignore[union-attr]  # still down: stays
    r.queue.down = False
    again = r.read(task_id)  # the next read enqueues it, under the turn's own name
    assert again.lease is not None and not again.lease.outbox and again.lease.redrives == 0
    assert [name for name, _ in r.queue.jobs] == [TurnJob(task_id, OWNER, 1, "m").name]
    assert r.deliver_all() == [Outcome.RAN]
    assert r.read(task_id).task.status.state is TaskState.COMPLETED


def test_a_resend_after_the_outbox_gets_the_same_task(make_client: Any) -> None:
    """On the wire: a retryable error naming the task, and the resend finds it."""
    client: Client = make_client(handler="tests.handlers.long")
    service = client.app.service
    queue = Recorder(down=True)
    service.ports.turns.queue = queue
    params = {
        "message": {"role": "ROLE_USER", "parts": [{"text": "artifacts=1"}], "messageId": "m1"},
        "configuration": {"returnImmediately": True},
    }
    response = client.post(
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params},
        {"A2A-Version": "1.0"},
    )
    error = response.json()["error"]
    assert error["code"] == -32000
    info = error["data"][0]
    task_id = info["metadata"]["taskId"]
    assert info["reason"] == "UNAVAILABLE" and task_id in error["message"]
    queue.down = False
    resent = client.result("SendMessage", params, version="1.0")["task"]
    assert resent["id"] == task_id
    assert [p["taskId"] for _, p in queue.jobs] == [task_id]


def test_the_sweep_recovers_every_owners_due_turns_and_only_those() -> None:
    r = rig()
    gone = Lease(turn=1, holder="gone", expires=r.clock.now(), message_id="m", inline=True)
    r.left_by_a_dead_run("t1", gone, owner="alice")
    r.left_by_a_dead_run("t2", gone, owner="bob")
    r.left_by_a_dead_run("t3", replace(gone, expires=r.clock.now() + timedelta(hours=1)))
    r.clock.advance(LEASE + 0.1)
    assert r.turns.sweep(r.clock.now()) == 2
    assert {p["owner"] for _, p in r.queue.jobs} == {"alice", "bob"}
    assert r.turns.sweep(r.clock.now()) == 0  # queued again, not due: nothing more to do
    assert r.store.get(OWNER, "t3").lease.holder == "gone"  # type: ignore[union-attr]


def test_one_sweep_reads_past_a_full_page_of_turns_that_are_not_due() -> None:
    """More queued turns than a page, still within the queue's retries, expired before the
    dead inline turns: the sweep reaches those on its later pages."""
    r = rig()
    queued = Lease(turn=1, expires=r.clock.now(), message_id="m")  # the queue still retries
    for n in range(SWEEP_BATCH + 50):
        r.left_by_a_dead_run(f"q{n}", queued)
    gone = Lease(turn=1, holder="gone", expires=r.clock.now(), message_id="m", inline=True)
    r.clock.advance(1)
    for n in range(3):
        r.left_by_a_dead_run(f"dead{n}", replace(gone, expires=r.clock.now()))
    r.clock.advance(LEASE + 0.1)
    assert r.turns.sweep(r.clock.now()) == 3
    assert sorted(p["taskId"] for _, p in r.queue.jobs) == ["dead0", "dead1", "dead2"]


def test_a_subscriber_of_a_task_whose_run_died_sees_the_rerun_to_its_end() -> None:
    """A resumed stream looks again at each keep-alive tick: it does not only tick."""
    r = rig()
    dead = Lease(turn=1, holder="gone", expires=r.clock.now(), message_id="m", inline=True)
    r.left_by_a_dead_run("t1", dead)
    policy = StreamPolicy(keepalive=0.01, duration=30, idle=30, slots=StreamSlots(4))
    _, stream = r.service.tasks.subscribe(OWNER, SubscribeRequest("t1"), policy)
    frames = waited(stream)
    try:
        opening = next(frames)
        assert opening is not None and opening.task.status.state is TaskState.WORKING
        assert next(frames) is None and r.queue.jobs == []  # a tick: not due yet
        r.clock.advance(LEASE + 0.1)
        assert next(frames) is None  # the tick after which the turn was re-queued
        assert len(r.queue.jobs) == 1
        assert r.deliver_all() == [Outcome.RAN]
        states = []
        for frame in frames:
            if frame is not None and isinstance(frame.item, StatusUpdate):
                states.append(frame.item.status.state)
        assert states[-1] is TaskState.COMPLETED
    finally:
        frames.close()


class Commits(MemoryTaskStore):
    """The memory store, saying when a task was created and when a commit (a lease renewal
    among them) happened."""

    def __init__(self) -> None:
        super().__init__()
        self.created = threading.Event()
        self.committed = threading.Event()

    def create(self, *args: Any, **kwargs: Any) -> StoredTask:
        stored = super().create(*args, **kwargs)
        self.created.set()
        return stored

    def commit(self, current: StoredTask, task: Task, events: Any, **kwargs: Any) -> StoredTask:
        stored = super().commit(current, task, events, **kwargs)
        self.committed.set()
        return stored


def test_a_slow_inline_turn_that_is_alive_keeps_its_lease_and_is_never_rerun() -> None:
    store, clock, queue = Commits(), ManualClock(), Recorder()
    turns = TurnQueue(store, queue, lease_seconds=LEASE, queue_span=SPAN, clock=clock)
    release = threading.Event()
    created = threading.Event()

    def silent(ctx: Context) -> None:
        created.set()
        if not release.wait(10):
            raise RuntimeError("the test never released the handler")
        ctx.artifact(text="late")

    module = HandlerModule(name="silent", handle=silent, info=AgentInfo(), skills=())
    service = A2AService(
        Ports(store, module, turns, clock=clock),
        ServiceSettings(commit_interval=0, lease_seconds=LEASE),
    )
    answers: list[Any] = []
    running = threading.Thread(
        target=lambda: answers.append(
            wait_out(
                service.sending.send(OWNER, request("go"), dialect="1.0", message_results=True)
            )
        )
    )
    running.start()
    assert created.wait(10)
    # The commit timer runs on a thread of its own: the handler may start before it commits.
    assert store.created.wait(10), "the commit timer did not create the task"
    (task,) = store.list(OWNER, TaskQuery()).tasks  # made by the commit timer, with a lease
    for _ in range(9):  # three leases long: each renewed by a heartbeat in time
        store.committed.clear()
        clock.advance(LEASE / 3 + 0.01)
        assert store.committed.wait(10), "no heartbeat renewed the lease"
        assert not turns.due(service.tasks.get(OWNER, TaskSelector(task.task.id)))
    release.set()
    running.join(10)
    assert answers[0].status.state is TaskState.COMPLETED
    assert queue.jobs == []  # never re-queued while its run was alive
