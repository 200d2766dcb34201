"""Deadlines of this process's turns (shared.runtime), kept on one thread per clock.

A turn's timers (its commit window, the lease's heartbeat) almost never fire for a short
turn: a blocking send ends in a millisecond, long before any of them (a long turn's timers
commit its events as they come, off the handler's thread). A thread per turn, even a reused
one, was woken and put back to sleep for every turn. Here a turn registers its next
deadline in a heap (`Timers.call_at`) and drops it when it ends (`Timer.cancel`), which costs
no thread anything: the one thread of its clock sleeps to the earliest deadline it knows, or
naps for `NAP_SECONDS` when it knows none, and is woken only by a deadline earlier than that
(or when the last deadline it sleeps to is dropped: a test's clock may never reach it). A
deadline that comes runs its function on a spare thread (shared.spare_threads), so one
turn's slow commit never delays another's. Dropped deadlines leave the heap as the thread
passes them, or when they outnumber the live ones.

One thread per clock, because each clock keeps its own time: the system's in production, a
test's ManualClock moves only when the test says so (`timers_of`). A clock's thread ends
after `IDLE_SECONDS` without any deadline and starts again at the next one.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable

from shared import spare_threads
from shared.clock import Clock

log = logging.getLogger("a2a.timers")

# Without a deadline the thread looks again after this (real seconds): a deadline set later
# than that wakes nobody. Shorter than any turn's first deadline (a commit interval, 0.25 s
# by default), so a short turn's never does; a longer nap would only make the thread notice
# a test clock's deadlines later.
NAP_SECONDS = 0.05
IDLE_SECONDS = 10.0  # a clock's thread without any deadline ends after this (real seconds)
_COMPACT_AT = 64  # the heap is rebuilt once it holds this many entries, most of them dropped


class Timer:
    """One deadline: `function` runs at `due` (the clock's monotonic time) unless canceled."""

    __slots__ = ("_timers", "canceled", "due", "function")

    def __init__(self, timers: Timers, due: float, function: Callable[[], None]) -> None:
        self._timers = timers
        self.due = due
        self.function = function
        self.canceled = False

    def cancel(self) -> None:
        """Drop the deadline (nothing happens if it has run or was dropped already)."""
        self._timers._drop(self)


class Timers:
    """The deadlines of one clock, and the thread that waits for them."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._heap: list[tuple[float, int, Timer]] = []
        self._order = itertools.count()  # equal deadlines in the order they came
        self._live = 0  # entries neither canceled nor run
        self._wake = threading.Event()
        # The clock's time by which the thread looks again (None: there is no thread), and
        # whether it naps (knew no deadline) rather than sleeping to one.
        self._sleeps_until: float | None = None
        self._napping = False

    def call_at(self, due: float, function: Callable[[], None]) -> Timer:
        """Run `function` on a spare thread once the clock's monotonic time reaches `due`."""
        timer = Timer(self, due, function)
        with self._lock:
            heapq.heappush(self._heap, (due, next(self._order), timer))
            self._live += 1
            if self._sleeps_until is None:
                self._sleeps_until, self._napping = due, False
                threading.Thread(target=self._serve, name="timers", daemon=True).start()
            elif due < self._sleeps_until:
                self._sleeps_until = due
                self._wake.set()
        return timer

    def _drop(self, timer: Timer) -> None:
        with self._lock:
            if timer.canceled or timer.function is _done:
                return
            timer.canceled = True
            self._live -= 1
            if not self._live:
                self._heap.clear()
                if self._sleeps_until is not None and not self._napping:
                    self._wake.set()  # to nap instead of sleeping to a dropped deadline
            elif len(self._heap) >= _COMPACT_AT and self._live < len(self._heap) // 2:
                self._heap = [entry for entry in self._heap if not entry[2].canceled]
                heapq.heapify(self._heap)

    def _serve(self) -> None:
        idle_since: float | None = None
        while True:
            with self._lock:
                self._wake.clear()
                now = self._clock.monotonic()
                due: list[Callable[[], None]] = []
                while self._heap and (self._heap[0][0] <= now or self._heap[0][2].canceled):
                    _, _, timer = heapq.heappop(self._heap)
                    if not timer.canceled:
                        self._live -= 1
                        due.append(timer.function)
                        timer.function = _done  # ran: a later cancel is a no-op
                if self._heap:
                    idle_since = None
                    self._sleeps_until, self._napping = self._heap[0][0], False
                else:
                    idle_since = idle_since if idle_since is not None else time.monotonic()
                    if not due and time.monotonic() - idle_since >= IDLE_SECONDS:
                        self._sleeps_until = None  # the next call_at starts a thread
                        return
                    self._sleeps_until, self._napping = now + NAP_SECONDS, True
                sleeps_until, napping = self._sleeps_until, self._napping
            for function in due:
                spare_threads.run(function)
            if napping:
                # Real seconds, whatever the clock: a test's clock may never move again.
                self._wake.wait(NAP_SECONDS)
            else:
                self._clock.wait(self._wake, sleeps_until - now)


def _done() -> None:
    """The function of a timer that has run."""


_registry_lock = threading.Lock()
_registry: dict[int, tuple[Clock, Timers]] = {}


def timers_of(clock: Clock) -> Timers:
    """The deadlines of `clock` (one Timers, and so one thread, per clock in this process)."""
    key = id(clock)
    with _registry_lock:
        found = _registry.get(key)
        if found is None or found[0] is not clock:
            found = (clock, Timers(clock))
            _registry[key] = found
        return found[1]


def _after_fork() -> None:
    # A forked child has none of its parent's threads (gunicorn forks its worker after the
    # import): its own timers, with no thread counted as sleeping.
    global _registry, _registry_lock  # noqa: PLW0603 - replaced whole: no parent's lock held
    _registry_lock = threading.Lock()
    _registry = {}


os.register_at_fork(after_in_child=_after_fork)
