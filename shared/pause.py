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

A request that waits for a turn (a blocking send, the worker's call) is the same kind of
work: `Waiting[T]` is a generator that yields a Pause whenever it has to wait and returns its
value at the end. Code that might wait is written once, as such a generator; `begun` runs
it up to its first pause, so that work that never waits (most requests) answers at once,
and what does wait is handed to the front as `Later`, which steps it on a pool thread and
waits out its pauses on the loop, holding no thread (shared.bindings.asgi). `wait_out`
drives one on a thread that may block (tests, an in-process queue's thread).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator
from typing import Generic, TypeVar

T = TypeVar("T")
U = TypeVar("U")


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


Waiting = Generator[Pause, None, T]


class Later(Generic[T]):
    """Work that paused (`begun`): `rest` yields its pauses and returns its value."""

    __slots__ = ("first", "work")

    def __init__(self, work: Waiting[T], first: Pause) -> None:
        self.work = work
        self.first = first

    def rest(self) -> Waiting[T]:
        yield self.first
        return (yield from self.work)

    def then(self, function: Callable[[T], U]) -> Later[U]:
        """This work, its value passed through `function` once it has it."""

        def after() -> Waiting[U]:
            return function((yield from self.work))

        return Later(after(), self.first)


def ready(value: T) -> Waiting[T]:
    """Work that needs no wait: its value."""
    return value
    yield  # a generator function, which returns at its first step


def begun(work: Waiting[T]) -> T | Later[T]:
    """The work's value if it never waits; else the work, paused at its first pause."""
    try:
        first = next(work)
    except StopIteration as done:
        value: T = done.value
        return value
    return Later(work, first)


def resolved(value: T | Later[T]) -> Waiting[T]:
    """What `begun` gave, as work again (to go on with it inside another Waiting)."""
    if isinstance(value, Later):
        return (yield from value.rest())
    return value


def wait_out(work: Waiting[T]) -> T:
    """Drive `work` on this thread, blocking through each pause until woken or its seconds
    passed: for callers that may hold a thread."""
    try:
        while True:
            pause = next(work)
            woken = threading.Event()
            pause.on_wake(woken.set)
            woken.wait(pause.seconds)
    except StopIteration as done:
        value: T = done.value
        return value
