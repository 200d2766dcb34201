"""The embedded task store: the TaskStore contract in one process's memory.

A real implementation for `make run` and the tests, not a mock: versions, owner scoping,
dense event sequences, idempotent message ids and cursor paging behave as in Firestore.
Everything is keyed by (owner, id): each owner's task ids are a namespace of their own.
Every read and write of its dicts holds its lock: requests, workers and push deliveries
call it from many threads at once.

A message's record (`MessageKey`) costs nothing when the task has the key's own id: the task
is the record, and a resend finds the id taken. With a push config store bound to it
(`track_push_configs`), a task says whether it has push configs (`StoredTask.push_configs`).

Bounded and compact: a task and its events are kept serialized, in one record per task (its
JSON and its updates' without the ids they start with, one bytes per commit of events, its
other fields in slots: ~1.9 KiB a short task, where the objects took ~10); past
`retention` after their last write, the least recently written tasks are forgotten, as
Firestore's TTL forgets them: their readers find no task. Past `max_bytes`, the owner whose
tasks hold the most bytes loses its least recently written terminal task (none left: its
least recently written live one): an owner who floods the store pays for it with its own
tasks, and a quiet owner's survive. The bound counts what a record really holds in the
process (each object's own size, its share of the dicts; `_Record.weigh`), each owner's
index (`_OWNER_BYTES`), and the message records beside the tasks. Not counted, as their size
does not grow with the tasks: the `_HOT_TASKS` kept as objects, and the `_HEAP_SLACK`
entries the owners' heap may hold past two an owner.
"""

from __future__ import annotations

import heapq
import math
import sys
import threading
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from shared import ids, model_json
from shared.clock import SYSTEM, Clock
from shared.errors import LiveTaskQuotaError
from shared.model import ArtifactUpdate, Event, Message, StatusUpdate, Task, TaskState, utc_now
from shared.ports import (
    DuplicateMessage,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskExists,
    TaskNews,
    TaskPage,
    TaskQuery,
    VersionConflict,
)
from shared.settings import MEMORY_MAX_BYTES
from shared.store.cost import TASK_IN_DOCUMENT_BYTES, Cost, logged_bytes, logs_in_task
from shared.store.paging import Cursor, decode_token, encode_token


