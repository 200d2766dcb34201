"""The TaskStore contract, run against every store: in memory and Firestore (the emulator)."""

from __future__ import annotations

import base64
import json
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import ids, lifecycle, limits, model_json
from shared.errors import InvalidParamsError, LiveTaskQuotaError
from shared.model import Artifact, ArtifactUpdate, Event, Part, Task, TaskState, TaskStatus
from shared.ports import (
    DuplicateMessage,
    InvalidPageToken,
    Lease,
    MessageKey,
    StoredTask,
    TaskExists,
    TaskQuery,
    TaskStore,
    VersionConflict,
)
from shared.store.firestore import FirestoreTaskStore
from tests.store.factory import ALICE, MALLORY, T0, message, new_task, sent, status
from tests.test_ids import HOSTILE_IDS


def step(store: TaskStore, current: StoredTask, events: list[Event]) -> StoredTask:
    return store.commit(current, lifecycle.apply_all(current.task, events), events)


def seqs(store: TaskStore, task_id: str, after: int = 0) -> list[int]:
    return [e.seq for e in store.events(ALICE, task_id, after)]


def test_create_then_get(store: TaskStore) -> None:
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0")
    assert (created.version, created.last_seq, created.dialect) == (1, 2, "v1.0")
    got = store.get(ALICE, task.id)
    assert got == created
    assert got.task == task
    assert [(e.seq, e.event) for e in store.events(ALICE, task.id)] == [
        (1, events[0]),
        (2, events[1]),
    ]


def test_unknown_task_is_none(store: TaskStore) -> None:
    assert store.get(ALICE, "nope") is None
    assert store.events(ALICE, "nope") == []


def test_a_taken_id_is_refused_for_its_owner(store: TaskStore) -> None:
    task, events = new_task()
    store.create(ALICE, task, events, dialect="v1.0")
    with pytest.raises(TaskExists):
        store.create(ALICE, task, [], dialect="v0.3", message_key=sent("m-1"))
    assert store.get(ALICE, task.id).version == 1  # type: ignore[union-attr]
    assert store.find_message(ALICE, sent("m-1")) is None


def test_each_owner_has_its_own_task_ids(store: TaskStore) -> None:
    """Two owners may both name a task `my-task-1`: neither sees, changes or blocks the
    other's."""
    alice_task, alice_events = new_task(task_id="my-task-1")
    mallory_task, mallory_events = new_task(task_id="my-task-1", text="mine")
    alice = store.create(ALICE, alice_task, alice_events, dialect="v1.0", message_key=sent("m-1"))
    mallory = store.create(
        MALLORY, mallory_task, mallory_events, dialect="v0.1", message_key=sent("m-1")
    )
    step(store, mallory, [status(mallory_task, TaskState.CANCELED)])
    assert store.get(ALICE, "my-task-1") == alice
    assert [e.event for e in store.events(ALICE, "my-task-1")] == list(alice_events)
    assert store.get(MALLORY, "my-task-1").version == 2  # type: ignore[union-attr]
    assert len(store.events(MALLORY, "my-task-1")) == 3
    assert [s.task for s in store.list(ALICE, TaskQuery()).tasks] == [alice_task]
    assert (
        store.find_message(ALICE, sent("m-1"))
        == store.find_message(MALLORY, sent("m-1"))
        == "my-task-1"
    )


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_ids_off_the_rule_are_refused_and_nothing_is_stored(store: TaskStore, bad: str) -> None:
    """The last line of defence behind the wire readers: no id off shared.ids' rule reaches
    a document path or a key."""
    task, _ = new_task()
    hostile_tasks = (
        replace(task, id=bad),
        replace(task, context_id=bad),
    )
    for hostile in hostile_tasks:
        with pytest.raises(ValueError, match=r" id (must|has \d+ characters)"):
            store.create(ALICE, hostile, [], dialect="v1.0")
    with pytest.raises(ValueError, match=r" id (must|has \d+ characters)"):
        store.create(ALICE, task, [], dialect="v1.0", message_key=sent(bad))
    assert store.list(ALICE, TaskQuery()).tasks == []
    assert store.get(ALICE, bad) is None


