"""Firestore now and then cancels a call on its side (CANCELLED), the emulator too: a task's
batch is sent again (`COMMIT_RETRY`), and one that had been applied all the same is known
by its commitId, not written twice. Through a proxy in front of the emulator that cancels
the next Commit before the emulator sees it, or after it applied it (tests/store/
cancelling_proxy.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.firestore import FirestoreEmulator
from shared import lifecycle
from shared.model import TaskState
from shared.ports import StoredTask
from shared.store.firestore import FirestoreTaskStore
from tests.store.cancelling_proxy import Cancel, CancellingProxy
from tests.store.factory import ALICE, new_task, status


@pytest.fixture
def proxy(clean_firestore: FirestoreEmulator) -> Iterator[CancellingProxy]:
    cancelling = CancellingProxy(clean_firestore.address)
    try:
        yield cancelling
    finally:
        cancelling.close()


@pytest.fixture
def store(
    clean_firestore: FirestoreEmulator, proxy: CancellingProxy, monkeypatch: pytest.MonkeyPatch
) -> FirestoreTaskStore:
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", proxy.address)
    return FirestoreTaskStore(clean_firestore.project)


def working(store: FirestoreTaskStore, current: StoredTask, text: str) -> StoredTask:
    events = [status(current.task, TaskState.WORKING, text=text)]
    return store.commit(current, lifecycle.apply_all(current.task, events), events)


@pytest.mark.parametrize("cancel", ["before", "after"])
def test_a_cancelled_commit_is_sent_again_and_lands_once(
    store: FirestoreTaskStore, proxy: CancellingProxy, cancel: Cancel
) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="1.0")
    current = working(store, current, "one")
    proxy.cancel = [cancel]
    current = working(store, current, "two")
    assert proxy.cancel == [] and proxy.commits == 3  # each commit applied once
    current = working(store, current, "three")  # its revision is the store's: no conflict
    logged = list(store.events(ALICE, task.id, 0))
    assert [e.seq for e in logged] == list(range(1, current.last_seq + 1))
    texts = [e.event.status.message.parts[0].text for e in logged[-3:]]  # type: ignore[union-attr]
    assert texts == ["one", "two", "three"]


@pytest.mark.parametrize("live_limit", [None, 10])
@pytest.mark.parametrize("cancel", ["before", "after"])
def test_a_cancelled_create_is_sent_again_and_lands_once(
    store: FirestoreTaskStore, proxy: CancellingProxy, cancel: Cancel, live_limit: int | None
) -> None:
    """Near the live limit, the create's batch also moves the owner's count under a
    precondition: an applied batch sent again fails on that too, and is known all the same."""
    first, events = new_task()
    store.create(ALICE, first, events, dialect="1.0", live_limit=live_limit)  # the count made
    task, events = new_task()
    proxy.cancel = [cancel]
    created = store.create(ALICE, task, events, dialect="1.0", live_limit=live_limit)
    assert proxy.cancel == []
    assert working(store, created, "next").last_seq == created.last_seq + 1
    stored = store.get(ALICE, task.id)
    assert stored is not None and stored.last_seq == created.last_seq + 1
    assert store.live_tasks(ALICE, 10) == 2


@pytest.mark.parametrize("cancel", ["before", "after"])
def test_an_owners_count_made_on_a_cancelled_call_is_made_again(
    store: FirestoreTaskStore, proxy: CancellingProxy, cancel: Cancel
) -> None:
    """An owner's first create near the limit makes the owner's count first (its document,
    written whole again when sent again)."""
    task, events = new_task()
    proxy.cancel = [cancel]
    store.create(ALICE, task, events, dialect="1.0", live_limit=10)
    assert proxy.cancel == [] and store.live_tasks(ALICE, 10) == 1
