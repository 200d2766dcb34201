"""What each store operation costs in Firestore document reads and writes, held to budget.

The budgets (issues 3, 15, 27 and 35): a blocking short task 1 write and no read (its task is
its message's record, and holds its log), a commit of a running task 1 write (its document
holds its latest events) but for the one in LOG_IN_TASK_BYTES of events that moves them into
an event document, GetTask 1 read, a ListTasks page of N tasks N reads plus the count. A push
config put within the per-task limit: its task and the task's configs read, two writes.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from shared import lifecycle
from shared.model import Artifact, ArtifactUpdate, Event, Part, Task, TaskState, TaskStatus
from shared.ports import DuplicateMessage, Lease, TaskQuery, TooManyPushConfigs, VersionConflict
from shared.store.cost import LOG_IN_TASK_BYTES
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_push import FirestorePushConfigStore
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, MALLORY, message, new_task, sent, status
from tests.store.test_push_contract import config


@pytest.fixture
def store(make_firestore_store: MakeStore) -> FirestoreTaskStore:
    return make_firestore_store()


def spent(store: FirestoreTaskStore) -> tuple[int, int]:
    """(reads, writes) since the last call; counting starts afresh."""
    counts = store.cost.reads, store.cost.writes
    store.cost.reset()
    return counts


def test_a_blocking_short_task_is_one_create(store: FirestoreTaskStore) -> None:
    # The service coalesces a short blocking run into one create with all its events.
    task, events = new_task()
    artifact = ArtifactUpdate(
        task_id=task.id,
        context_id=task.context_id,
        artifact=Artifact(artifact_id="a", parts=(Part(text="result"),)),
    )
    run: list[Event] = [*events, artifact, status(task, TaskState.COMPLETED, text="done")]
    start = Task(
        id=task.id, context_id=task.context_id, status=TaskStatus(state=TaskState.SUBMITTED)
    )
    key = sent("m-1")
    own = replace(start, id=key.task_id(ALICE))
    first = store.create(ALICE, lifecycle.apply_all(own, run), run, dialect="v1.0", message_key=key)
    # Created ended, the task (the message's record) holds its events itself.
    assert spent(store) == (0, 1)
    logged = store.events(ALICE, own.id)
    assert [entry.event for entry in logged] == run
    assert [entry.seq for entry in logged] == [1, 2, 3, 4]
    assert spent(store) == (1, 0)  # the task's document, which holds them all
    assert [entry.seq for entry in store.events(ALICE, own.id, after_seq=2)] == [3, 4]
    assert store.events(MALLORY, own.id) == []
    assert store.get(ALICE, own.id) == first
    spent(store)
    # Its resend: the batch refused, one read (the task: not a retry of our own batch).
    with pytest.raises(DuplicateMessage):
        store.create(ALICE, lifecycle.apply_all(own, run), run, dialect="v1.0", message_key=key)
    assert spent(store) == (1, 0)
    # A task of the client's id records the message in a document of its own.
    spent(store)
    store.create(
        ALICE, lifecycle.apply_all(start, run), run, dialect="v1.0", message_key=sent("m-2")
    )
    assert spent(store) == (0, 2)
    # A task created working (its turn's lease) keeps its first events in its document too.
    working = replace(start, id="working", status=TaskStatus(state=TaskState.WORKING))
    store.create(ALICE, working, events, dialect="v1.0", lease=Lease(turn=1, holder="h"))
    assert spent(store) == (0, 1)


def test_get_is_one_read(store: FirestoreTaskStore) -> None:
    task, events = new_task()
    store.create(ALICE, task, events, dialect="v1.0")
    spent(store)
    for owner, task_id in [(ALICE, task.id), (MALLORY, task.id), (ALICE, "missing")]:
        store.get(owner, task_id)
        assert spent(store) == (1, 0)


def test_create_and_commit_writes(store: FirestoreTaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    assert spent(store) == (0, 1)  # the task, its events in its document
    store.create(ALICE, new_task()[0], [], dialect="v1.0")
    assert spent(store) == (0, 1)
    turn: list[Event] = [message("a", task.id), message("b", task.id)]
    current = store.commit(current, lifecycle.apply_all(current.task, turn), turn)
    assert spent(store) == (0, 1)
    current = store.commit(current, current.task, turn, message_key=sent("m-2"))
    assert spent(store) == (0, 2)  # and the message's record
    current = store.commit(current, current.task, [])
    assert spent(store) == (0, 1)
    # Past LOG_IN_TASK_BYTES beside the task, the log moves into an event document.
    big = [message("x" * LOG_IN_TASK_BYTES, task.id)]
    current = store.commit(current, current.task, big)
    assert spent(store) == (0, 2)
    store.commit(current, current.task, turn)
    assert spent(store) == (0, 1)


def test_refusals_cost_no_writes(store: FirestoreTaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0", message_key=sent("m-1"))
    store.commit(current, task, [])
    spent(store)
    with pytest.raises(VersionConflict):
        store.commit(current, task, events)
    assert spent(store) == (1, 0)  # the read that tells a lost race from our own retried commit
    with pytest.raises(DuplicateMessage):
        store.create(ALICE, *new_task(), dialect="v1.0", message_key=sent("m-1"))
    assert spent(store) == (2, 0)  # that read, and the one that names the first task
    store.find_message(ALICE, sent("m-1"))
    assert spent(store) == (1, 0)


def test_a_list_page_of_n_tasks_is_n_reads_and_the_count(store: FirestoreTaskStore) -> None:
    for _ in range(5):
        store.create(ALICE, *new_task(), dialect="v1.0")
    spent(store)
    store.list(ALICE, TaskQuery(page_size=5))
    assert spent(store) == (5 + 1, 0)
    first = store.list(ALICE, TaskQuery(page_size=3))
    assert spent(store) == (3 + 1, 0)  # the count, not a read ahead, says a page follows
    store.list(ALICE, TaskQuery(page_size=3, page_token=first.next_page_token))
    assert spent(store) == (2 + 1, 0)
    store.list(MALLORY, TaskQuery())
    assert spent(store) == (1 + 1, 0)  # an empty query still bills one read


def test_reading_the_log_is_one_read_per_commit(store: FirestoreTaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    big = [message("x" * LOG_IN_TASK_BYTES, task.id)]
    current = store.commit(current, task, big)  # events 1..3 in an event document
    current = store.commit(current, task, big)  # 4 in another
    store.commit(current, task, [message("a", task.id), message("b", task.id)])  # in the task's
    spent(store)
    assert len(store.events(ALICE, task.id)) == 6
    assert spent(store) == (1 + 2, 0)  # the task's document, and the two event documents
    store.events(ALICE, task.id, after_seq=3)
    assert spent(store) == (1 + 1, 0)
    # What the task's document holds: it alone.
    assert len(store.events(ALICE, task.id, after_seq=4)) == 2
    assert spent(store) == (1, 0)
    assert store.events(ALICE, task.id, after_seq=6) == []
    assert spent(store) == (1, 0)
    assert store.events(ALICE, "missing") == []
    assert spent(store) == (1, 0)


def test_a_push_config_within_the_limit_costs_what_the_check_before_it_did(
    store: FirestoreTaskStore,
) -> None:
    # The service used to list the task's configs, then put (a read, then the config and the
    # task's flag): the put's own count, the task then its configs, is the same bill.
    configs = FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost)
    task, events = new_task()
    store.create(ALICE, task, events, dialect="v1.0")
    spent(store)
    configs.put(ALICE, config("c0", task_id=task.id), dialect="1.0", limit=3)
    assert spent(store) == (1 + 1, 2)  # an empty list bills one read
    configs.put(ALICE, config("c1", task_id=task.id), dialect="1.0", limit=3)
    assert spent(store) == (1 + 1, 2)
    configs.put(ALICE, config("c0", task_id=task.id), dialect="1.0", limit=3)
    assert spent(store) == (1 + 2, 1)  # a replacement writes the config alone
    configs.put(ALICE, config("c2", task_id=task.id), dialect="1.0", limit=3)
    spent(store)
    with pytest.raises(TooManyPushConfigs):
        configs.put(ALICE, config("c3", task_id=task.id), dialect="1.0", limit=3)
    assert spent(store) == (1 + 3, 0)
