"""The base of a TaskStore decorator: every call forwarded to the store it wraps, with two
hooks, so that a decorator writes only what it adds and never restates the seam
(shared.observability.store's spans, shared.store.notifying's commit callback).

- `around(call, **facts)`: the context each call but `tail` runs in, named by the call and
  what it carries (`events`, `version`, `after_seq`); a tail lives as long as its stream, so
  its reads are the stream's, not one call's.
- `committed(stored, events)`: after a `create` or `commit` succeeded, outside `around` and
  the inner store's locks; not after one that raised (the store is then unchanged).

It changes nothing of what the store does: what a call raises, it raises on.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from datetime import datetime

from shared.model import Event, Task
from shared.ports import (
    EventTail,
    Lease,
    LoggedEvent,
    MessageKey,
    StoredTask,
    TaskNews,
    TaskPage,
    TaskQuery,
    TaskStore,
)

_NOTHING: AbstractContextManager[None] = contextlib.nullcontext()


class ForwardingTaskStore:
    """A TaskStore that does what `inner` does; a decorator overrides the hooks it needs."""

    def __init__(self, inner: TaskStore) -> None:
        self.inner = inner

    def around(self, call: str, **facts: int) -> AbstractContextManager[object]:
        """What `call` runs inside: nothing, unless a decorator says otherwise."""
        return _NOTHING

    def committed(self, stored: StoredTask, events: Sequence[Event]) -> None:
        """Told of each write that succeeded: nothing to do, unless a decorator says otherwise."""

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        with self.around("get"):
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
        live_limit: int | None = None,
    ) -> StoredTask:
        with self.around("create", events=len(events)):
            stored = self.inner.create(
                owner,
                task,
                events,
                dialect=dialect,
                message_key=message_key,
                lease=lease,
                live_limit=live_limit,
            )
        self.committed(stored, events)
        return stored

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        with self.around("commit", events=len(events), version=current.version):
            stored = self.inner.commit(current, task, events, message_key=message_key)
        self.committed(stored, events)
        return stored

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        with self.around("find_message"):
            return self.inner.find_message(owner, key)

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        with self.around("events", after_seq=after_seq):
            return self.inner.events(owner, task_id, after_seq)

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        with self.around("expired_leases"):
            return self.inner.expired_leases(before, limit, after)

    def push_news(
        self, since: datetime, before: datetime, limit: int, after: TaskNews | None = None
    ) -> list[TaskNews]:
        with self.around("push_news"):
            return self.inner.push_news(since, before, limit, after)

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        with self.around("list"):
            return self.inner.list(owner, query)

    def live_tasks(self, owner: str, limit: int) -> int:
        with self.around("live_tasks"):
            return self.inner.live_tasks(owner, limit)

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> EventTail:
        return self.inner.tail(owner, task_id, after_seq)