class MemoryTaskStore:
    def __init__(
        self,
        *,
        max_bytes: int = MEMORY_MAX_BYTES,
        retention: timedelta = timedelta(days=30),
        clock: Clock = SYSTEM,
    ) -> None:
        # What Firestore would bill for the same calls: the task document, an event document
        # when a commit moves the log out of it (`cost.logs_in_task`), the message's record
        # when it needs a document, and the reads after a refused batch.
        self.cost = Cost()
        self._lock = threading.Lock()
        self._size = _Size(max_bytes)
        self._retention = retention
        self._clock = clock
        self._tasks = _CompactTasks(self._size)
        # A message's record, when it needs one: (owner, message id, digest), as MessageKey
        # compares, -> the task it went to; the oldest first.
        self._messages: dict[tuple[str, str, str], str] = {}
        # Message records kept whatever the tasks (a long conversation in a small store keeps
        # recognising its resent messages), in at most a quarter of the bound.
        self._messages_kept = min(_MESSAGES_KEPT, max_bytes // 4 // _MESSAGE_BYTES)
        # Whether tasks keep track of their push configs (a push config store marks them).
        self._push_tracked = False
        # Tails wait on this for commits: the embedded backend's own change notification.
        self._changed = threading.Condition(self._lock)
        # Tails waiting on it: a commit notifies only then (a notify with nobody waiting still
        # costs a commit a check of the lock and a deque).
        self._waiting = 0
        # Tails watched by a stream that waits without a thread (`MemoryTail.watch`), by task:
        # the task's next commit calls them, once.
        self._watching: dict[tuple[str, str], set[Callable[[], None]]] = {}

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        self.cost.add(reads=1)
        with self._lock:
            return self._owned(owner, task_id)

    def _owned(self, owner: str, task_id: str) -> StoredTask | None:
        return self._tasks.get((owner, task_id))

    def _bill(self, moved: int, recorded: bool) -> None:
        """The task document, the event documents its log `moved` into, the message's record
        if it has one."""
        self.cost.add(writes=1 + moved + recorded)

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
                self._tasks.mark(key, replace(stored, push_configs=True))
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
        live_limit: int | None = None,
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
            if live_limit is not None:
                self.cost.add(reads=1)  # as Firestore's count
                if self._tasks.live(owner) >= live_limit:
                    # Counted under the lock that writes: concurrent creates never pass it.
                    # A resend of the message that made one of them gets its task (the
                    # key's own id was found above), as a create without a limit would.
                    if message_key is not None and message_key.replaces is None:
                        found = self._messages.get(
                            (owner, message_key.message_id, message_key.digest)
                        )
                        if found is not None:
                            raise DuplicateMessage(found)
                    raise LiveTaskQuotaError(live_limit)
            packed = model_json.encode(task)  # before the claim: a task JSON refuses claims nothing
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
                size=len(packed),
            )
            moved = self._tasks.write(key, stored, packed, _document_bytes(task, packed), events)
            self._bill(moved, recorded)
            self._trim()
            if self._waiting:
                self._changed.notify_all()
            woken = self._watching.pop(key, ())
        for wake in woken:
            wake()
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
            packed = model_json.encode(task)
            recorded = self._claim(current.owner, message_key, task.id)
            new = replace(
                stored,
                task=task,
                version=stored.version + 1,
                last_seq=stored.last_seq + len(events),
                updated_at=utc_now(),
                lease=current.lease,
                pending=current.pending,
                size=len(packed),
            )
            moved = self._tasks.write(key, new, packed, _document_bytes(task, packed), events)
            self._bill(moved, recorded)
            self._trim()
            if self._waiting:
                self._changed.notify_all()
            woken = self._watching.pop(key, ())
        for wake in woken:
            wake()
        return new

    def _claim(self, owner: str, key: MessageKey | None, task_id: str) -> bool:
        """Record the message as sent to the task; whether that took a record of its own."""
        if key is None:
            return False
        ids.require(key.message_id, "message id")
        if key.recorded_by(owner, task_id):
            return False
        record = (owner, key.message_id, key.digest)
        previous = self._messages.pop(record, None)
        if previous is not None:
            if key.replaces is None:
                # Firestore's batch fails on the record: it reads the task, then the record.
                self._messages[record] = previous
                self.cost.add(reads=2)
                raise DuplicateMessage(previous)
            self._size.used -= _message_bytes(record, previous)
        self._messages[record] = task_id  # and at the end: the newest
        self._size.used += _message_bytes(record, task_id)
        return True

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        with self._lock:
            found = self._messages.get((owner, key.message_id, key.digest))
            if found is None:  # as Firestore: the record, then the task of the key's own id
                self.cost.add(reads=1)
                derived = key.task_id(owner)
                found = derived if (owner, derived) in self._tasks else None
        self.cost.add(reads=1)
        return found

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        with self._lock:
            record = self._tasks.record((owner, task_id))
            # As Firestore: the task's document, then, if it no longer holds them all, one
            # read per event document with news (a query finding none bills one).
            self.cost.add(reads=1 + (0 if record is None else record.documents_after(after_seq)))
            return [] if record is None else record.logged(task_id, after_seq)

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

    def push_news(
        self, since: datetime, before: datetime, limit: int, after: TaskNews | None = None
    ) -> list[TaskNews]:
        # Its notifier runs in the process that commits, which loses every task if it dies.
        return []

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        cursor = decode_token(query)
        with self._lock:
            # The index, not the tasks: only the page is decoded.
            records = self._tasks.owned(owner)
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
        # A task read lately is shared as it is kept (`_CompactTasks.hot`): concurrent pages
        # of big tasks hold one copy, not one a request.
        with self._lock:
            page = [
                self._tasks.hot((owner, task_id)) or r.unpack(owner, task_id)
                for task_id, r in matching_after[: query.page_size]
            ]
        token = ""
        if len(matching_after) > query.page_size:
            last = page[-1].task
            returned = (cursor.returned if cursor else 0) + len(page)
            token = encode_token(query, Cursor(last.status.timestamp, last.id, returned))
        self.cost.add(reads=max(1, len(page)) + 1)  # the page, and the count for totalSize
        return TaskPage(page, token, len(matching))

    def live_tasks(self, owner: str, limit: int) -> int:
        with self._lock:
            live = min(self._tasks.live(owner), limit)
        self.cost.add(reads=max(1, math.ceil(live / 1000)))  # as Firestore's count query
        return live

    def _trim(self) -> None:
        """Forget the least recently written tasks past retention, then, while the store is
        over its bound, the heaviest owner's (`_CompactTasks.victim`). Called with the lock
        held, after each write: the task just written is the most recent, never forgotten."""
        tasks = self._tasks
        expired = self._clock.now() - self._retention
        while len(tasks) > 1 and tasks.oldest().updated_at < expired:
            del tasks[tasks.oldest_key()]
        while len(tasks) > 1 and self._size.over():
            del tasks[tasks.victim()]
        # Message records: past those always kept, two per stored task, the oldest forgotten
        # first. A resend of a forgotten message, like one whose task is gone, is a new
        # message to the service.
        messages = self._messages
        while len(messages) > max(2 * len(self._tasks), self._messages_kept):
            record = next(iter(messages))
            self._size.used -= _message_bytes(record, messages.pop(record))


