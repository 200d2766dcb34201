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
import hashlib
import logging
import re
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any

from shared.agent import HandlerModule, text_part
from shared.lifecycle import apply
from shared.model import (
    Message,
    Role,
    StatusUpdate,
    TaskState,
    TaskStatus,
    new_id,
    utc_now,
)
from shared.ports import BadPayload, Delivery, Lease, StoredTask, TaskStore, VersionConflict
from shared.runtime import Turn

log = logging.getLogger("a2a.worker")

_ATTEMPTS = 20  # lost races in a row before we call it a bug, not bad luck
_SAFE_NAME = re.compile(r"[A-Za-z0-9_-]{1,400}")
LOST_TEXT = "The agent stopped working on this task and gave up after its last retry."


@dataclass(frozen=True)
class Job:
    """One queued turn: what the queue payload carries (identities, never message bodies)."""

    task_id: str
    owner: str
    turn: int
    message_id: str

    @property
    def name(self) -> str:
        """The queue entry's name: the same for every enqueue of this turn, so a repeated
        request adds nothing. Task ids a client chose may hold any character: those are hashed."""
        if _SAFE_NAME.fullmatch(self.task_id):
            return f"t-{self.task_id}-{self.turn}"
        return f"h-{hashlib.sha256(self.task_id.encode()).hexdigest()}-{self.turn}"

    def payload(self) -> dict[str, Any]:
        return {
            "taskId": self.task_id,
            "owner": self.owner,
            "turn": self.turn,
            "messageId": self.message_id,
        }

    @classmethod
    def from_payload(cls, payload: object) -> Job:
        if not isinstance(payload, dict):
            raise BadPayload("the payload must be a JSON object")
        values: dict[str, Any] = {}
        for field, key, kind in (
            ("task_id", "taskId", str),
            ("owner", "owner", str),
            ("turn", "turn", int),
            ("message_id", "messageId", str),
        ):
            value = payload.get(key)
            if not isinstance(value, kind) or isinstance(value, bool):
                raise BadPayload(f"{key} must be a {kind.__name__}")
            values[field] = value
        return cls(**values)


class Outcome(Enum):
    RAN = "ran"  # the turn ran to its end (or was canceled, or handed over)
    NOTHING_TO_DO = "nothing to do"  # accepted: gone, ended, or not this turn any more
    BUSY = "busy"  # another live run holds the lease: retry later

    @property
    def accepted(self) -> bool:
        """Whether the queue may forget the delivery (HTTP 2xx)."""
        return self is not Outcome.BUSY


class Worker:
    def __init__(
        self,
        store: TaskStore,
        handler: HandlerModule,
        *,
        commit_interval: float,
        lease_seconds: float,
    ) -> None:
        self.store = store
        self.handler = handler
        self._commit_interval = commit_interval
        self._lease_seconds = lease_seconds

    def deliver(self, payload: object, delivery: Delivery) -> Outcome:
        """Run the job in `payload`. Raises BadPayload for a malformed payload and whatever the
        store raised (the queue retries); on the last attempt, the task is failed first."""
        job = Job.from_payload(payload)
        try:
            outcome = self.run(job, delivery)
        except Exception:
            if delivery.final:
                self.fail(job)
            raise
        if outcome is Outcome.BUSY and delivery.final:
            self._mark_final(job)
        return outcome

    def run(self, job: Job, delivery: Delivery) -> Outcome:
        for _ in range(_ATTEMPTS):
            stored = self.store.get(job.owner, job.task_id)
            if stored is None or not _queued(stored, job):
                return Outcome.NOTHING_TO_DO
            lease = stored.lease
            assert lease is not None  # _queued checked it
            now = utc_now()
            if (
                lease.holder
                and lease.expires is not None
                and lease.expires > now
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
                message_id=None,
                commit_interval=self._commit_interval,
                allow_message=False,
                lease=held,
                lease_seconds=self._lease_seconds,
            )
            try:
                turn.claim()
            except VersionConflict:
                continue  # canceled, joined by a message, or taken: decide again
            turn.run()
            return Outcome.RAN
        raise RuntimeError(f"task {job.task_id}: too many concurrent writers")

    def fail(self, job: Job, text: str = LOST_TEXT) -> None:
        """End the job's turn `failed` (best effort: the store may be what failed)."""
        try:
            for _ in range(_ATTEMPTS):
                stored = self.store.get(job.owner, job.task_id)
                if stored is None or not _queued(stored, job):
                    return
                try:
                    end(self.store, stored, TaskState.FAILED, text)
                    return
                except VersionConflict:
                    continue
        except Exception:
            log.exception("task %s: could not record its failure", job.task_id)

    def _mark_final(self, job: Job) -> None:
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


def _queued(stored: StoredTask, job: Job) -> bool:
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


def abandoned(stored: StoredTask) -> bool:
    """True when the task's last attempt died: its final lease expired, nobody retries."""
    lease = stored.lease
    state = stored.task.status.state
    return (
        lease is not None
        and lease.final
        and bool(lease.holder)
        and lease.expires is not None
        and lease.expires < utc_now()
        and not state.terminal
        and not state.interrupted
    )


def end(store: TaskStore, stored: StoredTask, state: TaskState, text: str) -> StoredTask:
    """Commit `state` with an agent message, releasing the lease. Raises VersionConflict."""
    task = stored.task
    message = Message(
        message_id=new_id(),
        role=Role.AGENT,
        parts=(text_part(text),),
        task_id=task.id,
        context_id=task.context_id,
    )
    event = StatusUpdate(
        task_id=task.id,
        context_id=task.context_id,
        status=TaskStatus(state=state, message=message),
    )
    return store.commit(replace(stored, lease=None), apply(task, event), [event])
