"""Running a handler for one turn of a task and persisting what it does.

A Turn folds the handler's events into its copy of the task and commits them to the store
with optimistic concurrency. Commits are coalesced: a short turn costs one commit (the task
document and its events in one batch), a long one commits at most every `commit_interval`
seconds, and a timer makes even a silent handler's task visible to other instances within
that interval. A commit that loses a race re-reads the task: if it was canceled, the turn
stops (the handler sees `ctx.canceled`, then TaskCanceled at its next action); otherwise the
turn folds its pending events onto the fresh task and commits again.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from collections.abc import Awaitable, Callable

from shared.agent import Context, HandlerModule, TaskCanceled, text_part
from shared.lifecycle import apply, apply_all
from shared.model import (
    Event,
    Message,
    Role,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    new_id,
)
from shared.ports import LoggedEvent, StoredTask, TaskStore, VersionConflict

log = logging.getLogger("a2a.runtime")

# Called after each commit of a turn with the new snapshot and the events it logged.
Listener = Callable[[StoredTask, list[LoggedEvent]], None]

_MAX_REBASES = 20  # a writer that loses this often in a row has a bug, not bad luck
_CANCEL_POLL_SECONDS = 0.5


class Turn:
    """One run of the handler for one incoming message."""

    def __init__(
        self,
        store: TaskStore,
        owner: str,
        handler: HandlerModule,
        *,
        task: Task,
        stored: StoredTask | None,
        message: Message,
        dialect: str,
        message_id: str | None,
        commit_interval: float,
        allow_message: bool,
    ) -> None:
        self._store = store
        self._owner = owner
        self._handler = handler
        self._dialect = dialect
        self._message_id = message_id
        self._interval = commit_interval
        self._allow_message = allow_message
        self._lock = threading.RLock()
        self._stored = stored
        self._task = task
        self._pending: list[Event] = []
        self._last_commit = time.monotonic()
        self._last_cancel_check = self._last_commit
        self._canceled = False
        self._reply: Message | None = None
        self._message = message
        self._timer: threading.Timer | None = None
        self._listener: Listener | None = None
        working = StatusUpdate(
            task_id=task.id, context_id=task.context_id, status=TaskStatus(state=TaskState.WORKING)
        )
        # Resuming moves the agent's question into history before the answer to it arrives.
        for event in (working, message) if stored is not None else (message, working):
            self._apply(event)

    @property
    def task(self) -> Task:
        return self._task

    def claim(self) -> None:
        """Commit the start of the turn now, once: a continuation claims its task this way
        (only one message resumes an interrupted task) and a background turn becomes
        visible before it runs. Raises VersionConflict when the task moved on meanwhile."""
        with self._lock:
            self._commit()

    def listen(self, listener: Listener) -> StoredTask:
        """Call `listener` after every later commit; the snapshot committed so far (claim
        first). A listened-to turn commits each event as the handler makes it: a stream sends
        only what is in the log, so a client resuming from it can neither miss nor repeat an
        event. That costs a commit per event instead of one per commit interval."""
        with self._lock:
            if self._stored is None:
                raise RuntimeError("claim the turn before listening to it")
            self._listener = listener
            return self._stored

    def run(self) -> Task | Message:
        """Run the handler to the end of its turn; the result for a blocking send."""
        self._timer = threading.Timer(self._interval, self._flush_if_due)
        self._timer.daemon = True
        self._timer.start()
        ctx = Context(
            task_id=self._task.id,
            context_id=self._task.context_id,
            message=self._message,
            history=self._task.history,
            artifacts=self._task.artifacts,
            _sink=self,
        )
        try:
            self._call_handler(ctx)
        except TaskCanceled:
            pass
        except Exception:
            reference = new_id()[:8]
            log.exception("handler %s failed (reference %s)", self._handler.name, reference)
            self._end_with(
                TaskState.FAILED,
                f"The agent failed while working on this task (reference {reference}).",
            )
        finally:
            self._timer.cancel()
        with self._lock:
            if not self._canceled and not self._task.status.state.terminal:
                if self._reply is not None:
                    return self._finish_reply(self._reply)
                if ctx.ended is None:
                    self._apply(self._status(TaskState.COMPLETED, None))
            self._flush()
            return self._task

    def _call_handler(self, ctx: Context) -> None:
        result = self._handler.handle(ctx)
        if inspect.isawaitable(result):
            asyncio.run(_await(result))

    # -- the Context's sink ----------------------------------------------------------------

    def emit(self, event: Event) -> None:
        with self._lock:
            if self._canceled:
                raise TaskCanceled(self._task.id)
            self._apply(event)
            if self._listener is not None or time.monotonic() - self._last_commit >= self._interval:
                self._flush()
            if self._canceled:
                raise TaskCanceled(self._task.id)

    def reply(self, message: Message) -> None:
        with self._lock:
            if self._canceled:
                raise TaskCanceled(self._task.id)
            self._reply = message

    def canceled(self) -> bool:
        with self._lock:
            now = time.monotonic()
            if self._canceled or self._stored is None:
                return self._canceled
            if now - self._last_cancel_check >= _CANCEL_POLL_SECONDS:
                self._last_cancel_check = now
                current = self._store.get(self._owner, self._task.id)
                self._canceled = current is None or current.task.status.state.terminal
            return self._canceled

    # -- internals -------------------------------------------------------------------------

    def _finish_reply(self, reply: Message) -> Task | Message:
        """A direct answer stays a bare message only if nothing about the task was stored."""
        if self._allow_message and self._stored is None and not self._task_has_output():
            return reply.model_copy(update={"task_id": None})
        self._apply(self._status(TaskState.COMPLETED, reply))
        self._flush()
        return self._task

    def _task_has_output(self) -> bool:
        return bool(self._task.artifacts) or len(self._task.history) > 1

    def _status(self, state: TaskState, message: Message | None) -> StatusUpdate:
        return StatusUpdate(
            task_id=self._task.id,
            context_id=self._task.context_id,
            status=TaskStatus(state=state, message=message),
        )

    def _end_with(self, state: TaskState, text: str) -> None:
        with self._lock:
            if self._canceled or self._task.status.state.terminal:
                return
            message = Message(
                message_id=new_id(),
                role=Role.AGENT,
                parts=(text_part(text),),
                task_id=self._task.id,
                context_id=self._task.context_id,
            )
            self._apply(self._status(state, message))

    def _apply(self, event: Event) -> None:
        self._task = apply(self._task, event)
        self._pending.append(event)

    def _flush_if_due(self) -> None:
        with self._lock:
            if self._stored is None:
                try:
                    self._flush()
                except Exception:
                    log.exception("background commit of task %s failed", self._task.id)

    def _commit(self) -> None:
        """One attempt at committing what is pending."""
        first_seq = 1 if self._stored is None else self._stored.last_seq + 1
        if self._stored is None:
            self._stored = self._store.create(
                self._owner,
                self._task,
                self._pending,
                dialect=self._dialect,
                message_id=self._message_id,
            )
        else:
            self._stored = self._store.commit(
                self._stored, self._task, self._pending, message_id=self._message_id
            )
        self._message_id = None  # recorded with the first commit of the turn
        if self._listener is not None:
            logged = [LoggedEvent(first_seq + i, e) for i, e in enumerate(self._pending)]
            self._listener(self._stored, logged)
        self._pending.clear()
        self._last_commit = time.monotonic()

    def _flush(self) -> None:
        """Commit the pending events; on a lost race, re-read and decide again."""
        if not self._pending and self._stored is not None:
            return
        for _ in range(_MAX_REBASES):
            try:
                self._commit()
            except VersionConflict:
                current = self._store.get(self._owner, self._task.id)
                if current is None or current.task.status.state.terminal:
                    # Canceled (or finished) elsewhere: what this turn still had is dropped,
                    # because a terminal task never changes again.
                    self._canceled = True
                    self._pending.clear()
                    if current is not None:
                        self._stored, self._task = current, current.task
                    return
                self._stored = current
                self._task = apply_all(current.task, self._pending)
                continue
            return
        raise RuntimeError(f"task {self._task.id}: gave up after {_MAX_REBASES} lost commits")


async def _await(awaitable: Awaitable[None]) -> None:
    await awaitable
