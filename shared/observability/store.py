"""A TaskStore that traces each call (a span per read, commit, query), wired by shared.app
only while tracing is on: off, the store is not wrapped at all.

It changes nothing of what the store does; a call that raises (a lost race: VersionConflict)
records the exception on its span and raises it on.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from shared.model import Event, Task
from shared.observability.tracing import enabled, span
from shared.ports import (
    EventTail,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskPage,
    TaskQuery,
    TaskStore,
)


def traced(store: TaskStore) -> TaskStore:
    """`store`, its calls traced when tracing is on."""
    return TracedTaskStore(store) if enabled() else store


class TracedTaskStore:
    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        with span("store get"):
            return self.inner.get(owner, task_id)

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
        with span("store create", events=len(events)):
            return self.inner.create(
                owner, task, events, dialect=dialect, message_key=message_key, lease=lease
            )

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        with span("store commit", events=len(events), version=current.version):
            return self.inner.commit(current, task, events, message_key=message_key)

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        with span("store find_message"):
            return self.inner.find_message(owner, key)

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        with span("store events", after_seq=after_seq):
            return self.inner.events(owner, task_id, after_seq)

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        with span("store expired_leases"):
            return self.inner.expired_leases(before, limit, after)

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        with span("store list"):
            return self.inner.list(owner, query)

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> EventTail:
        # A tail lives as long as its stream: its reads are the stream's, not one call's.
        return self.inner.tail(owner, task_id, after_seq)
