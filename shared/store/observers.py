"""Who hears of a store's commits: the hook push notifications hang on.

Both stores call `notify` after every commit that logged events, outside their locks. An
observer that fails is logged and never fails the commit: the events are stored either way.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from shared.model import Event
from shared.ports import StoredTask

log = logging.getLogger("a2a.store")

Observer = Callable[[StoredTask, Sequence[Event]], None]


class CommitObservers:
    def __init__(self) -> None:
        self._observers: list[Observer] = []

    def observe(self, observer: Observer) -> None:
        """Call `observer(stored, events)` after each commit that logged events."""
        self._observers.append(observer)

    def notify(self, stored: StoredTask, events: Sequence[Event]) -> None:
        if not events:
            return
        for observer in self._observers:
            try:
                observer(stored, events)
            except Exception:
                log.exception("a commit observer failed for task %s", stored.task.id)
