"""Counting a store's document reads and writes, in Firestore's billing units, and the one
rule both stores follow for where a task's log is kept.

Both stores count, the Firestore store what it really reads and writes, the embedded one
what Firestore would for the same calls, so one budget test holds both and `make bench`
prints both. `logs_in_task` is the rule that decides what a create or commit writes: the
task's document alone (one write), or with event documents (two writes or more).
"""

from __future__ import annotations

import threading

from shared.model import ArtifactUpdate, Event, Message, StatusUpdate

# A task's document keeps the events of its latest commits (its log's tail) beside the task's
# JSON while the two together are at most this many bytes: a create or a commit is then one
# write, the task's document. The commit that would take them past it moves the tail into an
# event document in its batch (a second write) and keeps its own events there, or, those too
# big beside the task, moves them too. A task's JSON over it leaves no room: each of its
# commits with events writes an event document. Far under Firestore's 1 MiB a document, so a
# commit sends back at most this of older events, and a listener of the task is handed at
# most this of them with each commit. (An answer's text is in both, the task's artifact and
# its chunks' events: the nearer its text comes to this, the more often its log moves, and
# past it each commit of it writes an event document.)
LOG_IN_TASK_BYTES = 256_000

# A task's document keeps the task's JSON whole up to this many bytes; past it, only its
# status and metadata (the rest is rebuilt from its log on read: Firestore's `inLog`).
TASK_IN_DOCUMENT_BYTES = 800_000


# How a log names the kind of each event it keeps (Firestore: `{"kind":...,"event":...}`).
KIND_OF: dict[type[Event], str] = {
    Message: "message",
    StatusUpdate: "status",
    ArtifactUpdate: "artifact",
}


def logged_bytes(event: Event, json_bytes: int) -> int:
    """The bytes Firestore keeps `event` in, its JSON `json_bytes` long: that JSON within
    `{"kind":"<kind>","event":...}` (what `logs_in_task` counts, on both stores)."""
    return json_bytes + len(KIND_OF[type(event)]) + 20


def logs_in_task(task_bytes: int, log_bytes: int) -> bool:
    """Whether a task's document holding `task_bytes` of the task's JSON (whole, or its
    outline past TASK_IN_DOCUMENT_BYTES) keeps `log_bytes` of its events' JSON beside it."""
    return task_bytes + log_bytes <= LOG_IN_TASK_BYTES


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
