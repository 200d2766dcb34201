"""The periodic re-drive: whatever a failure left undone, picked up on a schedule.

A read of a task recovers it (shared.turn_queue.TurnQueue.settle), but a task nobody reads again
would wait forever: the sweep looks for such work across every owner. It is a list of
sweepers that shared.app hands it, each a callable taking the current time and returning how
many items it re-drove: the turns whose queue entry is missing (the outbox) or whose lease
expired (`TurnQueue.sweep`), and whatever else a module registers there. A sweeper reads its
work page after page (`pages`), each from where the last one ended, until a page comes back
short or its time budget (BUDGET) is spent: one sweep gets through every page there is.

Deployed, Cloud Scheduler calls it: a `POST /sweep` on the `worker` function, with an OIDC
token of the Cloud Tasks invoker account (shared.bindings.queue_target), once a minute
(`make deploy` creates the job). Under `make run` (the work queue in process) a
`SweepTimer` runs it on a thread. One sweeper that fails is logged and the others still
run; the next sweep tries again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TypeVar

from shared.clock import SYSTEM, Clock

log = logging.getLogger("a2a.sweep")

# Re-drives what is due at the given time; how many items it re-drove.
Sweeper = Callable[[datetime], int]
# Seconds one sweeper of one sweep reads pages at most: Cloud Scheduler's next call comes a
# minute later, and starts from the first page again.
BUDGET = 20.0

Item = TypeVar("Item")


def pages(
    read: Callable[[Item | None], list[Item]],
    size: int | None,
    *,
    budget: float = BUDGET,
    clock: Clock = SYSTEM,
) -> Iterator[Item]:
    """Every item of a paged query: `read(after)` answers the page past `after` (None: from
    the start), `size` items when more follow, so a shorter page is the last (None: a page
    may come back short and still be followed by more, as when the reader drops some of what
    it looked at; an empty page is the last). Stops early once `budget` seconds are spent
    (logged: the next sweep goes on)."""
    deadline = clock.monotonic() + budget
    after: Item | None = None
    while True:
        page = read(after)
        yield from page
        if not page or (size is not None and len(page) < size):
            return
        if clock.monotonic() > deadline:
            log.warning("the sweep stopped after %g s with pages left; the next goes on", budget)
            return
        after = page[-1]


class Sweep:
    def __init__(self, sweepers: Sequence[Sweeper], clock: Clock = SYSTEM) -> None:
        self.sweepers = list(sweepers)
        self._clock = clock

    def run(self) -> int:
        """Run every sweeper once, at the same `now`; how many items they re-drove."""
        now = self._clock.now()
        total = 0
        for sweeper in self.sweepers:
            try:
                total += sweeper(now)
            except Exception:
                log.exception("a sweeper failed; the next sweep tries again")
        if total:
            log.warning("the sweep re-drove %d items that a failure left behind", total)
        return total


class SweepTimer:
    """Runs a Sweep every `interval` seconds on a daemon thread until closed: the schedule of
    a process that runs its work queue itself (the embedded backend has no Cloud Scheduler)."""

    def __init__(self, sweep: Sweep, interval: float, clock: Clock = SYSTEM) -> None:
        self._sweep = sweep
        self._interval = interval
        self._clock = clock
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="sweep", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        """Stop; a sweep under way finishes on its own, holding nothing up."""
        self._closed.set()

    def _loop(self) -> None:
        while not self._clock.wait(self._closed, self._interval):
            self._sweep.run()
