"""Following a task's event log on Firestore (`FirestoreTaskStore.tail`): one snapshot
listener per task per instance, on the task's document, shared by every tail of that task on
the instance, or polling with backoff.

A listener costs a Listen stream and a thread of the client library's, and bills the
documents it reads once for all its tails; fifty subscribers of one task on one instance
hold one listener (`LogWatches`), which is closed when the last of them leaves.

Each tail keeps its own position. The listener's events stay in memory while a tail still
needs them, up to BUFFER_BYTES: past that, the oldest go, and a tail that has not read them
yet (a slow client) reads the log itself from its position until it has caught up, so it
neither holds the others back nor grows the instance's memory. A tail that starts behind
what the listener holds reads the log the same way. When the listener cannot be had, tails
poll the log instead; when it dies, they poll until one of them opens another (after
POLL_MAX_SECONDS), which the others then join.

A listener can stay open and fall silent: its stream alive, commits not handed over (seen on
`make dev`, once in 7 streamed runs: every step of a turn 6.7 s late). The client library
reopens a listener's stream only when it fails with an error, never one that merely goes
quiet (googleapis/python-firestore#18; the Node client restarts one after 2 minutes without
a message, nodejs-firestore#1220, for the same silence on real Firestore). So a tail never
waits on a listener alone: while its tails wait and the listener has handed nothing over for
SILENT_SECONDS, one of them reads the log in its place (one query of the events after the
newest it holds) and gives what it found to the listener's buffer, for every tail at once;
then the period starts over. A silent listener thus delays a commit by at most a period and
a read. What such a read found that the listener has still not handed over LATE_SECONDS
later proves it silent: it is closed, and its tails listen again.

A stream waits for its tail without a thread (`FirestoreTail.watch`, shared.pause): the
listener's next snapshot, or a read in its place, wakes it, and a tail that polls, or whose
listener is due a read in its place, says when to look again.

Every commit writes the task's document, and its log's latest events are there (`log`,
the events up to `lastSeq`); older ones are in event documents, each created by the commit
that moved them out of the task's document (shared.store.firestore). So the listener is on
the task's document: each snapshot is one version, with its latest events. Snapshots may
skip versions (the listener hands over the newest it has): when one shows that events the
tails have not had were moved out meanwhile, a read of the log is due at once (as in a silent
listener's place, by one tail for all), which finds them in their event documents. Events
are handed out by sequence number, each once, in order, without gaps.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from shared import model_json
from shared.frozen import frozen
from shared.model import Event
from shared.ports import LoggedEvent
from shared.store.cost import Cost

log = logging.getLogger("a2a.store.firestore")

# Polling a log waits this long after an empty read, doubling up to the maximum; any event
# found starts it over.
POLL_FIRST_SECONDS = 0.05
POLL_MAX_SECONDS = 1.0

# A listener that has handed nothing over for this long while its tails wait has the log read
# in its place (by one of them, once a period): a stream gets each commit within a second
# even when its listener falls silent (this, plus a read: 10-50 ms on the emulator, up to a
# few hundred on a busy machine). A quiet followed task costs a read a period, an empty query
# billing one: 120 reads a minute, $0.0022 an hour at $0.03 per 100,000 (docs/cost.md); a task
# that commits at least every half second costs none.
SILENT_SECONDS = 0.5
# How long the listener has to hand over what a read in its place found before it is called
# silent and replaced: after a quiet spell, the snapshot of a commit may merely be on its way
# when the read finds it (a busy emulator); its tails have the events from the read meanwhile.
LATE_SECONDS = 1.0

# Bytes of event JSON one listener keeps for tails that have not read them yet. A commit
# writes up to 4 MB: this is two of the largest, and thousands of ordinary ones.
BUFFER_BYTES = 8 * 1024 * 1024

# Event documents one read of a tail fetches at most (each holds up to 1 MB): a tail far
# behind reads its log in pages, never all of it at once.
PAGE_DOCUMENTS = 8


@frozen
class Held:
    """What one snapshot of a task's document holds of its log."""

    first: int  # its first event's seq: those before are in event documents
    last: int  # the task's newest event's seq
    events: list[tuple[LoggedEvent, int]]  # those asked for, each with its bytes of JSON


