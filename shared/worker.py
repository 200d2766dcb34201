"""The worker: runs one queued turn of a task under its lease, whichever queue delivered it.

A delivery names a task, its owner, the turn (the task version that queued it) and the
message that started the turn; the message itself is in the store. The worker decides from
the stored task alone, so duplicate and late deliveries are harmless:

- the task is gone, ended, waiting for input, or on another turn: nothing to do (accepted);
- another run holds a live lease from the same or a later attempt: busy (the queue retries);
- otherwise it takes the lease with an optimistic write and runs the handler (runtime.Turn).
  A later attempt takes over a live lease at once: the queue only starts one after the
  previous attempt failed, timed out or lost its connection (its worker died); should that
  run still live, its next commit loses and it stops.
  A handler module that says `RERUN_SAFE = False` is not run again: a later attempt that
  finds the turn started fails the task with a status message saying so.

On the queue's last attempt nothing may be left `working`: a run that fails fails the task,
and a lease marked `final` whose holder stops heartbeating is failed by the next reader
(`abandoned`).

`TurnQueue` is the other side: it puts queued turns on the work queue and recovers turns
whose owner vanished. An enqueue the queue refuses leaves the turn in the task's outbox
(`Lease.outbox`) and raises `QueueUnavailable`. Whoever reads the task first (a get, a
subscribe, a blocking send's poll, the sweep) recovers a turn that is `due`: an outbox entry
is enqueued again under its name (idempotent); a turn whose lease nobody renewed (an inline
turn's instance died, or a worker's, and the queue gave up) is re-queued under a new entry
name, up to `REDRIVE_LIMIT` times, then failed with a status message saying so.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta

from shared.clock import SYSTEM, Clock
from shared.conflicts import retry_on_conflict
from shared.jobs import Outcome, TurnJob
from shared.lifecycle import apply
from shared.model import (
    Message,
    Role,
    StatusUpdate,
    TaskState,
    TaskStatus,
    agent_message,
    new_id,
)
from shared.observability import tracing
from shared.observability.context import note, owner_tag
from shared.pause import Waiting
from shared.ports import Delivery, Lease, StoredTask, TaskQueue, TaskStore, VersionConflict
from shared.runtime import Runner, Start, Turn
from shared.sweep import pages

log = logging.getLogger("a2a.worker")

LOST_TEXT = "The agent stopped working on this task and gave up after its last retry."
# How often a turn whose owner vanished is re-queued before its task is failed: a turn that
# kills whatever runs it must not run forever.
REDRIVE_LIMIT = 3
REDRIVEN_TEXT = (
    "The agent stopped working on this task: the run answering its message vanished (its "
    "instance died, or the work queue gave up on it) {count} times; the worker's and the a2a "
    "function's logs say why. Send it again as a new message (a new messageId) to start over."
)
NOT_RERUN_TEXT = (
    "The agent stopped working on this task: the run answering its message vanished (its "
    "instance died, or its worker's attempt failed), and this agent must not run a turn twice "
    "(its handler module says RERUN_SAFE = False), so it was not run again. Send it again as "
    "a new message (a new messageId) to start over; the worker's and the a2a function's logs "
    "say why the run vanished."
)
# How many tasks with an expired lease one page of the sweep reads.
SWEEP_BATCH = 200


class QueueUnavailable(Exception):
    """The work queue did not take a turn; it waits in the task's outbox, which the sweep
    and the task's next read re-drive."""

    def __init__(self, task_id: str) -> None:
        super().__init__(task_id)
        self.task_id = task_id


