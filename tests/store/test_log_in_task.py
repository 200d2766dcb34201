"""A running task's latest events live in its own document (issue 35: a commit is one write).

On both stores (the embedded one counting what Firestore would): each commit of a running
task writes its document alone, until its events beside the task's JSON would pass
`cost.LOG_IN_TASK_BYTES`; that commit moves them into an event document (a second write).
Whatever the layout, every reader sees each event once, in order, with its sequence number:
`events` from any point, a tail opened before, during or after the commits (on Firestore
through its listener, or polling), and a task rebuilt from its log (`inLog`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from shared import lifecycle, model_json
from shared.model import Artifact, ArtifactUpdate, Event, Part, Task, TaskState
from shared.ports import Lease, StoredTask, TaskStore
from shared.store.cost import LOG_IN_TASK_BYTES, TASK_IN_DOCUMENT_BYTES, logged_bytes
from shared.store.firestore import FirestoreTaskStore
from shared.store.memory import MemoryTaskStore
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, T0, new_task, status
from tests.store.test_tail import drain, step

Store = MemoryTaskStore | FirestoreTaskStore

# A long run: 48 commits of 10 events of ~1.2 KB, ~560 KB of events in all, so the task's
# document moves its log out twice at least.
COMMITS = 48
PER_COMMIT = 10
CHUNK = 1000


@pytest.fixture(params=["memory", "firestore"])
def costed(request: pytest.FixtureRequest) -> Store:
    if request.param == "memory":
        return MemoryTaskStore()
    make: MakeStore = request.getfixturevalue("make_firestore_store")
    return make()


def running(store: TaskStore) -> StoredTask:
    task, events = new_task(at=T0)
    return store.create(ALICE, task, events, dialect="v1.0", lease=Lease(turn=1, holder="h"))


def chunk(task: Task, n: int, size: int = CHUNK) -> ArtifactUpdate:
    """One piece of an answer, replacing the one before (the task's JSON stays small: the
    log, not the task, is what grows)."""
    text = f"{n:08d}".ljust(size, "x")
    artifact = Artifact(artifact_id="answer", parts=(Part(text=text),))
    return ArtifactUpdate(task_id=task.id, context_id=task.context_id, artifact=artifact)


def commits(task: Task) -> Iterator[list[Event]]:
    """The long run's commits, each its chunks then a `working` status."""
    for c in range(COMMITS):
        chunks: list[Event] = [chunk(task, c * PER_COMMIT + n) for n in range(PER_COMMIT - 1)]
        yield [*chunks, status(task, TaskState.WORKING, at=T0, text=f"step {c}")]


def test_a_commit_of_a_running_task_is_one_write(costed: Store) -> None:
    current = running(costed)
    assert costed.cost.writes == 1  # created with its lease, its first events in its document
    for n in range(30):
        costed.cost.reset()
        current = step(costed, current, [chunk(current.task, n, size=20)] * 3)
        assert (costed.cost.reads, costed.cost.writes) == (0, 1), n
    costed.cost.reset()
    ended = step(costed, current, [status(current.task, TaskState.COMPLETED, at=T0)])
    assert costed.cost.writes == 1
    assert [e.seq for e in costed.events(ALICE, ended.task.id)] == list(range(1, 94))


def test_a_long_run_moves_its_log_out_a_write_each_time_and_reads_back_whole(
    costed: Store,
) -> None:
    current = running(costed)
    logged: list[Event] = list(costed.events(ALICE, current.task.id)[i].event for i in range(2))
    costed.cost.reset()
    moves = []
    for n, events in enumerate(commits(current.task)):
        before = costed.cost.writes
        current = step(costed, current, events)
        logged += events
        if costed.cost.writes - before == 2:
            moves.append(n)
        else:
            assert costed.cost.writes - before == 1
    texts = [e.artifact.parts[0].text or "" for e in logged if isinstance(e, ArtifactUpdate)]
    total = sum(map(len, texts))
    # Once a LOG_IN_TASK_BYTES of events at most, and at least once per two of them.
    assert total // LOG_IN_TASK_BYTES <= len(moves) <= total // (LOG_IN_TASK_BYTES // 2)
    assert len(moves) >= 2
    # From anywhere: the start, inside a moved document, at a move, inside the document's log.
    for after in sorted({0, 1, 2, 57, moves[0] * PER_COMMIT + 2, len(logged) - 7, len(logged)}):
        found = costed.events(ALICE, current.task.id, after)
        assert [(e.seq, e.event) for e in found] == list(enumerate(logged, 1))[after:], after
    assert costed.get(ALICE, current.task.id) == current


