"""Running a handler for one turn of a task and persisting what it does.

Everything a Turn holds is written by one thread at a time: the one that makes it until it
runs (a claim commits there), then the one that runs it. An async handler's turn runs on the
engine's event loop (shared.engine), so a turn awaiting a model holds no thread. A sync
handler's turn started by a request runs on that request's thread (`ran`), so a short one
never leaves it; the loop takes it over (`take_over`, under `_moving`, the turn's one lock)
when its first window closes or a cancel comes here, the handler going on there and its
events handed to the loop in order, as a sync handler's on the engine's pool are.

The turn folds the handler's events into its copy of the task and commits them with
optimistic concurrency, in windows, whoever listens: the first event after a quiet window at
once, the rest of a burst when its window closes (sooner past 1 MB). A window starts at the
stream commit interval and doubles with each commit up to the commit interval, so `working`
and the first tokens show at once and a long answer costs about a write a second; a short
turn ends before its first window closes, in one commit, as does one that answers within the
longest window without a word before (it is stored when that window closes). The committer
(`_arm`: a timer) writes on the engine's io threads while the handler goes on, one commit at
a time. A commit that loses a race re-reads the task: canceled, the turn stops; else it
folds its pending events onto the fresh task and commits again.

A cancel reaches the turn's pending await: one written on this instance stops the turn at
once (`stop_now`, through the engine); a turn that committed nothing for `CHECK_SECONDS`
reads its task, so one written elsewhere reaches it too. An async handler's await is then
cancelled (the model call is dropped); a sync handler sees `ctx.canceled`, and TaskCanceled
at its next action.

A streamed send listens to its turn (`listen`): it is told each event as the turn makes it,
under the sequence number its commit gives it (the turn is the log's one writer while it
holds the lease), so each token goes out at once and a resume anywhere is exact once
committed (shared.streaming says what a run stopped before its commit leaves).

Every turn holds the task's lease: every commit renews it, a heartbeat commits when nothing
else did for a while, the commit that ends the turn releases it. A run that dies leaves a
lease nobody renews, which a reader or the sweep recovers (shared.turn_queue); a turn that
finds its lease taken by another run stops as if canceled, without writing. Artifacts
without an explicit id get ids derived from the task, the turn and their order, so a turn
re-run after a crash replaces what the crashed run stored instead of adding it twice.

Messages sent while the turn runs wait on the task (`StoredTask.pending`). A turn that ends
completed or waiting for input while one waits hands the task over to it: the agent's last
message joins history, the task goes `submitted` with the next message's turn queued (its
lease), and `hand_over` enqueues it. A turn that fails, is rejected or canceled ends the
task: its waiting messages never run (a terminal task never changes again).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import math
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import replace
from datetime import timedelta
from typing import Any, Protocol, TypeVar

from shared.agent import Context, HandlerModule, TaskCanceled
from shared.clock import Clock
from shared.conflicts import ATTEMPTS, TooManyConflicts
from shared.engine import Engine, Started
from shared.frozen import frozen
from shared.lifecycle import apply, apply_all
from shared.limits import ArtifactMeter, LimitExceeded, Limits, servable
from shared.model import (
    ArtifactUpdate,
    Event,
    Message,
    StatusUpdate,
    Task,
    TaskState,
    derived_id,
    new_id,
    status_update,
    utc_now,
)
from shared.model_json import detached
from shared.observability import tracing
from shared.observability.context import note
from shared.pause import Waiting
from shared.ports import (
    DuplicateMessage,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskStore,
    VersionConflict,
)

log = logging.getLogger("a2a.runtime")

T = TypeVar("T")

# Told the turn's events, on the loop: each as the turn makes it (False: not yet committed,
# under the sequence number its commit will give it), and each commit's (True).
Listener = Callable[[list[LoggedEvent], bool], None]

# Called after the commit that handed the task over to its next pending message: enqueue it.
HandOver = Callable[[StoredTask], None]

# A turn that committed nothing for this long reads its task: a cancel written on another
# instance (or in the worker) reaches its pending await within this and a read.
CHECK_SECONDS = 0.5
# A turn commits its pending events once they hold this many bytes, whatever the window:
# one Firestore request carries 4 MB (store.firestore.COMMIT_BUDGET) with the task document,
# and one event up to 1 MB, so a commit takes at most about this much.
_COMMIT_BYTES = 1_000_000
# The end states after which a waiting message is the task's next turn.
_HANDS_OVER = (TaskState.COMPLETED, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED)
_ARTIFACT_IDS = uuid.UUID("6f1c2a52-9a43-4f57-9a8e-3a0d2b7f4c11")  # uuid5 namespace


@frozen
class TurnSettings:
    """What every turn of a function is set to."""

    window: float  # an event's first window (A2A_STREAM_COMMIT_INTERVAL_SECONDS)
    commit_interval: float  # the longest window (A2A_COMMIT_INTERVAL_SECONDS)
    lease_seconds: float  # a lease's life; renewed at every commit, a heartbeat at a third
    limits: Limits  # what the handler's artifacts may hold

    @classmethod
    def of(cls, settings: _TurnSettingsSource) -> TurnSettings:
        """From a function's settings (or the service's), whose fields of these names they are."""
        return cls(
            window=min(settings.stream_commit_interval, settings.commit_interval),
            commit_interval=settings.commit_interval,
            lease_seconds=settings.lease_seconds,
            limits=settings.limits,
        )


class _TurnSettingsSource(Protocol):
    @property
    def stream_commit_interval(self) -> float: ...
    @property
    def commit_interval(self) -> float: ...
    @property
    def lease_seconds(self) -> float: ...
    @property
    def limits(self) -> Limits: ...


@frozen
class Runner:
    """What runs a function's turns: its store, handler module and engine, the queue a turn
    hands its task over through, the settings and the clock (windows, checks, leases)."""

    store: TaskStore
    handler: HandlerModule
    engine: Engine
    hand_over: HandOver
    settings: TurnSettings
    clock: Clock


@frozen
class Start:
    """How a turn starts: the task (as stored, or new), the message it answers, the
    dialect it was sent in and its resend key. `lease`: a queued turn's (its message is
    stored already, and `stored` is required); without one, the turn takes a lease of its
    own at its first commit. `allow_message`: the turn may answer a bare message."""

    task: Task
    stored: StoredTask | None
    message: Message
    dialect: str
    message_key: MessageKey | None = None
    lease: Lease | None = None
    allow_message: bool = False


@frozen
class _Plan:
    """One commit: from `current` (None: create the task), the task and events to write
    (the first `count` pending, `size` bytes of the handler's), and, for a commit that hands
    the task over, the message it goes to."""

    current: StoredTask | None
    task: Task
    events: list[Event]
    size: int
    message_key: MessageKey | None
    lease: Lease | None
    handed: bool
    at: float  # when it was planned (the clock's monotonic time): its lease runs from then


class Turn:
    """One run of the handler for one incoming message, on the engine's loop."""

    def __init__(self, runner: Runner, owner: str, start: Start) -> None:
        self._runner = runner
        self._owner = owner
        self._start = start
        self._stored = start.stored
        self._task = start.task
        self._base = start.task  # the task as last committed (or as it starts)
        self._message_key = start.message_key
        self._pending: list[Event] = []
        self._sizes: list[int] = []  # the handler's bytes of each pending event (0: the turn's)
        self._pending_bytes = 0
        self._lease = start.lease
        lease, stored = start.lease, start.stored
        self._turn = (
            lease.turn if lease is not None else 1 if stored is None else stored.version + 1
        )
        self._window = runner.settings.window
        self._quiet = True  # the handler has made no event yet
        now = runner.clock.monotonic()
        self._last_commit = self._last_check = self._not_before = now
        self._canceled = False
        # How a turn stopped by another writer ended, as its log line says (`ended`).
        self._stopped_as = "canceled"
        self._reread = False  # stopped by a cancel of this instance: read the task at the end
        # Set when the turn's first commit found the task made already by another run of the
        # same message (a resend): the turn stops, and run() raises it for the service.
        self._duplicate: DuplicateMessage | None = None
        self._reply: Message | None = None
        self._listener: Listener | None = None
        # Its logs and spans belong to the unit of work that made it, on the loop.
        self._unit = tracing.snapshot()
        self._ctx: Context | None = None  # the handler's, made as it starts
        self._began = 0.0  # when the handler started (time.perf_counter)
        self._handler_done = False
        self._ending = False  # the handler returned (`_end`): the next commit ends the turn
        self._handler_task: asyncio.Future[Any] | None = None
        self._made = start.task  # a sync handler's view of the task (`emit`), on its thread
        # A sync handler's request's thread writes the turn (`ran`) until the loop takes it
        # over (`take_over`); `_moving` makes that switch one step for both.
        self._here = False
        self._moving = threading.Lock()
        # The committer: a timer at its next deadline (a short turn ends before it fires),
        # and the commit, check or heartbeat it started, one at a time.
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = math.inf
        self._acting: asyncio.Future[None] | None = None
        self._artifact_ids = itertools.count(1)
        self._artifact_sizes = ArtifactMeter(runner.settings.limits)
        # A new task starts working at the time it was submitted (one clock read per send).
        at = start.task.status.timestamp if stored is None else utc_now()
        working = status_update(start.task, TaskState.WORKING, at=at)
        if lease is not None:
            self._apply(working)
            return
        # Resuming moves the agent's question into history before the answer to it arrives.
        message = start.message
        for event in (working, message) if stored is not None else (message, working):
            self._apply(event)

    @property
    def task(self) -> Task:
        return self._task

    def claim(self) -> None:
        """Commit the start of the turn now, once, before it runs (on the thread that made
        it, its writer until it runs): a continuation claims its task this way (only one
        message resumes an interrupted task) and a background turn becomes visible before it
        runs. Raises VersionConflict when the task moved on meanwhile."""
        _made_here(self._claimed())

    async def _claimed(self) -> None:
        plan = self._plan()
        stored = await self._runner.engine.io(self._write, plan)
        self._landed(plan, stored)

    def listen(self, listener: Listener) -> StoredTask:
        """Tell `listener` (on the loop) each later event as the turn makes it, and each
        commit's; the snapshot committed so far (claim first)."""
        if self._stored is None:
            raise RuntimeError("claim the turn before listening to it")
        self._listener = listener
        return self._stored

    def ran(self) -> Waiting[Task | Message]:
        """Run the turn to its end for a request (from its thread): a sync handler's here
        while the engine has a slot for it (`Engine.hold`), until the loop takes it over (then
        its end is waited for without a thread); else on the loop. The result for a send."""
        engine = self._runner.engine
        if not self.awaits:
            self._began, self._ctx, self._made = time.perf_counter(), self._context(), self._task
            self._here = True
            if engine.hold(self._owner, self._task.id, self):
                ended = self._run_here(self._ctx)
                return (yield from ended.outcome()) if isinstance(ended, Started) else ended
            self._here = False
        return (yield from engine.start(self.run()).outcome())

    def _run_here(self, ctx: Context) -> Task | Message | Started[Task | Message]:
        """The sync handler run on this thread; the turn's end made here, or on the loop once
        it took the turn over (or must await what the handler returned)."""
        engine = self._runner.engine
        with tracing.span("handler turn"):  # this thread is in the turn's unit of work
            note(taskId=self._task.id)
            returned: object = None
            error: BaseException | None = None
            try:
                returned = self._runner.handler.handle(ctx)
            except BaseException as exc:  # SystemExit too: the loop's turn must hear of it
                error = exc
            with self._moving:
                here, self._here = self._here, False
            if not here or inspect.isawaitable(returned):
                ending = engine.go_on(self._on_loop(self._awaited(returned, error)))
                engine.let_go(self)
                return ending
            engine.let_go(self)
            if error is not None:
                self._failed(error)
            self._handler_done = True
            result = _made_here(self._end())
            note(handlerSeconds=round(time.perf_counter() - self._began, 6), turnState=self.ended)
        return result

    def take_over(self, *, now: bool = False) -> bool:
        """On the loop: take over a sync turn its request's thread runs once its committer
        has something due (its first window closed), or `now` (a cancel here); whether it did.
        The handler goes on there, its events and its return handed to the loop."""
        with self._moving:
            if not self._here or not (now or self._next()[0] <= self._runner.clock.monotonic()):
                return False
            self._here = False
        self._runner.engine.running(self._owner, self._task.id, self)
        with tracing.resumed(self._unit):
            self._arm()  # its committer's timers run in its unit of work
        return True

    async def run(self) -> Task | Message:
        """Run the handler to the end of its turn on the loop (a stream's turn, the worker's,
        or one without a slot here); the result for a blocking send."""
        self._began, self._ctx = time.perf_counter(), self._context()
        return await self._on_loop(self._call_handler(self._ctx))

    @property
    def ended(self) -> str:
        """How the turn ended, as logs name it: the task's state; for a turn another writer
        stopped, the state it left the task in (`canceled`), or `gone`, or `taken over` (by
        another run of the turn), or `duplicate` (a resend's, dropped)."""
        return self._stopped_as if self._canceled else self._task.status.state.value

    @property
    def awaits(self) -> bool:
        """Whether its handler is async (its turn runs on the loop from the start)."""
        return inspect.iscoroutinefunction(self._runner.handler.handle)

    def stop_now(self) -> None:
        """A cancel of this task was committed on this instance: stop now (on the loop). Its
        pending events are dropped (the task is terminal); an async handler's await is
        cancelled."""
        if self._canceled or self._handler_done:
            return  # an ending turn's commit loses its race, and reads the cancel then
        self._stop("canceled")
        self._reread = True

    async def _on_loop(self, handler: Awaitable[None]) -> Task | Message:
        """The turn on the loop, from the handler's run (or what a request's thread left of
        it) to its end."""
        engine, task_id = self._runner.engine, self._task.id
        with tracing.resumed(self._unit), tracing.span("handler turn"):
            note(taskId=task_id)  # the handler's own log lines name the task too
            engine.running(self._owner, task_id, self)
            self._arm()  # the first window's close: a short turn ends before it
            try:
                await handler
            except asyncio.CancelledError:
                if not self._canceled:
                    raise  # the engine itself is going away
            except Exception as error:
                self._failed(error)
            finally:
                self._handler_done = True
                self._disarm()
                if self._acting is not None:
                    await self._acting  # the commit in flight lands first
                engine.ended(self._owner, task_id, self)
            result = await self._end()
            note(handlerSeconds=round(time.perf_counter() - self._began, 6), turnState=self.ended)
            return result

    def _failed(self, error: BaseException) -> None:
        """The handler raised `error`: the task fails, its message saying why (a limit's
        names it; any other error a reference to the log line), unless it was canceled.
        What is no error of the handler's (SystemExit) goes on up."""
        if isinstance(error, TaskCanceled):
            return
        if isinstance(error, LimitExceeded):  # the handler's own output
            log.warning("handler %s: %s", self._runner.handler.name, error)
            self._end_with(TaskState.FAILED, str(error))
            return
        if not isinstance(error, Exception):
            raise error
        reference = new_id()[:8]
        name = self._runner.handler.name
        log.error("handler %s failed (reference %s)", name, reference, exc_info=error)
        note(reference=reference)
        self._end_with(
            TaskState.FAILED,
            f"The agent failed while working on this task (reference {reference}).",
        )

    def _context(self) -> Context:
        # What the handler reads is its own: changing a dict in it changes nothing stored or
        # served (the store keeps these very objects).
        store, owner, original = self._runner.store, self._owner, self._start.message
        message = detached(original)
        history = tuple(message if m is original else detached(m) for m in self._task.history)
        return Context(
            task_id=self._task.id,
            context_id=self._task.context_id,
            message=message,
            history=history,
            artifacts=tuple(detached(artifact) for artifact in self._task.artifacts),
            _sink=self,
            extensions=self._runner.handler.active_extensions(original),
            _list_tasks=lambda query: store.list(owner, query),
        )

    async def _call_handler(self, ctx: Context) -> None:
        handle = self._runner.handler.handle
        if self.awaits:
            returned: object = handle(ctx)
        else:  # a sync handler holds a thread of the engine's pool for its whole turn
            self._made = self._task
            returned = await self._runner.engine.in_thread(handle, ctx)
        await self._awaited(returned)

    async def _awaited(self, returned: object, error: BaseException | None = None) -> None:
        """What the handler returned, awaited if it is awaitable (a coroutine), as a task that
        a cancel cancels: the model call it waits on is dropped; or what it raised (a sync
        handler run by its request's thread leaves either to the loop)."""
        if error is not None:
            raise error
        if inspect.isawaitable(returned):
            self._handler_task = asyncio.ensure_future(returned)
            await self._handler_task

    async def _end(self) -> Task | Message:
        self._ending = True  # the handler returned: the next commit ends the turn
        ctx, self._ctx = self._ctx, None  # it holds this turn: no cycle for the collector
        if self._reread:  # canceled here: answer the task as the cancel left it
            current = await self._runner.engine.io(
                self._runner.store.get, self._owner, self._task.id
            )
            if current is not None:
                self._stored, self._task = current, current.task
        if not self._canceled and not self._task.status.state.terminal:
            if self._reply is not None:
                reply = self._reply
                if self._start.allow_message and self._stored is None and not self._has_output():
                    return replace(reply, task_id=None)  # nothing about the task was stored
                self._apply(status_update(self._task, TaskState.COMPLETED, reply))
            elif ctx is None or ctx.ended is None:
                self._apply(status_update(self._task, TaskState.COMPLETED))
        await self._flush(force=self._holds_lease())
        if self._duplicate is not None:
            raise self._duplicate
        return self._task

    def _has_output(self) -> bool:
        return bool(self._task.artifacts) or len(self._task.history) > 1

    # -- the Context's sink: called on the loop (an async handler) or from the handler's thread

    def emit(self, event: Event) -> None:
        if self._canceled:
            raise TaskCanceled(self._task.id)
        # Over a limit, or unservable: raised here, to the handler, and not applied. The
        # meter is the emitting thread's alone (the loop's, or a sync handler's own), and so
        # is the task it measures against: the loop's, or, on a sync handler's thread, the
        # task as that handler's own events made it (`_made`: the loop applies them later).
        engine = self._runner.engine
        if engine.on_loop():
            self._emitted(*self._checked(event, self._task))
            return
        made = self._made
        event, size = self._checked(event, made)
        self._made = apply(made, event)
        with self._moving:
            if self._here:  # this thread writes the turn
                self._apply(event, size, self._made)
                self._quiet = False
                return
        # The loop writes it: the handler goes on, the loop applies its events in order.
        engine.loop.call_soon_threadsafe(self._emitted, event, size)

    def _checked(self, event: Event, made: Task) -> tuple[Event, int]:
        if isinstance(event, ArtifactUpdate):
            return self._artifact_sizes.add(event, made)
        return servable(event)

    def reply(self, message: Message) -> None:
        if self._canceled:
            raise TaskCanceled(self._task.id)
        # Read by the turn's end, on the loop, once the handler returned.
        self._reply, _ = servable(message)

    def canceled(self) -> bool:
        return self._canceled

    def artifact_id(self) -> str:
        count = next(self._artifact_ids)  # atomic: any thread
        return derived_id(_ARTIFACT_IDS, f"{self._task.id}/{self._turn}/{count}")

    def _emitted(self, event: Event, size: int) -> None:
        """A handler's event, into the turn (on the loop)."""
        if self._canceled:
            return  # stopped meanwhile: dropped, as a cancel drops what is pending
        self._apply(event, size)
        if self._listener is not None and self._stored is not None:
            self._listener([LoggedEvent(self._stored.last_seq + len(self._pending), event)], False)
        first, self._quiet = self._quiet, False
        if first or len(self._pending) == 1 or self._pending_bytes >= _COMMIT_BYTES:
            self._arm()  # its window's close (at once after a quiet one), or now past 1 MB

    # -- commits --------------------------------------------------------------------------

    def _arm(self) -> None:
        """Set the committer's timer to its next deadline (on the loop), unless one is set
        sooner or it is acting now (it sets the next when done)."""
        if self._acting is not None or self._handler_done:
            return
        due, _ = self._next()
        if due >= self._timer_due:
            return
        self._disarm()
        if due < math.inf:
            clock = self._runner.clock
            delay = clock.loop_delay(max(due - clock.monotonic(), 0.0))
            self._timer = asyncio.get_running_loop().call_later(delay, self._fire)
            self._timer_due = due

    def _disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_due = None, math.inf

    def _fire(self) -> None:
        """The committer's timer: act if what it was set for is due (a test's clock may not
        have come so far), else set it again."""
        self._timer, self._timer_due = None, math.inf
        if self._handler_done:
            return
        due, what = self._next()
        if due > self._runner.clock.monotonic():
            self._arm()
            return
        self._acting = asyncio.ensure_future(self._act(what))

    async def _act(self, what: str) -> None:
        """Commit a window's events, renew the lease or look for a cancel written elsewhere;
        then set the timer for what comes next."""
        try:
            if what == "check":
                await self._check()
            else:
                await self._commit(force=what == "heartbeat")
                if what == "commit":
                    self._window = min(self._window * 2, self._runner.settings.commit_interval)
        except Exception:
            # The next try here, or the turn's end, commits again; a lease that expires
            # meanwhile lets a retry of this turn take over, which this run then notices.
            log.exception("%s of task %s failed", what, self._task.id)
            self._not_before = self._runner.clock.monotonic() + self._renew_after / 2
        finally:
            self._acting = None
            self._arm()

    @property
    def _renew_after(self) -> float:
        return self._runner.settings.lease_seconds / 3  # a heartbeat when no commit did

    def _next(self) -> tuple[float, str]:
        """When the committer acts next, and what it does: pending events are committed when
        their window closes, at once past 1 MB, a turn not yet stored whose handler said
        nothing yet when the longest window closes (one that answers within it costs one
        write); the lease is renewed when no commit did for a third of its life; a stored turn
        that committed nothing for CHECK_SECONDS reads its task. Never, once the turn may
        commit no more (canceled, or a resend's turn that found the first run's task)."""
        if self._canceled:
            return math.inf, ""
        if self._pending_bytes >= _COMMIT_BYTES:
            return self._not_before, "commit"
        if self._stored is None and self._quiet:
            longest = self._runner.settings.commit_interval
            return max(self._last_commit + longest, self._not_before), "commit"
        if self._pending:
            return max(self._last_commit + self._window, self._not_before), "commit"
        if not self._holds_lease():
            return math.inf, ""
        heartbeat = self._last_commit + self._renew_after
        check = max(self._last_commit, self._last_check) + CHECK_SECONDS
        return (heartbeat, "heartbeat") if heartbeat <= check else (check, "check")

    async def _check(self) -> None:
        """Read the task: stop if another writer ended it or took the turn over."""
        self._last_check = self._runner.clock.monotonic()
        current = await self._runner.engine.io(self._runner.store.get, self._owner, self._task.id)
        if not self._canceled and self._stopped_by(current):
            self._stopped(current)

    async def _flush(self, *, force: bool = False) -> None:
        """Commit everything pending (with `force`, even nothing: a lease's renewal or
        release), in commits of about 1 MB at most."""
        await self._commit(force=force)
        while self._pending and not self._canceled:
            await self._commit()

    async def _commit(self, *, force: bool = False) -> None:
        """One commit of what is pending; a lost race re-reads the task: stop if the turn may
        not go on, else fold what is pending onto it and commit again."""
        engine, store = self._runner.engine, self._runner.store
        for _ in range(ATTEMPTS):
            if self._canceled or (not self._pending and self._stored is not None and not force):
                return
            plan = self._plan()
            try:
                stored = await engine.io(self._write, plan)
            except DuplicateMessage as duplicate:
                # The task is the first run's: this run's work is dropped as a cancel's is.
                self._duplicate = duplicate
                self._stop("duplicate")
                return
            except VersionConflict:
                current = await engine.io(store.get, self._owner, self._task.id)
                if current is None or self._stopped_by(current):
                    self._stopped(current)
                    return
                self._rebase(current)
                continue
            self._landed(plan, stored)
            if plan.handed:
                await engine.io(self._runner.hand_over, stored)
            return
        raise TooManyConflicts(f"task {self._task.id}: gave up after {ATTEMPTS} lost races")

    def _plan(self) -> _Plan:
        """The next commit (on the loop): the pending events, or the first of them that make
        about 1 MB; it ends the turn when it takes them all and the turn ends."""
        at = self._runner.clock.monotonic()
        count, size = len(self._pending), self._pending_bytes
        if size > _COMMIT_BYTES:
            count, size = 0, 0
            while count < len(self._sizes) and (
                count == 0 or size + self._sizes[count] <= _COMMIT_BYTES
            ):
                size += self._sizes[count]
                count += 1
        events = self._pending[:count]
        whole = count == len(self._pending)
        task = self._task if whole else apply_all(self._base, events)
        ends = whole and self._ends()
        if self._stored is None:
            lease = None if ends else self._renewed()
            return _Plan(None, task, events, size, self._message_key, lease, False, at)
        current = self._stored
        handed = self._hand_over_events() if ends else None
        if handed is not None:
            next_message, task, events = handed
            expires = self._runner.clock.now() + timedelta(
                seconds=self._runner.settings.lease_seconds
            )
            queued = Lease(turn=current.version + 1, expires=expires, message_id=next_message)
            current = replace(current, lease=queued, pending=current.pending[1:])
        elif ends:
            # A terminal task never runs what still waits on it.
            ended = self._task.status.state.terminal
            current = replace(current, lease=None, pending=() if ended else current.pending)
        else:
            current = replace(current, lease=self._renewed())
        return _Plan(current, task, events, size, self._message_key, None, handed is not None, at)

    def _write(self, plan: _Plan) -> StoredTask:
        """The plan's store call (on an io thread: it touches nothing of the turn's)."""
        store = self._runner.store
        if plan.current is None:
            return store.create(
                self._owner,
                plan.task,
                plan.events,
                dialect=self._start.dialect,
                message_key=plan.message_key,
                lease=plan.lease,
            )
        return store.commit(plan.current, plan.task, plan.events, message_key=plan.message_key)

    def _landed(self, plan: _Plan, stored: StoredTask) -> None:
        """Record a commit (on the loop), and tell the listener what it logged."""
        first_seq = 1 if self._stored is None else self._stored.last_seq + 1
        count = len(self._pending) if plan.handed else len(plan.events)
        self._stored, self._base = stored, plan.task
        self._message_key = None  # recorded with the first commit of the turn
        del self._pending[:count]
        del self._sizes[:count]
        self._pending_bytes -= plan.size
        self._last_commit = plan.at
        if plan.handed:
            # Only now is the task handed over: a commit that lost its race leaves the turn's
            # own end pending, to be handed over (or not) again from the task as it is then.
            self._task = plan.task
        if self._listener is not None:
            self._listener([LoggedEvent(first_seq + i, e) for i, e in enumerate(plan.events)], True)

    def _rebase(self, current: StoredTask) -> None:
        """Fold what is pending onto `current` (a fresh read: the turn goes on)."""
        self._stored, self._base = current, current.task
        self._task = apply_all(current.task, self._pending)
        if current.lease is not None:
            # Still ours (_stopped_by checked): keep what others noted on it (`final`).
            self._lease = current.lease

    def _stopped(self, current: StoredTask | None) -> None:
        """Stop for `current` (a fresh read that `_stopped_by`): canceled (or finished)
        elsewhere, or taken over by another run of this turn. What this turn still had is
        dropped: a terminal task never changes again, and the new holder redoes the turn."""
        if current is None:
            self._stop("gone")
            return
        state = current.task.status.state
        self._stop(state.value if state.terminal else "taken over")
        self._stored, self._task, self._base = current, current.task, current.task

    def _stop(self, why: str) -> None:
        self._canceled = True
        self._stopped_as = why
        self._pending.clear()
        self._sizes.clear()
        self._pending_bytes = 0
        if self._handler_task is not None:
            self._handler_task.cancel()  # the model call it awaits is dropped
        self._disarm()

    # -- the task's state -----------------------------------------------------------------

    def _end_with(self, state: TaskState, text: str) -> None:
        if not self._canceled and not self._task.status.state.terminal:
            self._apply(status_update(self._task, state, text))

    def _apply(self, event: Event, size: int = 0, task: Task | None = None) -> None:
        """Fold `event` in (`task`: the task it makes, when the caller has it already)."""
        self._task = apply(self._task, event) if task is None else task
        self._pending.append(event)
        self._sizes.append(size)
        self._pending_bytes += size

    def _stopped_by(self, current: StoredTask | None) -> bool:
        """True when `current` (a fresh read) means this turn must stop: the task is gone or
        ended elsewhere (canceled), or another run took over this turn's lease."""
        if current is None or current.task.status.state.terminal:
            return True
        return current.lease is None or current.lease.holder != self._holder()

    def _holder(self) -> str | None:
        """This run's lease holder id (None: it has taken no lease yet)."""
        return None if self._lease is None else self._lease.holder

    def _holds_lease(self) -> bool:
        """Whether the stored task still names this run as its lease's holder (the commit
        that ends the turn gives it back)."""
        lease = None if self._stored is None else self._stored.lease
        return not self._canceled and lease is not None and lease.holder == self._holder()

    def _renewed(self) -> Lease:
        if self._lease is None:
            message_id = self._start.message.message_id
            self._lease = Lease(
                turn=self._turn, holder=new_id(), message_id=message_id, inline=True
            )
        seconds = self._runner.settings.lease_seconds
        return replace(self._lease, expires=self._runner.clock.now() + timedelta(seconds=seconds))

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
                instead.append(status_update(self._task, TaskState.SUBMITTED))
                events = [*self._pending[:index], *instead, *self._pending[index + 1 :]]
                return stored.pending[0], apply_all(stored.task, events), events
        return None  # the end was committed before the message came: it stands


def _made_here(work: Coroutine[Any, Any, T]) -> T:
    """Run a turn's `work` to its end on this thread, the turn's writer off the loop: it
    awaits nothing but its store calls, made here (`Engine.io`), so it never suspends."""
    try:
        work.send(None)
    except StopIteration as done:
        value: T = done.value
        return value
    work.close()
    raise RuntimeError("a turn's work off the loop waited for the loop")
