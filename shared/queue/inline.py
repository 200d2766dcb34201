"""The embedded backend's TaskQueue: deliveries run on threads of this process.

It keeps the queue's promises the way Cloud Tasks does, so the same scenarios pass on both:
a name is taken once (for the life of the process), a delivery may be due later (`delay`), a
delivery that is not accepted or that raises is retried with exponential backoff (timed by a
Clock), and the last attempt says it is the last.

It never holds a process up: its threads are daemons, so a process that exits (Ctrl-C,
SIGTERM) drops what is queued, as `close()` does; after `close()` no attempt starts and no
backoff is waited out. `join()` waits until everything enqueued is done (tests).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from shared.clock import SYSTEM, Clock
from shared.observability import tracing
from shared.observability.context import note
from shared.observability.work import unit
from shared.ports import Delivery
from shared.queue import encode

log = logging.getLogger("a2a.queue")

# Takes one payload and its attempt; True when the target accepted it (HTTP 2xx in the cloud).
Target = Callable[[dict[str, Any], Delivery], bool]
# A queued delivery: its name, payload, the traceparent of the code that enqueued it (the
# header a Cloud Tasks entry carries) and when it became due (the clock's monotonic time).
_Entry = tuple[str, dict[str, Any], str | None, float]


class InlineQueue:
    def __init__(
        self,
        target: Target,
        *,
        threads: int = 16,
        max_attempts: int = 5,
        min_backoff: float = 0.1,
        max_backoff: float = 5.0,
        clock: Clock = SYSTEM,
        kind: str = "queued",
    ) -> None:
        """`kind`: what each delivery's log line calls it (as its Cloud Tasks target's:
        "worker", "deliver")."""
        self._target = target
        self._kind = kind
        self._max_threads = threads
        self._max_attempts = max_attempts
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._clock = clock
        self._names: set[str] = set()
        self._waiting: deque[_Entry] = deque()
        self._threads = 0  # started, each serving deliveries until close()
        self._idle = 0  # of those, the ones waiting for a delivery
        self._unfinished = 0  # enqueued, and not yet accepted, given up or dropped
        self._changed = threading.Condition()
        self._closed = threading.Event()

    def close(self) -> None:
        """Stop: drop what is queued, start no attempt and wait out no backoff (the process
        is going away). A target already running finishes on its own, holding nothing up."""
        self._closed.set()
        with self._changed:
            self._unfinished -= len(self._waiting)
            self._waiting.clear()
            self._changed.notify_all()

    def join(self, timeout: float) -> bool:
        """Wait until every delivery enqueued so far is done (accepted, given up, or dropped
        by close); False when `timeout` seconds passed first."""
        with self._changed:
            return self._changed.wait_for(lambda: self._unfinished == 0, timeout)

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        with tracing.span("enqueue", queue=self._kind, entry=name):
            return self._enqueue(name, payload, delay, tracing.traceparent())

    def _enqueue(
        self, name: str, payload: dict[str, Any], delay: float, traceparent: str | None
    ) -> bool:
        encode(name, payload)  # the same size limit as Cloud Tasks
        with self._changed:
            if name in self._names:
                return False
            self._names.add(name)
            if self._closed.is_set():
                return True  # dropped, as close() drops what is queued
            self._unfinished += 1
            if delay <= 0:
                self._schedule(name, payload, traceparent)
                return True
        # A thread that waits out the delay (cut short by close()), then queues it.
        threading.Thread(
            target=self._after,
            args=(delay, name, payload, traceparent),
            name="inline-queue-delay",
            daemon=True,
        ).start()
        return True

    def _after(
        self, delay: float, name: str, payload: dict[str, Any], traceparent: str | None
    ) -> None:
        self._clock.wait(self._closed, delay)
        with self._changed:
            if self._closed.is_set():
                self._unfinished -= 1  # dropped, as close() drops what is queued
                self._changed.notify_all()
            else:
                self._schedule(name, payload, traceparent)

    def _schedule(self, name: str, payload: dict[str, Any], traceparent: str | None) -> None:
        """Queue a delivery now (holding the condition's lock), with a thread to run it."""
        self._waiting.append((name, payload, traceparent, self._clock.monotonic()))
        if len(self._waiting) > self._idle and self._threads < self._max_threads:
            self._threads += 1
            threading.Thread(target=self._serve, name="inline-queue", daemon=True).start()
        self._changed.notify()

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed.is_set():
                    self._idle += 1
                    self._changed.wait()
                    self._idle -= 1
                if self._closed.is_set():
                    return
                entry = self._waiting.popleft()
            try:
                self._deliver(entry)
            finally:
                with self._changed:
                    self._unfinished -= 1
                    self._changed.notify_all()

    def _deliver(self, entry: _Entry) -> None:
        name, payload, traceparent, due = entry
        for attempt in range(self._max_attempts):
            if self._closed.is_set():
                break
            final = attempt + 1 == self._max_attempts
            try:
                # Each attempt is a unit of work of its own, as a Cloud Tasks target's call.
                with unit(self._kind, traceparent=traceparent):
                    lag = round(max(self._clock.monotonic() - due, 0.0), 6)
                    note(attempt=attempt, queueLagSeconds=lag)
                    accepted = self._target(payload, Delivery(attempt, final))
                if accepted:
                    return
                log.info("%s: not accepted (attempt %d)", name, attempt + 1)
            except BaseException as exc:
                # A delivery that dies is retried, as Cloud Tasks retries a worker that died
                # mid-request; only the interpreter's own exits pass through.
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                log.exception("%s: attempt %d failed", name, attempt + 1)
            if final:
                break
            # Cut short by close(); the loop then ends before another attempt.
            self._clock.wait(self._closed, min(self._max_backoff, self._min_backoff * 2**attempt))
            due = self._clock.monotonic()
        if not self._closed.is_set():
            log.error("%s: gave up after %d attempts", name, self._max_attempts)