def test_both_stores_count_the_same_writes_and_reads(make_firestore_store: MakeStore) -> None:
    """The embedded store's count is Firestore's, commit by commit, across the moves."""
    counts: list[list[tuple[int, int]]] = []
    for store in (MemoryTaskStore(), make_firestore_store()):
        current = running(store)
        seen = []
        for events in commits(current.task):
            store.cost.reset()
            current = step(store, current, events)
            store.events(ALICE, current.task.id, current.last_seq - 25)
            seen.append((store.cost.reads, store.cost.writes))
        counts.append(seen)
    memory, firestore = counts
    assert memory == firestore
    assert {writes for _, writes in memory} == {1, 2}
    assert {reads for reads, _ in memory} == {1, 2}  # the task's document, an event document


# The emulator now and then cancels a listen stream (RST_STREAM); the client library then
# raises in a thread of its own, and the tails poll instead: they must still get every event.
@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_tails_opened_before_during_and_after_get_each_event_once_in_order(
    tailing_store: Store,
) -> None:
    tailing = tailing_store
    current = running(tailing)
    task_id = current.task.id
    total = 2 + COMMITS * PER_COMMIT
    got: dict[str, list[int]] = {}
    readers = []

    def follow(name: str, after: int, want: int) -> None:
        tail = tailing.tail(ALICE, task_id, after)
        try:
            got[name] = drain(tail, want, seconds=60)
        finally:
            tail.close()

    def start(name: str, after: int) -> None:
        reader = threading.Thread(target=follow, args=(name, after, total - after))
        reader.start()
        readers.append(reader)

    start("before", 0)
    for n, events in enumerate(commits(current.task)):
        current = step(tailing, current, events)
        if n == COMMITS // 2:
            start("during", 0)
            start("during, inside the document's log", current.last_seq - 3)
    for name, after in [("after", 0), ("after, inside the document's log", total - 4)]:
        follow(name, after, total - after)
    for reader in readers:
        reader.join(90)
    middle = (COMMITS // 2 + 1) * PER_COMMIT + 2 - 3
    assert got == {
        "before": list(range(1, total + 1)),
        "during": list(range(1, total + 1)),
        "during, inside the document's log": list(range(middle + 1, total + 1)),
        "after": list(range(1, total + 1)),
        "after, inside the document's log": list(range(total - 3, total + 1)),
    }


def test_a_task_too_big_for_its_document_keeps_its_log_there_too(costed: Store) -> None:
    """A task whose JSON passes TASK_IN_DOCUMENT_BYTES (Firestore keeps only its outline in
    its document, `inLog`) still commits in one write, and reads back whole."""
    current = running(costed)
    half = TASK_IN_DOCUMENT_BYTES // 2
    for n in range(3):  # three artifacts of half the bound: the task outgrows its document
        big = ArtifactUpdate(
            task_id=current.task.id,
            context_id=current.task.context_id,
            artifact=Artifact(artifact_id=f"big-{n}", parts=(Part(text="b" * half),)),
        )
        current = step(costed, current, [big])
    costed.cost.reset()
    for n in range(5):
        current = step(costed, current, [chunk(current.task, n, size=100)] * 2)
    assert costed.cost.writes == 5
    got = costed.get(ALICE, current.task.id)
    assert got == current and got.task == current.task
    assert [e.seq for e in costed.events(ALICE, current.task.id, 4)] == list(range(5, 16))


def document_bytes(task: Task, log: list[Event]) -> int:
    """What `cost.logs_in_task` weighs: the task's JSON and its log's events as kept."""
    encoded = model_json.encode
    return len(encoded(task)) + sum(logged_bytes(e, len(encoded(e))) for e in log)


@pytest.mark.parametrize("over", [0, 1])
def test_events_that_fill_the_document_exactly_stay_and_a_byte_more_moves_the_log(
    costed: Store, over: int
) -> None:
    """At the bound, a commit's events stay in the task's document beside its log; a byte
    past it, the log before them moves into an event document and they stay (two writes);
    the next commit is one write again."""
    current = running(costed)
    first = costed.events(ALICE, current.task.id)
    big = 100_000

    def turn(size: int) -> list[Event]:
        # A piece of the answer the next replaces: in the log, no longer in the task.
        return [chunk(current.task, 0, size=size), chunk(current.task, 1, size=big)]

    fill = turn(1000)
    weight = document_bytes(
        lifecycle.apply_all(current.task, fill), [e.event for e in first] + fill
    )
    exact = turn(1000 + LOG_IN_TASK_BYTES - weight + over)
    assert (
        document_bytes(lifecycle.apply_all(current.task, exact), [e.event for e in first] + exact)
        == LOG_IN_TASK_BYTES + over
    )
    costed.cost.reset()
    current = step(costed, current, exact)
    assert costed.cost.writes == 1 + over
    costed.cost.reset()
    current = step(costed, current, [status(current.task, TaskState.WORKING, at=T0)])
    assert costed.cost.writes == 1 + (1 - over)  # at the bound, a byte more moves it now
    assert [e.seq for e in costed.events(ALICE, current.task.id)] == [1, 2, 3, 4, 5]
    assert [e.seq for e in costed.events(ALICE, current.task.id, 3)] == [4, 5]