class MemoryTail:
    """Follows one task's log in a MemoryTaskStore, woken by the store's commits."""

    def __init__(self, store: MemoryTaskStore, owner: str, task_id: str, after_seq: int) -> None:
        self._store = store
        self._key = (owner, task_id)
        self._last = max(after_seq, 0)
        self._wake: Callable[[], None] | None = None  # what the task's next commit calls

    def _ahead(self) -> bool:
        record = self._store._tasks.record(self._key)
        return record is not None and record.last_seq > self._last

    def watch(self, wake: Callable[[], None]) -> float | None:
        store = self._store
        with store._lock:
            self._forget()
            ahead = self._ahead()
            if not ahead:
                self._wake = wake
                store._watching.setdefault(self._key, set()).add(wake)
        if ahead:
            wake()
        return None

    def _forget(self) -> None:
        """Drop the stream's wake, if the commit it waited for has not called it. Hold the
        store's lock."""
        wake, self._wake = self._wake, None
        watching = self._store._watching.get(self._key)
        if wake is not None and watching is not None:
            watching.discard(wake)
            if not watching:
                del self._store._watching[self._key]

    def next(self, timeout: float) -> list[LoggedEvent]:
        store = self._store
        with store._changed:
            self._forget()
            store._waiting += 1
            try:
                if not store._changed.wait_for(self._ahead, timeout=max(timeout, 0)):
                    return []
            finally:
                store._waiting -= 1
            record = store._tasks.record(self._key)
            assert record is not None  # _ahead found it, under the same lock
            found = record.logged(self._key[1], self._last)
        self._last = found[-1].seq
        return found

    def close(self) -> None:
        with self._store._lock:
            self._forget()


# -- the compact form --------------------------------------------------------------------------

# Tasks kept as objects too, most recently used first: a running turn's reads decode nothing.
_HOT_TASKS = 64
# Message records always kept (at most): a long conversation keeps recognising its resent
# messages, however many tasks the bound holds.
_MESSAGES_KEPT = 10_000
# A dict's share per entry at most: a full dict grows to the next power of two of slots past
# three times its entries, so just after, each entry has up to 4 slots of 24 bytes (two
# thirds of the slots are usable) and 6 indices of up to 4 bytes.
_DICT_ENTRY = 4 * 24 + 6 * 4
# Entries the owners' heap may hold past two an owner before it is rebuilt (`_Owners`).
_HEAP_SLACK = 64
_EVENT_KINDS: dict[type, bytes] = {Message: b"m", StatusUpdate: b"s", ArtifactUpdate: b"a"}
# An update's JSON starts with its task's id and context id (as its task's JSON does): kept
# without that start (a short task's JSON and log hold it four times, a sixth of their
# bytes), under a kind of its own.
_SHORTENED: dict[bytes, bytes] = {b"s": b"S", b"a": b"A"}
_FULL_KINDS = {kind[0] for kind in _EVENT_KINDS.values()}
_EVENT_MODELS: dict[int, Any] = {
    **{kind[0]: model for model, kind in _EVENT_KINDS.items()},
    **{_SHORTENED[kind][0]: model for model, kind in _EVENT_KINDS.items() if kind in _SHORTENED},
}
# A task's JSON kept without its start is kept from the comma that ends it: no JSON document
# starts with one.
_SHORT_TASK = b","
# Between a commit's events: compact JSON holds no newline byte (JSON escapes a newline in
# a string, and no UTF-8 sequence of another character holds the byte 0x0A).
_SEPARATOR = b"\n"