# (owner, task id, after seq) -> the task's next events after that seq (a page), from the
# store.
Read = Callable[[str, str, int], list[LoggedEvent]]
# (owner, task id) -> the task's document, to listen on.
Document = Callable[[str, str], Any]
# (a snapshot of the task's document, owner, after seq) -> what it holds of the log after
# that seq (None: not the owner's task, or none).
Decode = Callable[[Any, str, int], Held | None]


class LogWatch:
    """One snapshot listener on one task's document, and the events it received that a tail
    may still need: every event after `floor` up to `newest`, none at or below `floor`."""

    def __init__(self, document: Any, decode: Decode, first: FirestoreTail, cost: Cost) -> None:
        """Listen from `first`'s position, for it (among its tails before the first snapshot,
        which would otherwise drop what no tail needs yet)."""
        self.arrived = threading.Condition()
        self._cost = cost
        self._owner = first.owner
        self.floor = first.position
        self.newest = first.position
        # The newest seq a snapshot showed moved out of the task's document: past `newest`,
        # events only a read of the event documents finds.
        self.moved = 0
        self._decode = decode
        self._events: dict[int, tuple[Event, int]] = {}  # seq -> (event, its bytes)
        self._bytes = 0
        self.tails: set[FirestoreTail] = {first}
        # What the next snapshot calls, once: the wakes of streams waiting without a thread.
        self.watching: set[Callable[[], None]] = set()
        # When it last handed over a snapshot, or its log was last read in its place (set
        # back a period when a read is due at once: `_arrived`, `feed`).
        self.heard = time.monotonic()
        self.listened = first.position  # the newest seq the listener itself handed over
        # The newest seq a read in its place found that the listener had not handed over,
        # and when: it has until LATE_SECONDS later to hand it over.
        self.owed: tuple[int, float] | None = None
        self._watch: Any = None
        self._watch = document.on_snapshot(self._on_snapshot)

    @property
    def active(self) -> bool:
        return self._watch is not None and bool(self._watch.is_active)

    def _on_snapshot(self, documents: Any, changes: Any, read_time: Any) -> None:
        # On the listener's thread. A reconnect may send a version again: keyed by seq.
        with self.arrived:
            self.heard = time.monotonic()
            self._cost.add(reads=len(changes))  # a listener is billed each document it hands over
            for change in changes:
                if change.type.name == "REMOVED":
                    continue
                # Those up to `newest` it holds already (or no tail needs).
                held = self._decode(change.document, self._owner, self.newest)
                if held is None:
                    continue
                self.listened = max(self.listened, held.last)
                self.moved = max(self.moved, held.first - 1)
                for logged, size in held.events:
                    self._keep(logged, size)
            if self.owed is not None and self.listened >= self.owed[0]:
                self.owed = None  # it was late, not silent
            woken = self._arrived()
        for wake in woken:
            wake()

    def feed(self, found: list[LoggedEvent], more: bool = False) -> None:
        """Take what a read of the log in the listener's place found, as if the listener had
        handed it over: every tail gets it. What the listener has not handed over itself is
        owed from now on. `more`: the log may hold more than the read took, and is due
        another read at once."""
        if not found:
            return
        with self.arrived:
            if more:
                self.heard = time.monotonic() - SILENT_SECONDS
            for logged in found:
                if logged.seq > self.floor:
                    self._keep(logged, len(model_json.encode(logged.event)))
            last = found[-1].seq
            if last > self.listened and self.owed is None:
                self.owed = (last, time.monotonic())
            woken = self._arrived()
        for wake in woken:
            wake()

    def _keep(self, logged: LoggedEvent, size: int) -> None:
        """Hold `logged` for the tails that have not read it. Hold `arrived`."""
        if logged.seq not in self._events:
            self._events[logged.seq] = (logged.event, size)
            self._bytes += size

    def _arrived(self) -> set[Callable[[], None]]:
        """Hand over what arrived: its tails are notified, and the wakes of waiting streams
        returned, to be called outside the lock. Hold `arrived`."""
        while self.newest + 1 in self._events:
            self.newest += 1
        if self.newest < self.moved:
            # Moved out of the task's document before a snapshot showed them: in event
            # documents, for a read to find (due now; `due` takes it, for one tail).
            self.heard = min(self.heard, time.monotonic() - SILENT_SECONDS)
        self.trim()
        self.arrived.notify_all()
        woken, self.watching = self.watching, set()
        return woken

    def take(self, after: int) -> list[LoggedEvent]:
        """The events after `after` (at or above the floor) received so far. Hold `arrived`."""
        return [LoggedEvent(s, self._events[s][0]) for s in range(after + 1, self.newest + 1)]

    def trim(self) -> None:
        """Forget what every tail at or above the floor has read, then, over BUFFER_BYTES,
        the oldest events (their slow tails read the log instead). Hold `arrived`."""
        positions = [tail.position for tail in self.tails if tail.position >= self.floor]
        floor = max(min(positions, default=self.newest), self.floor)
        for seq in [seq for seq in self._events if seq <= floor]:
            self._bytes -= self._events.pop(seq)[1]
        while self._bytes > BUFFER_BYTES and floor < self.newest:
            floor += 1
            self._bytes -= self._events.pop(floor)[1]
        self.floor = floor
        self.newest = max(self.newest, floor)

    def due(self) -> bool:
        """Whether the log is due a read in this listener's place (and is taken as read: one
        tail reads it). Hold `arrived`."""
        now = time.monotonic()
        if now - self.heard < SILENT_SECONDS:
            return False
        self.heard = now
        return True

    def silent(self) -> bool:
        """Whether the listener still owes what a read in its place found LATE_SECONDS ago or
        more. Hold `arrived`."""
        return self.owed is not None and time.monotonic() - self.owed[1] >= LATE_SECONDS

    def close(self) -> None:
        watch, self._watch = self._watch, None
        if watch is not None:
            watch.unsubscribe()
        with self.arrived:  # its waiting tails look again: they poll, or listen anew
            woken, self.watching = self.watching, set()
        for wake in woken:
            wake()


