"""One Firestore listener per task per instance, shared by all its tails
(shared.store.firestore_tail): each tail keeps its own position, a slow one neither holds the
others back nor the listener's memory, and the listener closes with its last tail.

On the emulator: fifty tails of one task, one listener, every event to each. Without it:
the sharing's bookkeeping against a log the test writes itself (hypothesis drives commits,
reads, joins and leaves in any order).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import lifecycle
from shared.model import Event, TaskState
from shared.ports import LoggedEvent, StoredTask
from shared.store import firestore_tail
from shared.store.cost import Cost
from shared.store.firestore import FirestoreTaskStore, _encode_event, _held, _logged
from shared.store.firestore_tail import PAGE_DOCUMENTS, FirestoreTail, LogWatch, LogWatches
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, new_task, status
from tests.store.test_tail import drain


def step(store: FirestoreTaskStore, current: StoredTask, events: list[Event]) -> StoredTask:
    return store.commit(current, lifecycle.apply_all(current.task, events), events)


def silences(caplog: pytest.LogCaptureFixture) -> int:
    """The listeners a task's tails found silent: on a loaded machine the emulator can hand a
    snapshot over later than SILENT_SECONDS (a fresh-clone run saw it). Each is closed, and its
    tails listen anew, at once or after polling a while: one listener opened for each, at most."""
    return sum("fell silent" in r.getMessage() for r in caplog.records)


# The emulator now and then cancels a listen stream (RST_STREAM); the client library then
# raises in a thread of its own, and the tails poll instead (checked below).
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_fifty_tails_of_a_task_share_one_listener(make_firestore_store: MakeStore) -> None:
    store = make_firestore_store(tail="listener")
    assert store.watches is not None
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    threads = threading.active_count()
    store.cost.reset()
    tails = [store.tail(ALICE, task.id, 0) for _ in range(50)]
    try:
        assert store.watches.opened == 1 and store.watches.open == 1
        assert all(t.listening for t in tails)
        got: list[list[int]] = [[] for _ in tails]
        readers = [
            threading.Thread(target=lambda i=i: got[i].extend(drain(tails[i], 12, seconds=30)))
            for i in range(len(tails))
        ]
        for reader in readers:
            reader.start()
        for n in range(5):  # five commits of two events while the fifty wait
            current = step(store, current, [status(task, TaskState.WORKING, text=f"{n}")] * 2)
        for reader in readers:
            reader.join(40)
        assert got == [list(range(1, 13))] * 50  # every event to each, once, in order
        # One listener's threads, not fifty (each listener runs a thread of its own).
        assert threading.active_count() - threads <= 5
        if all(t.listening for t in tails):
            # The log's six documents billed once (twice, were the listener to reconnect),
            # not once per tail. (A listener the emulator cancelled left the tails polling:
            # they got every event all the same, above.)
            assert store.cost.reads <= 12
    finally:
        for tail in tails:
            tail.close()
    assert store.watches.open == 0  # closed with its last tail
    opened = store.watches.opened
    again = store.tail(ALICE, task.id, 11)
    try:
        assert drain(again, 1) == [12]
        assert store.watches.opened == opened + 1
    finally:
        again.close()


# (A listener closed as silent may end its stream so too, seen with silences forced.)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_tail_that_starts_behind_the_listener_reads_the_log(
    make_firestore_store: MakeStore, caplog: pytest.LogCaptureFixture
) -> None:
    store = make_firestore_store(tail="listener")
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    first = store.tail(ALICE, task.id, 2)
    try:
        current = step(store, current, [status(task, TaskState.WORKING, text="a")] * 3)
        assert drain(first, 3) == [3, 4, 5]  # the listener keeps nothing `first` has read
        late = store.tail(ALICE, task.id, 0)
        try:
            assert drain(late, 5) == [1, 2, 3, 4, 5]
            step(store, current, [status(task, TaskState.COMPLETED)])
            assert drain(late, 1) == [6] and drain(first, 1) == [6]
            assert store.watches is not None
            assert 1 <= store.watches.opened <= 1 + silences(caplog)
        finally:
            late.close()
    finally:
        first.close()


# (A listener closed as silent may end its stream so too, seen with silences forced.)
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_slow_tail_holds_neither_the_others_nor_the_memory(
    make_firestore_store: MakeStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setattr(firestore_tail, "BUFFER_BYTES", 2000)  # about four events
    store = make_firestore_store(tail="listener")
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    fast, slow = store.tail(ALICE, task.id, 2), store.tail(ALICE, task.id, 2)
    try:
        for n in range(10):  # the fast tail reads each commit; the slow one reads nothing
            current = step(store, current, [status(task, TaskState.WORKING, text=f"{n}")] * 2)
            assert drain(fast, 2) == [3 + 2 * n, 4 + 2 * n]
        assert store.watches is not None
        [watch] = store.watches._open.values()
        assert watch._bytes <= 2000  # what the slow tail has not read went, past the bound
        # Behind the listener, a stream waiting on the slow tail is told when its next read
        # of the log is due (at once, while it catches up), not woken by the listener.
        woken: list[bool] = []
        got = [e.seq for e in slow.next(0)]  # a page of the log
        due = slow.watch(lambda: woken.append(True))
        assert woken == [] and due is not None and due <= firestore_tail.POLL_MAX_SECONDS
        got += drain(slow, 20 - len(got))  # from the log, then from the listener again
        assert got == list(range(3, 23))
        step(store, current, [status(task, TaskState.COMPLETED)])
        assert drain(slow, 1) == [23] and drain(fast, 1) == [23]
        assert 1 <= store.watches.opened <= 1 + silences(caplog)
        assert slow.listening or silences(caplog)  # back on the listener, or soon after a silence
    finally:
        fast.close()
        slow.close()


def test_a_tail_far_behind_reads_the_log_in_pages(
    make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Each commit's events moved out of the task's document at once: one event document each.
    monkeypatch.setattr("shared.store.firestore.logs_in_task", lambda task, log: False)
    store = make_firestore_store(tail="polling")
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")  # one document: seqs 1 and 2
    for n in range(PAGE_DOCUMENTS + 2):
        current = step(store, current, [status(task, TaskState.WORKING, text=f"{n}")])
    tail = store.tail(ALICE, task.id, 0)
    try:
        assert [e.seq for e in tail.next(5)] == list(range(1, PAGE_DOCUMENTS + 2))
        assert drain(tail, 3) == list(range(PAGE_DOCUMENTS + 2, PAGE_DOCUMENTS + 5))
    finally:
        tail.close()


def follow(tail: FirestoreTail, seconds: float) -> list[int]:
    """What a stream of `tail` gets within `seconds`: it calls `next(0)`, and between calls
    waits for the tail's wake or the time it names (shared.streaming's pause)."""
    got: list[int] = []
    deadline = time.monotonic() + seconds
    while not got and time.monotonic() < deadline:
        got = [e.seq for e in tail.next(0)]
        if not got:
            woken = threading.Event()
            due = tail.watch(woken.set)
            woken.wait(min(deadline - time.monotonic(), due if due is not None else seconds))
    return got


def test_a_deaf_listener_delays_no_commit_by_a_second_and_is_replaced(
    make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A listener whose stream stays open but hands nothing over (what a stream of the
    # emulator's did once in 7 streamed runs on make dev): a stream of its task still gets
    # each commit within a second, from the log read in its place, and it is replaced.
    deaf: set[int] = set()
    hear = LogWatch._on_snapshot

    def deafened(watch: LogWatch, documents: Any, changes: Any, read_time: Any) -> None:
        if id(watch) not in deaf:
            hear(watch, documents, changes, read_time)

    monkeypatch.setattr(LogWatch, "_on_snapshot", deafened)
    store = make_firestore_store(tail="listener")
    assert store.watches is not None
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    tail = store.tail(ALICE, task.id, 2)
    try:
        [watch] = store.watches._open.values()
        deaf.add(id(watch))
        late: list[float] = []
        for n in range(3):
            current = step(store, current, [status(task, TaskState.WORKING, text=f"{n}")])
            committed = time.monotonic()
            assert follow(tail, 5) == [3 + n]
            late.append(time.monotonic() - committed)
        assert max(late) < 1.0, late
        deadline = time.monotonic() + 5  # it owes what the reads found: replaced
        while store.watches.opened == 1 and time.monotonic() < deadline:
            assert follow(tail, firestore_tail.SILENT_SECONDS) == []
        assert store.watches.opened == 2 and tail.listening
        step(store, current, [status(task, TaskState.COMPLETED)])
        assert follow(tail, 5) == [6]
    finally:
        tail.close()


# -- the bookkeeping, against a log the test writes ------------------------------------------


@dataclass
class Change:
    document: Any
    type: Any = field(default_factory=lambda: type("Type", (), {"name": "MODIFIED"}))


class Document:
    """A document as the Firestore client hands it over: the task's, or an event
    document."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self.exists = True

    def get(self, name: str) -> Any:
        return self._fields[name]

    def to_dict(self) -> dict[str, Any]:
        return dict(self._fields)