def _starts(task_id: str, context_id: str) -> tuple[bytes, bytes]:
    """How the model's JSON of a task of these ids starts, and of its updates. (Ids are
    written as they are: the stores refuse ids with characters JSON escapes, `shared.ids`.)"""
    ids = f'"{task_id}","context_id":"{context_id}",'.encode()
    return b'{"id":' + ids, b'{"task_id":' + ids


def _pack_commit(events: Sequence[Event], start: bytes) -> tuple[bytes, int]:
    """A commit's events as one bytes: each its kind and its JSON, one to a line, an update
    that starts with `start` without it; and the bytes Firestore would log them in
    (`cost.logged_bytes`). The model's JSON leaves out fields that are None; reading puts
    them back, so the events read back equal those stored."""
    packed = []
    logged = 0
    for event in events:
        kind = _EVENT_KINDS[type(event)]
        data = model_json.encode(event)
        logged += logged_bytes(event, len(data))
        if kind in _SHORTENED and data.startswith(start):
            packed.append(_SHORTENED[kind] + data[len(start) :])
        else:
            packed.append(kind + data)
    return _SEPARATOR.join(packed), logged


def _unpack_event(data: bytes, start: bytes) -> Event:
    """An event `_pack_commit` packed with `start`, read back."""
    kind = data[0]
    event: Event = model_json.decode(
        _EVENT_MODELS[kind], data[1:] if kind in _FULL_KINDS else start + data[1:]
    )
    return event


