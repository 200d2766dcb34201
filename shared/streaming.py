"""Streams of a task's events in canonical form: what a streamed send or a subscriber sees.

A stream is an iterator of Frames, keep-alive ticks (None) and pauses (shared.pause: nothing
to send until woken or some seconds passed; its reader waits them out without a thread). It
opens with the task (a snapshot) unless it resumes after a sequence number, carries every
status and artifact event in log order with its number, and ends after a terminal or
interrupted status, at its deadline, after a while without news on a task that waits for
input, or when the instance stops (`StreamSlots.stop`); the client resumes with Last-Event-ID
and loses nothing. A streamed send's stream is told each event as its turn makes it, under
the number its commit gives it, while the turn commits in windows of up to a second
(shared.runtime); only the end waits for its commit, so a client that saw it finds it with
GetTask. A resume is exact once what the client saw is committed: a run stopped before that
(a cancel, its instance's end) leaves it out of the log, and a resume after it is told how the
task ended (shared.service.tasks.subscribe) or, the task going on elsewhere, gets what the
run that took over logs after it. Anything else follows the log through the store's tail.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import queue
import time
from collections.abc import Callable, Generator

from shared.engine import Engine
from shared.frozen import frozen
from shared.lifecycle import apply
from shared.model import ArtifactUpdate, Event, StatusUpdate, Task
from shared.pause import Pause
from shared.ports import EventTail, LoggedEvent, StoredTask, TaskStore
from shared.runtime import Turn
from shared.stream_slots import StreamSlots

log = logging.getLogger("a2a.streaming")


@frozen
class Frame:
    """One frame of a stream: an item for the client, and the task as of it."""

    seq: int  # the log's sequence number of the event, or the snapshot's last one
    item: Task | StatusUpdate | ArtifactUpdate
    task: Task  # the task as of this frame (v0.1 numbers artifacts by their place in it)


# None is a keep-alive tick: nothing happened for `StreamPolicy.keepalive` seconds; a Pause:
# nothing to send yet.
Stream = Generator[Frame | Pause | None, None, None]


@frozen
class StreamPolicy:
    """How this instance's streams run: their timings and their slots."""

    keepalive: float  # seconds of silence before a keep-alive tick
    duration: float  # seconds a stream stays open at most (less than the function's timeout)
    # Seconds a stream on a task that waits for input (input- or auth-required) stays open
    # without news: nothing happens until someone answers, and an open stream holds a
    # connection and keeps the instance billed. The client resubscribes to go on waiting.
    idle: float
    slots: StreamSlots  # this instance's open streams


class _Clock:
    """When a stream must send a keep-alive tick, and when it must end."""

    def __init__(self, policy: StreamPolicy) -> None:
        self._stopping = policy.slots.stopping
        self._keepalive = policy.keepalive
        self._idle = policy.idle
        now = time.monotonic()
        self._end = now + policy.duration
        self._quiet_since = now
        self._news_at = now

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self._end or self._stopping.is_set()

    def wait(self, waiting_for_input: bool = False) -> float:
        """Seconds until the next tick or the end, whichever comes first."""
        until = min(self._quiet_since + self._keepalive, self._end)
        if waiting_for_input:
            until = min(until, self._news_at + self._idle)
        return max(until - time.monotonic(), 0)

    def tick_due(self) -> bool:
        return time.monotonic() >= self._quiet_since + self._keepalive

    def idle(self) -> bool:
        return time.monotonic() >= self._news_at + self._idle

    def sent(self, news: bool = True) -> None:
        self._quiet_since = time.monotonic()
        if news:
            self._news_at = self._quiet_since


class _Fold:
    """The frames for logged events, each once, up to the one that ends the stream; and for
    the events a listened-to turn tells ahead of their commit (`made`), framed then and not
    again when committed."""

    def __init__(self, task: Task, last_seq: int) -> None:
        self.task = task
        self.last = last_seq  # the last committed event folded
        self.ended = False
        # Told ahead of their commit and framed, oldest first: the commit that logs one is
        # known by the event itself (a message sent to the task meanwhile may have moved its
        # sequence number on by one).
        self._unstored: collections.deque[Event] = collections.deque()
        self._held = False  # the turn told its end: nothing more is framed before commit

    def frames(self, logged: list[LoggedEvent]) -> list[Frame]:
        out = []
        for entry in logged:
            if self.ended or entry.seq <= self.last:
                continue
            self.last = entry.seq
            if self._unstored and entry.event is self._unstored[0]:
                self._unstored.popleft()
                continue
            out.extend(self._framed(entry))
        return out

    def made(self, logged: list[LoggedEvent]) -> list[Frame]:
        out = []
        for entry in logged:
            event = entry.event
            self._held = self._held or (
                isinstance(event, StatusUpdate) and event.status.state.final
            )
            if self._held or self.ended:
                break
            self._unstored.append(event)
            out.extend(self._framed(entry))
        return out

    def _framed(self, entry: LoggedEvent) -> list[Frame]:
        self.task = apply(self.task, entry.event)
        # A message entering history is no stream event: a 1.0 client ends a stream at the
        # first `message` it sees.
        if not isinstance(entry.event, StatusUpdate | ArtifactUpdate):
            return []
        if isinstance(entry.event, StatusUpdate) and entry.event.status.state.final:
            self.ended = True
        return [Frame(entry.seq, entry.event, self.task)]


