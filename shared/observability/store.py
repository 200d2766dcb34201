"""A TaskStore that traces each call (a span per read, commit, query), wired by shared.app
only while tracing is on: off, the store is not wrapped at all.

It changes nothing of what the store does (shared.forwarding forwards every call); a call
that raises (a lost race: VersionConflict) records the exception on its span and raises it on.
A tail is not traced: its reads are its stream's, not one call's.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

from shared.forwarding import ForwardingTaskStore
from shared.observability.tracing import enabled, span
from shared.ports import TaskStore


def traced(store: TaskStore) -> TaskStore:
    """`store`, its calls traced when tracing is on."""
    return TracedTaskStore(store) if enabled() else store


class TracedTaskStore(ForwardingTaskStore):
    def around(self, call: str, **facts: int) -> AbstractContextManager[object]:
        """A span `store <call>`, with what the call carries as its attributes."""
        return span(f"store {call}", **facts)
