"""The tail part of the TaskStore contract: following a log as other writers commit.

Run against the embedded store (its condition variable) and the Firestore store on the
emulator, once with its snapshot listener and once polling: all three behave the same.
"""

from __future__ import annotations

import threading
import time

import pytest

from shared import lifecycle
from shared.model import Event, TaskState
from shared.ports import StoredTask, TaskStore
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_tail import POLL_MAX_SECONDS
from shared.store.memory import MemoryTaskStore
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, MALLORY, new_task, status


def step(store: TaskStore, current: StoredTask, events: list[Event]) -> StoredTask:
    return store.commit(current, lifecycle.apply_all(current.task, events), events)


def drain(tail: object, want: int, seconds: float = 10) -> list[int]:
    """Sequence numbers from `tail` until `want` of them arrived (bounded in time)."""
    seqs: list[int] = []
    deadline = time.monotonic() + seconds
    while len(seqs) < want and time.monotonic() < deadline:
        seqs.extend(e.seq for e in tail.next(0.5))  # type: ignore[attr-defined]
    return seqs


def test_tail_sees_the_log_then_what_others_commit(tailing_store: TaskStore) -> None:
    store = tailing_store
    task, events = new_task()
    stored = store.create(ALICE, task, events, dialect="1.0")
    tail = store.tail(ALICE, task.id, 0)
    try:
        assert drain(tail, 2) == [1, 2]

        # The tail waits in next() on a thread while this one commits three times.
        got: list[int] = []
        reader = threading.Thread(target=lambda: got.extend(drain(tail, 6)))
        reader.start()
        current = stored
        for n in range(3):
            # Two events in one commit: one event document holding seqs n*2+3, n*2+4.
            current = step(store, current, [status(task, TaskState.WORKING, text=f"s{n}")] * 2)
        reader.join(15)
        assert got == [3, 4, 5, 6, 7, 8]  # each once, in order, across commits
        assert tail.next(0.2) == []
    finally:
        tail.close()
        tail.close()  # idempotent


def test_a_watched_tail_is_woken_by_a_commit_or_says_when_to_look(
    tailing_store: TaskStore,
) -> None:
    """What a stream waiting without a thread relies on (shared.pause): a commit wakes the
    watcher (the embedded store's commit, the listener's snapshot), or, polling, the tail
    says when its next read is due; a wake is a hint, the next read finds the events."""
    store = tailing_store
    polling = isinstance(store, FirestoreTaskStore) and store.watches is None
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    tail = store.tail(ALICE, task.id, 0)
    try:
        assert drain(tail, 2) == [1, 2]
        for n in range(2):
            woken = threading.Event()
            due = tail.watch(woken.set)
            current = step(store, current, [status(task, TaskState.WORKING, text=f"s{n}")])
            if polling:  # nothing wakes it: its next read is due within the backoff's cap
                assert due is not None and due <= POLL_MAX_SECONDS
            else:
                assert woken.wait(10), "the commit did not wake the watcher"
            assert drain(tail, 1) == [3 + n]
    finally:
        tail.close()


def test_tail_starts_after_a_sequence_number_inside_a_commit(tailing_store: TaskStore) -> None:
    store = tailing_store
    task, events = new_task()
    stored = store.create(ALICE, task, events, dialect="1.0")
    step(store, stored, [status(task, TaskState.WORKING, text=str(n)) for n in range(3)])
    tail = store.tail(ALICE, task.id, 3)
    try:
        assert drain(tail, 2) == [4, 5]
    finally:
        tail.close()


def test_a_quiet_tail_waits_its_timeout_and_no_longer(tailing_store: TaskStore) -> None:
    store = tailing_store
    task, events = new_task()
    store.create(ALICE, task, events, dialect="1.0")
    tail = store.tail(ALICE, task.id, 2)
    try:
        started = time.monotonic()
        assert tail.next(0.3) == []
        assert 0.25 <= time.monotonic() - started < 2
    finally:
        tail.close()


def test_another_owners_task_yields_nothing(tailing_store: TaskStore) -> None:
    store = tailing_store
    task, events = new_task()
    store.create(ALICE, task, events, dialect="1.0")
    for owner, task_id in ((MALLORY, task.id), (ALICE, "no-such-task")):
        tail = store.tail(owner, task_id, 0)
        try:
            assert tail.next(0.2) == []
        finally:
            tail.close()


def test_firestore_listens_or_polls_as_asked(make_firestore_store: MakeStore) -> None:
    for mode, listening in (("listener", True), ("polling", False)):
        store = make_firestore_store(tail=mode)
        task, events = new_task()
        store.create(ALICE, task, events, dialect="1.0")
        tail = store.tail(ALICE, task.id, 0)
        try:
            assert tail.listening is listening
            assert drain(tail, 2) == [1, 2]
        finally:
            tail.close()


def test_firestore_polls_when_no_listener_can_be_had(
    make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from google.cloud.firestore_v1.document import DocumentReference

    def refuse(self: DocumentReference, callback: object) -> None:
        raise RuntimeError("listen streams are blocked here")

    monkeypatch.setattr(DocumentReference, "on_snapshot", refuse)
    store = make_firestore_store(tail="listener")
    task, events = new_task()
    stored = store.create(ALICE, task, events, dialect="1.0")
    tail = store.tail(ALICE, task.id, 2)
    try:
        assert not tail.listening
        step(store, stored, [status(task, TaskState.COMPLETED)])
        assert drain(tail, 1) == [3]
    finally:
        tail.close()


def test_a_commit_wakes_a_waiting_tail_of_the_embedded_store_at_once() -> None:
    """A tail waiting with a long timeout returns as soon as a commit lands, not at its
    timeout: the embedded store notifies the tails that wait (and only then)."""
    store = MemoryTaskStore()
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0")
    tail = store.tail(ALICE, task.id, after_seq=len(events))
    asked = threading.Event()
    ahead = tail._ahead

    def watched() -> bool:
        asked.set()  # asked under the store's lock: the commit below waits for the tail to wait
        return ahead()

    tail._ahead = watched  # type: ignore[method-assign]
    found: list[int] = []
    waiting = threading.Thread(
        target=lambda: found.extend(e.seq for e in tail.next(60)), daemon=True
    )
    waiting.start()
    assert asked.wait(10)
    step(store, created, [status(created.task, TaskState.COMPLETED)])
    waiting.join(10)
    assert found == [len(events) + 1]