class Log:
    """One task's log laid out as the store lays it out: its document keeps the latest
    events (at most `keep`; older ones moved into event documents by the commit that would
    pass it, as `FirestoreTaskStore.commit` does), and the listeners on that document (each
    handed the newest version at once, or, while held, the newest when released)."""

    def __init__(self, keep: int = 3) -> None:
        self.keep = keep
        self.documents: list[Document] = []  # event documents
        self.log: list[str] = []  # the task document's
        self.last = 0
        self.listeners: list[Watch] = []
        self.held = False
        self.reads: list[int] = []  # the seq after which each `read` read

    @property
    def first(self) -> int:
        return self.last - len(self.log) + 1

    def commit(self, events: list[Event]) -> None:
        encoded = [_encode_event(e) for e in events]
        first, old = self.first, self.log
        if len(old) + len(encoded) <= self.keep:
            self.log, moved = old + encoded, []
        elif old and len(encoded) <= self.keep:
            self.log, moved = encoded, old
        else:
            self.log, moved = [], old + encoded
        if moved:
            self.documents.append(Document({"first": first, "events": moved}))
        self.last += len(events)
        if not self.held:
            self.hand_over()

    def task_document(self) -> Document:
        return Document({"owner": ALICE, "lastSeq": self.last, "log": list(self.log)})

    def hand_over(self) -> None:
        for listener in self.listeners:
            if listener.is_active:
                listener.callback(None, [Change(self.task_document())], None)

    def hold(self) -> None:
        """The listeners' snapshots are late: on their way until `release`."""
        self.held = True

    def release(self) -> None:
        """The newest version reaches them (those between are skipped, as a listener may)."""
        self.held = False
        self.hand_over()

    def cut(self) -> None:
        """Every listener's stream is cut (as the emulator does now and then)."""
        for listener in self.listeners:
            listener.is_active = False

    def silence(self) -> None:
        """Every listener falls silent: open, and handed nothing more."""
        self.listeners = []

    def read(self, owner: str, task_id: str, after: int) -> list[LoggedEvent]:
        """As the store's read of the log in a tail's place (recorded: `reads`)."""
        self.reads.append(after)
        return self.page(after, None)

    def page(self, after: int, documents: int | None) -> list[LoggedEvent]:
        """As the store's read: its document, then the event documents before its log that
        hold events after `after` (at most `documents`: short of the log, none of it)."""
        first = self.first
        found: list[LoggedEvent] = []
        if after < first - 1:
            chosen = [d for d in self.documents if _logged(d, after) and d.get("first") < first]
            found = [e for d in chosen[:documents] for e in _logged(d, after)]
            if found and found[-1].seq < first - 1:
                return found
        held = _held(self.task_document(), ALICE, after)
        assert held is not None
        return found + [logged for logged, _ in held.events]

    def document(self, owner: str, task_id: str) -> Listened:
        return Listened(self)