class _Size:
    """The bytes the store holds, against its bound."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0

    def over(self) -> bool:
        return self.used > self.limit


def _message_bytes(record: tuple[str, str, str], task_id: str) -> int:
    """What a message record holds: its key (the owner is the store's, shared), the task id
    (the task's own while it is kept, its record's alone after), its dict entry."""
    _, message_id, digest = record
    return (
        _KEY3_BYTES + sys.getsizeof(message_id) + sys.getsizeof(digest) + sys.getsizeof(task_id)
    ) + _DICT_ENTRY


_KEY2_BYTES = sys.getsizeof(("", ""))
_KEY3_BYTES = sys.getsizeof(("", "", ""))
# A short message id, a digest (sha-256 hex) and a uuid task id: what `_messages_kept` is
# reckoned in.
_MESSAGE_BYTES = _message_bytes(("", "m" * 36, "d" * 64), "t" * 36)


def _document_bytes(task: Task, packed: bytes) -> int:
    """The bytes of the task's JSON its Firestore document would hold: `packed`, or past
    TASK_IN_DOCUMENT_BYTES its status and metadata alone."""
    if len(packed) <= TASK_IN_DOCUMENT_BYTES:
        return len(packed)
    return len(model_json.encode(replace(task, history=(), artifacts=())))


class _Record:
    """One stored task: its JSON, its log (one bytes per commit with events, and the last seq
    of each), StoredTask's other fields (the owner is its key's), and what ListTasks filters
    and sorts on. Written again in place by each commit. The JSON that starts with the task's
    id and the context id it was created in (`first_context`) is kept without that start."""

    __slots__ = (
        "commits",
        "context_id",
        "created_at",
        "dialect",
        "ends",
        "first_context",
        "lease",
        "moved",
        "pending",
        "push_configs",
        "size",
        "state",
        "tail_bytes",
        "task",
        "timestamp",
        "updated_at",
        "version",
    )

    def __init__(self, created_at: datetime, context_id: str) -> None:
        self.commits: list[bytes] = []
        # Machine integers in the array's own buffer, which its getsizeof counts: no int
        # objects of their own to weigh, whatever the interpreter shares of small ones.
        self.ends = array("q")
        self.created_at = created_at
        self.first_context = context_id
        self.size = 0
        # Firestore's layout of the log, for its cost: the last seq of each event document
        # (None until the first), and the bytes of the events its task document holds (those
        # after the last event document).
        self.moved: array[int] | None = None
        self.tail_bytes = 0

    def write(
        self, stored: StoredTask, packed: bytes, document_bytes: int, events: Sequence[Event]
    ) -> int:
        """Hold `stored`, its task's JSON `packed`, and `events` as its log's next commit
        (packed first: an event that cannot be written changes nothing); the event documents
        Firestore would write for it, its task document holding `document_bytes` of the
        task's JSON (`cost.logs_in_task`; one for a commit over its 1 MB a document too)."""
        task = stored.task
        task_start, update_start = _starts(task.id, self.first_context)
        logged = 0
        if events:
            commit, logged = _pack_commit(events, update_start)
            self.commits.append(commit)
            self.ends.append(stored.last_seq)
        # As Firestore's commit: the task document's log grows while it fits; else the old
        # one moves out and this commit's events are the log, or, too big, move with it.
        before = stored.last_seq - len(events)
        old = before > (self.moved[-1] if self.moved else 0)
        moved = 0
        if logs_in_task(document_bytes, self.tail_bytes + logged):
            self.tail_bytes += logged
        elif old and logs_in_task(document_bytes, logged):
            self._move(before)
            self.tail_bytes, moved = logged, 1
        else:
            if events or old:
                self._move(stored.last_seq)
                moved = 1
            self.tail_bytes = 0
        status = task.status
        if packed.startswith(task_start):
            packed = packed[len(task_start) - 1 :]  # from the comma
        self.task = packed
        self.version = stored.version
        self.dialect = stored.dialect
        self.updated_at = stored.updated_at
        self.lease = stored.lease
        self.pending = stored.pending
        self.push_configs = stored.push_configs
        self.context_id: str = task.context_id
        self.state: TaskState = status.state
        self.timestamp: datetime = status.timestamp
        return moved

    def _move(self, last: int) -> None:
        """Firestore's task document's log, up to `last`, moved into an event document."""
        if self.moved is None:
            self.moved = array("q")
        self.moved.append(last)

    @property
    def last_seq(self) -> int:
        return self.ends[-1] if self.ends else 0

    def weigh(self, task_id: str) -> int:
        """The bytes this record holds in the process, with its key and dict entries (the
        store's, its owner's index's): each object's own size (`sys.getsizeof`), the strings
        it shares with others counted as its own, so the bound is never short. (The
        datetimes: created, updated, the status's.)"""
        getsizeof = sys.getsizeof
        size = (
            _RECORD_BYTES
            + getsizeof(self.task)
            + getsizeof(self.commits)
            + getsizeof(self.ends)
            + getsizeof(task_id)
            + getsizeof(self.context_id)
            + (0 if self.first_context is self.context_id else getsizeof(self.first_context))
            + getsizeof(self.tail_bytes)
            + (0 if self.moved is None else getsizeof(self.moved))
        )
        for commit in self.commits:
            size += getsizeof(commit)
        if self.lease is not None:
            lease = self.lease
            size += _LEASE_BYTES + getsizeof(lease.holder) + getsizeof(lease.message_id)
        if self.pending:
            size += getsizeof(self.pending) + sum(getsizeof(m) for m in self.pending)
        return size

    def documents_after(self, seq: int) -> int:
        """The reads of Firestore's event documents for the events after `seq`: none when its
        task document holds them all, else one per document with some (at least one)."""
        moved = self.moved
        if moved is None or seq >= moved[-1]:
            return 0
        return len(moved) - bisect_right(moved, seq)

    def logged(self, task_id: str, after_seq: int) -> list[LoggedEvent]:
        """The events after `after_seq` of the task `task_id` (this record's), read back."""
        first = bisect_right(self.ends, after_seq)
        seq = self.ends[first - 1] if first else 0
        found = []
        start = _starts(task_id, self.first_context)[1]
        for commit in self.commits[first:]:
            for data in commit.split(_SEPARATOR):
                seq += 1
                if seq > after_seq:
                    found.append(LoggedEvent(seq, _unpack_event(data, start)))
        return found

    def unpack(self, owner: str, task_id: str) -> StoredTask:
        packed = self.task
        if packed.startswith(_SHORT_TASK):
            packed = _starts(task_id, self.first_context)[0][:-1] + packed
        return StoredTask(
            model_json.decode(Task, packed),
            owner,
            self.version,
            self.last_seq,
            self.dialect,
            self.created_at,
            self.updated_at,
            self.lease,
            self.pending,
            self.push_configs,
            size=len(packed),
        )


