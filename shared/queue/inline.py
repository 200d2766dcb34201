"""The embedded backend's TaskQueue: deliveries run on a thread pool in this process.

It keeps the queue's promises the way Cloud Tasks does, so the same scenarios pass on both:
a name is taken once (for the life of the process), a delivery that is not accepted or that
raises is retried with exponential backoff, and the last attempt says it is the last.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shared.ports import Delivery
from shared.queue import encode

log = logging.getLogger("a2a.queue")

# Takes one payload and its attempt; True when the target accepted it (HTTP 2xx in the cloud).
Target = Callable[[dict[str, Any], Delivery], bool]


class InlineQueue:
    def __init__(
        self,
        target: Target,
        *,
        threads: int = 16,
        max_attempts: int = 5,
        min_backoff: float = 0.1,
        max_backoff: float = 5.0,
    ) -> None:
        self._target = target
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="inline-queue")
        self._names: set[str] = set()
        self._lock = threading.Lock()
        self._max_attempts = max_attempts
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._closed = threading.Event()

    def close(self) -> None:
        """Stop retrying and drop what is queued (the process is going away)."""
        self._closed.set()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        encode(name, payload)  # the same size limit as Cloud Tasks
        with self._lock:
            if name in self._names:
                return False
            self._names.add(name)
        self._pool.submit(self._deliver, name, payload)
        return True

    def _deliver(self, name: str, payload: dict[str, Any]) -> None:
        for attempt in range(self._max_attempts):
            final = attempt + 1 == self._max_attempts
            try:
                if self._target(payload, Delivery(attempt, final)):
                    return
                log.info("%s: not accepted (attempt %d)", name, attempt + 1)
            except BaseException as exc:
                # A delivery that dies is retried, as Cloud Tasks retries a worker that died
                # mid-request; only the interpreter's own exits pass through.
                if isinstance(exc, KeyboardInterrupt | SystemExit):
                    raise
                log.exception("%s: attempt %d failed", name, attempt + 1)
            if final or self._closed.wait(min(self._max_backoff, self._min_backoff * 2**attempt)):
                break
        if not self._closed.is_set():
            log.error("%s: gave up after %d attempts", name, self._max_attempts)
