"""A manual Clock: time moves only when a test calls `advance`, so tests never sleep to
let a lease expire or a backoff pass."""

from __future__ import annotations

import threading
from datetime import datetime, timedelta

from shared.model import utc_now


class ManualClock:
    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or utc_now()
        self._elapsed = 0.0
        self._changed = threading.Condition()

    def now(self) -> datetime:
        with self._changed:
            return self._start + timedelta(seconds=self._elapsed)

    def monotonic(self) -> float:
        with self._changed:
            return 1000.0 + self._elapsed

    def wait(self, event: threading.Event, timeout: float) -> bool:
        """Blocks until `event` is set or the test advanced time past the timeout."""
        with self._changed:
            deadline = self._elapsed + max(timeout, 0.0)
            while not event.is_set() and self._elapsed < deadline:
                # Re-checks the event now and then: a set() does not notify this condition.
                self._changed.wait(0.01)
            return event.is_set()

    def loop_delay(self, seconds: float) -> float:
        """An event loop's timer looks again every few real milliseconds: only the test
        moves this clock."""
        return min(seconds, 0.002)

    def advance(self, seconds: float) -> None:
        with self._changed:
            self._elapsed += seconds
            self._changed.notify_all()