@dataclass
class Watch:
    callback: Callable[[Any, list[Change], Any], None]
    is_active: bool = True

    def unsubscribe(self) -> None:
        self.is_active = False


@dataclass
class Listened:
    log: Log

    def on_snapshot(self, callback: Callable[[Any, list[Change], Any], None]) -> Watch:
        watch = Watch(callback)
        callback(None, [Change(self.log.task_document())], None)
        self.log.listeners.append(watch)
        return watch


class Clock:
    """firestore_tail's `time`, moved by the test (and by the tail's sleeps; its waits for a
    snapshot wait nothing)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """firestore_tail's clock, moved by the test."""
    clock = Clock()
    monkeypatch.setattr(firestore_tail, "time", clock)
    return clock


def working() -> Event:
    """What the commits of these tests write: a status event of a new task's."""
    task, _ = new_task()
    return status(task, TaskState.WORKING, text="x")


def watching(log: Log) -> LogWatches:
    """The listeners of `log`'s task document, shared by its tails."""
    return LogWatches(log.document, _held, Cost())


# A commit of n events, a read by tail i, a new tail from a seq, tail i leaving, the
# listeners' streams cut, the listeners fallen silent, their snapshots held back (and then
# only the newest handed over), or n tenths of a second passing.
Op = tuple[str, int]
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("commit"), st.integers(1, 4)),
        st.tuples(st.just("hold"), st.just(0)),
        st.tuples(st.just("release"), st.just(0)),
        st.tuples(st.just("read"), st.integers(0, 4)),
        st.tuples(st.just("join"), st.integers(0, 12)),
        st.tuples(st.just("leave"), st.integers(0, 4)),
        st.tuples(st.just("cut"), st.just(0)),
        st.tuples(st.just("silence"), st.just(0)),
        st.tuples(st.just("wait"), st.integers(1, 12)),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, keep=st.integers(0, 6))
