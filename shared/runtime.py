"""Running a handler for one turn of a task and persisting what it does.

A Turn folds the handler's events into its copy of the task and commits them to the store
with optimistic concurrency. Commits are coalesced in windows (`window`, the stream commit
interval where the turn is wired with it; else `commit_interval`), wherever the turn runs
and whether anyone listens: the first event after a quiet window is committed at once, the
rest of a burst together when the window closes (sooner once 1 MB of events waits). Streams
on any instance, GetTask and webhooks so see a handler's progress within a window plus the
store's latency, while the handler still works. Firestore sustains about one write a second
per document: a 50 ms window still allows twenty, but a handler making events in a loop
commits a few times instead of once per event. A short turn costs one commit (the task
document and its events in one batch): its first window's timer is dropped unfired. The
commits are made by the turn's timer (shared.timers) on a spare thread, not by the handler's
calls (but for the 1 MB one, and the turn's end), one at a time; one that goes on with the
turn is written without the turn's lock, so the handler's calls never wait for the store
meanwhile. A commit that loses a race re-reads the task: if
it was canceled, the turn stops (the handler sees `ctx.canceled`, then TaskCanceled at its
next action); otherwise the turn folds its pending events onto the fresh task and commits
again.

A streamed send listens to its turn (`listen`): its stream sends only what the log holds, so
a client resuming on any instance with Last-Event-ID gets exactly the events after its last
one. Sending a frame before its commit would let the client see an event that a lost race
(a cancel) or the instance's death then leaves out of the log, or puts another event at its
sequence number.

Every turn holds the task's lease, a background turn (run by the worker) and an inline one
(run in a request) alike: every commit renews it, a heartbeat commits when nothing else did
for a while (and so notices a cancel, which makes the commit lose), and the commit that ends
the turn releases it. A run that dies leaves a lease nobody renews, which a reader or the
sweep recovers (shared.worker.TurnQueue.settle). A turn that finds its lease taken by
another run stops as if canceled, without writing. Artifacts without an explicit id get ids
derived from the task, the turn and their order, so a turn re-run after a crash replaces
what the crashed run stored instead of adding it twice.

Messages sent while the turn runs wait on the task (`StoredTask.pending`). A turn that ends
completed or waiting for input while one waits hands the task over to it instead: the
agent's last message joins history, the task goes `submitted` with the next message's turn
queued (its lease), and `hand_over` enqueues it. A turn that fails, is rejected or canceled
ends the task: its waiting messages are never run (a terminal task never changes again).
"""

from __future__ import annotations

import inspect
import logging
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import timedelta
from typing import NamedTuple

from shared.agent import Context, HandlerModule, TaskCanceled
from shared.clock import SYSTEM, Clock
from shared.conflicts import retry_on_conflict
from shared.lifecycle import apply, apply_all
from shared.limits import DEFAULT_LIMITS, ArtifactMeter, LimitExceeded, Limits, servable
from shared.model import (
    ArtifactUpdate,
    Event,
    Message,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    agent_message,
    derived_id,
    new_id,
    utc_now,
)
from shared.model_json import detached
from shared.observability import tracing
from shared.observability.context import note
from shared.ports import (
    DuplicateMessage,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskStore,
    VersionConflict,
)
from shared.timers import Timer, timers_of

log = logging.getLogger("a2a.runtime")

# Called after each commit of a turn with the new snapshot and the events it logged.
Listener = Callable[[StoredTask, list[LoggedEvent]], None]

# Called after the commit that handed the task over to its next pending message: enqueue it.
HandOver = Callable[[StoredTask], None]

