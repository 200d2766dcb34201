"""Queued turns: put on the work queue, and recovered when their run vanished.

`TurnQueue` puts queued turns on the work queue and recovers turns
whose owner vanished. An enqueue the queue refuses leaves the turn in the task's outbox
(`Lease.outbox`) and raises `QueueUnavailable`. Whoever reads the task first (a get, a
subscribe, a blocking send's poll, the sweep) recovers a turn that is `due`: an outbox entry
is enqueued again under its name (idempotent); a turn whose lease nobody renewed (an inline
turn's instance died, or a worker's, and the queue gave up) is re-queued under a new entry
name, up to `REDRIVE_LIMIT` times, then failed with a status message saying so.

A turn ends here, too, when its task must be failed (`end`): after the queue's last attempt, a
turn re-driven `REDRIVE_LIMIT` times, or one that must not run twice (`NOT_RERUN_TEXT`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace
from datetime import datetime, timedelta

from shared.clock import SYSTEM, Clock
from shared.conflicts import retry_on_conflict
from shared.jobs import TurnJob
from shared.lifecycle import apply
from shared.model import TaskState, status_update
from shared.observability.context import note
from shared.ports import Lease, StoredTask, TaskQueue, TaskStore
from shared.sweep import pages

log = logging.getLogger("a2a.turn_queue")

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


def retry_span(attempts: int, min_backoff: float, max_backoff: float) -> float:
    """Seconds a queue with this retry policy waits between a delivery's first and last
    attempts, all told (each backoff doubles from the minimum up to the maximum)."""
    return sum(min(max_backoff, min_backoff * 2.0**n) for n in range(max(attempts - 1, 0)))


def abandoned(stored: StoredTask, clock: Clock = SYSTEM) -> bool:
    """True when the task's last attempt died: its final lease expired, nobody retries."""
    lease = stored.lease
    return (
        lease is not None
        and lease.final
        and bool(lease.holder)
        and lease.expires is not None
        and lease.expires < clock.now()
        and not stored.task.status.state.final
    )


def end(store: TaskStore, stored: StoredTask, state: TaskState, text: str) -> StoredTask:
    """Commit `state` with an agent message, releasing the lease. Raises VersionConflict."""
    event = status_update(stored.task, state, text)
    return store.commit(replace(stored, lease=None), apply(stored.task, event), [event])


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
        if lease is None or lease.expires is None or stored.task.status.state.final:
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