class Worker:
    """Runs the turns the work queue delivers, on the runner's engine: a delivery waits for its
    turn without a thread (`deliver` is work that pauses, shared.pause.Waiting)."""

    def __init__(self, runner: Runner, turns: TurnQueue) -> None:
        """`turns` queues the next turn of a task whose turn ended while messages waited."""
        self.runner = runner
        self.store = runner.store
        self.handler = runner.handler
        self._turns = turns
        self._clock = runner.clock

    def deliver(self, payload: object, delivery: Delivery) -> Waiting[Outcome]:
        """Run the job in `payload`. Raises BadPayload for a malformed payload and whatever the
        store raised (the queue retries); on the last attempt, the task is failed first."""
        job = TurnJob.from_payload(payload)
        note(taskId=job.task_id, owner=owner_tag(job.owner))
        try:
            outcome = yield from self.run(job, delivery)
        except Exception:
            if delivery.final:
                self.fail(job)
            raise
        if outcome is Outcome.BUSY and delivery.final:
            self._mark_final(job)
        if outcome is not Outcome.RAN:  # a turn that ran: its end, noted by `run`
            note(outcome=outcome.value)
        return outcome

    def run(self, job: TurnJob, delivery: Delivery) -> Waiting[Outcome]:
        # The span is the claim's; the turn, made inside it, is its child however long it runs
        # (a span ends where it began: the turn's waits are no place to end it).
        with tracing.span("worker turn", turn=job.turn, attempt=delivery.attempt):
            claimed = retry_on_conflict(
                lambda: self._claim(job, delivery), subject=f"task {job.task_id}"
            )
        if isinstance(claimed, Outcome):
            return claimed
        yield from self.runner.engine.start(claimed.run()).outcome()
        # The line says how the turn ended (completed, failed, canceled, input-required...),
        # not only that it ran: the queue's answer is `ran` whichever.
        note(outcome=claimed.ended)
        return Outcome.RAN

    def _claim(self, job: TurnJob, delivery: Delivery) -> Outcome | Turn:
        """The turn, its lease taken; or why there is none to run. Raises VersionConflict when
        the claim lost a race (canceled, joined by a message, or taken): decide again."""
        stored = self.store.get(job.owner, job.task_id)
        if stored is None or not _queued(stored, job):
            return Outcome.NOTHING_TO_DO
        lease = stored.lease
        assert lease is not None  # _queued checked it
        if (
            lease.holder
            and lease.expires is not None
            and lease.expires > self._clock.now()
            and delivery.attempt <= lease.attempt
        ):
            return Outcome.BUSY
        if lease.holder and not self.handler.rerun_safe:
            # An earlier attempt started this turn and died: it must not start again.
            log.error("task %s: %s", job.task_id, NOT_RERUN_TEXT)
            end(self.store, stored, TaskState.FAILED, NOT_RERUN_TEXT)
            return Outcome.NOTHING_TO_DO
        message = _turn_message(stored, job.message_id)
        if message is None:
            log.error("task %s: no message %s in its history", job.task_id, job.message_id)
            self.fail(job)
            return Outcome.NOTHING_TO_DO
        held = replace(
            lease,
            holder=new_id(),
            expires=None,
            attempt=delivery.attempt,
            final=delivery.final,
            outbox=False,
            inline=False,
        )
        start = Start(stored.task, stored, message, stored.dialect, lease=held)
        turn = Turn(self.runner, job.owner, start)
        turn.claim()
        return turn

    def fail(self, job: TurnJob, text: str = LOST_TEXT) -> None:
        """End the job's turn `failed` (best effort: the store may be what failed)."""

        def decide() -> None:
            stored = self.store.get(job.owner, job.task_id)
            if stored is not None and _queued(stored, job):
                end(self.store, stored, TaskState.FAILED, text)

        try:
            retry_on_conflict(decide, subject=f"task {job.task_id}")
        except Exception:
            log.exception("task %s: could not record its failure", job.task_id)

    def _mark_final(self, job: TurnJob) -> None:
        """The last attempt found the lease held: nobody retries if its holder dies, so mark
        it final, and readers fail the task once that lease expires (see `abandoned`)."""
        stored = self.store.get(job.owner, job.task_id)
        if stored is None or stored.lease is None or not _queued(stored, job):
            return
        # A lost race means the holder committed: it is alive, and its lease says who it is.
        with contextlib.suppress(VersionConflict):
            self.store.commit(
                replace(stored, lease=replace(stored.lease, final=True)), stored.task, []
            )