_CANCEL_POLL_SECONDS = 0.5
# A turn commits its pending events once they hold this many bytes, whatever the interval:
# one Firestore request carries 4 MB (store.firestore.COMMIT_BUDGET) with the task document,
# and one event up to 1 MB, so a fast handler's burst never outgrows a commit.
_COMMIT_BYTES = 1_000_000
# The end states after which a waiting message is the task's next turn.
_HANDS_OVER = (TaskState.COMPLETED, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED)
_ARTIFACT_IDS = uuid.UUID("6f1c2a52-9a43-4f57-9a8e-3a0d2b7f4c11")  # uuid5 namespace


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
        message_key: MessageKey | None,
        commit_interval: float,
        allow_message: bool,
        window: float | None = None,
        hand_over: HandOver,
        lease: Lease | None = None,
        lease_seconds: float = 30.0,
        limits: Limits = DEFAULT_LIMITS,
        clock: Clock = SYSTEM,
    ) -> None:
        """`lease`: run a queued turn (its message is stored already) holding this lease;
        `stored` is then required. Without it the turn takes a lease of its own at its first
        commit. Either is renewed for `lease_seconds` at every commit. `hand_over` enqueues
        the next turn this one handed the task over to. `window`: how long an event of the
        handler waits for its commit (at most the commit interval, which is the default).
        `clock` times the windows, the cancel checks, the heartbeat and the lease's expiry."""
        self._store = store
        self._clock = clock
        self._owner = owner
        self._handler = handler
        self._dialect = dialect
        self._message_key = message_key
        self._allow_message = allow_message
        self._lock = threading.RLock()  # the turn's state
        # One commit at a time, taken before the lock: the timer's commit writes without the
        # lock (_write), so the handler goes on making events meanwhile.
        self._committing = threading.Lock()
        self._stored = stored
        self._task = task
        self._pending: list[Event] = []
        self._pending_bytes = 0  # of the handler's events among them
        self._last_commit = clock.monotonic()
        self._last_cancel_check = self._last_commit
        self._canceled = False
        # How a turn stopped by another writer ended, as its log line says (`ended`).
        self._stopped_as = "canceled"
        # Set when the turn's first commit found the task made already by another run of the
        # same message (a resend): the turn stops, and run() raises it for the service.
        self._duplicate: DuplicateMessage | None = None
        self._reply: Message | None = None
        self._message = message
        self._listener: Listener | None = None
        # Its logs and spans belong to the unit of work that made it, on whichever thread
        # it runs (a streamed send's own, shared.streaming).
        self._unit = tracing.snapshot()
        # How long the handler's events wait for their commit (a listened-to turn's may be
        # shorter: listen).
        self._window = commit_interval if window is None else min(window, commit_interval)
        # The turn's next timer (_timers), while the handler runs.
        self._timer: Timer | None = None
        self._not_before = self._last_commit  # after a failed timed commit: not again before
        self._handler_done = False
        queued = lease is not None
        # An inline turn's own lease is made at its first commit that holds one (_renewed):
        # a blocking send ends at its first commit, which gives none.
        self._lease = lease
        self._turn = (
            lease.turn if lease is not None else 1 if stored is None else stored.version + 1
        )
        self._lease_seconds = lease_seconds
        self._renew_after = lease_seconds / 3  # a heartbeat when no commit did for this long
        self._hand_over = hand_over
        self._ending = False  # the handler returned: the next commit ends the turn
        self._artifacts = 0
        self._artifact_sizes = ArtifactMeter(limits)
        # A new task starts working at the time it was submitted (one clock read per send).
        at = task.status.timestamp if stored is None else utc_now()
        working = StatusUpdate(
            task_id=task.id,
            context_id=task.context_id,
            status=TaskStatus(state=TaskState.WORKING, timestamp=at),
        )
        if queued:
            self._apply(working)
            return
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
        with self._committing, self._lock:
            self._commit()

    def listen(self, listener: Listener, window: float) -> StoredTask:
        """Call `listener` after every later commit; the snapshot committed so far (claim
        first). A listened-to turn commits what the handler makes within `window` seconds
        (instead of the commit interval): a stream sends only what is in the log, so a client
        resuming from it can neither miss nor repeat an event, and the window bounds how long
        an event waits for its frame."""
        with self._lock:
            if self._stored is None:
                raise RuntimeError("claim the turn before listening to it")
            self._listener = listener
            self._window = min(window, self._window)
            return self._stored

    def run(self) -> Task | Message:
        """Run the handler to the end of its turn; the result for a blocking send."""
        with tracing.resumed(self._unit), tracing.span("handler turn"):
            note(taskId=self._task.id)  # the handler's own log lines name the task too
            started = time.perf_counter()
            result = self._run()
            seconds = round(time.perf_counter() - started, 6)
            note(handlerSeconds=seconds, turnState=self.ended)
            return result

    @property
    def ended(self) -> str:
        """How the turn ended, as logs name it: the task's state; for a turn another writer
        stopped, the state it left the task in (`canceled`), or `gone`, or `taken over` (by
        another run of the turn), or `duplicate` (a resend's, dropped). Read once the turn
        ran (nothing changes it then: no lock)."""
        return self._stopped_as if self._canceled else self._task.status.state.value

    def _run(self) -> Task | Message:
        # The timers make the turn's commits: a deadline of the process's timers thread,
        # which a turn that ends first costs no thread's time. The first is set at the end of
        # the first window whatever is pending, so the handler's first event needs no earlier
        # one (a short turn wakes no thread).
        with self._lock:
            self._not_before = self._clock.monotonic()
            self._arm(by=self._last_commit + self._window)
        # What the handler reads is its own: changing a dict in it changes nothing stored or
        # served (the store keeps these very objects).
        message = detached(self._message)
        history = tuple(message if m is self._message else detached(m) for m in self._task.history)
        ctx = Context(
            task_id=self._task.id,
            context_id=self._task.context_id,
            message=message,
            history=history,
            artifacts=tuple(detached(artifact) for artifact in self._task.artifacts),
            _sink=self,
            extensions=self._handler.active_extensions(self._message),
            _list_tasks=lambda query: self._store.list(self._owner, query),
        )
        try:
            self._call_handler(ctx)
        except TaskCanceled:
            pass
        except LimitExceeded as exc:  # the handler's own output: its message says what and why
            log.warning("handler %s: %s", self._handler.name, exc)
            self._end_with(TaskState.FAILED, str(exc))
        except Exception:
            reference = new_id()[:8]
            log.exception("handler %s failed (reference %s)", self._handler.name, reference)
            note(reference=reference)
            self._end_with(
                TaskState.FAILED,
                f"The agent failed while working on this task (reference {reference}).",
            )
        finally:
            with self._lock:
                self._handler_done = True
                if self._timer is not None:
                    self._timer.cancel()
                    self._timer = None
        with self._committing, self._lock:
            self._ending = True
            result = self._end(ctx)
            if self._duplicate is not None:
                raise self._duplicate
            return result

    def _end(self, ctx: Context) -> Task | Message:
        if not self._canceled and not self._task.status.state.terminal:
            if self._reply is not None:
                return self._finish_reply(self._reply)
            if ctx.ended is None:
                self._apply(self._status(TaskState.COMPLETED, None))
        self._flush(force=self._holds_lease())
        return self._task

    def _call_handler(self, ctx: Context) -> None:
        result = self._handler.handle(ctx)
        if inspect.isawaitable(result):
            import asyncio  # ~20 ms at import: only for async handlers, off the cold start

            asyncio.run(_await(result))

    # -- the Context's sink ----------------------------------------------------------------

    def emit(self, event: Event) -> None:
        with self._lock:
            if self._canceled:
                raise TaskCanceled(self._task.id)
            # Over a limit, or unservable: raised, and not applied.
            if isinstance(event, ArtifactUpdate):
                event, size = self._artifact_sizes.add(event, self._task)
            else:
                event, size = servable(event)
            self._apply(event)
            self._pending_bytes += size
            full = self._pending_bytes >= _COMMIT_BYTES
            if not full and len(self._pending) == 1:
                # The timers commit it when its window closes (at once after a quiet one),
                # with whatever the handler makes until then, off the handler's thread.
                self._arm(earlier_only=True)
            if self._canceled:
                raise TaskCanceled(self._task.id)
        if full:
            # Here, on the handler's thread (after the timer's commit, if one is under way):
            # what waits never outgrows one commit.
            with self._committing, self._lock:
                if self._pending_bytes >= _COMMIT_BYTES:
                    self._flush()
                if self._canceled:
                    raise TaskCanceled(self._task.id)

    def reply(self, message: Message) -> None:
        with self._lock:
            if self._canceled:
                raise TaskCanceled(self._task.id)
            self._reply, _ = servable(message)

    def canceled(self) -> bool:
        with self._lock:
            now = self._clock.monotonic()
            if self._canceled or self._stored is None:
                return self._canceled
            if now - self._last_cancel_check >= _CANCEL_POLL_SECONDS:
                self._last_cancel_check = now
                current = self._store.get(self._owner, self._task.id)
                if self._stopped_by(current):
                    self._stop(current)
            return self._canceled

    def artifact_id(self) -> str:
        with self._lock:
            self._artifacts += 1
            return derived_id(_ARTIFACT_IDS, f"{self._task.id}/{self._turn}/{self._artifacts}")

    # -- internals -------------------------------------------------------------------------

    def _finish_reply(self, reply: Message) -> Task | Message:
        """A direct answer stays a bare message only if nothing about the task was stored."""
        if self._allow_message and self._stored is None and not self._task_has_output():
            return replace(reply, task_id=None)
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
            message = agent_message(text, task_id=self._task.id, context_id=self._task.context_id)
            self._apply(self._status(state, message))

    def _apply(self, event: Event) -> None:
        self._task = apply(self._task, event)
        self._pending.append(event)

    def _stopped_by(self, current: StoredTask | None) -> bool:
        """True when `current` (a fresh read) means this turn must stop: the task is gone or
        ended elsewhere (canceled), or another run took over this turn's lease."""
        if current is None or current.task.status.state.terminal:
            return True
        return current.lease is None or current.lease.holder != self._holder()

    def _stop(self, current: StoredTask | None) -> None:
        """Stop the turn, for `current` (a fresh read that `_stopped_by`), noting why."""
        self._canceled = True
        if current is None:
            self._stopped_as = "gone"
        elif current.task.status.state.terminal:
            self._stopped_as = current.task.status.state.value
        else:
            self._stopped_as = "taken over"

    def _holder(self) -> str | None:
        """This run's lease holder id (None: it has taken no lease yet)."""
        return None if self._lease is None else self._lease.holder

    def _holds_lease(self) -> bool:
        """Whether the stored task still names this run as its lease's holder (the commit
        that ends the turn gives it back)."""
        stored = self._stored
        return (
            not self._canceled
            and stored is not None
            and stored.lease is not None
            and stored.lease.holder == self._holder()
        )

    def _next_timer(self) -> tuple[float, str]:
        """When the timers commit next, and why: pending events (and a turn not yet stored,
        even a silent one) are committed when their window closes, so that streams on any
        instance, readers and webhooks see them; the lease is renewed when no commit did for
        a third of its life. Never, once the turn may commit no more (canceled, or a
        resend's turn that found the first run's task) or the lease is gone (ended, handed
        over)."""
        if self._canceled:
            return math.inf, ""
        if self._stored is None or self._pending:
            return self._last_commit + self._window, "commit"
        if self._holds_lease():
            return self._last_commit + self._renew_after, "heartbeat"
        return math.inf, ""

    def _arm(self, *, earlier_only: bool = False, by: float = math.inf) -> None:
        """Set the turn's timer to its next deadline (under the lock), or `by` if that is
        sooner; with `earlier_only`, only if that comes before the one set. A timer also
        fires half a heartbeat after it was set at the latest, to look again (as the
        handler's own commits move deadlines later without re-arming it)."""
        due, _ = self._next_timer()
        soon = self._clock.monotonic() + self._renew_after / 2
        at = min(max(due, self._not_before), soon, by)
        if self._timer is not None:
            if earlier_only and self._timer.due <= at:
                return
            self._timer.cancel()  # nothing if it is the one firing now
        self._timer = timers_of(self._clock).call_at(at, self._timers)

    def _timers(self) -> None:
        """The turn's timer fired (on a spare thread): make the commit that is due, and set
        it again, until the handler returns. The handler is not held up meanwhile: a commit
        that goes on with the turn is written without the lock (_write); one that ends it
        (the handler ended the task, or hands it over), and a lost race, are decided under
        the lock, as on the handler's thread."""
        with self._committing:
            with self._lock:
                if self._handler_done:
                    return
                due, what = self._next_timer()
                now = self._clock.monotonic()
                if max(due, self._not_before) > now:
                    self._arm()
                    return
                plain = self._duplicate is None and not self._ends()
                batch = self._batch() if plain else None
            try:
                if batch is not None:
                    self._write(batch)
                else:
                    with self._lock:
                        # A heartbeat commits even nothing: it renews the lease.
                        self._flush(force=what == "heartbeat")
            except Exception:
                # The handler's next call or the turn's end commits again, else the next
                # try here; a lease that expires meanwhile lets a retry of this turn take
                # over, which this run then notices and stops.
                log.exception("%s of task %s failed", what, self._task.id)
                with self._lock:
                    self._not_before = now + self._renew_after / 2
            with self._lock:
                if not self._handler_done:
                    self._arm()

    def _batch(self) -> _Batch:
        """What a commit that goes on with the turn writes (under the lock)."""
        lease = self._renewed()
        current = None if self._stored is None else replace(self._stored, lease=lease)
        events = list(self._pending)
        return _Batch(current, self._task, events, self._pending_bytes, self._message_key, lease)

    def _write(self, batch: _Batch) -> None:
        """Commit `batch` without holding the lock (under `_committing`): the handler's later
        events stay pending for the next commit. A lost race (a resend's task made first,
        too) is decided under the lock as `_flush` decides it (re-read: stop, or fold and
        commit again)."""
        try:
            if batch.current is None:
                stored = self._store.create(
                    self._owner,
                    batch.task,
                    batch.events,
                    dialect=self._dialect,
                    message_key=batch.message_key,
                    lease=batch.lease,
                )
            else:
                stored = self._store.commit(
                    batch.current, batch.task, batch.events, message_key=batch.message_key
                )
        except (VersionConflict, DuplicateMessage):
            with self._lock:
                self._flush(force=True)
            return
        with self._lock:
            logged = self._committed(stored, batch.events, batch.size)
        if logged is not None and self._listener is not None:
            self._listener(stored, logged)

    def _committed(
        self, stored: StoredTask, events: list[Event], size: int
    ) -> list[LoggedEvent] | None:
        """Record a commit of the first `events` pending (their `size` bytes), under the
        lock; the events as logged, for the listener (None without one)."""
        first_seq = 1 if self._stored is None else self._stored.last_seq + 1
        self._stored = stored
        self._message_key = None  # recorded with the first commit of the turn
        del self._pending[: len(events)]
        self._pending_bytes -= size
        self._last_commit = self._clock.monotonic()
        if self._listener is None:
            return None
        return [LoggedEvent(first_seq + i, e) for i, e in enumerate(events)]

    def _commit(self) -> None:
        """One attempt at committing what is pending (under the lock)."""
        handed = None
        if self._stored is None:
            events = list(self._pending)
            stored = self._store.create(
                self._owner,
                self._task,
                events,
                dialect=self._dialect,
                message_key=self._message_key,
                lease=None if self._ends() else self._renewed(),
            )
        else:
            current = self._stored
            task, events = self._task, list(self._pending)
            handed = self._hand_over_events()
            if handed is not None:
                next_message, task, events = handed
                expires = self._clock.now() + timedelta(seconds=self._lease_seconds)
                queued = Lease(turn=current.version + 1, expires=expires, message_id=next_message)
                current = replace(current, lease=queued, pending=current.pending[1:])
            elif self._ends():
                # A terminal task never runs what still waits on it.
                ended = self._task.status.state.terminal
                current = replace(current, lease=None, pending=() if ended else current.pending)
            else:
                current = replace(current, lease=self._renewed())
            stored = self._store.commit(current, task, events, message_key=self._message_key)
            # Only now is the task handed over: a commit that lost its race leaves the turn's
            # own end pending, to be handed over (or not) again from the task as it is then.
            self._task = task
        logged = self._committed(stored, events, self._pending_bytes)
        if logged is not None and self._listener is not None:
            self._listener(stored, logged)
        if handed is not None:
            self._hand_over(stored)

    def _renewed(self) -> Lease:
        if self._lease is None:
            self._lease = Lease(
                turn=self._turn, holder=new_id(), message_id=self._message.message_id, inline=True
            )
        return replace(
            self._lease, expires=self._clock.now() + timedelta(seconds=self._lease_seconds)
        )

    def _ends(self) -> bool:
        """Whether this commit ends the turn: the handler returned, or ended it (a status the
        handler can act after no more: terminal, or waiting for input)."""
        return self._ending or self._task.status.state.final

    def _hand_over_events(self) -> tuple[str, Task, list[Event]] | None:
        """The pending message this commit hands the task over to, if it ends the turn
        completed or waiting for input while one waits, with the task and events to commit
        then: the ending status replaced by its message (into history) and `submitted`. None:
        no hand-over. The turn's own events are left as they are until the commit lands."""
        stored = self._stored
        state = self._task.status.state
        if stored is None or not stored.pending or state not in _HANDS_OVER:
            return None
        for index in range(len(self._pending) - 1, -1, -1):
            event = self._pending[index]
            if isinstance(event, StatusUpdate) and event.status.state is state:
                reply = event.status.message
                instead: list[Event] = [] if reply is None else [reply]
                instead.append(self._status(TaskState.SUBMITTED, None))
                events = [*self._pending[:index], *instead, *self._pending[index + 1 :]]
                return stored.pending[0], apply_all(stored.task, events), events
        return None  # the end was committed before the message came: it stands

    def _flush(self, *, force: bool = False) -> None:
        """Commit the pending events (with `force`, even none: a background turn's lease
        renewal or release); on a lost race, re-read and decide again."""
        if self._duplicate is not None or (
            not self._pending and self._stored is not None and not force
        ):
            return
        retry_on_conflict(self._commit_or_rebase, subject=f"task {self._task.id}")

    def _commit_or_rebase(self) -> None:
        """Commit; on a lost race, re-read: stop if the turn may not go on, else fold what is
        pending onto the fresh task and raise VersionConflict again, to be retried."""
        try:
            self._commit()
        except DuplicateMessage as duplicate:
            # The task is the first run's: this run's work is dropped as a cancel's is.
            self._duplicate = duplicate
            self._canceled = True
            self._stopped_as = "duplicate"
            self._pending.clear()
            self._pending_bytes = 0
        except VersionConflict:
            current = self._store.get(self._owner, self._task.id)
            if current is None or self._stopped_by(current):
                # Canceled (or finished) elsewhere, or taken over by another run of this
                # turn: what this turn still had is dropped, because a terminal task never
                # changes again and the new holder redoes the turn.
                self._stop(current)
                self._pending.clear()
                self._pending_bytes = 0
                if current is not None:
                    self._stored, self._task = current, current.task
                return
            self._stored = current
            self._task = apply_all(current.task, self._pending)
            if current.lease is not None:
                # Still ours (_stopped_by checked): keep what others noted on it (`final`).
                self._lease = current.lease
            raise


class _Batch(NamedTuple):
    """A commit the timer writes without the turn's lock: from `current` (None: create the
    task), the task and the events pending then (`size` bytes of the handler's)."""

    current: StoredTask | None
    task: Task
    events: list[Event]
    size: int
    message_key: MessageKey | None
    lease: Lease


async def _await(awaitable: Awaitable[None]) -> None:
    await awaitable
