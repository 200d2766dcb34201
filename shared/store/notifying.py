"""A TaskStore that tells a callback of each commit that logged events: the hook push
notifications hang on (shared.push_notify.PushNotifier), wired in shared.app.

It wraps any TaskStore and changes nothing of what the store does (shared.forwarding
forwards every call): after a `create` or `commit` succeeded with events, it calls the
callback with the stored task and those events, outside the inner store's locks. A callback
that raises is logged and never fails the commit: the events are stored either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shared.forwarding import ForwardingTaskStore
from shared.model import Event
from shared.ports import StoredTask, TaskStore

log = logging.getLogger("a2a.store")

OnCommit = Callable[[StoredTask, Sequence[Event]], None]


class NotifyingTaskStore(ForwardingTaskStore):
    def __init__(self, inner: TaskStore, on_commit: OnCommit) -> None:
        super().__init__(inner)
        self.on_commit = on_commit

    def committed(self, stored: StoredTask, events: Sequence[Event]) -> None:
        if not events:
            return
        try:
            self.on_commit(stored, events)
        except Exception:
            log.exception("a commit callback failed for task %s", stored.task.id)
