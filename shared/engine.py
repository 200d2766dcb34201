"""The process's background work: the event loop its turns run on, and its few threads.

An LLM agent's turn spends seconds awaiting a model; here it holds no thread: a turn
(shared.runtime.Turn) of an async handler is a task on one event loop, on a thread of its
own started at the first turn, so thousands wait at once on one instance, and a cancel
cancels the await they wait on (`cancel`). Code that blocks runs on threads:

- a sync handler holds a thread for its whole turn, at most `sync_turns` at once
  (A2A_SYNC_TURNS): the thread of the request that started it while at most `on_requests`
  do (`hold`; the loop takes over one past its first window), else one of the engine's
  pool. So requests that run no handler always find a thread;
- a store call of a turn on the loop (a commit, a read) runs on the `io` pool: Firestore's
  client blocks.

The Engine is built once by shared.app and handed to the service and the worker; nothing of
it is module-global. It keeps the turns running here by task, so a cancel that reaches this
instance reaches the turn at once (one that reaches another instance is seen by the turn's
own check of its task). A handler that blocks the loop (a sync call in an async handler)
holds every turn of the instance: the engine logs a loop held over `HELD_SECONDS`, naming
the async turns that ran (none: other threads kept the CPU from it); docs/agents.md says more.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, Protocol, TypeVar

from shared.pause import Pause, Waiting

log = logging.getLogger("a2a.engine")

T = TypeVar("T")

# Threads for turns' store calls: a commit or read of Firestore takes a few milliseconds of
# waiting on the network, so a few dozen serve hundreds of turns committing once a second.
IO_THREADS = 32
# A loop held this long by one step of a turn is logged: every other turn of the instance
# waited meanwhile. Looked at every TICK_SECONDS while turns run, with the held turns that
# are due (the default first window: one is taken over within a tick of its window's close).
HELD_SECONDS = 0.25
TICK_SECONDS = 0.05
# What a late tick logs: an async handler's turn that ran on the loop held it; with none, the
# loop's thread got no CPU (a sync handler's computation on another thread), no one to blame.
_HELD = (
    "the turns' loop was held %.2f s by a blocking call in an async handler (turns that ran: "
    "%s): await it, or run it with asyncio.to_thread (docs/agents.md)"
)
_LATE = (
    "the turns' loop ran %.2f s late with no async handler on it: the process's other threads "
    "kept the CPU from it (sync handlers' long computations, requests beyond the instance's "
    "CPU): every turn of the instance waited meanwhile"
)
# A wait for a turn's end looks again after this even if nothing woke it (the end always
# wakes it: this only bounds a lost wake).
_LOOK_AGAIN = 60.0


class Started(Generic[T]):
    """Work started on the loop, as another thread sees it: `outcome` waits for its end
    without a thread (its pauses are woken by the end) and gives its value, or raises."""

    __slots__ = ("_error", "_finished", "_value", "pause")

    def __init__(self) -> None:
        self.pause = Pause(_LOOK_AGAIN)
        self._finished = False
        self._value: T | None = None
        self._error: BaseException | None = None

    def finish(self, task: asyncio.Task[T]) -> None:  # on the loop
        if task.cancelled():
            self._error = EngineClosed("the instance stopped the turn: it is shutting down")
        elif task.exception() is not None:
            self._error = task.exception()
        else:
            self._value = task.result()
        self._finished = True
        self.pause.wake()

    def outcome(self) -> Waiting[T]:
        while not self._finished:
            yield self.pause
        if self._error is not None:
            raise self._error
        value: T = self._value  # type: ignore[assignment]  # finished without an error
        return value


class EngineClosed(RuntimeError):
    """A turn was to start on an engine that was closed (the process is going away)."""


class Running(Protocol):
    """A turn as the engine holds it while it runs: it can be stopped from outside."""

    def stop_now(self) -> None:
        """The task was canceled here: stop the turn now (on the loop)."""
        ...

    def take_over(self, *, now: bool = False) -> bool:
        """On the loop: take the turn over from its request's thread if due (or `now`)."""
        ...

    @property
    def task(self) -> Any:
        """The task it runs (its id names it in the log)."""
        ...

    @property
    def awaits(self) -> bool:
        """Whether its handler is async: it runs on the loop, which a blocking call holds."""
        ...


