"""What only the Firestore store has: its document layout, size limits and retention."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from google.api_core import exceptions as google_errors
from google.cloud import firestore
from google.cloud.firestore_v1.batch import WriteBatch
from hypothesis import given
from hypothesis import strategies as st

from emulator.firestore import FirestoreEmulator
from shared import lifecycle, model_json
from shared.errors import InvalidParamsError
from shared.limits import LimitExceeded
from shared.model import (
    Artifact,
    ArtifactUpdate,
    Event,
    Message,
    Part,
    PushConfig,
    Role,
    TaskState,
)
from shared.ports import Lease, VersionConflict
from shared.store.cost import LOG_IN_TASK_BYTES
from shared.store.firestore import (
    COMMIT_BUDGET,
    EVENT_DOCUMENT_BUDGET,
    LOG_SLACK,
    PUSH_CONFIGS,
    _encode_event,
    _utf8_size,
    document_id,
)
from shared.store.firestore_push import FirestorePushConfigStore
from tests import test_model_json as json_of
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, message, new_task, sent
from tests.store.test_tail import drain, step


@pytest.fixture
def client(clean_firestore: FirestoreEmulator) -> firestore.Client:
    """A plain client on the emptied emulator, to look at the documents the store wrote."""
    return firestore.Client(project=clean_firestore.project)


def raw_events(client: firestore.Client, task_id: str) -> dict[str, dict[str, Any]]:
    log = client.collection("tasks", document_id(ALICE, task_id), "events")
    return {s.id: s.to_dict() or {} for s in log.stream()}


def raw_task(client: firestore.Client, task_id: str) -> dict[str, Any]:
    return client.document("tasks", document_id(ALICE, task_id)).get().to_dict() or {}


def old_layout(client: firestore.Client, task_id: str) -> None:
    """Make the task's documents what a task's were before task documents kept a log: every
    event in an event document (one, as if of one commit), no `log` field."""
    task = client.document("tasks", document_id(ALICE, task_id))
    fields = task.get().to_dict() or {}
    texts, last = fields["log"], fields["lastSeq"]
    assert len(texts) == last and not raw_events(client, task_id)
    task.collection("events").document("0000000001").create(
        {
            "owner": ALICE,
            "first": 1,
            "last": last,
            "events": texts,
            "expireAt": fields["logExpireAt"],
        }
    )
    task.update({"log": firestore.DELETE_FIELD})


def chunk(task_id: str, text: str, append: bool = True) -> ArtifactUpdate:
    return ArtifactUpdate(
        task_id=task_id,
        context_id="ctx",
        artifact=Artifact(artifact_id="a", parts=(Part(text=text),)),
        append=append,
    )


def test_documents_the_pydantic_models_wrote_read_back_identically(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    """A deployed project's documents, from before the models left pydantic: the task's,
    its events' and a push config's JSON as those models wrote it (tests/test_model_json.py),
    read by this store as it read them then."""
    store = make_firestore_store()
    configs = FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost)
    task = json_of.WRITTEN[0][1]
    events = [event for _, event in json_of.LOGGED]
    store.create(ALICE, task, events, dialect="v1.0", lease=Lease(turn=1, holder="h"))
    config = json_of.WRITTEN[2][1]
    configs.put(ALICE, config, dialect="1.0")
    tasks = client.collection("tasks")
    old_layout(client, task.id)  # its events in an event document, as every task's were then
    tasks.document(document_id(ALICE, task.id)).update({"task": json_of.TASK})
    (name,) = raw_events(client, task.id)
    tasks.document(document_id(ALICE, task.id)).collection("events").document(name).update(
        {"events": [text for text, _ in json_of.LOGGED]}
    )
    (config_document,) = (
        tasks.document(document_id(ALICE, task.id)).collection(PUSH_CONFIGS).stream()
    )
    config_document.reference.update({"config": json_of.CONFIG_FULL})
    stored = store.get(ALICE, task.id)
    assert stored is not None and stored.task == task
    assert [logged.event for logged in store.events(ALICE, task.id)] == events
    assert [c.config for c in configs.list(ALICE, task.id)] == [config]


def test_the_task_document_keeps_its_log_until_it_would_outgrow_it(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    """A running task's commits each write its document alone, its latest events there; the
    commit that would take them past LOG_IN_TASK_BYTES moves them, with its own, into event
    documents in its batch, and the document's log starts empty again."""
    store = make_firestore_store()
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0", lease=Lease(turn=1, holder="h"))
    for n in range(3):
        store.cost.reset()
        current = step(store, current, [message(f"{n}.{m}", task.id) for m in range(n + 1)])
        assert store.cost.writes == 1
    assert raw_events(client, task.id) == {}
    document = raw_task(client, task.id)
    assert (document["lastSeq"], len(document["log"])) == (8, 8)
    store.cost.reset()
    big: list[Event] = [chunk(task.id, "b" * (LOG_IN_TASK_BYTES // 2), append=False)] * 2
    current = step(store, current, big)
    assert store.cost.writes == 2  # the task document, one event document
    documents = raw_events(client, task.id)
    assert [(d["first"], d["last"], len(d["events"])) for d in documents.values()] == [(1, 10, 10)]
    assert (raw_task(client, task.id)["log"], current.last_seq) == ([], 10)
    current = step(store, current, [message("after", task.id)])
    assert [e.seq for e in store.events(ALICE, task.id)] == list(range(1, 12))
    assert (len(raw_events(client, task.id)), raw_task(client, task.id)["lastSeq"]) == (1, 11)
    assert len(raw_task(client, task.id)["log"]) == 1
    assert store.get(ALICE, task.id) == current


def test_a_task_stored_before_documents_kept_a_log_reads_and_grows(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    """A task written by the store before this layout: no `log`, every event in an event
    document. Its log reads back, its next commit keeps its events in its document, and a
    tail and a resume see each event once, in order."""
    store = make_firestore_store()
    task, events = new_task()
    store.create(ALICE, task, events, dialect="v1.0", lease=Lease(turn=1, holder="h"))
    old_layout(client, task.id)
    current = store.get(ALICE, task.id)
    assert current is not None
    assert [(e.seq, e.event) for e in store.events(ALICE, task.id)] == list(enumerate(events, 1))
    tail = store.tail(ALICE, task.id, 1)
    try:
        more: list[Event] = [message("new", task.id), message("newer", task.id)]
        store.cost.reset()
        current = step(store, current, more)
        assert store.cost.writes == 1
        assert raw_task(client, task.id)["log"] == [_encode_event(e) for e in more]
        assert drain(tail, 3) == [2, 3, 4]
    finally:
        tail.close()
    assert [e.event for e in store.events(ALICE, task.id, after_seq=1)] == [events[1], *more]
    assert store.get(ALICE, task.id) == current


def test_a_task_created_ended_holds_its_log_in_its_own_document(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    store = make_firestore_store()
    task, events = new_task(state=TaskState.COMPLETED)
    store.create(ALICE, task, events, dialect="v1.0")
    assert raw_events(client, task.id) == {}
    document = client.collection("tasks").document(document_id(ALICE, task.id)).get()
    assert len(document.get("log")) == len(events)
    assert [(e.seq, e.event) for e in store.events(ALICE, task.id)] == list(enumerate(events, 1))
    assert [e.seq for e in store.events(ALICE, task.id, after_seq=1)] == [2]
    # Too big to share the task's document (its JSON and its events' past
    # LOG_IN_TASK_BYTES): an event document, as any commit's that would outgrow it.
    big, big_events = new_task(state=TaskState.COMPLETED, text="x" * (LOG_IN_TASK_BYTES // 2))
    store.create(ALICE, big, big_events, dialect="v1.0")
    assert list(raw_events(client, big.id)) == ["0000000001"]
    assert raw_task(client, big.id)["log"] == []
    assert [e.event for e in store.events(ALICE, big.id)] == big_events


def test_a_commit_too_big_for_one_document_is_split_in_the_same_batch(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    store = make_firestore_store()
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    third = EVENT_DOCUMENT_BUDGET // 3 + 1000
    turn: list[Event] = [chunk(task.id, c * third, append=c != "x") for c in "xyz"]
    store.cost.reset()
    current = store.commit(current, lifecycle.apply_all(current.task, turn), turn)
    assert store.cost.writes == 3  # the task and two event documents
    documents = raw_events(client, task.id)
    # The document's log (1, 2) moved with them.
    assert [(d["first"], d["last"]) for d in documents.values()] == [(1, 4), (5, 5)]
    assert [e.seq for e in store.events(ALICE, task.id)] == [1, 2, 3, 4, 5]
    assert store.get(ALICE, task.id) == current


def test_the_task_document_keeps_the_task_while_it_fits(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    store = make_firestore_store(task_budget=10_000)
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    document = client.document("tasks", document_id(ALICE, task.id)).get()
    assert document.get("inLog") is False
    assert document.get("task") == model_json.encode(task).decode()
    turn: list[Event] = [chunk(task.id, "x" * 20_000, append=False)]
    current = store.commit(current, lifecycle.apply_all(current.task, turn), turn)
    document = client.document("tasks", document_id(ALICE, task.id)).get()
    assert document.get("inLog") is True
    assert len(document.get("task")) < 1000  # status and metadata, no history or artifacts
    got = store.get(ALICE, task.id)
    assert got == current
    assert got is not None and got.size is current.size is None  # no JSON holds the history


def test_a_big_task_read_during_a_commit_is_one_version(
    make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, other = make_firestore_store(task_budget=200), make_firestore_store(task_budget=200)
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0")
    created = step(store, created, [message("in the document", task.id)])
    read_log = store._log

    def log_read_after_other_commits(*args: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(store, "_log", read_log)
        current = other.get(ALICE, task.id)
        assert current is not None
        # One in the document's log, then one that moves it all into an event document.
        current = step(other, current, [message("meanwhile", task.id)])
        step(other, current, [message("m" * LOG_IN_TASK_BYTES, task.id)])
        return read_log(*args, **kwargs)

    monkeypatch.setattr(store, "_log", log_read_after_other_commits)
    got = store.get(ALICE, task.id)
    assert got == created
    assert got.task == created.task  # without the events of versions 3 and 4
    assert [e.seq for e in store.events(ALICE, task.id)] == [1, 2, 3, 4, 5]


def test_a_part_over_the_limit_is_refused_naming_it(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    store = make_firestore_store(part_limit=1000)
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    store.cost.reset()
    big = Message(message_id="m", role=Role.USER, parts=(Part(text="ok"), Part(raw="A" * 2000)))
    with pytest.raises(InvalidParamsError) as refused:
        store.commit(current, task, [big])
    assert refused.value.field == "message.parts[1]"
    assert "1000 bytes per part" in refused.value.message
    with pytest.raises(InvalidParamsError) as refused:
        store.commit(current, task, [chunk(task.id, "y" * 2000)])
    assert refused.value.field == "artifact.parts[0]"
    assert (store.cost.writes, store.get(ALICE, task.id)) == (0, current)


def test_an_event_over_a_document_is_refused_naming_the_limit(
    make_firestore_store: MakeStore,
) -> None:
    store = make_firestore_store()
    task, events = new_task()
    half = Part(text="z" * (EVENT_DOCUMENT_BUDGET // 2 + 10))
    big = Message(message_id="m", role=Role.USER, parts=(half, half))
    with pytest.raises(InvalidParamsError) as refused:
        store.create(ALICE, task, [*events, big], dialect="v1.0")
    assert f"{EVENT_DOCUMENT_BUDGET} bytes per message" in refused.value.message
    assert store.get(ALICE, task.id) is None


def test_every_document_expires_and_the_log_not_before_its_task(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    store = make_firestore_store(retention_days=7)
    # Its log too big for its document: an event document.
    task, events = new_task(text="x" * LOG_IN_TASK_BYTES)
    before = datetime.now(UTC).replace(microsecond=0)  # stored times are to the millisecond
    current = store.create(ALICE, task, events, dialect="v1.0", message_key=sent("m-1"))
    expiries = [
        client.document("tasks", document_id(ALICE, task.id)).get().get("expireAt"),
        *[s.get("expireAt") for s in client.collection("idempotency").stream()],
    ]
    [log_expiry] = [d["expireAt"] for d in raw_events(client, task.id).values()]
    for expiry in expiries:
        assert before + timedelta(days=7) <= expiry <= datetime.now(UTC) + timedelta(days=7)
    slack = timedelta(days=7 * LOG_SLACK)
    assert before + slack <= log_expiry <= datetime.now(UTC) + slack
    store.commit(current, task, [])
    assert client.document("tasks", document_id(ALICE, task.id)).get().get("expireAt") > expiries[0]


def test_a_task_that_lives_on_keeps_its_oldest_events_and_configs(
    client: firestore.Client, make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_firestore_store(retention_days=10)
    configs = FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost)
    # Its first events in an event document (too big for the task's), the next in its own.
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    current = store.commit(current, task, [message("x" * LOG_IN_TASK_BYTES, task.id)])
    configs.put(
        ALICE, PushConfig(id="c", task_id=task.id, url="https://h.example.com/"), dialect="1.0"
    )
    # The config flagged the task (firestore_push): a commit goes on from a fresh read.
    current = store.get(ALICE, task.id) or current
    start = datetime.now(UTC)

    def log_expiries() -> list[datetime]:
        config = client.collection("tasks", document_id(ALICE, task.id), PUSH_CONFIGS).stream()
        events = [d["expireAt"] for d in raw_events(client, task.id).values()]
        return events + [s.get("expireAt") for s in config]

    # Four days on, a commit finds its log due to outlive it: its events are in the task's
    # document, which expires with it.
    later = start + timedelta(days=4)
    monkeypatch.setattr("shared.store.firestore.utc_now", lambda: later)
    store.cost.reset()
    current = store.commit(current, task, [message("day 4", task.id)])
    assert store.cost.writes == 1
    # Six days on, less than a retention of the log's life is left: every event document and
    # config is written again, so none expires before the task (a retention after its last
    # commit).
    later = start + timedelta(days=6)
    store.cost.reset()
    current = store.commit(current, task, [message("day 6", task.id)])
    assert store.cost.writes == 1 + 2  # the commit, the event document and the config
    task_expiry = client.document("tasks", document_id(ALICE, task.id)).get().get("expireAt")
    assert task_expiry >= later + timedelta(days=10) - timedelta(seconds=1)
    assert all(expiry >= task_expiry for expiry in log_expiries())
    assert len(log_expiries()) == 2
    assert len(raw_task(client, task.id)["log"]) == 2
    # The next commits are plain again, each leaving the log outliving the task.
    for day in (7, 12, 15, 20):
        later = start + timedelta(days=day)
        current = store.commit(current, task, [message(f"day {day}", task.id)])
        task_expiry = client.document("tasks", document_id(ALICE, task.id)).get().get("expireAt")
        assert all(expiry >= task_expiry for expiry in log_expiries()), day
    # One of them moves the document's log (and itself) into an event document: written to
    # expire a log's retention after it, it outlives the task too.
    store.cost.reset()
    later = start + timedelta(days=21)
    current = store.commit(current, task, [message("y" * LOG_IN_TASK_BYTES, task.id)])
    assert store.cost.writes == 2
    task_expiry = client.document("tasks", document_id(ALICE, task.id)).get().get("expireAt")
    assert all(expiry >= task_expiry for expiry in log_expiries())
    assert len(log_expiries()) == 3
    assert [e.seq for e in store.events(ALICE, task.id)] == list(range(1, 11))


def test_data_firestore_refuses_in_a_map_round_trips(make_firestore_store: MakeStore) -> None:
    store = make_firestore_store()
    deep: dict[str, Any] = {"__reserved__": 1, "": "empty key"}
    for _ in range(30):
        deep = {"nested": deep}
    task, events = new_task()
    data = Message(message_id="d", role=Role.AGENT, parts=(Part(data=deep, metadata=deep),))
    task = lifecycle.apply(task, data)
    store.create(ALICE, task, [*events, data], dialect="v1.0")
    assert store.get(ALICE, task.id).task == task  # type: ignore[union-attr]
    assert store.events(ALICE, task.id)[-1].event == data


def test_the_store_modules_load_no_google_client() -> None:
    probe = (
        "import sys, shared.store, shared.store.memory, shared.store.paging, shared.ports; "
        "sys.exit('google.cloud.firestore' in sys.modules)"
    )
    root = Path(__file__).parents[2]
    assert subprocess.run([sys.executable, "-c", probe], cwd=root, check=False).returncode == 0


@pytest.fixture
def retried_after_success(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every batch commit is sent twice, as the client library retries a commit whose answer
    was lost: the first succeeds, the retry meets the first's writes."""
    original = WriteBatch.commit

    def twice(self: WriteBatch, *args: Any, **kwargs: Any) -> Any:
        writes = list(self._write_pbs)
        original(self, *args, **kwargs)
        self._write_pbs = writes
        return original(self, *args, **kwargs)

    monkeypatch.setattr(WriteBatch, "commit", twice)


@pytest.mark.usefixtures("retried_after_success")
def test_a_commit_retried_after_it_succeeded_is_recognised_as_ours(
    make_firestore_store: MakeStore,
) -> None:
    store = make_firestore_store()
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0", message_key=sent("m-1"))
    turn: list[Event] = [message("more", task.id)]
    committed = store.commit(created, lifecycle.apply_all(created.task, turn), turn)
    assert committed.version == 2
    again = [message("again", task.id)]
    # The revision returned is the stored one (its document's log too): the next commit goes
    # through, and so does one that moves the log into an event document.
    last = store.commit(committed, lifecycle.apply_all(committed.task, again), again)
    assert store.get(ALICE, task.id) == last
    big = [message("b" * LOG_IN_TASK_BYTES, task.id)]
    moved = store.commit(last, last.task, big)
    after = [message("after", task.id)]
    last = store.commit(moved, moved.task, after)
    assert store.get(ALICE, task.id) == last
    assert [e.event for e in store.events(ALICE, task.id)] == [
        *events,
        *turn,
        *again,
        *big,
        *after,
    ]


def test_a_commit_aborted_by_contention_is_a_lost_race(
    make_firestore_store: MakeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_firestore_store()
    task, events = new_task()
    created = store.create(ALICE, task, events, dialect="v1.0")

    def aborted(self: WriteBatch, *args: Any, **kwargs: Any) -> Any:
        raise google_errors.Aborted("Transaction lock timeout.")  # type: ignore[no-untyped-call]

    turn: list[Event] = [message("more", task.id)]
    with monkeypatch.context() as patch:
        patch.setattr(WriteBatch, "commit", aborted)
        with pytest.raises(VersionConflict):
            store.commit(created, lifecycle.apply_all(created.task, turn), turn)
    assert store.get(ALICE, task.id) == created  # nothing written: the writer decides again
    assert store.commit(created, lifecycle.apply_all(created.task, turn), turn).version == 2


def test_a_commit_over_one_request_is_refused_before_anything_is_written(
    make_firestore_store: MakeStore,
) -> None:
    store = make_firestore_store()
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    store.cost.reset()
    piece = EVENT_DOCUMENT_BUDGET // 2
    turn: list[Event] = [
        chunk(task.id, "w" * piece, append=n > 0) for n in range(COMMIT_BUDGET // piece + 1)
    ]
    with pytest.raises(LimitExceeded, match=r"more than one Firestore request carries"):
        store.commit(current, lifecycle.apply_all(current.task, turn), turn)
    assert (store.cost.writes, store.get(ALICE, task.id)) == (0, current)
    fits = turn[: COMMIT_BUDGET // piece - 1]
    assert store.commit(current, lifecycle.apply_all(current.task, fits), fits).version == 2


def test_the_log_a_commit_writes_again_counts_in_its_request(
    make_firestore_store: MakeStore,
) -> None:
    """The task document's log goes out in every commit (kept, or moved): a commit whose own
    events fit in one request, but not with that log, is refused naming the sizes."""
    store = make_firestore_store()
    task, events = new_task()
    current = store.create(ALICE, task, events, dialect="v1.0")
    kept = [message("k" * (LOG_IN_TASK_BYTES - 10_000), task.id)]
    current = store.commit(current, task, kept)  # in the document: the task's JSON is small
    piece = EVENT_DOCUMENT_BUDGET // 2
    pieces = (COMMIT_BUDGET - 100_000) // piece
    turn: list[Event] = [chunk(task.id, "w" * piece, append=n > 0) for n in range(pieces)]
    turn.append(chunk(task.id, "w" * (COMMIT_BUDGET - 100_000 - pieces * piece)))
    assert sum(_utf8_size(_encode_event(e)) for e in turn) < COMMIT_BUDGET
    store.cost.reset()
    with pytest.raises(LimitExceeded, match=r"a commit of 41\d{5} bytes of events is more"):
        store.commit(current, task, turn)
    assert (store.cost.writes, store.get(ALICE, task.id)) == (0, current)
    fits = turn[:-2]
    assert store.commit(current, task, fits).version == current.version + 1
    assert len(store.events(ALICE, task.id)) == 3 + len(fits)


def test_a_task_stored_before_the_push_config_flag_reads_its_configs(
    client: firestore.Client, make_firestore_store: MakeStore
) -> None:
    """A document without `pushConfigs` (stored before it existed) may have configs: the
    notifier reads them. A new one has none until a config is put."""
    store = make_firestore_store()
    task, events = new_task()
    assert store.create(ALICE, task, events, dialect="v1.0").push_configs is False
    document = client.document("tasks", document_id(ALICE, task.id))
    assert document.get().get("pushConfigs") is False
    document.update({"pushConfigs": firestore.DELETE_FIELD})
    old = store.get(ALICE, task.id)
    assert old is not None and old.push_configs


@given(text=st.text())
def test_a_texts_size_is_its_utf8s(text: str) -> None:
    """The sizes checked against Firestore's limits: ASCII text measured without a copy."""
    assert _utf8_size(text) == len(text.encode("utf-8", "surrogatepass"))
