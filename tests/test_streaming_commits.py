"""A streamed send's commits (shared.runtime.Turn.listen, shared.streaming.inline): each event
goes out as the handler makes it, under the sequence number its commit gives it, while the
turn commits in windows that grow (an answer streamed token by token costs a few writes, not
one a token); only the end waits for its commit; and the writes of an LLM's answer stay
within budget on both backends.

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
from shared.model import ArtifactUpdate, Event, StatusUpdate, Task, TaskState
from shared.pause import wait_out
from shared.ports import StoredTask
from shared.requests import CancelRequest
from shared.service import A2AService
from shared.service.base import Ports, ServiceSettings
from shared.store.firestore import FirestoreTaskStore
from shared.store.memory import MemoryTaskStore
from shared.stream_slots import StreamSlots
from shared.streaming import Frame, StreamPolicy
from shared.turn_queue import TurnQueue
from tests.clock import ManualClock
from tests.conftest import wait_until
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


def make_service(
    store: MemoryTaskStore | FirestoreTaskStore, clock: ManualClock, handle: object
) -> A2AService:
    turns = TurnQueue(store, NoQueue(), lease_seconds=30, queue_span=60)
    return A2AService(
        Ports(store, module(handle), turns, clock=clock),
        ServiceSettings(stream_commit_interval=WINDOW),
    )


def streamed(
    store: MemoryTaskStore | FirestoreTaskStore,
    clock: ManualClock,
    handle: object,
    service: A2AService | None = None,
) -> Iterator[Frame | None]:
    service = service or make_service(store, clock, handle)
    policy = StreamPolicy(keepalive=15, duration=30, idle=15, slots=StreamSlots(4))
    return waited(service.sending.stream(OWNER, request("go"), dialect="1.0", policy=policy))


class Paced:
    """A handler's pace in manual time: each step moves the clock, and when one of its turn's
    windows closes (the first WINDOW long, each later one twice the one before up to the
    commit interval: shared.runtime.Turn._act) it waits for that window's commit before going
    on, so the commits are the windows' whatever this machine's speed. Counts the commits."""

    def __init__(self, store: MemoryTaskStore | FirestoreTaskStore, clock: ManualClock) -> None:
        self.clock = clock
        self.go = threading.Event()  # the handler starts (the test has reset the counts)
        self.commits = 0
        self.windows = 0  # closed so far
        self._landed = threading.Semaphore(0)
        self._now, self._last, self._window = 0.0, 0.0, WINDOW
        commit = store.commit

        def counted(*args: Any, **kwargs: Any) -> StoredTask:
            stored = commit(*args, **kwargs)
            self.commits += 1
            self._landed.release()
            return stored

        store.commit = counted  # type: ignore[method-assign]

    def step(self, seconds: float) -> None:
        """Move `seconds` on; a window that closed meanwhile is committed first."""
        self.clock.advance(seconds)
        self._now += seconds
        if self._now >= self._last + self._window:
            assert self._landed.acquire(timeout=10), "the window's commit never came"
            self.windows += 1
            self._last = self._now
            self._window = min(self._window * 2, ServiceSettings().commit_interval)


# Steps that never land on a window's edge (0.05 s x 2^k): 201m != 500 x 2^k, 1501m neither,
# so float rounding cannot move a commit from one step to the next.
@pytest.mark.parametrize(("chunks", "step"), [(500, 0.0201), (60, 0.1501)])
def test_an_llm_answer_streams_every_chunk_within_25_writes(
    store: MemoryTaskStore | FirestoreTaskStore, chunks: int, step: float
) -> None:
    """Issue 35's two answers, 500 chunks over 10 s and 60 over 9 s appended to one artifact:
    each chunk its own frame, the whole text stored, a commit a window (growing to 1 s) and
    the end, in at most 25 writes."""
    clock = ManualClock()
    paced = Paced(store, clock)

    def handle(ctx: Context) -> None:
        paced.go.wait(10)
        answer = ctx.artifact(text="t0 ", name="answer")
        for index in range(1, chunks):
            paced.step(step)
            ctx.artifact(text=f"t{index} ", artifact_id=answer, append=True)

    frames = streamed(store, clock, handle)
    opening = next(frames)
    assert opening is not None
    store.cost.reset()  # from the claim on: the claim is the send's first commit in any case
    paced.go.set()
    sent = [frame for frame in frames if frame is not None]
    appended = [f for f in sent if isinstance(f.item, ArtifactUpdate)]
    assert len(appended) == chunks and sent[-1].task.status.state is TaskState.COMPLETED
    # Each frame's number is its event's in the log: a resume anywhere is exact.
    logged = store.events(OWNER, opening.task.id, opening.seq)
    assert [(e.seq, e.event) for e in logged] == [(f.seq, f.item) for f in sent]
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None
    text = "".join(part.text or "" for part in stored.task.artifacts[0].parts)
    assert text == "".join(f"t{index} " for index in range(chunks))
    assert paced.commits == paced.windows + 1  # a commit a window, and the end
    assert paced.windows <= 14  # 50+100+200+400+800 ms, then 1 s each
    # One write a commit (the task's document, its latest events in it): at most 25 in all,
    # where a commit a chunk of two writes each was 1,000 (and 50 ms windows 400).
    assert store.cost.writes == paced.commits <= 25


def test_events_go_out_before_their_window_closes_and_the_end_after_its_commit(
    store: MemoryTaskStore | FirestoreTaskStore,
) -> None:
    """Events the handler made are sent at once, ahead of their commit; they are committed
    when their window closes, without the handler; the end is sent once committed."""
    clock = ManualClock()
    go = threading.Event()

    def handle(ctx: Context) -> None:
        for step in range(3):
            ctx.progress(f"step {step}")
        go.wait(10)

    frames = streamed(store, clock, handle)
    opening = next(frames)
    assert opening is not None
    burst = [next(frames) for _ in range(3)]  # time stands: no window has closed
    assert [f.seq for f in burst if f is not None] == [opening.seq + n for n in (1, 2, 3)]
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None and stored.last_seq == opening.seq  # not yet committed
    clock.advance(WINDOW)

    def committed() -> bool:
        stored = store.get(OWNER, opening.task.id)
        return stored is not None and stored.last_seq == opening.seq + 3

    wait_until(committed, 10, lambda: "the window's events were never committed")
    go.set()
    end = next(frames)
    assert end is not None and end.task.status.state is TaskState.COMPLETED
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None and stored.last_seq == end.seq  # in the log before it was sent
    assert list(frames) == []


def texts(frames: Sequence[Frame | None]) -> list[str]:
    """What each status frame said, or the state it ended in."""
    out = []
    for frame in frames:
        assert frame is not None and isinstance(frame.item, StatusUpdate)
        message = frame.item.status.message
        out.append(message.parts[0].text or "" if message else frame.item.status.state.value)
    return out


def test_a_message_sent_meanwhile_neither_repeats_nor_drops_a_frame() -> None:
    """A message sent to the task while its stream runs ahead of the log takes the log's next
    number: the events sent before it are committed under later ones, and not sent again."""
    store, clock = MemoryTaskStore(), ManualClock()
    said, go = threading.Event(), threading.Event()

    def handle(ctx: Context) -> None:
        ctx.progress("a")
        said.set()
        go.wait(10)
        ctx.progress("b")
        ctx.fail("stopped")  # a failed task never runs the message that waits on it

    service = make_service(store, clock, handle)
    frames = streamed(store, clock, handle, service)
    opening = next(frames)
    assert opening is not None
    first = next(frames)
    assert said.wait(10)
    more = request("more", message_id="m2", task_id=opening.task.id)
    wait_out(service.sending.send(OWNER, more, dialect="1.0", message_results=False))
    go.set()
    rest = list(frames)
    assert texts([first, *rest]) == ["a", "b", "stopped"]
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None and rest[-1] is not None and rest[-1].seq == stored.last_seq


def test_a_cancel_of_a_stream_ahead_of_its_log_sends_the_cancel() -> None:
    """Canceled before its window closed, the turn's told events never reach the log; the
    stream still ends with the cancel, under the number the log gave it."""
    store, clock = MemoryTaskStore(), ManualClock()
    said, done = threading.Event(), threading.Event()

    def handle(ctx: Context) -> None:
        ctx.progress("a")
        ctx.progress("b")
        said.set()
        done.wait(10)
        assert ctx.canceled

    service = make_service(store, clock, handle)
    frames = streamed(store, clock, handle, service)
    opening = next(frames)
    assert opening is not None
    told = [next(frames), next(frames)]
    assert said.wait(10)
    service.tasks.cancel(OWNER, CancelRequest(task_id=opening.task.id))
    done.set()
    rest = list(frames)
    assert texts([*told, *rest]) == ["a", "b", "canceled"]
    stored = store.get(OWNER, opening.task.id)
    assert stored is not None and stored.last_seq == opening.seq + 1
    assert rest[-1] is not None and rest[-1].seq == stored.last_seq


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