class LogWatches:
    """This instance's listeners on task logs, one per task, each open while a tail of it
    is."""

    def __init__(self, document: Document, decode: Decode, cost: Cost) -> None:
        self._document = document
        self._decode = decode
        self._cost = cost
        self._lock = threading.Lock()
        self._open: dict[tuple[str, str], LogWatch] = {}
        self.opened = 0  # listeners opened so far

    @property
    def open(self) -> int:
        """Listeners open now."""
        with self._lock:
            return len(self._open)

    def join(self, tail: FirestoreTail, owner: str, task_id: str) -> LogWatch | None:
        """The task's listener, with `tail` among its tails (opened from the tail's position
        if none is open, or the open one died); None when no listener can be had."""
        with self._lock:
            watch = self._open.get((owner, task_id))
            if watch is None or not watch.active:
                try:
                    document = self._document(owner, task_id)
                    watch = LogWatch(document, self._decode, tail, self._cost)
                except Exception:
                    log.warning("no listener on task %s's events: polling", task_id, exc_info=True)
                    return None
                self._open[(owner, task_id)] = watch
                self.opened += 1
                return watch
            with watch.arrived:
                watch.tails.add(tail)
            return watch

    def leave(self, tail: FirestoreTail, owner: str, task_id: str, watch: LogWatch) -> None:
        """`tail` is done with `watch`: closed when it was the last."""
        with self._lock:
            with watch.arrived:
                watch.tails.discard(tail)
                last = not watch.tails
                if not last:
                    watch.trim()
            if last and self._open.get((owner, task_id)) is watch:
                del self._open[(owner, task_id)]
        if last:
            watch.close()


