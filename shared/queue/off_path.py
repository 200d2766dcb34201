"""A TaskQueue that enqueues on threads of its own: the caller never waits for the queue.

It wraps a queue whose enqueue can stall (Cloud Tasks: a call may take its whole 10 s timeout
in an outage) for callers that must not wait, such as a commit that queues push deliveries:
`enqueue` only records the entry and returns; threads create it, retrying with backoff for up
to `give_up_after` seconds. What is still not enqueued then, what is over `max_waiting`, and
what `close()` drops, is logged and left to whoever keeps the state to re-drive it (for push
deliveries: the lagging-config sweep, shared.push_notify).
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from typing import Any

from shared.clock import SYSTEM, Clock
from shared.observability import tracing
from shared.ports import DelayingTaskQueue, TaskTooLarge
from shared.queue import encode

log = logging.getLogger("a2a.queue")

# name, payload, delay, and the unit of work that enqueued it (its trace goes with the entry)
_Entry = tuple[str, dict[str, Any], float, Any]


class OffPathQueue:
    def __init__(
        self,
        inner: DelayingTaskQueue,
        *,
        threads: int = 4,
        max_waiting: int = 10_000,
        give_up_after: float = 60.0,
        min_backoff: float = 0.5,
        max_backoff: float = 8.0,
        clock: Clock = SYSTEM,
    ) -> None:
        self.inner = inner
        self._max_threads = threads
        self._max_waiting = max_waiting
        self._give_up_after = give_up_after
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._clock = clock
        self._waiting: deque[_Entry] = deque()
        self._threads = 0
        self._busy = 0  # entries taken by a thread and not yet enqueued or given up
        self._changed = threading.Condition()
        self._closed = threading.Event()

    def enqueue(self, name: str, payload: dict[str, Any], *, delay: float = 0.0) -> bool:
        """Record the entry for a thread to create; True, since whether the name was used
        before is known only later (the queue's answer is logged, not returned)."""
        encode(name, payload)  # over the size limit: the caller hears of it now
        with self._changed:
            if self._closed.is_set():
                log.warning("%s: not enqueued, the process is stopping", name)
                return True
            if len(self._waiting) >= self._max_waiting:
                log.error(
                    "%s: not enqueued, %d entries already wait for the queue",
                    name,
                    len(self._waiting),
                )
                return True
            self._waiting.append((name, payload, delay, tracing.snapshot()))
            if self._threads < self._max_threads and len(self._waiting) > self._idle():
                self._threads += 1
                threading.Thread(target=self._serve, name="off-path-queue", daemon=True).start()
            self._changed.notify()
        return True

    def _idle(self) -> int:
        return self._threads - self._busy

    def close(self) -> None:
        """Stop: drop what waits (logged), wait out no backoff, then close the inner queue."""
        self._closed.set()
        with self._changed:
            if self._waiting:
                log.warning("dropped %d entries not yet enqueued (stopping)", len(self._waiting))
            self._waiting.clear()
            self._changed.notify_all()
        self.inner.close()

    def join(self, timeout: float) -> bool:
        """Wait until every entry so far is enqueued, given up or dropped (tests)."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._waiting and not self._busy, timeout)

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._waiting and not self._closed.is_set():
                    self._changed.wait()
                if self._closed.is_set():
                    self._threads -= 1
                    return
                entry = self._waiting.popleft()
                self._busy += 1
            name, payload, delay, enqueued_in = entry
            try:
                with tracing.resumed(enqueued_in):
                    self._create(name, payload, delay)
            finally:
                with self._changed:
                    self._busy -= 1
                    self._changed.notify_all()

    def _create(self, name: str, payload: dict[str, Any], delay: float) -> None:
        started = self._clock.monotonic()
        attempt = 0
        while not self._closed.is_set():
            try:
                self.inner.enqueue(name, payload, delay=delay)
                return
            except TaskTooLarge:
                log.exception("%s: refused by the queue", name)
                return
            except Exception as exc:
                pause = min(self._max_backoff, self._min_backoff * 2**attempt)
                if self._clock.monotonic() - started + pause > self._give_up_after:
                    log.error(
                        "%s: not enqueued after %d attempts in %.0f s (%s); a sweep re-drives it",
                        name,
                        attempt + 1,
                        self._clock.monotonic() - started,
                        exc,
                    )
                    return
                log.warning("%s: enqueue attempt %d failed (%s); retrying", name, attempt + 1, exc)
                attempt += 1
                self._clock.wait(self._closed, pause)
