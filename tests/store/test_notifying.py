"""The notifying decorator: told of each commit that logged events, after it succeeded; a
callback that fails never fails the commit. (It also passes the TaskStore contract.)"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from shared import lifecycle
from shared.model import Event, TaskState
from shared.ports import StoredTask, TaskExists, VersionConflict
from shared.store.memory import MemoryTaskStore
from shared.store.notifying import NotifyingTaskStore
from tests.store.factory import ALICE, new_task, status


def recording() -> tuple[NotifyingTaskStore, list[tuple[StoredTask, list[Event]]]]:
    heard: list[tuple[StoredTask, list[Event]]] = []

    def on_commit(stored: StoredTask, events: Sequence[Event]) -> None:
        heard.append((stored, list(events)))

    return NotifyingTaskStore(MemoryTaskStore(), on_commit), heard


def test_each_create_and_commit_with_events_is_told_after_it_is_stored() -> None:
    store, heard = recording()
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="1.0")
    assert heard == [(created, events)]
    done = [status(task, TaskState.COMPLETED)]
    committed = store.commit(created, lifecycle.apply_all(created.task, done), done)
    assert heard[1] == (committed, done)
    assert store.inner.get(ALICE, task.id) == committed  # stored before it was told


def test_a_commit_without_events_or_that_failed_is_not_told() -> None:
    store, heard = recording()
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="1.0")
    heard.clear()
    renewed = store.commit(created, created.task, [])
    assert heard == []
    done = [status(task, TaskState.COMPLETED)]
    with pytest.raises(VersionConflict):
        store.commit(created, lifecycle.apply_all(created.task, done), done)  # stale version
    with pytest.raises(TaskExists):
        store.create(ALICE, task, events, dialect="1.0")
    assert heard == []
    assert store.get(ALICE, task.id) == renewed


def test_a_failing_callback_is_logged_and_the_commit_stands(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def broken(stored: StoredTask, events: Sequence[Event]) -> None:
        raise RuntimeError("the push queue is down")

    store = NotifyingTaskStore(MemoryTaskStore(), broken)
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="1.0")
    assert store.get(ALICE, task.id) == created
    assert "a commit callback failed for task " + task.id in caplog.text