class Engine:
    """The loop that runs this process's turns, its pools, and the turns running."""

    def __init__(
        self, sync_turns: int, *, on_requests: int | None = None, store_blocks: bool = True
    ) -> None:
        """`on_requests`: the sync turns that may run on their requests' threads (app.py: half
        of THREADS). `store_blocks`: the store's calls wait on the network (Firestore), so the
        loop makes them on the io threads; the embedded store's take microseconds of CPU."""
        self._sync_turns = sync_turns
        self._slots = threading.BoundedSemaphore(sync_turns)  # sync handlers running
        self._on_requests = min(sync_turns, sync_turns if on_requests is None else on_requests)
        self._store_blocks = store_blocks
        # The start of the loop's thread, `_outstanding`, `_held`, `_ticking`.
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = 0  # the loop's thread's ident
        self._ticking = False  # the held-loop check is scheduled
        self._ended_since_tick: list[tuple[str, float]] = []  # (task id, when) of those ended
        self._closed = False
        self._outstanding: set[Started[Any]] = set()  # started, not yet ended (`close`)
        self._io: ThreadPoolExecutor | None = None
        self._sync: ThreadPoolExecutor | None = None
        # The turns running on the loop, by (owner, task id): read and written there only.
        self._running: dict[tuple[str, str], Running] = {}
        # The sync turns whose handlers run on their requests' threads (`hold`).
        self._held: dict[Running, tuple[str, str]] = {}

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The turns' loop, started at the first use."""
        loop = self._loop
        if loop is None:
            with self._lock:
                if self._loop is None:
                    self._loop = self._start()
                loop = self._loop
        return loop

    def _start(self) -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        self._io = ThreadPoolExecutor(IO_THREADS, thread_name_prefix="turn-io")
        self._sync = ThreadPoolExecutor(self._sync_turns, thread_name_prefix="sync-turn")
        started = threading.Event()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            self._thread = threading.get_ident()
            loop.call_soon(started.set)
            try:
                loop.run_forever()
            finally:
                loop.close()
                for pool in (self._io, self._sync):
                    if pool is not None:
                        pool.shutdown(wait=False)

        threading.Thread(target=serve, name="turns", daemon=True).start()
        started.wait()
        return loop

    def on_loop(self) -> bool:
        """Whether this is the loop's thread."""
        return threading.get_ident() == self._thread

    def start(self, work: Coroutine[Any, Any, T]) -> Started[T]:
        """Run `work` on the loop (from any thread other than the loop's): its end, to wait
        for without a thread. Raises EngineClosed once the process is going away."""
        if self._closed:
            work.close()
            raise EngineClosed("this instance is shutting down: it starts no turn")
        return self.go_on(work)

    def go_on(self, work: Coroutine[Any, Any, T]) -> Started[T]:
        """`start` for the rest of a turn started already (held): even once closed."""
        started: Started[T] = Started()
        with self._lock:
            self._outstanding.add(started)

        def begin() -> None:
            self.loop.create_task(work).add_done_callback(ended)

        def ended(task: asyncio.Task[T]) -> None:
            with self._lock:
                self._outstanding.discard(started)
            started.finish(task)
            self._stop_if_closed()

        self.loop.call_soon_threadsafe(begin)
        return started

    async def io(self, function: Callable[..., T], *args: Any) -> T:
        """`function(*args)` (a store call) on the io pool, awaited on the loop, in the calling
        turn's context (its unit of work: logs, spans); made at once when the store does
        not block, or off the loop (a turn whose writer is a request's thread)."""
        if not self._store_blocks or not self.on_loop():
            return function(*args)
        run = functools.partial(contextvars.copy_context().run, function, *args)
        return await self.loop.run_in_executor(self._io, run)

    def in_thread(self, function: Callable[..., T], *args: Any) -> Awaitable[T]:
        """`function(*args)` (a sync handler) on the sync turns' pool once a slot is free,
        awaited on the loop, in the calling turn's context."""

        def run() -> T:
            with self._slots:
                return function(*args)

        return self.loop.run_in_executor(self._sync, contextvars.copy_context().run, run)

    # -- the sync turns held on requests' threads (from those threads) --------------------

    def hold(self, owner: str, task_id: str, turn: Running) -> bool:
        """Whether the sync turn may run its handler on this request's thread (fewer than
        `on_requests` do, a slot is free); held until `let_go`, the loop taking it over when
        due (`_tick`) or canceled here. Raises EngineClosed once closed."""
        loop = self.loop
        with self._lock:
            if self._closed:
                raise EngineClosed("this instance is shutting down: it starts no turn")
            if len(self._held) >= self._on_requests or not self._slots.acquire(blocking=False):
                return False
            self._held[turn] = (owner, task_id)
            tick, self._ticking = not self._ticking, True
        if tick:
            loop.call_soon_threadsafe(self._tick, time.monotonic())
        return True

    def let_go(self, turn: Running) -> None:
        """The held turn's handler returned: its slot is free."""
        with self._lock:
            del self._held[turn]
        self._slots.release()
        if self._closed:
            self.loop.call_soon_threadsafe(self._stop_if_closed)

    # -- the turns running here (on the loop) ---------------------------------------------

    def running(self, owner: str, task_id: str, turn: Running) -> None:
        self._running[(owner, task_id)] = turn
        with self._lock:
            tick, self._ticking = not self._ticking, True
        if tick:
            self._tick(time.monotonic())

    def _tick(self, set_at: float) -> None:
        """Every TICK_SECONDS while turns run: the held turns due are taken over; a tick that
        comes HELD_SECONDS late is logged (`_HELD`, `_LATE`)."""
        now = time.monotonic()
        with self._lock:
            here = list(self._held)
        for turn in here:
            turn.take_over()
        due = set_at + TICK_SECONDS
        if now - due > HELD_SECONDS:  # one that ended before the tick was due did not hold it
            ended = [task_id for task_id, at in self._ended_since_tick if at > due]
            ran = sorted({*ended, *(t.task.id for t in self._running.values() if t.awaits)})
            log.warning(*(_HELD, now - due, ", ".join(ran[:5])) if ran else (_LATE, now - due))
        self._ended_since_tick.clear()
        with self._lock:
            going_on = self._ticking = bool(self._running or self._held)
        if going_on:
            self.loop.call_later(TICK_SECONDS, self._tick, now)

    def ended(self, owner: str, task_id: str, turn: Running) -> None:
        if self._running.get((owner, task_id)) is turn:
            del self._running[(owner, task_id)]
            if turn.awaits:
                self._ended_since_tick.append((task_id, time.monotonic()))  # it may have held it

    def cancel(self, owner: str, task_id: str) -> None:
        """The owner's task was canceled by a write of this instance: the turn running it
        here, if any, stops now (any thread; nothing waits for it)."""
        if self._loop is None:
            return  # no turn ever ran here

        def stop() -> None:
            turn = self._running.get((owner, task_id))
            if turn is None:  # one held on a request's thread is taken over first
                with self._lock:
                    held = [t for t, key in self._held.items() if key == (owner, task_id)]
                turn = next((t for t in held if t.take_over(now=True)), None)
            if turn is not None:
                turn.stop_now()

        self._loop.call_soon_threadsafe(stop)

    def close(self) -> None:
        """The process is going away: no turn starts any more; those started run on to their
        end (their requests are answered while the server drains them), then the loop stops.
        A turn that outlives the process leaves a lease nobody renews: a reader or the sweep
        recovers it."""
        self._closed = True
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._stop_if_closed)

    def _stop_if_closed(self) -> None:
        """On the loop: once closed and nothing started (or held) is left, stop."""
        with self._lock:
            idle = not self._outstanding and not self._held
        if self._closed and idle:
            asyncio.get_running_loop().stop()