def test_each_tail_gets_its_own_range_once_within_the_memory_bound(
    ops: list[Op], keep: int
) -> None:
    """Whatever the task's document keeps of its log (`keep` events), and whichever of its
    versions the listener skips."""
    bound = 2500  # bytes: five events (each ~460 bytes of JSON)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(firestore_tail, "BUFFER_BYTES", bound)
        clock = Clock()
        patch.setattr(firestore_tail, "time", clock)
        log = Log(keep)
        event = working()
        watches = watching(log)
        tails: list[tuple[FirestoreTail, int, list[int]]] = []
        closed: set[int] = set()
        for op, n in [("join", 0), *ops]:
            if op == "commit":
                log.commit([event] * n)
            elif op == "hold":
                log.hold()
            elif op == "release":
                log.release()
            elif op == "cut":
                log.cut()
            elif op == "silence":
                log.silence()
            elif op == "wait":
                clock.now += n / 10
            elif op == "join":
                start = min(n, log.last)
                tail = FirestoreTail(ALICE, "t", start, read=log.read, watches=watches)
                tails.append((tail, start, []))
            elif tails:
                index = n % len(tails)
                tail, _, seen = tails[index]
                if op == "read":
                    seen.extend(e.seq for e in tail.next(0))
                else:
                    tail.close()
                    closed.add(index)
            for watch in watches._open.values():
                assert watch._bytes <= bound
        for index, (tail, start, seen) in enumerate(tails):
            if index not in closed:
                for _ in range(log.last + 2):  # a slow tail catches up from the log
                    clock.now += firestore_tail.SILENT_SECONDS  # a silent listener's read
                    seen.extend(e.seq for e in tail.next(0))
                tail.close()
            # Its own range, each once, in order: all of it, or up to where it left.
            assert seen == list(range(start + 1, start + 1 + len(seen)))
            assert index in closed or seen[-1:] == [log.last] or start == log.last
        assert watches.open == 0


