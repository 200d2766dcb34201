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

On the queue's last attempt nothing may be left `working`: a run that fails fails the task,
and a lease marked `final` whose holder stops heartbeating is failed by the next reader
(`abandoned`).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace

from shared.agent import HandlerModule
from shared.clock import SYSTEM, Clock
from shared.conflicts import retry_on_conflict
from shared.jobs import Outcome, TurnJob
from shared.lifecycle import apply
from shared.limits import DEFAULT_LIMITS, Limits
from shared.model import (
    Message,
    Role,
    StatusUpdate,
    TaskState,
    TaskStatus,
    agent_message,
    new_id,
)
from shared.ports import Delivery, Lease, StoredTask, TaskStore, VersionConflict
from shared.runtime import Turn

log = logging.getLogger("a2a.worker")

LOST_TEXT = "The agent stopped working on this task and gave up after its last retry."


class Worker:
    def __init__(
        self,
        store: TaskStore,
        handler: HandlerModule,
        *,
        commit_interval: float,
        lease_seconds: float,
        limits: Limits = DEFAULT_LIMITS,
        clock: Clock = SYSTEM,
    ) -> None:
        self.store = store
        self._limits = limits
        self.handler = handler
        self._commit_interval = commit_interval
        self._lease_seconds = lease_seconds
        self._clock = clock

    def deliver(self, payload: object, delivery: Delivery) -> Outcome:
        """Run the job in `payload`. Raises BadPayload for a malformed payload and whatever the
        store raised (the queue retries); on the last attempt, the task is failed first."""
        job = TurnJob.from_payload(payload)
        try:
            outcome = self.run(job, delivery)
        except Exception:
            if delivery.final:
                self.fail(job)
            raise
        if outcome is Outcome.BUSY and delivery.final:
            self._mark_final(job)
        return outcome

    def run(self, job: TurnJob, delivery: Delivery) -> Outcome:
        claimed = retry_on_conflict(
            lambda: self._claim(job, delivery), subject=f"task {job.task_id}"
        )
        if isinstance(claimed, Outcome):
            return claimed
        claimed.run()
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
        message = _turn_message(stored, job.message_id)
        if message is None:
            log.error("task %s: no message %s in its history", job.task_id, job.message_id)
            self.fail(job)
            return Outcome.NOTHING_TO_DO
        held = Lease(job.turn, new_id(), None, delivery.attempt, delivery.final)
        turn = Turn(
            self.store,
            job.owner,
            self.handler,
            task=stored.task,
            stored=stored,
            message=message,
            dialect=stored.dialect,
            message_key=None,
            commit_interval=self._commit_interval,
            allow_message=False,
            lease=held,
            lease_seconds=self._lease_seconds,
            limits=self._limits,
            clock=self._clock,
        )
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
