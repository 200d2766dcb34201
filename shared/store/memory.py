"""The embedded task store: the TaskStore contract in one process's memory.

A real implementation for `make run` and the tests, not a mock: versions, owner scoping,
dense event sequences, idempotent message ids and cursor paging behave as in Firestore.
Everything is keyed by (owner, id): each owner's task ids are a namespace of their own.
Every read and write of its dicts holds its lock: requests, workers and push deliveries
call it from many threads at once.

A message's record (`MessageKey`) costs nothing when the task has the key's own id: the task
is the record, and a resend finds the id taken. With a push config store bound to it
(`track_push_configs`), a task says whether it has push configs (`StoredTask.push_configs`).

Bounded and compact: a task and its events are kept serialized (a few KiB a short task, where
the objects took ~10), the most recently used ones also as objects; past `max_bytes`, or
`retention` after their last write, the least recently written tasks are forgotten, as
Firestore's TTL forgets them: their readers find no task.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import fields, replace
from datetime import datetime, timedelta
from typing import Any, overload

from shared import ids, limits, model_json
from shared.clock import SYSTEM, Clock
from shared.model import ArtifactUpdate, Event, Message, StatusUpdate, Task, TaskState, utc_now
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
from shared.settings import MEMORY_MAX_BYTES
from shared.store.cost import Cost
from shared.store.paging import Cursor, decode_token, encode_token


class MemoryTaskStore:
    def __init__(
        self,
        *,
        max_bytes: int = MEMORY_MAX_BYTES,
        retention: timedelta = timedelta(days=30),
        clock: Clock = SYSTEM,
    ) -> None:
        # What Firestore would bill for the same calls: the task document, one event document
        # per commit that logs events, the message's record when it needs a document, and
        # the reads after a refused batch.
        self.cost = Cost()
        # Per (owner, task id): the last seq of each commit, the task, its log.
        self._commit_ends: dict[tuple[str, str], list[int]] = {}
        self._lock = threading.Lock()
        self._size = _Size(max_bytes)
        self._retention = retention
        self._clock = clock
        self._tasks = _CompactTasks(self._size)
        self._events = _CompactLogs(self._size)
        self._messages: dict[tuple[str, MessageKey], str] = {}
        # Whether tasks keep track of their push configs (a push config store marks them).
        self._push_tracked = False
        # Tails wait on this for commits: the embedded backend's own change notification.
        self._changed = threading.Condition(self._lock)

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        self.cost.add(reads=1)
        with self._lock:
            return self._owned(owner, task_id)

    def _owned(self, owner: str, task_id: str) -> StoredTask | None:
        return self._tasks.get((owner, task_id))

    def _bill(self, key: tuple[str, str], events: Sequence[Event], recorded: bool) -> None:
        """The task document, one event document, the message's record if it has one."""
        if events:
            self._commit_ends.setdefault(key, []).append(self._tasks[key].last_seq)
        self.cost.add(writes=1 + bool(events) + recorded)

    def track_push_configs(self) -> None:
        """From now on tasks say whether a push config was put on them (the push config store
        beside this one marks them): call it before the first task is created."""
        self._push_tracked = True

    def mark_push_configs(self, owner: str, task_id: str) -> bool:
        """Record that the owner's task has a push config; False when there is no such task
        (Firestore then writes no task document)."""
        key = (owner, task_id)
        with self._lock:
            stored = self._owned(owner, task_id)
            if stored is None:
                return False
            if not stored.push_configs:
                # The stored record, which `commit` builds on: no commit after this one drops
                # the mark, whatever snapshot it was given.
                self._tasks[key] = replace(stored, push_configs=True)
            return True

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
                # Firestore reads the task to tell its own retried batch from a refusal.
                self.cost.add(reads=1)
                if message_key is not None and message_key.recorded_by(owner, task.id):
                    raise DuplicateMessage(task.id)
                if message_key is not None and message_key.replaces is None:
                    self.cost.add(reads=1)  # and the message's record, whose it was
                raise TaskExists(task.id)
            recorded = self._claim(owner, message_key, task.id)
            now = utc_now()
            stored = StoredTask(
                task,
                owner,
                1,
                len(events),
                dialect,
                now,
                now,
                lease,
                push_configs=not self._push_tracked,
            )
            self._tasks[key] = stored
            self._events.start(key, events)
            self._bill(key, events, recorded)
            self._trim()
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
                self.cost.add(reads=1)  # as Firestore's, after its failed batch
                raise VersionConflict(task.id)
            recorded = self._claim(current.owner, message_key, task.id)
            log = self._events[key]
            log.extend(stored.last_seq + 1, events)
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
            self._bill(key, events, recorded)
            self._trim()
            self._changed.notify_all()
        return new

    def _claim(self, owner: str, key: MessageKey | None, task_id: str) -> bool:
        """Record the message as sent to the task; whether that took a record of its own."""
        if key is None:
            return False
        ids.require(key.message_id, "message id")
        if key.recorded_by(owner, task_id):
            return False
        previous = self._messages.get((owner, key))
        if previous is not None and key.replaces is None:
            # Firestore's batch fails on the record: it reads the task, then the record.
            self.cost.add(reads=2)
            raise DuplicateMessage(previous)
        self._messages[(owner, key)] = task_id
        return True

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        with self._lock:
            found = self._messages.get((owner, key))
            if found is None:  # as Firestore: the record, then the task of the key's own id
                self.cost.add(reads=1)
                derived = key.task_id(owner)
                found = derived if (owner, derived) in self._tasks else None
        self.cost.add(reads=1)
        return found

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

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        past = None
        if after is not None and after.lease is not None and after.lease.expires is not None:
            past = (after.lease.expires, (after.owner, after.task.id))
        with self._lock:
            # The records, not the tasks: only the leases found are decoded.
            expired = [
                (lease.expires, key)
                for key, r in self._tasks.records()
                if (lease := r.lease) is not None
                and lease.expires is not None
                and lease.expires < before
                and (past is None or (lease.expires, key) > past)
            ]
            expired.sort()
            found = [self._tasks[key] for _, key in expired[:limit]]
        self.cost.add(reads=max(1, len(found)))
        return found

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        cursor = decode_token(query)
        with self._lock:
            # The index, not the tasks: only the page is decoded.
            records = [(key[1], r) for key, r in self._tasks.records() if key[0] == owner]
        matching = [
            (task_id, r)
            for task_id, r in records
            if (query.context_id is None or r.context_id == query.context_id)
            and (query.state is None or r.state == query.state)
            and (query.status_after is None or r.timestamp > query.status_after)
        ]
        matching.sort(key=lambda m: (m[1].timestamp, m[0]), reverse=True)
        if cursor is not None:
            key = (cursor.timestamp, cursor.task_id)
            matching_after = [m for m in matching if (m[1].timestamp, m[0]) < key]
        else:
            matching_after = matching
        page = [r.unpack() for _, r in matching_after[: query.page_size]]
        token = ""
        if len(matching_after) > query.page_size:
            last = page[-1].task
            returned = (cursor.returned if cursor else 0) + len(page)
            token = encode_token(query, Cursor(last.status.timestamp, last.id, returned))
        self.cost.add(reads=max(1, len(page)) + 1)  # the page, and the count for totalSize
        return TaskPage(page, token, len(matching))

    def _trim(self) -> None:
        """Forget the least recently written tasks while the store is over its bound or they
        are past retention. Called with the lock held, after each write."""
        expired = self._clock.now() - self._retention
        while len(self._tasks) > 1 and (
            self._size.over() or self._tasks.oldest().updated_at < expired
        ):
            key = self._tasks.oldest_key()
            del self._tasks[key]
            del self._events[key]
            self._commit_ends.pop(key, None)
        # Message records: past _MESSAGES_KEPT, two per stored task (their bytes are in
        # _TASK_OVERHEAD), the oldest forgotten first. A resend of a forgotten message, like
        # one whose task is gone, is a new message to the service.
        while len(self._messages) > max(2 * len(self._tasks), _MESSAGES_KEPT):
            del self._messages[next(iter(self._messages))]


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