def test_another_owners_task_does_not_exist(store: TaskStore) -> None:
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0", message_key=sent("m-1"))
    assert store.get(MALLORY, task.id) is None
    assert store.events(MALLORY, task.id) == []
    assert store.find_message(MALLORY, sent("m-1")) is None
    assert store.list(MALLORY, TaskQuery()).tasks == []
    forged = replace(created, owner=MALLORY)
    with pytest.raises(VersionConflict):
        step(store, forged, [status(task, TaskState.CANCELED)])
    assert store.get(ALICE, task.id) == created


def test_commit_bumps_version_and_appends_dense_seqs(store: TaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    current = step(store, current, [message("a", task.id), message("b", task.id)])
    current = step(store, current, [])
    current = step(store, current, [status(current.task, TaskState.COMPLETED, text="done")])
    assert (current.version, current.last_seq) == (4, 5)
    assert store.get(ALICE, task.id) == current
    assert seqs(store, task.id) == [1, 2, 3, 4, 5]
    rebuilt = lifecycle.apply_all(
        Task(id=task.id, context_id="ctx", status=TaskStatus(state=TaskState.SUBMITTED)),
        [e.event for e in store.events(ALICE, task.id)],
    )
    assert rebuilt == current.task


def test_events_after_seq(store: TaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    step(store, current, [message(str(n), task.id) for n in range(3)])
    assert seqs(store, task.id, 0) == [1, 2, 3, 4, 5]
    assert seqs(store, task.id, 3) == [4, 5]  # from the middle of one commit's events
    assert seqs(store, task.id, 2) == [3, 4, 5]
    assert seqs(store, task.id, 5) == []
    assert seqs(store, task.id, 99) == []


def test_a_stale_commit_loses_and_nothing_is_lost(store: TaskStore) -> None:
    task, events = new_task(state=TaskState.INPUT_REQUIRED)
    store.create(ALICE, task, events, dialect="v1.0")
    first, second = store.get(ALICE, task.id), store.get(ALICE, task.id)
    assert first is not None and second is not None
    won = step(store, first, [message("one", task.id)])
    with pytest.raises(VersionConflict):
        step(store, second, [message("two", task.id)])
    assert store.get(ALICE, task.id) == won
    # The loser re-reads and decides again.
    again = store.get(ALICE, task.id)
    assert again is not None
    final = step(store, again, [message("two", task.id)])
    assert final.version == 3
    texts = [m.parts[0].text for m in final.task.history]
    assert texts == ["hello", "one", "two"]
    assert seqs(store, task.id) == [1, 2, 3, 4]


def test_two_writers_at_the_same_moment(store: TaskStore) -> None:
    task, events = new_task(state=TaskState.INPUT_REQUIRED)
    store.create(ALICE, task, events, dialect="v1.0")
    barrier = threading.Barrier(2)
    versions: list[int] = []

    def send(text: str) -> None:
        barrier.wait()
        while True:
            current = store.get(ALICE, task.id)
            assert current is not None
            try:
                versions.append(step(store, current, [message(text, task.id)]).version)
                return
            except VersionConflict:
                continue

    threads = [threading.Thread(target=send, args=(t,)) for t in ("x", "y")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(versions) == [2, 3]
    final = store.get(ALICE, task.id)
    assert final is not None
    assert sorted(m.parts[0].text or "" for m in final.task.history[1:]) == ["x", "y"]
    assert seqs(store, task.id) == [1, 2, 3, 4]


def test_idempotent_message_ids(store: TaskStore) -> None:
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0", message_key=sent("m-1"))
    assert store.find_message(ALICE, sent("m-1")) == task.id
    assert store.find_message(ALICE, sent("m-2")) is None

    again, again_events = new_task()
    with pytest.raises(DuplicateMessage) as duplicate:
        store.create(ALICE, again, again_events, dialect="v1.0", message_key=sent("m-1"))
    assert duplicate.value.task_id == task.id
    assert store.get(ALICE, again.id) is None

    with pytest.raises(DuplicateMessage) as duplicate:
        step_events: list[Event] = [message("retry", task.id)]
        store.commit(
            created, lifecycle.apply_all(task, step_events), step_events, message_key=sent("m-1")
        )
    assert duplicate.value.task_id == task.id
    assert store.get(ALICE, task.id) == created
    assert seqs(store, task.id) == [1, 2]

    # Message ids are the sender's: another owner may use the same one.
    other, other_events = new_task()
    store.create(MALLORY, other, other_events, dialect="v1.0", message_key=sent("m-1"))
    assert store.find_message(MALLORY, sent("m-1")) == other.id
    assert store.find_message(ALICE, sent("m-1")) == task.id

    later = store.commit(created, task, [], message_key=sent("m-2"))
    assert later.version == 2
    assert store.find_message(ALICE, sent("m-2")) == task.id


def test_a_message_id_with_other_content_is_another_message(store: TaskStore) -> None:
    """The key is the messageId and the content's digest: a client that reuses an id for
    other content sends a new message, recorded for the task it went to."""
    first, first_events = new_task()
    store.create(ALICE, first, first_events, dialect="v1.0", message_key=sent("m-1", "aaa"))
    assert store.find_message(ALICE, sent("m-1", "bbb")) is None
    second, second_events = new_task()
    store.create(ALICE, second, second_events, dialect="v1.0", message_key=sent("m-1", "bbb"))
    assert store.find_message(ALICE, sent("m-1", "aaa")) == first.id
    assert store.find_message(ALICE, sent("m-1", "bbb")) == second.id
    with pytest.raises(DuplicateMessage) as duplicate:
        store.create(ALICE, *new_task(), dialect="v1.0", message_key=sent("m-1", "bbb"))
    assert duplicate.value.task_id == second.id
    # Keys are compared whole: neither part alone, nor their concatenation, finds a record.
    assert store.find_message(ALICE, sent("m-1a", "aa")) is None
    assert store.find_message(MALLORY, sent("m-1", "aaa")) is None


def test_a_key_that_replaces_its_record_names_the_new_task(store: TaskStore) -> None:
    first, first_events = new_task()
    store.create(ALICE, first, first_events, dialect="v1.0", message_key=sent("m-1"))
    second, second_events = new_task()
    moved_on = replace(sent("m-1"), replaces=first.id)
    store.create(ALICE, second, second_events, dialect="v1.0", message_key=moved_on)
    assert store.find_message(ALICE, sent("m-1")) == second.id
    third = store.commit(
        store.get(ALICE, second.id),  # type: ignore[arg-type]
        second,
        [],
        message_key=replace(sent("m-1"), replaces=second.id),
    )
    assert store.find_message(ALICE, sent("m-1")) == third.task.id == second.id
    assert store.find_message(MALLORY, sent("m-1")) is None


def test_a_task_with_the_keys_own_id_is_the_messages_record(store: TaskStore) -> None:
    """A message that starts a task gives it its key's id: creating the task records it, and
    a resend's create is refused as that message's, naming the task."""
    key = sent("m-1")
    task, events = new_task(task_id=key.task_id(ALICE))
    created = store.create(ALICE, task, events, dialect="v1.0", message_key=key)
    assert store.find_message(ALICE, key) == task.id
    assert store.find_message(ALICE, sent("m-1", "other content")) is None
    again, again_events = new_task(task_id=key.task_id(ALICE), text="the resend's run")
    with pytest.raises(DuplicateMessage) as duplicate:
        store.create(ALICE, again, again_events, dialect="v1.0", message_key=key)
    assert duplicate.value.task_id == task.id
    assert store.get(ALICE, task.id) == created  # the first send's, untouched
    # Another owner's same message derives another id, in a namespace of its own.
    assert key.task_id(MALLORY) != task.id
    assert store.find_message(MALLORY, key) is None
    theirs, theirs_events = new_task(task_id=key.task_id(MALLORY))
    store.create(MALLORY, theirs, theirs_events, dialect="v1.0", message_key=key)
    assert store.find_message(MALLORY, key) == theirs.id
    # A task of another id under the same key (the client moved on) needs a record, which
    # the look-up finds before the key's own task.
    later, later_events = new_task()
    moved_on = replace(key, replaces=task.id)
    store.create(ALICE, later, later_events, dialect="v1.0", message_key=moved_on)
    assert store.find_message(ALICE, key) == later.id
    # Without a key, the same id is only taken.
    with pytest.raises(TaskExists):
        store.create(ALICE, *new_task(task_id=task.id), dialect="v1.0")


@given(
    owner=st.text(min_size=1, max_size=40),
    message_id=st.from_regex(r"[A-Za-z0-9\-_.:~@+]{1,128}", fullmatch=True),
    digest=st.text(max_size=70),
    other=st.text(min_size=1, max_size=40),
)
def test_a_keys_own_task_id_is_an_id_and_its_alone(
    owner: str, message_id: str, digest: str, other: str
) -> None:
    """Whatever the owner and message, the derived task id passes the id rule, is the same
    for a resend, and differs for another owner, messageId or content."""
    key = MessageKey(message_id, digest)
    derived = key.task_id(owner)
    assert ids.is_valid(derived)
    assert MessageKey(message_id, digest).task_id(owner) == derived
    assert key.recorded_by(owner, derived)
    assert not replace(key, replaces=derived).recorded_by(owner, derived)
    assert other == owner or key.task_id(other) != derived
    assert key.task_id(owner) == derived  # asked again after another owner's
    assert MessageKey(message_id, digest + "x").task_id(owner) != derived
    assert MessageKey(message_id + "x", digest).task_id(owner) != derived


def list_ids(store: TaskStore, query: TaskQuery, owner: str = ALICE) -> list[str]:
    return [s.task.id for s in store.list(owner, query).tasks]


def test_list_newest_first_with_filters(store: TaskStore) -> None:
    made = {}
    for n, (ctx, state) in enumerate(
        [
            ("c1", TaskState.WORKING),
            ("c2", TaskState.COMPLETED),
            ("c1", TaskState.COMPLETED),
            ("c2", TaskState.WORKING),
            ("c1", TaskState.INPUT_REQUIRED),
        ]
    ):
        task, events = new_task(ctx, T0 + timedelta(minutes=n), state)
        store.create(ALICE, task, events, dialect="v1.0")
        made[n] = task.id
    mallorys, events = new_task("c1", T0 + timedelta(hours=1))
    store.create(MALLORY, mallorys, events, dialect="v1.0")

    assert list_ids(store, TaskQuery()) == [made[n] for n in (4, 3, 2, 1, 0)]
    assert list_ids(store, TaskQuery(context_id="c1")) == [made[n] for n in (4, 2, 0)]
    assert list_ids(store, TaskQuery(state=TaskState.COMPLETED)) == [made[2], made[1]]
    assert list_ids(store, TaskQuery(context_id="c2", state=TaskState.WORKING)) == [made[3]]
    after = T0 + timedelta(minutes=2)
    assert list_ids(store, TaskQuery(status_after=after)) == [made[4], made[3]]
    assert list_ids(store, TaskQuery(context_id="c1", status_after=after)) == [made[4]]
    assert list_ids(store, TaskQuery(context_id="nope")) == []
    page = store.list(ALICE, TaskQuery(context_id="c1"))
    assert (page.total_size, page.next_page_token) == (3, "")
    assert page.tasks[0] == store.get(ALICE, made[4])


def test_list_pages(store: TaskStore) -> None:
    ids = []
    for n in range(7):
        # Two tasks share each timestamp: the store orders them its own way (the task id,
        # or the document id that owner and task id derive), the same way on every page.
        task, events = new_task(at=T0 + timedelta(seconds=n // 2))
        store.create(ALICE, task, events, dialect="v1.0")
        ids.append((task.status.timestamp, task.id))
    whole = [s.task.id for s in store.list(ALICE, TaskQuery(page_size=7)).tasks]
    times = dict((task_id, at) for at, task_id in ids)
    assert sorted(whole) == sorted(task_id for _, task_id in ids)
    assert [times[t] for t in whole] == sorted(times.values(), reverse=True)
    expected = whole
    seen: list[str] = []
    token = None
    sizes = []
    while True:
        page = store.list(ALICE, TaskQuery(page_size=3, page_token=token))
        assert page.total_size == 7
        seen += [s.task.id for s in page.tasks]
        sizes.append(len(page.tasks))
        if not page.next_page_token:
            break
        token = page.next_page_token
    assert seen == expected
    assert sizes == [3, 3, 1]
    exact = store.list(ALICE, TaskQuery(page_size=7))
    assert (len(exact.tasks), exact.next_page_token) == (7, "")


def test_list_is_stable_under_concurrent_inserts(store: TaskStore) -> None:
    ids = []
    for n in range(4):
        task, events = new_task(at=T0 + timedelta(seconds=n))
        store.create(ALICE, task, events, dialect="v1.0")
        ids.append(task.id)
    first = store.list(ALICE, TaskQuery(page_size=2))
    assert [s.task.id for s in first.tasks] == [ids[3], ids[2]]
    # Newer tasks arrive between the pages: they belong before page one, not in page two.
    for n in range(3):
        task, events = new_task(at=T0 + timedelta(minutes=1, seconds=n))
        store.create(ALICE, task, events, dialect="v1.0")
    second = store.list(ALICE, TaskQuery(page_size=2, page_token=first.next_page_token))
    assert [s.task.id for s in second.tasks] == [ids[1], ids[0]]
    assert second.total_size == 7
    if second.next_page_token:
        # A store that knows the end from the count (Firestore: no read one task ahead) may
        # be fooled by the inserts into one more page, which is empty and the last.
        third = store.list(ALICE, TaskQuery(page_size=2, page_token=second.next_page_token))
        assert (third.tasks, third.next_page_token) == ([], "")


def test_list_refuses_foreign_tokens(store: TaskStore) -> None:
    for n in range(3):
        task, events = new_task("c1", at=T0 + timedelta(seconds=n))
        store.create(ALICE, task, events, dialect="v1.0")
    token = store.list(ALICE, TaskQuery(context_id="c1", page_size=1)).next_page_token
    assert token
    with pytest.raises(InvalidPageToken):
        store.list(ALICE, TaskQuery(context_id="c2", page_size=1, page_token=token))
    for garbage in ("not-a-token", "e30", "W10"):
        with pytest.raises(InvalidPageToken):
            store.list(ALICE, TaskQuery(page_token=garbage))


def _token(raw: str) -> str:
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def test_forged_page_tokens_are_refused_by_the_bodys_rules(store: TaskStore) -> None:
    """A token comes back from the client: read as a body is, then held to its shape. Each of
    these was a -32603 and a traceback (OverflowError, RecursionError, a naive time compared
    with an aware one)."""
    for n in range(3):
        task, events = new_task("c1", at=T0 + timedelta(seconds=n))
        store.create(ALICE, task, events, dialect="v1.0")
    token = store.list(ALICE, TaskQuery(page_size=1)).next_page_token
    stamp, task_id, returned, fingerprint = json.loads(base64.urlsafe_b64decode(token + "=="))
    assert store.list(ALICE, TaskQuery(page_size=1, page_token=token)).tasks  # the real one

    def forged(**changed: str) -> str:
        parts = {
            "stamp": json.dumps(stamp),
            "task_id": json.dumps(task_id),
            "returned": json.dumps(returned),
            "fingerprint": json.dumps(fingerprint),
            **changed,
        }
        return _token(f"[{','.join(parts.values())}]")

    hostile = [
        forged(returned="Infinity"),
        forged(returned="NaN"),
        forged(returned="1e400"),
        forged(returned="-1"),
        forged(returned="true"),
        forged(returned="1.5"),
        forged(returned=str(2**64)),
        forged(task_id="[" * 5000 + "]" * 5000),
        forged(task_id='"\\ud800"'),  # a lone surrogate
        forged(task_id="null"),
        forged(stamp=json.dumps("2026-01-01T00:00:00")),  # no offset
        forged(stamp=json.dumps("0001-01-01T00:00:00+23:59")),  # before year 1 in UTC
        forged(stamp=json.dumps("9999-12-31T23:59:59-23:59")),  # past year 9999 in UTC
        forged(stamp="1"),
        _token("[" * 5000 + "]" * 5000),
        _token('{"a": 1, "a": 2}'),
        _token(f"[{json.dumps(stamp)},{json.dumps(task_id)},{returned}]"),
        "%%%",
        "\u00ff",
    ]
    for garbage in hostile:
        with pytest.raises(InvalidPageToken, match=r"'params\.pageToken'"):
            store.list(ALICE, TaskQuery(page_size=1, page_token=garbage))


def test_a_task_larger_than_a_document_comes_back_whole(store: TaskStore) -> None:
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    chunk = 512 * 1024
    for n in range(10):  # 5 MiB of artifact text, one chunk per step
        update = ArtifactUpdate(
            task_id=task.id,
            context_id=task.context_id,
            artifact=Artifact(artifact_id="big", parts=(Part(text=chr(65 + n) * chunk),)),
            append=n > 0,
            last_chunk=n == 9,
        )
        current = step(store, current, [update, message(f"note {n}", task.id)])
    current = step(store, current, [status(current.task, TaskState.COMPLETED, text="done")])
    got = store.get(ALICE, task.id)
    assert got == current
    assert got.task == current.task
    (artifact,) = got.task.artifacts
    assert sum(len(p.text or "") for p in artifact.parts) == 10 * chunk
    assert len(got.task.history) == 11
    assert seqs(store, task.id) == list(range(1, 24))
    assert store.list(ALICE, TaskQuery()).tasks == [current]


def test_a_lease_is_stored_kept_by_other_writers_and_released(store: TaskStore) -> None:
    task, events = new_task()
    queued = store.create(ALICE, task, events, dialect="v1.0", lease=Lease(turn=1))
    assert store.get(ALICE, task.id) == queued
    assert queued.lease == Lease(turn=1)
    expires = T0 + timedelta(seconds=30)
    held = Lease(turn=1, holder="run-a", expires=expires, attempt=2, final=True)
    current = store.commit(replace(queued, lease=held), task, [])
    got = store.get(ALICE, task.id)
    assert got is not None and got.lease == held == current.lease
    # A writer that knows nothing of leases (a message joining the task) keeps it.
    current = step(store, got, [message("by the way", task.id)])
    assert store.get(ALICE, task.id).lease == held  # type: ignore[union-attr]
    # A stale snapshot cannot take the lease: the write loses like any other.
    with pytest.raises(VersionConflict):
        store.commit(replace(got, lease=replace(held, holder="run-b")), task, [])
    released = store.commit(replace(current, lease=None), current.task, [])
    assert released.lease is None
    assert store.get(ALICE, task.id) == released
    assert store.list(ALICE, TaskQuery()).tasks == [released]


def test_every_field_of_a_lease_and_the_waiting_messages_are_stored(store: TaskStore) -> None:
    task, events = new_task()
    lease = Lease(
        turn=3,
        holder="",
        expires=T0,
        attempt=1,
        message_id="m-1",
        redrives=2,
        inline=True,
        outbox=True,
    )
    created = store.create(ALICE, task, events, dialect="v1.0", lease=lease)
    assert created.pending == ()
    waiting = store.commit(replace(created, pending=("m-2", "m-3")), task, [])
    got = store.get(ALICE, task.id)
    assert (
        got is not None and got.lease == lease and got.pending == ("m-2", "m-3") == waiting.pending
    )
    # A writer that passes the snapshot on keeps them; one that drops them drops them.
    kept = step(store, got, [message("more", task.id)])
    assert store.get(ALICE, task.id).pending == ("m-2", "m-3") == kept.pending  # type: ignore[union-attr]
    store.commit(replace(kept, pending=()), kept.task, [])
    assert store.get(ALICE, task.id).pending == ()  # type: ignore[union-attr]


def test_expired_leases_of_every_owner_oldest_first(store: TaskStore) -> None:
    def leased(owner: str, task_id: str, lease: Lease | None) -> None:
        task, events = new_task(task_id=task_id)
        store.create(owner, task, events, dialect="v1.0", lease=lease)

    leased(ALICE, "late", Lease(turn=1, holder="a", expires=T0 + timedelta(seconds=20)))
    leased(MALLORY, "early", Lease(turn=1, expires=T0 + timedelta(seconds=10)))
    leased(ALICE, "live", Lease(turn=1, holder="b", expires=T0 + timedelta(seconds=60)))
    leased(ALICE, "no-expiry", Lease(turn=1))
    leased(ALICE, "no-lease", None)
    before = T0 + timedelta(seconds=30)
    found = store.expired_leases(before, 10)
    assert [(s.owner, s.task.id) for s in found] == [(MALLORY, "early"), (ALICE, "late")]
    assert [s.task.id for s in store.expired_leases(before, 1)] == ["early"]
    assert store.expired_leases(T0, 10) == []
    # Each is the task as `get` reads it: the sweep commits on it.
    assert found[1] == store.get(ALICE, "late")


def test_expired_leases_page_after_page_each_task_once(store: TaskStore) -> None:
    """The sweep's pages: each goes on past the last task of the one before, ties included."""
    expiries = [10, 10, 10, 20, 30]  # seconds past T0: three of them tied
    for n, seconds in enumerate(expiries):
        task, events = new_task(task_id=f"t{n}")
        owner = ALICE if n % 2 else MALLORY
        lease = Lease(turn=1, expires=T0 + timedelta(seconds=seconds))
        store.create(owner, task, events, dialect="v1.0", lease=lease)
    before = T0 + timedelta(minutes=1)
    seen: list[StoredTask] = []
    page = store.expired_leases(before, 2)
    while page:
        assert len(page) <= 2
        seen += page
        page = store.expired_leases(before, 2, after=page[-1])
    assert sorted(s.task.id for s in seen) == [f"t{n}" for n in range(5)]  # each once
    assert [s.lease.expires for s in seen if s.lease] == sorted(
        T0 + timedelta(seconds=s) for s in expiries
    )


def test_readers_and_writers_at_once(store: TaskStore) -> None:
    """Several writers create and commit while readers list, get and read events: no call
    fails, and every reader sees a consistent store (counts only grow, logs stay dense)."""
    # The emulator is slower by far: fewer tasks there still make the calls overlap.
    writers, readers = 4, 3
    tasks_each = 6 if isinstance(store, FirestoreTaskStore) else 60
    failures: list[BaseException] = []
    created: list[str] = []
    writing = threading.Event()
    writing.set()

    def write(n: int) -> None:
        try:
            for _ in range(tasks_each):
                task, events = new_task(context_id=f"w{n}")
                current = store.create(ALICE, task, events, dialect="1.0")
                created.append(task.id)
                for k in range(2):
                    current = step(store, current, [status(task, TaskState.WORKING, text=str(k))])
        except BaseException as exc:
            failures.append(exc)

    def read() -> None:
        seen_total = 0
        try:
            while writing.is_set():
                page = store.list(ALICE, TaskQuery(page_size=20))
                assert page.total_size >= seen_total  # tasks are only ever added
                seen_total = page.total_size
                for stored in page.tasks[:3]:
                    got = store.get(ALICE, stored.task.id)
                    assert got is not None and got.version >= stored.version
                    logged = seqs(store, stored.task.id)
                    assert logged == list(range(1, len(logged) + 1))  # dense, in order
                    assert len(logged) >= stored.last_seq
        except BaseException as exc:
            failures.append(exc)

    reading = [threading.Thread(target=read) for _ in range(readers)]
    writing_threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in reading + writing_threads:
        thread.start()
    for thread in writing_threads:
        thread.join(60)
    writing.clear()
    for thread in reading:
        thread.join(60)
    assert failures == []
    final = store.list(ALICE, TaskQuery(page_size=writers * tasks_each))
    assert final.total_size == len(created) == writers * tasks_each
    assert all(s.version == 3 and s.last_seq == 4 for s in final.tasks)


def test_the_size_a_store_returns_is_its_stored_json_s(store: TaskStore) -> None:
    """Every snapshot carries the size of the JSON its task is stored as, in UTF-8 bytes (what
    limits.check_history bounds the history by): created, committed, read, listed."""
    task, events = new_task(text="h\N{SNOWMAN}llo")
    created = store.create(ALICE, task, events, dialect="v1.0")
    said: list[Event] = [message("\N{SNOWMAN} and more", task.id)]
    committed = step(store, created, said)
    got = store.get(ALICE, task.id)
    assert got is not None
    (listed,) = store.list(ALICE, TaskQuery()).tasks
    for stored in (created, committed, got, listed):
        assert stored.size == len(model_json.encode(stored.task))
    assert committed.size is not None and created.size is not None
    assert committed.size > created.size


@pytest.mark.parametrize("slack", [-1, 0, None])
def test_a_task_read_back_checks_its_history_without_measuring_it(
    store: TaskStore, slack: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store returns the size of the JSON it read a task from (StoredTask.size), which
    holds the whole history: a new message that fits with it is not measured against each
    message again, and one near or over the limit is measured, and refused exactly as before,
    at the same byte (`slack`: the limit's distance from the exact size; None: the default)."""
    task, events = new_task()
    said = [message(f"message {n}, \N{SNOWMAN} and all", task.id) for n in range(20)]
    everything = [*events, *said]
    store.create(ALICE, lifecycle.apply_all(task, everything), everything, dialect="v1.0")
    read = store.get(ALICE, task.id)
    assert read is not None
    new = message("one more", task.id)
    exact = sum(limits.model_bytes(m) for m in (*read.task.history, new))
    bound = limits.Limits() if slack is None else limits.Limits(history_bytes=exact + slack)
    measured: list[Any] = []
    real = limits.model_bytes

    def measuring(model: Any) -> int:
        measured.append(model)
        return real(model)

    monkeypatch.setattr(limits, "model_bytes", measuring)
    outcomes: list[str | None] = []
    for checked in (read, replace(read, size=None)):  # the copy: its size unknown
        measured.clear()
        try:
            limits.check_history(checked, new, bound)
            outcomes.append(None)
        except InvalidParamsError as refused:
            outcomes.append(str(refused))
        whole = len(read.task.history) + 1
        assert len(measured) == (1 if checked is read and slack is None else whole)
    assert outcomes[0] == outcomes[1]
    assert (outcomes[0] is None) == (slack != -1)


def test_a_burst_of_creates_never_passes_the_live_limit(store: TaskStore) -> None:
    # The finding: A2A_MAX_LIVE_TASKS_PER_OWNER=5, 40 concurrent background sends on
    # Firestore: all 40 accepted (they each counted 0 to 4 before any of them wrote).
    store.create(ALICE, *new_task(), dialect="v1.0")  # one live task already
    store.create(ALICE, *new_task(state=TaskState.COMPLETED), dialect="v1.0")  # not counted
    store.create(MALLORY, *new_task(), dialect="v1.0")  # another owner's
    start = threading.Barrier(40)

    def send(_: int) -> str:
        start.wait()
        try:
            store.create(ALICE, *new_task(), dialect="v1.0", live_limit=5)
        except LiveTaskQuotaError as refused:
            assert refused.code == -32000 and "A2A_MAX_LIVE_TASKS_PER_OWNER" in str(refused)
            return "refused"
        return "created"

    with ThreadPoolExecutor(40) as pool:
        outcomes = list(pool.map(send, range(40)))
    assert outcomes.count("created") == 4, outcomes
    assert store.live_tasks(ALICE, 100) == 5
    # Another owner's live tasks are its own; a task that ends makes room.
    store.create(MALLORY, *new_task(), dialect="v1.0", live_limit=2)
    with pytest.raises(LiveTaskQuotaError):
        store.create(MALLORY, *new_task(), dialect="v1.0", live_limit=2)
    [one, *_] = store.list(ALICE, TaskQuery(state=TaskState.WORKING)).tasks
    current = store.get(ALICE, one.task.id)
    assert current is not None
    done: list[Event] = [status(current.task, TaskState.CANCELED)]
    store.commit(current, lifecycle.apply_all(current.task, done), done)
    store.create(ALICE, *new_task(), dialect="v1.0", live_limit=5)
    with pytest.raises(LiveTaskQuotaError):
        store.create(ALICE, *new_task(), dialect="v1.0", live_limit=5)


def test_a_resend_at_the_live_limit_gets_its_first_task(store: TaskStore) -> None:
    key = MessageKey("m1", "digest")
    own = key.task_id(ALICE)
    store.create(ALICE, *new_task(task_id=own), dialect="v1.0", message_key=key, live_limit=1)
    with pytest.raises(DuplicateMessage) as first:
        store.create(ALICE, *new_task(task_id=own), dialect="v1.0", message_key=key, live_limit=1)
    assert first.value.task_id == own
    other = MessageKey("m2", "digest")
    with pytest.raises(LiveTaskQuotaError):
        store.create(
            ALICE,
            *new_task(task_id=other.task_id(ALICE)),
            dialect="v1.0",
            message_key=other,
            live_limit=1,
        )


def test_live_tasks_counts_the_owner_s_tasks_not_terminal_up_to_the_limit(
    store: TaskStore,
) -> None:
    assert store.live_tasks(ALICE, 10) == 0
    made = {}
    for state in TaskState:
        task, events = new_task(state=state)
        made[state] = store.create(ALICE, task, events, dialect="v1.0")
    store.create(MALLORY, *new_task(), dialect="v1.0")
    live = [s for s in TaskState if not s.terminal]
    assert len(live) == 5  # submitted, working, input- and auth-required, unknown
    assert store.live_tasks(ALICE, 100) == len(live)
    assert store.live_tasks(ALICE, 3) == 3  # the count stops at the limit
    assert store.live_tasks(MALLORY, 100) == 1
    # A task that ends is no longer live; one that goes on is.
    working = made[TaskState.WORKING]
    done: list[Event] = [status(working.task, TaskState.COMPLETED)]
    store.commit(working, lifecycle.apply_all(working.task, done), done)
    assert store.live_tasks(ALICE, 100) == len(live) - 1
