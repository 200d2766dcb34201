"""A stream's pause: nothing to send until something happens, or until some seconds pass.

Between frames a stream waits for its task's next event, often for minutes (a task that
waits for input). A thread blocked on that wait would cap an instance's streams at its
THREADS and leave none for other requests. So a stream that has nothing to send hands its
reader a Pause instead of blocking: the front (shared/bindings/asgi.py) waits on the event
loop, holding no thread, until the pause is woken (from any thread: a commit, a listener's
snapshot, a streamed turn's commit, the instance stopping) or its seconds have passed, and
only then has a pool thread make the stream's next chunk.

A wake is a hint, never a frame: the stream looks again and may find nothing (a commit of
another task's events, or one it already sent), and pauses again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Pause:
    """Nothing to send for at most `seconds` (the stream's next keep-alive, its end, its
    tail's own next read), unless woken before."""

    __slots__ = ("__weakref__", "_lock", "_on_wake", "_woken", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._woken = False
        self._on_wake: Callable[[], None] | None = None

    def wake(self) -> None:
        """Something may have happened (any thread, any number of times): the reader's
        callback runs, once, here."""
        with self._lock:
            self._woken = True
            on_wake, self._on_wake = self._on_wake, None
        if on_wake is not None:
            on_wake()

    def on_wake(self, callback: Callable[[], None]) -> None:
        """The reader's `callback`, run once at the first wake: at once, here, when the
        pause was woken already."""
        with self._lock:
            if not self._woken:
                self._on_wake = callback
                return
        callback()
