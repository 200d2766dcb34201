"""The embedded task store: the TaskStore contract in one process's memory.

A real implementation for `make run` and the tests, not a mock: versions, owner scoping,
dense event sequences, idempotent message ids and cursor paging behave as in Firestore.
Everything is keyed by (owner, id): each owner's task ids are a namespace of their own.
Every read and write of its dicts holds its lock: requests, workers and push deliveries
call it from many threads at once.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from shared import ids
from shared.model import Event, Task, utc_now
from shared.ports import (
    DuplicateMessage,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskExists,
    TaskPage,
    TaskQuery,
    VersionConflict,
)
from shared.store.cost import Cost
from shared.store.paging import Cursor, decode_token, encode_token


class MemoryTaskStore:
    def __init__(self) -> None:
        # What Firestore would bill for the same calls: the task document, one event document
        # per commit that logs events, the idempotency document.
        self.cost = Cost()
        # Per (owner, task id): the last seq of each commit, the task, its log.
        self._commit_ends: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()
        self._tasks: dict[tuple[str, str], StoredTask] = {}
        self._events: dict[tuple[str, str], list[LoggedEvent]] = {}
        self._messages: dict[tuple[str, MessageKey], str] = {}
        # Tails wait on this for commits: the embedded backend's own change notification.
        self._changed = threading.Condition(self._lock)

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        self.cost.add(reads=1)
        with self._lock:
            return self._owned(owner, task_id)

    def _owned(self, owner: str, task_id: str) -> StoredTask | None:
        return self._tasks.get((owner, task_id))

    def _bill(
        self, key: tuple[str, str], events: Sequence[Event], message_key: MessageKey | None
    ) -> None:
        """The task document, one event document, the idempotency document."""
        if events:
            self._commit_ends.setdefault(key, []).append(self._tasks[key].last_seq)
        self.cost.add(writes=1 + bool(events) + (message_key is not None))

    def create(
        self,
        owner: str,
        task: Task,
        events: Sequence[Event],
        *,
        dialect: str,
        message_key: MessageKey | None = None,
        lease: Lease | None = None,
    ) -> StoredTask:
        ids.require(task.id, "task id")
        ids.require(task.context_id, "context id")
        key = (owner, task.id)
        with self._lock:
            if key in self._tasks:
                raise TaskExists(task.id)
            self._claim(owner, message_key, task.id)
            now = utc_now()
            stored = StoredTask(task, owner, 1, len(events), dialect, now, now, lease)
            self._tasks[key] = stored
            self._events[key] = [LoggedEvent(i + 1, e) for i, e in enumerate(events)]
            self._bill(key, events, message_key)
            self._changed.notify_all()
        return stored

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        key = (current.owner, task.id)
        with self._lock:
            stored = self._tasks.get(key)
            if stored is None or stored.version != current.version:
                raise VersionConflict(task.id)
            self._claim(current.owner, message_key, task.id)
            log = self._events[key]
            log.extend(LoggedEvent(stored.last_seq + i + 1, e) for i, e in enumerate(events))
            new = replace(
                stored,
                task=task,
                version=stored.version + 1,
                last_seq=stored.last_seq + len(events),
                updated_at=utc_now(),
                lease=current.lease,
                pending=current.pending,
            )
            self._tasks[key] = new
            self._bill(key, events, message_key)
            self._changed.notify_all()
        return new

    def _claim(self, owner: str, key: MessageKey | None, task_id: str) -> None:
        if key is None:
            return
        ids.require(key.message_id, "message id")
        previous = self._messages.get((owner, key))
        if previous is not None and key.replaces is None:
            raise DuplicateMessage(previous)
        self._messages[(owner, key)] = task_id

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        self.cost.add(reads=1)
        with self._lock:
            return self._messages.get((owner, key))

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        with self._lock:
            # One read per event document (commit) with news, as the Firestore query bills.
            ends = self._commit_ends.get((owner, task_id), [])
            self.cost.add(reads=max(1, sum(end > after_seq for end in ends)))
            if self._owned(owner, task_id) is None:
                return []
            # Sequences are dense from 1, so the slice starts at index after_seq.
            return list(self._events[(owner, task_id)][max(after_seq, 0) :])

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> MemoryTail:
        return MemoryTail(self, owner, task_id, after_seq)

    def expired_leases(self, before: datetime, limit: int) -> list[StoredTask]:
        with self._lock:
            expired = [
                s
                for s in self._tasks.values()
                if s.lease is not None and s.lease.expires is not None and s.lease.expires < before
            ]
        expired.sort(key=lambda s: s.lease.expires if s.lease and s.lease.expires else before)
        found = expired[:limit]
        self.cost.add(reads=max(1, len(found)))
        return found

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        cursor = decode_token(query)
        with self._lock:
            tasks = list(self._tasks.values())
        matching = [
            s
            for s in tasks
            if s.owner == owner
            and (query.context_id is None or s.task.context_id == query.context_id)
            and (query.state is None or s.task.status.state == query.state)
            and (query.status_after is None or s.task.status.timestamp > query.status_after)
        ]
        matching.sort(key=lambda s: (s.task.status.timestamp, s.task.id), reverse=True)
        if cursor is not None:
            key = (cursor.timestamp, cursor.task_id)
            matching_after = [s for s in matching if (s.task.status.timestamp, s.task.id) < key]
        else:
            matching_after = matching
        page = matching_after[: query.page_size]
        token = ""
        if len(matching_after) > query.page_size:
            last = page[-1].task
            returned = (cursor.returned if cursor else 0) + len(page)
            token = encode_token(query, Cursor(last.status.timestamp, last.id, returned))
        self.cost.add(reads=max(1, len(page)) + 1)  # the page, and the count for totalSize
        return TaskPage(page, token, len(matching))


class MemoryTail:
    """Follows one task's log in a MemoryTaskStore, woken by the store's commits."""

    def __init__(self, store: MemoryTaskStore, owner: str, task_id: str, after_seq: int) -> None:
        self._store = store
        self._owner = owner
        self._task_id = task_id
        self._last = max(after_seq, 0)

    def _ahead(self) -> bool:
        stored = self._store._owned(self._owner, self._task_id)
        return stored is not None and stored.last_seq > self._last

    def next(self, timeout: float) -> list[LoggedEvent]:
        with self._store._changed:
            if not self._store._changed.wait_for(self._ahead, timeout=max(timeout, 0)):
                return []
            # Sequences are dense from 1, so the slice starts at index _last.
            found = self._store._events[(self._owner, self._task_id)][self._last :]
        self._last = found[-1].seq
        return found

    def close(self) -> None:
        """Nothing to release: waiting happens only inside next()."""
