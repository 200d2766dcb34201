"""Daemon threads reused for background functions (a turn's timer that fired, shared.timers).

Starting a thread waits until the new thread has been scheduled: under concurrent requests
that wait was a good part of a short blocking send. A function handed to `run` goes to a
thread that is idle, waiting for the next one, and a new thread starts only when none is;
at most MAX_IDLE wait, the others end once their function returns.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger("a2a.threads")

MAX_IDLE = 32  # threads kept waiting after a burst (a few KiB of memory each)


class _Spares:
    """The threads of this process waiting for a function, and the functions handed out."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle = 0  # threads waiting on `jobs`, or about to
        self.jobs: queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]]]
        self.jobs = queue.SimpleQueue()

    def run(self, function: Callable[..., None], args: tuple[Any, ...]) -> None:
        with self.lock:
            spare = self.idle > 0
            if spare:
                self.idle -= 1  # that thread is this function's: the next call counts one fewer
        self.jobs.put((function, args))
        if not spare:
            threading.Thread(target=self.serve, name="spare", daemon=True).start()

    def serve(self) -> None:
        while True:
            function, args = self.jobs.get()
            try:
                function(*args)
            except Exception:
                name = getattr(function, "__name__", function)
                log.exception("background function %s failed", name)
            with self.lock:
                if self.idle >= MAX_IDLE:
                    return
                self.idle += 1


_spares = _Spares()


def run(function: Callable[..., None], *args: Any) -> None:
    """Call `function(*args)` on a daemon thread, now, without waiting for it."""
    _spares.run(function, args)


def _after_fork() -> None:
    # A forked child has none of its parent's threads (gunicorn forks its worker after the
    # import): its own start with nothing counted idle and a queue of their own.
    global _spares  # noqa: PLW0603 - replaced whole, so no lock of the parent's is inherited
    _spares = _Spares()


os.register_at_fork(after_in_child=_after_fork)