def _queued(stored: StoredTask, job: TurnJob) -> bool:
    """Whether the stored task still waits for (or runs) this job's turn."""
    state = stored.task.status.state
    lease = stored.lease
    return (
        lease is not None
        and lease.turn == job.turn
        and not state.terminal
        and not state.interrupted
    )


def _turn_message(stored: StoredTask, message_id: str) -> Message | None:
    # The newest: a client that turned off de-duplication may reuse message ids.
    for message in reversed(stored.task.history):
        if message.message_id == message_id and message.role is Role.USER:
            return message
    return None


def retry_span(attempts: int, min_backoff: float, max_backoff: float) -> float:
    """Seconds a queue with this retry policy waits between a delivery's first and last
    attempts, all told (each backoff doubles from the minimum up to the maximum)."""
    return sum(min(max_backoff, min_backoff * 2.0**n) for n in range(max(attempts - 1, 0)))


def abandoned(stored: StoredTask, clock: Clock = SYSTEM) -> bool:
    """True when the task's last attempt died: its final lease expired, nobody retries."""
    lease = stored.lease
    state = stored.task.status.state
    return (
        lease is not None
        and lease.final
        and bool(lease.holder)
        and lease.expires is not None
        and lease.expires < clock.now()
        and not state.terminal
        and not state.interrupted
    )


def end(store: TaskStore, stored: StoredTask, state: TaskState, text: str) -> StoredTask:
    """Commit `state` with an agent message, releasing the lease. Raises VersionConflict."""
    task = stored.task
    message = agent_message(text, task_id=task.id, context_id=task.context_id)
    event = StatusUpdate(
        task_id=task.id,
        context_id=task.context_id,
        status=TaskStatus(state=state, message=message),
    )
    return store.commit(replace(stored, lease=None), apply(task, event), [event])