def _fixed_bytes() -> int:
    """A record's own size, its key's, and its datetimes' (what `weigh` adds to the parts
    whose sizes vary), with its entry in the store's dict."""
    now = utc_now()
    record = sys.getsizeof(_Record(now, ""))
    return record + _KEY2_BYTES + 3 * sys.getsizeof(now) + 2 * _DICT_ENTRY


_RECORD_BYTES = _fixed_bytes()
# A lease's object and its dict of fields, and its expiry (its strings are counted apart).
_LEASE_BYTES = (
    sys.getsizeof(Lease(turn=1)) + sys.getsizeof(Lease(turn=1).__dict__) + sys.getsizeof(utc_now())
)


class _Owned:
    """One owner's tasks: their ids in the order of their last write, the terminal ones
    apart from the live ones, and the bytes their records hold."""

    __slots__ = ("bytes", "done", "live", "owner")

    def __init__(self, owner: str) -> None:
        self.owner = owner  # the one copy every key of the owner's tasks holds
        self.bytes = 0
        self.done: dict[str, None] = {}
        self.live: dict[str, None] = {}

    def oldest(self, keep: str) -> str | None:
        """The least recently written terminal task, else live one, but `keep`."""
        for ids_ in (self.done, self.live):
            for task_id in ids_:
                if task_id != keep:
                    return task_id
                break  # `keep` is the most recent: the next in this order is none
        return None


def _heap_entry_bytes() -> int:
    """A heap entry: its tuple, its negated byte count, its slot in the list."""
    return sys.getsizeof((0, "")) + sys.getsizeof(-(2**40)) + 8


# What an owner's index holds besides its tasks' entries (counted in `_Record.weigh`): its
# `_Owned` and two dicts, its entry in the owners' dict, two entries in their heap, its name.
_OWNER_BYTES = (
    sys.getsizeof(_Owned("")) + 2 * sys.getsizeof({}) + _DICT_ENTRY + 2 * _heap_entry_bytes()
)


