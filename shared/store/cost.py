"""Counting a store's document reads and writes, in Firestore's billing units.

Both stores count, the Firestore store what it really reads and writes, the embedded one
what Firestore would for the same calls, so one budget test holds both and `make bench`
prints both.
"""

from __future__ import annotations

import threading


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