class FirestoreTail:
    """Follows a task's log from a position of its own: through the instance's shared
    listener on its document, or by polling with backoff when it has no listener, when polling
    was chosen (`watches` None), or while it is behind what the listener holds."""

    def __init__(
        self, owner: str, task_id: str, after_seq: int, *, read: Read, watches: LogWatches | None
    ) -> None:
        self.owner = owner
        self._task_id = task_id
        self._read = read
        self.position = max(after_seq, 0)  # the last seq handed out
        self._delay = POLL_FIRST_SECONDS
        self._next_poll = 0.0  # monotonic time of the next read when polling
        self._watches = watches
        self._watch = None if watches is None else watches.join(self, owner, task_id)
        self._relisten_at = 0.0  # monotonic time after which a dead listener is replaced
        self._waking: tuple[LogWatch, Callable[[], None]] | None = None  # a stream's wake

    def watch(self, wake: Callable[[], None]) -> float | None:
        self._forget()
        watch = self._watch
        if watch is None or not watch.active:  # polling: the next read is due then
            return max(self._next_poll - time.monotonic(), 0)
        with watch.arrived:
            # Behind what the listener holds, the tail reads the log itself, when its poll
            # is due.
            behind = self.position < watch.floor
            ready = watch.newest > self.position and not behind
            if not ready and not behind:
                watch.watching.add(wake)
                self._waking = (watch, wake)
            # The log is read in a silent listener's place (`next`) once this has passed.
            silent_at = watch.heard + SILENT_SECONDS
        if behind:
            return max(self._next_poll - time.monotonic(), 0)
        if ready:
            wake()
        return max(silent_at - time.monotonic(), 0)

    def _forget(self) -> None:
        """Drop a stream's wake that no snapshot has called yet."""
        waking, self._waking = self._waking, None
        if waking is not None:
            watch, wake = waking
            with watch.arrived:
                watch.watching.discard(wake)

    @property
    def listening(self) -> bool:
        return self._watch is not None and self._watch.active

    def next(self, timeout: float) -> list[LoggedEvent]:
        self._forget()
        watch, watches = self._watch, self._watches
        dead = watch is not None and not watch.active
        if dead and watches is not None and time.monotonic() >= self._relisten_at:
            # The listener died (its stream was cut) or fell silent: listen again, at most
            # once a while, and the task's other tails join the new listener as they notice.
            self._relisten_at = time.monotonic() + POLL_MAX_SECONDS
            self.close()
            watch = self._watch = watches.join(self, self.owner, self._task_id)
        deadline = time.monotonic() + max(timeout, 0)
        while watch is not None and watch.active:
            with watch.arrived:
                # Until an event, the deadline, or the log's read in the listener's place.
                until = min(deadline, watch.heard + SILENT_SECONDS)
                watch.arrived.wait_for(
                    lambda: (
                        watch.newest > self.position
                        or self.position < watch.floor
                        or not watch.active
                        or time.monotonic() >= watch.heard + SILENT_SECONDS  # a read is due
                    ),
                    timeout=max(until - time.monotonic(), 0),
                )
                if self.position < watch.floor or not watch.active:
                    break  # behind its events, or it died: the log is read from here
                found = self._take(watch)
                if found:
                    return found
                silent = watch.silent()
                due = not silent and watch.due()
                after = watch.newest
            if silent or due:
                # Nothing from it for a period: the log is read in its place, for all its tails;
                # a page full of commits may have more behind it, read on the next look.
                found = self._read(self.owner, self._task_id, after)
                watch.feed(found, more=len(found) >= PAGE_DOCUMENTS)
            if silent:
                # What an earlier read found, it never handed over: its stream is open but
                # mute. This tail takes what the read found, then listens anew on its next
                # look, at once (a listener that lived LATE_SECONDS cannot make it thrash);
                # its other tails follow as they find it closed.
                with watch.arrived:
                    found = self._take(watch) if self.position >= watch.floor else []
                log.warning(
                    "the listener on task %s's events fell silent: listening again", self._task_id
                )
                watch.close()
                self._relisten_at = 0.0
                return found
            if due:
                continue
            if time.monotonic() >= deadline:
                return []
        if watch is not None and not watch.active:
            log.warning("the listener on task %s's events stopped: polling", self._task_id)
        # Behind the listener's events (or without a listener): read the log from here.
        return self._poll(max(deadline - time.monotonic(), 0))

    def _take(self, watch: LogWatch) -> list[LoggedEvent]:
        """The listener's events after this tail's position, now its own. Hold `arrived`."""
        found = watch.take(self.position)
        if found:
            self.position = found[-1].seq
            watch.trim()
        return found

    def _poll(self, timeout: float) -> list[LoggedEvent]:
        # The backoff runs across calls: a caller that asks often (a stream looking whether
        # its instance stops) reads no more often than one that waits long.
        deadline = time.monotonic() + timeout
        while True:
            due = self._next_poll - time.monotonic()
            if due > 0:
                remaining = deadline - time.monotonic()
                if due > remaining:
                    time.sleep(max(remaining, 0))
                    return []
                time.sleep(due)
            found = self._read(self.owner, self._task_id, self.position)
            if found:
                self.position = found[-1].seq
                self._delay = POLL_FIRST_SECONDS
                self._next_poll = time.monotonic()
                return found
            self._next_poll = time.monotonic() + self._delay
            self._delay = min(self._delay * 2, POLL_MAX_SECONDS)

    def close(self) -> None:
        self._forget()
        watch, self._watch = self._watch, None
        if watch is not None and self._watches is not None:
            self._watches.leave(self, self.owner, self._task_id, watch)
