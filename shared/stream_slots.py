"""The streams one instance holds open at once, and each owner's share of them.

A stream holds a connection and its memory for as long as it is open: `StreamSlots` counts
them, refuses one past the instance's limit or its owner's share with an error naming the
setting, and gets each back once, however the stream ends (`HeldStream`).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Generator
from typing import Any, TypeVar

from shared.errors import StreamLimitError
from shared.pause import Pause

T = TypeVar("T")


class StreamSlots:
    """The streams one instance may hold open at once (each holds a connection and its
    memory, and a thread only while it makes a frame), and one owner's share of them: a
    caller with many streams open cannot starve everyone else."""

    def __init__(self, limit: int, per_owner: int | None = None) -> None:
        self.limit = limit
        self.per_owner = min(per_owner or limit, limit)
        self._lock = threading.Lock()
        self._open: dict[str, int] = {}
        self.stopping = threading.Event()
        self._paused: weakref.WeakSet[Pause] = weakref.WeakSet()  # woken by `stop`

    def stop(self) -> None:
        """The instance is going away: every stream ends at once, as at its deadline (the
        client resumes elsewhere with Last-Event-ID), and so does any opened after this."""
        self.stopping.set()
        with self._lock:
            paused = list(self._paused)
        for pause in paused:
            pause.wake()

    def pause(self, seconds: float) -> Pause:
        """A stream's pause of at most `seconds`, which `stop` wakes."""
        pause = Pause(seconds)
        with self._lock:
            self._paused.add(pause)
        if self.stopping.is_set():
            pause.wake()
        return pause

    @property
    def held(self) -> int:
        """Slots held now, by every owner."""
        with self._lock:
            return sum(self._open.values())

    def open(self, owner: str, make: Callable[[], Generator[T, None, None]]) -> HeldStream[T]:
        """The stream `make` returns, holding a slot of `owner`'s until it ends, fails or is
        closed (also when it is closed before it was ever started)."""
        with self._lock:
            if sum(self._open.values()) >= self.limit:
                raise StreamLimitError(
                    f"this instance already holds {self.limit} streams (A2A_MAX_STREAMS); "
                    "retry shortly, or poll the task with GetTask (tasks/get)"
                )
            if self._open.get(owner, 0) >= self.per_owner:
                raise StreamLimitError(
                    f"you already hold {self.per_owner} streams on this instance "
                    "(A2A_MAX_STREAMS_PER_OWNER); close one, or poll the task with GetTask "
                    "(tasks/get)"
                )
            self._open[owner] = self._open.get(owner, 0) + 1
        try:
            stream = make()
        except BaseException:
            self._release(owner)
            raise
        return HeldStream(stream, lambda: self._release(owner))

    def _release(self, owner: str) -> None:
        with self._lock:
            left = self._open[owner] - 1
            if left:
                self._open[owner] = left
            else:
                del self._open[owner]


class HeldStream(Generator[T, None, None]):
    """A stream holding a slot: the slot goes back once, on every exit — the stream ends,
    raises, or is closed, started or not (a generator's `finally` never runs when it is
    closed before its first `next`, which is how a HEAD or a client gone early leaves it)."""

    def __init__(self, stream: Generator[T, None, None], release: Callable[[], None]) -> None:
        self._stream = stream
        self._release: Callable[[], None] | None = release

    def send(self, value: None) -> T:
        try:
            return self._stream.send(value)
        except BaseException:
            self.close()
            raise

    def throw(self, typ: Any, val: Any = None, tb: Any = None) -> T:
        try:
            return self._stream.throw(typ, val, tb)
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        release, self._release = self._release, None
        try:
            self._stream.close()
        finally:
            if release is not None:
                release()
