"""A streamed send's commits (shared.runtime.Turn.listen, shared.streaming.inline): its events
are committed together in short windows, each frame goes out only once its event is in the
log, and the writes of a 100-event streamed task stay within budget on both backends.

Time is a ManualClock that the handler moves itself, so the count of commits does not depend
on how fast this machine runs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from emulator.firestore import FirestoreEmulator
from shared.agent import Context
from shared.limits import model_bytes
from shared.model import Event, Task, TaskState
from shared.ports import StoredTask
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings
from shared.store.firestore import FirestoreTaskStore
from shared.store.memory import MemoryTaskStore
from shared.streaming import Frame, StreamPolicy, StreamSlots
from shared.worker import TurnQueue
from tests.clock import ManualClock
from tests.pauses import waited
from tests.test_runtime import NoQueue, module, request

OWNER = "o"
WINDOW = 0.05  # the stream's commit interval under test
EVENTS = 100  # status and artifact events after the claim: 98 steps, the artifact, the end
STEP = 0.01  # manual seconds between two of the handler's events


@pytest.fixture(params=["memory", "firestore"])
def store(request: pytest.FixtureRequest) -> Iterator[MemoryTaskStore | FirestoreTaskStore]:
    if request.param == "memory":
        yield MemoryTaskStore()
    else:
        emulator: FirestoreEmulator = request.getfixturevalue("clean_firestore")
        yield FirestoreTaskStore(emulator.project)


def streamed(
    store: MemoryTaskStore | FirestoreTaskStore, clock: ManualClock, handle: object
) -> Iterator[Frame | None]:
    turns = TurnQueue(store, NoQueue(), lease_seconds=30, queue_span=60)
    service = A2AService(
        Ports(store, module(handle), turns, clock=clock),
        ServiceSettings(stream_commit_interval=WINDOW),
    )
    policy = StreamPolicy(keepalive=15, duration=30, idle=15, slots=StreamSlots(4))
    return waited(service.sending.stream(OWNER, request("go"), dialect="1.0", policy=policy))


def test_a_100_event_stream_commits_in_windows_within_budget(
    store: MemoryTaskStore | FirestoreTaskStore,
) -> None:
    clock = ManualClock()

    def handle(ctx: Context) -> None:
        for step in range(EVENTS - 2):
            clock.advance(STEP)
            ctx.progress(f"step {step}")
        clock.advance(STEP)
        ctx.artifact(text="done")

    frames = streamed(store, clock, handle)
    opening = next(frames)
    assert opening is not None and isinstance(opening.item, Task)
    store.cost.reset()  # from the claim on: the claim is the send's first commit in any case
    seqs, last = [], opening
    for frame in frames:
        assert frame is not None  # no keep-alive: an event every 10 ms (of manual time)
        # What the client sees is in the log already: a resume anywhere is exact.
        committed = store.get(OWNER, opening.item.id)
        assert committed is not None and frame.seq <= committed.last_seq
        seqs.append(frame.seq)
        last = frame
    assert seqs == list(range(opening.seq + 1, opening.seq + 1 + EVENTS))
    assert last.task.status.state is TaskState.COMPLETED
    # One commit per window of the handler's 1 s, and the end: each is one document write
    # (the task, its latest events in it). Per event, it was 2 x 100.
    windows = round(EVENTS * STEP / WINDOW)
    assert store.cost.writes <= windows + 1


def test_a_window_closes_without_the_handler(
    store: MemoryTaskStore | FirestoreTaskStore,
) -> None:
    """Events the handler made just before going quiet are committed, and sent, when their
    window closes: the handler is not needed to push them out."""
    clock = ManualClock()
    emitted, go = threading.Event(), threading.Event()

    def handle(ctx: Context) -> None:
        for step in range(3):
            ctx.progress(f"step {step}")
        emitted.set()
        go.wait(10)

    frames = streamed(store, clock, handle)
    opening = next(frames)
    assert opening is not None
    assert emitted.wait(10)
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None and stored.last_seq == opening.seq  # time stands: not yet
    clock.advance(WINDOW)
    burst = [next(frames) for _ in range(3)]
    assert [f.seq for f in burst if f is not None] == [opening.seq + n for n in (1, 2, 3)]
    go.set()
    rest = list(frames)
    assert rest[-1] is not None and rest[-1].task.status.state is TaskState.COMPLETED


class SizedStore(MemoryTaskStore):
    """The embedded store, recording the JSON bytes of each commit's events."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[int] = []

    def commit(
        self, current: StoredTask, task: Task, events: Sequence[Event], **kw: Any
    ) -> StoredTask:
        self.commits.append(sum(model_bytes(e) for e in events))
        return super().commit(current, task, events, **kw)


def test_a_burst_of_large_events_is_committed_before_it_outgrows_a_commit() -> None:
    """A commit carries at most a few MB (Firestore: 4 MB with the task): events of ~600 KB
    made within one window go out in commits of about 1 MB, not all together."""
    store, clock = SizedStore(), ManualClock()
    chunk = "x" * 600_000

    def handle(ctx: Context) -> None:
        artifact = ctx.artifact(text=chunk)
        for _ in range(4):
            ctx.artifact(text=chunk, artifact_id=artifact, append=True)

    frames = list(streamed(store, clock, handle))  # time stands: one window throughout
    assert frames[-1] is not None and frames[-1].task.status.state is TaskState.COMPLETED
    assert len(store.commits) >= 3
    assert max(store.commits) < 2 * 1_000_000