def test_the_tails_of_a_dead_listener_share_the_next_one() -> None:
    log = Log()
    event = working()
    watches = watching(log)
    tails = [FirestoreTail(ALICE, "t", 0, read=log.read, watches=watches) for _ in range(3)]
    log.commit([event] * 2)
    assert [[e.seq for e in t.next(0)] for t in tails] == [[1, 2]] * 3
    log.cut()
    log.commit([event])  # unseen by the dead listener: read from the log, then listened to
    assert [[e.seq for e in t.next(0)] for t in tails] == [[3]] * 3
    assert watches.opened == 2 and watches.open == 1 and all(t.listening for t in tails)
    log.commit([event])
    assert [[e.seq for e in t.next(0)] for t in tails] == [[4]] * 3
    for tail in tails:
        tail.close()
    assert watches.open == 0


def test_a_silent_listener_delays_its_tails_by_a_period_then_is_replaced(
    clock: Clock,
) -> None:
    log = Log()
    event = working()
    reads = log.reads

    watches = watching(log)
    tails = [FirestoreTail(ALICE, "t", 0, read=log.read, watches=watches) for _ in range(3)]
    log.commit([event])
    assert [[e.seq for e in t.next(0)] for t in tails] == [[1]] * 3 and reads == []
    log.silence()
    log.commit([event] * 2)  # never handed over
    clock.now += firestore_tail.SILENT_SECONDS - 0.01
    assert [t.next(0) for t in tails] == [[], [], []] and reads == []  # not yet a period
    clock.now += 0.01
    # One read, by the first tail, for all three: each has the commit a period late.
    assert [[e.seq for e in t.next(0)] for t in tails] == [[2, 3]] * 3 and reads == [1]
    assert watches.opened == 1  # not yet called silent: its snapshot may be on its way
    log.commit([event])
    clock.now += firestore_tail.SILENT_SECONDS
    assert [[e.seq for e in t.next(0)] for t in tails] == [[4]] * 3 and reads == [1, 3]
    log.commit([event])
    clock.now += firestore_tail.LATE_SECONDS - firestore_tail.SILENT_SECONDS
    # It still owes what the first read found: one last read in its place, for the first
    # tail, then it is replaced; the second has the commit from the next listener, and the
    # third, joining it behind what it keeps, from the log.
    got = [[e.seq for e in t.next(0)] for t in tails]
    assert got == [[5]] * 3 and reads == [1, 3, 4, 4]
    assert watches.opened == 2 and watches.open == 1
    log.commit([event])  # handed over by the new listener at once: no read
    assert [[e.seq for e in t.next(0)] for t in tails] == [[6]] * 3 and reads == [1, 3, 4, 4]
    assert watches.opened == 2 and all(t.listening for t in tails)
    for tail in tails:
        tail.close()
    assert watches.open == 0


def test_a_burst_behind_a_silent_listener_is_read_page_after_page(
    clock: Clock,
) -> None:
    log = Log(keep=0)  # each commit's events in an event document of their own
    event = working()

    def page(owner: str, task_id: str, after: int) -> list[LoggedEvent]:
        # As the store's read: the first PAGE_DOCUMENTS event documents after `after`.
        return log.page(after, PAGE_DOCUMENTS)

    watches = watching(log)
    tail = FirestoreTail(ALICE, "t", 0, read=page, watches=watches)
    log.silence()
    for _ in range(PAGE_DOCUMENTS + 3):  # commits in a burst, none handed over
        log.commit([event])
    clock.now += firestore_tail.SILENT_SECONDS
    first = [e.seq for e in tail.next(0)]
    assert first == list(range(1, PAGE_DOCUMENTS + 1))
    # The rest at the next look, not a period later.
    assert [e.seq for e in tail.next(0)] == list(range(PAGE_DOCUMENTS + 1, PAGE_DOCUMENTS + 4))
    assert tail.next(0) == []
    tail.close()