# -- the compact form --------------------------------------------------------------------------

# Fixed allowance per task for what its serialized form does not hold: keys, index, records.
_TASK_OVERHEAD = 1024
# Tasks kept as objects too, most recently used first: a running turn's reads decode nothing.
_HOT_TASKS = 64
# Message records always kept (~0.4 KiB each): a long conversation in a small store keeps
# recognising its resent messages.
_MESSAGES_KEPT = 10_000
_FIELDS = [f.name for f in fields(StoredTask)]
_TASK_FIELD = _FIELDS.index("task")
_LEASE_FIELD = _FIELDS.index("lease")
_EVENT_KINDS: dict[type, bytes] = {Message: b"m", StatusUpdate: b"s", ArtifactUpdate: b"a"}
_EVENT_MODELS: dict[int, Any] = {kind[0]: model for model, kind in _EVENT_KINDS.items()}


def _pack_task(task: Task) -> bytes:
    # The model's JSON leaves out fields that are None (a short task's JSON shrinks by a
    # third); reading puts them back, so the task read back equals the one stored.
    return model_json.encode(task)


def _pack_event(event: Event) -> bytes:
    return _EVENT_KINDS[type(event)] + model_json.encode(event)


def _unpack_event(data: bytes) -> Event:
    event: Event = model_json.decode(_EVENT_MODELS[data[0]], data[1:])
    return event