def _follow_tail(tail: EventTail, fold: _Fold, clock: _Clock, slots: StreamSlots) -> Stream:
    with contextlib.closing(tail):
        while not fold.ended and not clock.expired:
            waiting = fold.task.status.state.interrupted
            if waiting and clock.idle():
                return
            frames = fold.frames(tail.next(0))
            yield from frames
            if frames:
                clock.sent()
            elif clock.tick_due():
                yield None
                clock.sent(news=False)
            else:
                yield _paused(slots, clock.wait(waiting), tail.watch)


def _paused(
    slots: StreamSlots, seconds: float, watch: Callable[[Callable[[], None]], float | None]
) -> Pause:
    """A pause until the next tick or the end (`seconds`), or until `watch` wakes it, or its
    due time (the tail's own next read) passed, or the instance stops."""
    pause = slots.pause(seconds)
    due = watch(pause.wake)
    if due is not None:
        pause.seconds = min(seconds, due)
    return pause


def follow(
    store: TaskStore, owner: str, stored: StoredTask, after_seq: int | None, policy: StreamPolicy
) -> Stream:
    """A subscriber's stream: the snapshot (unless resuming), then the log after it."""
    start = stored.last_seq if after_seq is None else after_seq

    def frames() -> Stream:
        clock = _Clock(policy)
        if after_seq is None:
            task = stored.task
            yield Frame(stored.last_seq, task, task)
            if task.status.state.terminal:
                # Only a resent message (the send it repeats had finished) follows a terminal
                # task: its end, as a status event, for versions without an opening task.
                end = StatusUpdate(task_id=task.id, context_id=task.context_id, status=task.status)
                yield Frame(stored.last_seq, end, task)
                return
            clock.sent()
        # Resuming folds the missed events onto the newer snapshot: only artifact positions
        # and the state are read from the fold, and neither moves back.
        fold = _Fold(stored.task, start)
        if stored.task.status.state.terminal:
            # A resumed stream of an ended task: its log is whole, and may be in no place a
            # tail follows (the store can keep a task created ended with its log).
            yield from fold.frames(store.events(owner, stored.task.id, start))
            return
        tail = store.tail(owner, stored.task.id, start)
        yield from _follow_tail(tail, fold, clock, policy.slots)

    return frames()


def inline(
    turn: Turn, engine: Engine, store: TaskStore, owner: str, policy: StreamPolicy
) -> Stream:
    """A streamed send's stream: runs the claimed `turn` now, on the engine, and sends each
    event as the turn makes it (its end once committed); after the turn, whatever others
    committed (a cancel) comes from the log."""
    told = _Told()
    opening = turn.listen(told.put)
    # Started before any frame is read: a claimed turn must run even if nobody listens, and
    # goes on if the client goes away.
    engine.start(_run(turn, told))

    def frames() -> Stream:
        clock = _Clock(policy)
        fold = _Fold(opening.task, opening.last_seq)
        yield Frame(opening.last_seq, opening.task, opening.task)
        clock.sent()
        while not fold.ended and not clock.expired:
            try:
                news = told.get_nowait()
            except queue.Empty:
                if clock.tick_due():
                    yield None
                    clock.sent(news=False)
                else:
                    yield _paused(policy.slots, clock.wait(), told.watch)
                continue
            if news is None:
                tail = store.tail(owner, opening.task.id, fold.last)
                yield from _follow_tail(tail, fold, clock, policy.slots)
                return
            logged, committed = news
            for frame in fold.frames(logged) if committed else fold.made(logged):
                yield frame
                clock.sent()

    return frames()


class _Told:
    """What a streamed turn tells its stream (None: the turn ended), from the loop to the
    stream, which waits for the next without a thread: the next `put` calls the stream's
    wake."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[list[LoggedEvent], bool] | None] = queue.SimpleQueue()
        self._wake: Callable[[], None] | None = None

    def put(self, logged: list[LoggedEvent], committed: bool) -> None:
        self._send((logged, committed))

    def end(self) -> None:
        self._send(None)

    def _send(self, news: tuple[list[LoggedEvent], bool] | None) -> None:
        self._queue.put(news)
        wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    def get_nowait(self) -> tuple[list[LoggedEvent], bool] | None:
        return self._queue.get_nowait()

    def watch(self, wake: Callable[[], None]) -> float | None:
        self._wake = wake
        if not self._queue.empty():  # put before the wake was there
            self._wake = None
            wake()
        return None


async def _run(turn: Turn, told: _Told) -> None:
    try:
        await turn.run()
    except Exception:
        log.exception("the streamed turn of task %s failed", turn.task.id)
    finally:
        told.end()
