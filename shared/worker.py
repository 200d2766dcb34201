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

The queued turns themselves, and their recovery, are shared.turn_queue's.
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import replace

from shared.conflicts import retry_on_conflict
from shared.jobs import Outcome, TurnJob
from shared.model import Message, Role, TaskState, new_id
from shared.observability import tracing
from shared.observability.context import note, owner_tag
from shared.pause import Waiting
from shared.ports import Delivery, StoredTask, VersionConflict
from shared.runtime import Runner, Start, Turn
from shared.turn_queue import LOST_TEXT, NOT_RERUN_TEXT, TurnQueue, end

log = logging.getLogger("a2a.worker")


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
    lease = stored.lease
    waits = not stored.task.status.state.final
    return waits and lease is not None and lease.turn == job.turn


def _turn_message(stored: StoredTask, message_id: str) -> Message | None:
    # The newest: a client that turned off de-duplication may reuse message ids.
    for message in reversed(stored.task.history):
        if message.message_id == message_id and message.role is Role.USER:
            return message
    return None