class TurnQueue:
    """Queued turns onto the work queue, and turns whose owner vanished back onto it."""

    def __init__(
        self,
        store: TaskStore,
        queue: TaskQueue,
        *,
        lease_seconds: float,
        queue_span: float,
        rerun_safe: bool = True,
        clock: Clock = SYSTEM,
    ) -> None:
        """`queue`: the work queue. `queue_span`: seconds it may go on retrying a turn it
        holds (its attempts' backoff, all told): a queued or worker-held turn silent for
        longer than that past its lease has no delivery left. An inline turn (no queue
        entry) is due `lease_seconds` after its lease expired. `rerun_safe` (the handler
        module's RERUN_SAFE): False, a due turn that a run had started is failed rather than
        queued again.
        """
        self.store = store
        self.queue = queue
        self._lease = timedelta(seconds=lease_seconds)
        self._span = timedelta(seconds=queue_span)
        self._rerun_safe = rerun_safe
        self._clock = clock

    def queued_lease(self, turn: int, message_id: str) -> Lease:
        """The lease of a turn about to be queued: a worker should take it by its expiry."""
        return Lease(turn=turn, expires=self._clock.now() + self._lease, message_id=message_id)

    def enqueue(self, queued: StoredTask) -> StoredTask:
        """Put the task's queued turn on the work queue (an entry of that name adds nothing).
        When the queue does not take it, the turn goes to the task's outbox: raises
        QueueUnavailable."""
        note(taskId=queued.task.id)  # a non-blocking send's line names the task it queued
        if not self._put(queued):
            self._to_outbox(queued)
            raise QueueUnavailable(queued.task.id)
        return queued

    def hand_over(self, queued: StoredTask) -> None:
        """Enqueue the turn a finished turn handed the task over to (an outbox entry when the
        queue refuses: the sweep runs it)."""
        with contextlib.suppress(QueueUnavailable):
            self.enqueue(queued)

    def _put(self, queued: StoredTask) -> bool:
        """Enqueue the job of the task's queued turn; False when the queue did not take it."""
        lease = queued.lease
        assert lease is not None and not lease.holder
        job = TurnJob(queued.task.id, queued.owner, lease.turn, lease.message_id, lease.redrives)
        try:
            self.queue.enqueue(job.name, job.payload())
        except Exception:
            log.exception("task %s: the work queue did not take turn %d", job.task_id, job.turn)
            return False
        return True

    def _to_outbox(self, queued: StoredTask) -> StoredTask:
        """The task with its queued turn marked as having no queue entry (best effort)."""

        def decide() -> StoredTask:
            current = self.store.get(queued.owner, queued.task.id)
            if current is None or current.lease is None or current.lease != queued.lease:
                return current or queued  # taken by a worker (the enqueue did land), or ended
            lease = replace(current.lease, outbox=True)
            return self.store.commit(replace(current, lease=lease), current.task, [])

        try:
            return retry_on_conflict(decide, subject=f"task {queued.task.id}")
        except Exception:
            # The queued lease still expires: the sweep re-drives it then.
            log.exception("task %s: could not record its turn in the outbox", queued.task.id)
            return queued

    def due(self, stored: StoredTask) -> bool:
        """Whether the task's turn has no owner left: recover it (`settle`)."""
        lease = stored.lease
        state = stored.task.status.state
        if lease is None or lease.expires is None or state.terminal or state.interrupted:
            return False
        if lease.outbox or abandoned(stored, self._clock):
            return True
        grace = self._lease if lease.holder and lease.inline else self._span
        return lease.expires + grace < self._clock.now()

    def settle(self, stored: StoredTask) -> StoredTask:
        """The task as a reader should see it: its turn recovered first when it is due.
        Best effort: a store or queue that fails leaves the task as it was, for the next."""
        return self._settle(stored)[0]

    def _settle(self, stored: StoredTask) -> tuple[StoredTask, bool]:
        """The task, and whether its turn was recovered (re-driven or failed) here."""
        if not self.due(stored):
            return stored, False
        attempts = iter([stored])

        def decide() -> tuple[StoredTask, bool]:
            # The task as read by the caller first, then as it is after each lost race.
            current = next(attempts, None) or self.store.get(stored.owner, stored.task.id)
            if current is None or not self.due(current):
                return current or stored, False
            recovered = self._recover(current)
            return recovered, recovered is not current

        try:
            return retry_on_conflict(decide, subject=f"task {stored.task.id}")
        except Exception:
            log.exception("task %s: could not recover its turn", stored.task.id)
            return stored, False

    def _recover(self, stored: StoredTask) -> StoredTask:
        """Re-drive the due turn of `stored`, or fail the task. Raises VersionConflict."""
        lease = stored.lease
        assert lease is not None
        if abandoned(stored, self._clock):
            return end(self.store, stored, TaskState.FAILED, LOST_TEXT)
        if lease.outbox:
            if not self._put(stored):
                return stored  # still refused: the next reader or sweep tries again
            again = replace(lease, outbox=False, expires=self._clock.now() + self._lease)
            return self.store.commit(replace(stored, lease=again), stored.task, [])
        if lease.holder and not self._rerun_safe:
            log.error("task %s: %s", stored.task.id, NOT_RERUN_TEXT)
            return end(self.store, stored, TaskState.FAILED, NOT_RERUN_TEXT)
        if not lease.message_id or lease.redrives >= REDRIVE_LIMIT:
            text = REDRIVEN_TEXT.format(count=lease.redrives + 1)
            log.error("task %s: %s", stored.task.id, text)
            return end(self.store, stored, TaskState.FAILED, text)
        log.warning(
            "task %s: turn %d has no live run (holder %r); re-queued",
            stored.task.id,
            lease.turn,
            lease.holder,
        )
        again = replace(
            self.queued_lease(lease.turn, lease.message_id), redrives=lease.redrives + 1
        )
        queued = self.store.commit(replace(stored, lease=again), stored.task, [])
        return queued if self._put(queued) else self._to_outbox(queued)

    def sweep(self, now: datetime) -> int:
        """Recover every due turn (the longest expired first, page after page within the
        sweep's budget); how many were re-driven or failed. A shared.sweep Sweeper."""
        found = pages(
            lambda after: self.store.expired_leases(now, SWEEP_BATCH, after),
            SWEEP_BATCH,
            clock=self._clock,
        )
        return sum(self._settle(stored)[1] for stored in found)