class _CompactTasks:
    """(owner, task id) -> StoredTask and its log, kept as `_Record`s in the order of their
    last write (the least recently written first), with the most recently used tasks also as
    objects, and each owner's index (`_Owned`) with a heap of the owners by their bytes, the
    heaviest first: an entry is pushed at each change of an owner's bytes, and one that no
    longer says its owner's bytes is dropped when it comes to the top (or when the heap,
    past two entries an owner and `_HEAP_SLACK`, is rebuilt), so a write costs O(log n)."""

    def __init__(self, size: _Size) -> None:
        self._size = size
        self._records: dict[tuple[str, str], _Record] = {}
        self._hot: dict[tuple[str, str], StoredTask] = {}
        self._owners: dict[str, _Owned] = {}
        self._heaviest: list[tuple[int, str]] = []  # (-bytes, owner)

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
        stored = record.unpack(*key)
        self._keep_hot(key, stored)
        return stored

    def hot(self, key: tuple[str, str]) -> StoredTask | None:
        """The task of `key` if it is kept unpacked (read or written lately), else None."""
        return self._hot.get(key)

    def record(self, key: tuple[str, str]) -> _Record | None:
        return self._records.get(key)

    def write(
        self,
        key: tuple[str, str],
        stored: StoredTask,
        packed: bytes,
        document_bytes: int,
        events: Sequence[Event],
    ) -> int:
        """Store `stored` (its task's JSON `packed`), its log's next commit `events` (a new
        task: its first), as the most recently written; the event documents Firestore would
        write for it (`_Record.write`)."""
        record = self._records.get(key)
        if record is None:
            record = _Record(stored.created_at, stored.task.context_id)
            moved = record.write(stored, packed, document_bytes, events)
            owned = self._owner(key[0])
            key = (owned.owner, key[1])
        else:
            live = not record.state.terminal
            # Raises before it changes anything.
            moved = record.write(stored, packed, document_bytes, events)
            del self._records[key]  # and back in at the end: the most recently written
            self._unput(key, record, live)
        self._put(key, record)
        self._keep_hot(key, stored)
        return moved

    def mark(self, key: tuple[str, str], stored: StoredTask) -> None:
        """`stored`, the task of `key` with only its push-config mark changed."""
        record = self._records.pop(key)
        self._unput(key, record, not record.state.terminal)
        record.push_configs = stored.push_configs
        self._put(key, record)
        self._keep_hot(key, stored)

    def _owner(self, owner: str) -> _Owned:
        owned = self._owners.get(owner)
        if owned is None:
            owned = self._owners[owner] = _Owned(owner)
            self._size.used += _OWNER_BYTES + sys.getsizeof(owner)
        return owned

    def _put(self, key: tuple[str, str], record: _Record) -> None:
        record.size = record.weigh(key[1])
        self._size.used += record.size
        self._records[key] = record
        owned = self._owners[key[0]]
        (owned.done if record.state.terminal else owned.live)[key[1]] = None
        owned.bytes += record.size
        self._weighed(owned)

    def _unput(self, key: tuple[str, str], record: _Record, live: bool) -> _Owned:
        """Take `record` (`live` when it was put) out of the counts and its owner's index
        (the caller then says the owner's new bytes to the heap)."""
        self._size.used -= record.size
        owned = self._owners[key[0]]
        del (owned.live if live else owned.done)[key[1]]
        owned.bytes -= record.size
        return owned

    def _weighed(self, owned: _Owned) -> None:
        """Tell the heap the owner's bytes now."""
        heap = self._heaviest
        if len(heap) > 2 * len(self._owners) + _HEAP_SLACK:
            heap[:] = [(-o.bytes, name) for name, o in self._owners.items()]
            heapq.heapify(heap)
        else:
            heapq.heappush(heap, (-owned.bytes, owned.owner))

    def __delitem__(self, key: tuple[str, str]) -> None:
        record = self._records.pop(key)
        owned = self._unput(key, record, not record.state.terminal)
        self._hot.pop(key, None)
        if owned.done or owned.live:
            self._weighed(owned)
        else:
            del self._owners[key[0]]
            self._size.used -= _OWNER_BYTES + sys.getsizeof(owned.owner)

    def _keep_hot(self, key: tuple[str, str], stored: StoredTask) -> None:
        self._hot.pop(key, None)
        self._hot[key] = stored
        if len(self._hot) > _HOT_TASKS:
            del self._hot[next(iter(self._hot))]

    def records(self) -> Iterable[tuple[tuple[str, str], _Record]]:
        return list(self._records.items())

    def owned(self, owner: str) -> list[tuple[str, _Record]]:
        """The owner's tasks' ids and records."""
        owned = self._owners.get(owner)
        if owned is None:
            return []
        records = self._records
        return [(t, records[owner, t]) for ids_ in (owned.live, owned.done) for t in ids_]

    def live(self, owner: str) -> int:
        """How many of the owner's tasks are not terminal."""
        owned = self._owners.get(owner)
        return 0 if owned is None else len(owned.live)

    def victim(self) -> tuple[str, str]:
        """The task to forget for room: the heaviest owner's least recently written terminal
        one (none: its live one), never the task written last (the global oldest instead,
        when that one is the heaviest owner's only task)."""
        heap, owners = self._heaviest, self._owners
        newest = next(reversed(self._records))
        while heap:
            negated, name = heap[0]
            owned = owners.get(name)
            if owned is None or owned.bytes != -negated:
                heapq.heappop(heap)  # stale: its owner's bytes changed since
                continue
            task_id = owned.oldest(keep=newest[1] if newest[0] == name else "")
            if task_id is not None:
                return (name, task_id)
            break
        return self.oldest_key()

    def oldest_key(self) -> tuple[str, str]:
        return next(iter(self._records))

    def oldest(self) -> _Record:
        return self._records[self.oldest_key()]
