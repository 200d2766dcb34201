"""Counting a store's document reads and writes, in Firestore's billing units.

Both stores count, the Firestore store what it really reads and writes, the embedded one
what Firestore would for the same calls, so one budget test holds both and `make bench`
prints both; `logs_in_task` is the one rule both follow for a create that writes one
document rather than two.
"""

from __future__ import annotations

import threading

from shared.model import TaskState
from shared.ports import Lease

# A task created ended (terminal, with no turn to run: a short blocking send's) keeps the log
# of its one commit in its own document when the task's JSON and its events' together are at
# most this many bytes (far under Firestore's 1 MiB a document): one write, where a task with
# an event document is two.
LOG_IN_TASK_BYTES = 256_000


def logs_in_task(state: TaskState, lease: Lease | None, json_bytes: int) -> bool:
    """Whether a task created in `state` with `lease`, its JSON and its events' `json_bytes`,
    holds its own log."""
    return lease is None and state.terminal and json_bytes <= LOG_IN_TASK_BYTES


class Cost:
    """Firestore documents read and written by one store, as Firestore bills them.

    A document get is one read (found or not), a query one read per document returned and at
    least one, a count aggregation one read per 1000 entries and at least one; a committed
    batch one write per document. Failed batches are not billed.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reads = 0
        self.writes = 0

    def reset(self) -> None:
        with self._lock:
            self.reads = 0
            self.writes = 0

    def add(self, *, reads: int = 0, writes: int = 0) -> None:
        with self._lock:
            self.reads += reads
            self.writes += writes
