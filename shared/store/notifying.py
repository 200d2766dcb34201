"""A TaskStore that tells a callback of each commit that logged events: the hook push
notifications hang on (shared.push_notify.PushNotifier), wired in shared.app.

It wraps any TaskStore and changes nothing of what the store does: after a `create` or
`commit` succeeded with events, it calls the callback with the stored task and those events,
outside the inner store's locks. A callback that raises is logged and never fails the commit:
the events are stored either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime

from shared.model import Event, Task
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

log = logging.getLogger("a2a.store")

OnCommit = Callable[[StoredTask, Sequence[Event]], None]


class NotifyingTaskStore:
    def __init__(self, inner: TaskStore, on_commit: OnCommit) -> None:
        self.inner = inner
        self.on_commit = on_commit

    def _notify(self, stored: StoredTask, events: Sequence[Event]) -> None:
        if not events:
            return
        try:
            self.on_commit(stored, events)
        except Exception:
            log.exception("a commit callback failed for task %s", stored.task.id)

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
        stored = self.inner.create(
            owner, task, events, dialect=dialect, message_key=message_key, lease=lease
        )
        self._notify(stored, events)
        return stored

    def commit(
        self,
        current: StoredTask,
        task: Task,
        events: Sequence[Event],
        *,
        message_key: MessageKey | None = None,
    ) -> StoredTask:
        stored = self.inner.commit(current, task, events, message_key=message_key)
        self._notify(stored, events)
        return stored

    def get(self, owner: str, task_id: str) -> StoredTask | None:
        return self.inner.get(owner, task_id)

    def find_message(self, owner: str, key: MessageKey) -> str | None:
        return self.inner.find_message(owner, key)

    def events(self, owner: str, task_id: str, after_seq: int = 0) -> list[LoggedEvent]:
        return self.inner.events(owner, task_id, after_seq)

    def expired_leases(
        self, before: datetime, limit: int, after: StoredTask | None = None
    ) -> list[StoredTask]:
        return self.inner.expired_leases(before, limit, after)

    def list(self, owner: str, query: TaskQuery) -> TaskPage:
        return self.inner.list(owner, query)

    def tail(self, owner: str, task_id: str, after_seq: int = 0) -> EventTail:
        return self.inner.tail(owner, task_id, after_seq)
