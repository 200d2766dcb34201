"""Events a handler running in the test's process sets for the test, or the test for it, by a
key the two share (a task id, a token in the message) and a name ("started", "go")."""

from __future__ import annotations

import threading

_flags: dict[tuple[str, str], threading.Event] = {}
_lock = threading.Lock()


def flag(key: str, name: str) -> threading.Event:
    """The one event of `key` and `name`, made at the first ask from either side."""
    with _lock:
        return _flags.setdefault((key, name), threading.Event())