def test_a_listener_whose_snapshot_is_on_its_way_is_not_called_silent(
    clock: Clock,
) -> None:
    # After a quiet spell a commit's snapshot may still be on its way when the read in the
    # listener's place finds it: the tails have it from the read, and the listener's copy,
    # arriving within LATE_SECONDS, is neither handed out again nor a reason to replace it.
    log = Log()
    event = working()
    watches = watching(log)
    tails = [FirestoreTail(ALICE, "t", 0, read=log.read, watches=watches) for _ in range(2)]
    log.commit([event])
    assert [[e.seq for e in t.next(0)] for t in tails] == [[1]] * 2
    log.hold()
    log.commit([event])
    clock.now += firestore_tail.SILENT_SECONDS
    assert [[e.seq for e in t.next(0)] for t in tails] == [[2]] * 2
    clock.now += firestore_tail.LATE_SECONDS / 2
    log.release()  # late, not silent
    clock.now += firestore_tail.LATE_SECONDS
    assert [t.next(0) for t in tails] == [[], []]
    log.commit([event])  # to the same listener
    assert [[e.seq for e in t.next(0)] for t in tails] == [[3]] * 2
    assert watches.opened == 1 and all(t.listening for t in tails)
    for tail in tails:
        tail.close()


def test_a_quiet_followed_task_costs_a_read_a_period_whatever_its_tails(
    clock: Clock,
) -> None:
    # The price of never waiting on a silent listener alone: a minute without a commit is
    # 60 / SILENT_SECONDS reads (an empty query bills one), however many tails share the
    # listener; a minute with a commit each period is none.
    log = Log()
    event = working()
    reads = log.reads

    watches = watching(log)
    tails = [FirestoreTail(ALICE, "t", 0, read=log.read, watches=watches) for _ in range(5)]
    start = clock.now
    while clock.now - start < 60:
        clock.now += 0.125  # a stream looks this often at most (its pauses end sooner)
        for tail in tails:
            assert tail.next(0) == []
    assert len(reads) == round(60 / firestore_tail.SILENT_SECONDS)
    del reads[:]
    start = clock.now
    while clock.now - start < 60:
        log.commit([event])
        clock.now += firestore_tail.SILENT_SECONDS * 0.9
        for tail in tails:
            assert len(tail.next(0)) == 1
    assert reads == []
    for tail in tails:
        tail.close()


def test_events_moved_out_of_a_version_the_listener_skipped_are_read_at_once(
    clock: Clock,
) -> None:
    # A listener hands over the newest version of the task's document it has: when that
    # shows events moved into event documents that no snapshot showed, one read finds them,
    # for every tail, at their next look (not a silent period later).
    log = Log(keep=2)
    event = working()
    reads = log.reads

    watches = watching(log)
    tails = [FirestoreTail(ALICE, "t", 0, read=log.read, watches=watches) for _ in range(2)]
    log.commit([event] * 2)  # in the task's document
    assert [[e.seq for e in t.next(0)] for t in tails] == [[1, 2]] * 2
    log.commit([event])  # 1 and 2 moved out, 3 in the document: seen, no read
    assert [[e.seq for e in t.next(0)] for t in tails] == [[3]] * 2 and reads == []
    log.hold()
    log.commit([event])  # 4 beside 3
    log.commit([event])  # 3 and 4 moved out, 5 in the document
    woken: list[bool] = []
    assert tails[0].watch(lambda: woken.append(True)) is not None and woken == []
    log.release()  # the listener skipped the version that showed 4
    assert woken == [True]
    assert tails[0].watch(lambda: None) == 0  # look now: a read is due
    assert [[e.seq for e in t.next(0)] for t in tails] == [[4, 5]] * 2 and reads == [3]
    assert watches.opened == 1  # not silent: it handed over all it had
    log.commit([event])
    assert [[e.seq for e in t.next(0)] for t in tails] == [[6]] * 2 and reads == [3]
    for tail in tails:
        tail.close()