class _Size:
    """The bytes the store holds, against its bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def over(self) -> bool:
        return self.used > self.limit


class _Record:
    """One stored task: StoredTask's fields with the task serialized, and what ListTasks
    filters and sorts on."""

    __slots__ = ("context_id", "state", "timestamp", "updated_at", "values")

    def __init__(self, stored: StoredTask) -> None:
        values: list[Any] = [getattr(stored, name) for name in _FIELDS]
        values[_TASK_FIELD] = packed = _pack_task(stored.task)
        limits.note_stored(stored.task, len(packed))  # the next send's check_history
        self.values = tuple(values)
        status = stored.task.status
        self.context_id: str = stored.task.context_id
        self.state: TaskState = status.state
        self.timestamp: datetime = status.timestamp
        self.updated_at: datetime = stored.updated_at

    @property
    def size(self) -> int:
        return len(self.values[_TASK_FIELD]) + _TASK_OVERHEAD

    @property
    def lease(self) -> Lease | None:
        lease: Lease | None = self.values[_LEASE_FIELD]
        return lease

    def unpack(self) -> StoredTask:
        values = list(self.values)
        packed = values[_TASK_FIELD]
        values[_TASK_FIELD] = task = model_json.decode(Task, packed)
        limits.note_stored(task, len(packed))
        return StoredTask(*values)


class _CompactTasks:
    """(owner, task id) -> StoredTask, kept as `_Record`s in the order of their last write
    (the least recently written first), with the most recently used also as objects."""

    def __init__(self, size: _Size) -> None:
        self._size = size
        self._records: dict[tuple[str, str], _Record] = {}
        self._hot: dict[tuple[str, str], StoredTask] = {}

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    def __getitem__(self, key: tuple[str, str]) -> StoredTask:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: tuple[str, str]) -> StoredTask | None:
        stored = self._hot.get(key)
        if stored is not None:
            return stored
        record = self._records.get(key)
        if record is None:
            return None
        stored = record.unpack()
        self._keep_hot(key, stored)
        return stored

    def __setitem__(self, key: tuple[str, str], stored: StoredTask) -> None:
        self._drop(key)  # and back in at the end: the most recently written
        record = _Record(stored)
        self._records[key] = record
        self._size.used += record.size
        self._keep_hot(key, stored)

    def __delitem__(self, key: tuple[str, str]) -> None:
        if key not in self._records:
            raise KeyError(key)
        self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        record = self._records.pop(key, None)
        if record is not None:
            self._size.used -= record.size
        self._hot.pop(key, None)

    def _keep_hot(self, key: tuple[str, str], stored: StoredTask) -> None:
        self._hot.pop(key, None)
        self._hot[key] = stored
        if len(self._hot) > _HOT_TASKS:
            del self._hot[next(iter(self._hot))]

    def records(self) -> Iterable[tuple[tuple[str, str], _Record]]:
        return list(self._records.items())

    def oldest_key(self) -> tuple[str, str]:
        return next(iter(self._records))

    def oldest(self) -> _Record:
        return self._records[self.oldest_key()]


class _PackedLog:
    """One task's event log, each event serialized: a list of LoggedEvent to its callers."""

    def __init__(self, size: _Size) -> None:
        self._size = size
        self._events: list[tuple[int, bytes]] = []

    def __len__(self) -> int:
        return len(self._events)

    def __iter__(self) -> Iterator[LoggedEvent]:
        return (LoggedEvent(seq, _unpack_event(data)) for seq, data in self._events)

    @overload
    def __getitem__(self, index: int) -> LoggedEvent: ...
    @overload
    def __getitem__(self, index: slice) -> list[LoggedEvent]: ...
    def __getitem__(self, index: int | slice) -> LoggedEvent | list[LoggedEvent]:
        if isinstance(index, slice):
            return [LoggedEvent(seq, _unpack_event(data)) for seq, data in self._events[index]]
        seq, data = self._events[index]
        return LoggedEvent(seq, _unpack_event(data))

    def extend(self, first_seq: int, events: Iterable[Event]) -> None:
        """Append `events`, the first of them at `first_seq` (packed: no LoggedEvent made)."""
        packed = [(seq, _pack_event(event)) for seq, event in enumerate(events, first_seq)]
        self._events.extend(packed)
        self._size.used += sum(len(data) for _, data in packed)

    def clear(self) -> None:
        self._size.used -= sum(len(data) for _, data in self._events)
        self._events.clear()


class _CompactLogs:
    """(owner, task id) -> its _PackedLog, started with a new task's first events."""

    def __init__(self, size: _Size) -> None:
        self._size = size
        self._logs: dict[tuple[str, str], _PackedLog] = {}

    def __getitem__(self, key: tuple[str, str]) -> _PackedLog:
        return self._logs[key]

    def start(self, key: tuple[str, str], events: Iterable[Event]) -> None:
        """The task's log anew, holding `events` from seq 1."""
        self._drop(key)
        log = self._logs[key] = _PackedLog(self._size)
        log.extend(1, events)

    def __delitem__(self, key: tuple[str, str]) -> None:
        if key not in self._logs:
            raise KeyError(key)
        self._drop(key)

    def _drop(self, key: tuple[str, str]) -> None:
        log = self._logs.pop(key, None)
        if log is not None:
            log.clear()
