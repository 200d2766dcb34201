"""The PushConfigStore contract, run against the memory store and Firestore: configs scoped
by owner (another owner's config is never read, replaced, listed, leased or deleted), the
sending lease (one holder at a time; only the holder records progress or gives it back), and
the per-task limit (counted and written in one step: racing puts never pass it)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import lifecycle
from shared.conflicts import retry_on_conflict
from shared.errors import PushConfigQuotaError
from shared.jobs import PushJob
from shared.model import PushAuthentication, PushConfig, TaskState, utc_now
from shared.ports import (
    PushConfigStore,
    StoredPushConfig,
    StoredTask,
    TaskStore,
    TooManyPushConfigs,
)
from shared.push_notify import SWEEP_AFTER, NewsSweeper, PushNotifier
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_push import FirestorePushConfigStore
from shared.store.memory import MemoryTaskStore
from shared.store.memory_push import MemoryPushConfigStore
from shared.store.notifying import NotifyingTaskStore
from tests.store.conftest import MakeStore
from tests.store.factory import message, new_task, status


@pytest.fixture(params=["memory", "firestore"])
def push_store(request: pytest.FixtureRequest) -> PushConfigStore:
    if request.param == "memory":
        return MemoryPushConfigStore()
    make: MakeStore = request.getfixturevalue("make_firestore_store")
    tasks = make()
    return FirestorePushConfigStore(tasks.client, retention=tasks.retention, cost=tasks.cost)


A, B = "owner-a", "owner-b"


def config(config_id: str, task_id: str = "t1", url: str = "https://h.example.com/") -> PushConfig:
    auth = PushAuthentication(schemes=("Bearer",), credentials="c")
    return PushConfig(id=config_id, task_id=task_id, url=url, token="tok", authentication=auth)


def test_put_get_list_delete(push_store: PushConfigStore) -> None:
    assert push_store.get(A, "t1", "a") is None
    assert push_store.list(A, "t1") == []
    stored = push_store.put(A, config("a"), dialect="1.0")
    assert (stored.config, stored.owner, stored.dialect, stored.delivered_seq) == (
        config("a"),
        A,
        "1.0",
        0,
    )
    push_store.put(A, config("b"), dialect="0.3")
    push_store.put(A, config("x", task_id="t2"), dialect="0.1")
    assert [c.config.id for c in push_store.list(A, "t1")] == ["a", "b"]  # oldest first
    got = push_store.get(A, "t1", "b")
    assert got is not None and got.dialect == "0.3"
    assert push_store.delete(A, "t1", "a") is True
    assert push_store.delete(A, "t1", "a") is False
    assert [c.config.id for c in push_store.list(A, "t1")] == ["b"]
    assert [c.config.id for c in push_store.list(A, "t2")] == ["x"]


def test_put_replaces_and_keeps_the_order(push_store: PushConfigStore) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    push_store.put(A, config("b"), dialect="1.0")
    push_store.put(A, config("a", url="https://other.example.com/"), dialect="0.3")
    listed = push_store.list(A, "t1")
    assert [(c.config.id, c.config.url, c.dialect) for c in listed] == [
        ("a", "https://other.example.com/", "0.3"),
        ("b", "https://h.example.com/", "1.0"),
    ]


def test_the_sending_lease_has_one_holder_and_only_it_records_progress(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    until = utc_now() + timedelta(minutes=5)
    taken = push_store.begin_delivery(A, "t1", "a", "h1", until)
    assert taken is not None and taken.delivered_seq == 0
    assert push_store.begin_delivery(A, "t1", "a", "h2", until) is None  # busy
    push_store.delivered(A, "t1", "a", "h2", 7)  # not the holder: nothing happens
    push_store.end_delivery(A, "t1", "a", "h2")
    assert delivered(push_store) == 0
    assert push_store.begin_delivery(A, "t1", "a", "h3", until) is None  # h1 still holds it
    push_store.delivered(A, "t1", "a", "h1", 3)
    push_store.put(A, config("a", url="https://other.example.com/"), dialect="1.0")
    push_store.delivered(A, "t1", "a", "h1", 4)  # replacing the config kept the lease
    assert delivered(push_store) == 4
    push_store.end_delivery(A, "t1", "a", "h1")
    again = push_store.begin_delivery(A, "t1", "a", "h2", until)
    assert again is not None and again.delivered_seq == 4
    assert push_store.begin_delivery(A, "t1", "a", "h9", until) is None
    assert push_store.begin_delivery(A, "t1", "x", "h9", until) is None  # no such config


def test_an_expired_lease_is_taken_over_and_its_old_holder_is_ignored(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    assert push_store.begin_delivery(A, "t1", "a", "stale", utc_now() - timedelta(seconds=1))
    assert push_store.begin_delivery(A, "t1", "a", "live", utc_now() + timedelta(minutes=5))
    push_store.delivered(A, "t1", "a", "stale", 9)  # a delivery that outlived its lease
    push_store.end_delivery(A, "t1", "a", "stale")  # must not release the live one's lease
    assert delivered(push_store) == 0
    later = utc_now() + timedelta(minutes=5)
    assert push_store.begin_delivery(A, "t1", "a", "other", later) is None
    push_store.delivered(A, "t1", "a", "live", 2)
    assert delivered(push_store) == 2


def delivered(push_store: PushConfigStore) -> int:
    stored = push_store.get(A, "t1", "a")
    assert stored is not None
    return stored.delivered_seq


def test_another_owners_config_is_out_of_reach(push_store: PushConfigStore) -> None:
    """B uses A's task id and config id: B reads, lists, leases and deletes nothing of A's,
    and B's config of the same ids is a config of B's own that leaves A's as it was."""
    mine = push_store.put(A, config("a"), dialect="1.0", delivered_seq=3)
    until = utc_now() + timedelta(minutes=5)
    assert push_store.get(B, "t1", "a") is None
    assert push_store.list(B, "t1") == []
    assert push_store.begin_delivery(B, "t1", "a", "h", until) is None
    push_store.delivered(B, "t1", "a", "h", 99)
    push_store.end_delivery(B, "t1", "a", "h")
    assert push_store.delete(B, "t1", "a") is False
    theirs = push_store.put(B, config("a", url="https://evil.example.com/"), dialect="0.1")
    assert (theirs.owner, theirs.delivered_seq) == (B, 0)
    assert push_store.get(A, "t1", "a") == mine
    assert push_store.list(A, "t1") == [mine]
    assert push_store.begin_delivery(B, "t1", "a", "hb", until) is not None
    assert push_store.begin_delivery(A, "t1", "a", "ha", until) is not None  # not B's lease
    assert push_store.delete(B, "t1", "a") is True
    assert push_store.get(A, "t1", "a") == mine


@pytest.mark.parametrize("bad", ["/", "a/b", "..", "x" * 2000, "\ud800"])
def test_ids_off_the_rule_are_refused(push_store: PushConfigStore, bad: str) -> None:
    for hostile in (config(bad), config("a", task_id=bad)):
        with pytest.raises(ValueError, match=r" id (must|has \d+ characters)"):
            push_store.put(A, hostile, dialect="1.0")
    assert push_store.list(A, "t1") == []


def test_a_wanted_event_makes_the_config_lag_until_delivered(push_store: PushConfigStore) -> None:
    push_store.put(A, config("a"), dialect="1.0", delivered_seq=2)
    push_store.put(A, config("b"), dialect="1.0")
    now = utc_now()
    push_store.want(A, "t1", "a", 5, now + timedelta(seconds=60))
    push_store.want(A, "t1", "a", 4, now + timedelta(seconds=90))  # older news: no change
    push_store.want(A, "t1", "gone", 9, now)  # no such config: nothing happens
    push_store.want(B, "t1", "a", 9, now)  # another owner's ids name no config of A's
    stored = push_store.get(A, "t1", "a")
    assert stored is not None and (stored.delivered_seq, stored.wanted_seq) == (2, 5)
    assert push_store.lagging(now + timedelta(seconds=59), 10) == []  # not due yet
    due = push_store.lagging(now + timedelta(seconds=61), 10)
    assert [(c.owner, c.config.id, c.wanted_seq) for c in due] == [(A, "a", 5)]
    assert push_store.begin_delivery(A, "t1", "a", "h", now + timedelta(minutes=5))
    push_store.delivered(A, "t1", "a", "h", 4)  # not caught up yet
    assert len(push_store.lagging(now + timedelta(seconds=61), 10)) == 1
    push_store.delivered(A, "t1", "a", "h", 5)
    assert push_store.lagging(now + timedelta(days=1), 10) == []


def test_the_earliest_sweep_time_stands_and_lagging_is_oldest_first_and_bounded(
    push_store: PushConfigStore,
) -> None:
    now = utc_now()
    for index, config_id in enumerate(["a", "b", "c"]):
        push_store.put(B if config_id == "b" else A, config(config_id), dialect="1.0")
        push_store.want(
            B if config_id == "b" else A, "t1", config_id, 3, now - timedelta(seconds=10 - index)
        )
    push_store.want(A, "t1", "c", 4, now - timedelta(seconds=30))  # earlier: it stands
    push_store.want(A, "t1", "a", 4, now + timedelta(seconds=30))  # later: it does not
    due = push_store.lagging(now, 2)
    assert [(c.owner, c.config.id) for c in due] == [(A, "c"), (A, "a")]
    assert [c.config.id for c in push_store.lagging(now, 10)] == ["c", "a", "b"]


def test_a_failed_attempt_defers_the_sweep_and_the_last_one_is_recorded(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    now = utc_now()
    push_store.want(A, "t1", "a", 3, now)
    until = now + timedelta(minutes=5)
    assert push_store.begin_delivery(A, "t1", "a", "h1", until)
    later = now + timedelta(hours=1)
    push_store.attempt_failed(A, "t1", "a", "other", "x", at=now, retry_at=None)  # not the holder
    push_store.attempt_failed(A, "t1", "a", "h1", "HTTP 500", at=now, retry_at=later)
    assert push_store.lagging(now + timedelta(minutes=59), 10) == []  # the queue retries
    assert len(push_store.lagging(later, 10)) == 1
    push_store.attempt_failed(A, "t1", "a", "h1", "HTTP 503", at=now, retry_at=None)
    push_store.end_delivery(A, "t1", "a", "h1")
    failed = push_store.get(A, "t1", "a")
    assert failed is not None and failed.last_error == "HTTP 503"
    assert failed.failed_at is not None
    assert abs((failed.failed_at - now).total_seconds()) < 0.01
    assert push_store.lagging(now + timedelta(days=1), 10) == []  # no sweep retries it
    assert push_store.list(A, "t1") == [failed]
    # Updating the config forgets the failure and makes it due to the next sweep.
    replaced = push_store.put(A, config("a", url="https://new.example.com/"), dialect="1.0")
    assert (replaced.last_error, replaced.failed_at, replaced.wanted_seq) == (None, None, 3)
    assert [c.config.url for c in push_store.lagging(utc_now(), 10)] == ["https://new.example.com/"]


def test_a_delivery_that_catches_up_forgets_the_failure(push_store: PushConfigStore) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    now = utc_now()
    push_store.want(A, "t1", "a", 2, now)
    assert push_store.begin_delivery(A, "t1", "a", "h1", now + timedelta(minutes=5))
    push_store.attempt_failed(A, "t1", "a", "h1", "refused", at=now, retry_at=None)
    push_store.end_delivery(A, "t1", "a", "h1")
    push_store.want(A, "t1", "a", 3, now)  # the next event
    assert push_store.begin_delivery(A, "t1", "a", "h2", now + timedelta(minutes=5))
    push_store.delivered(A, "t1", "a", "h2", 3)
    stored = push_store.get(A, "t1", "a")
    assert stored is not None and (stored.last_error, stored.failed_at) == (None, None)
    assert push_store.lagging(now + timedelta(days=1), 10) == []


def test_failures_in_a_row_and_the_back_off_are_kept_until_one_gets_through(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    now = utc_now()
    push_store.want(A, "t1", "a", 2, now)
    until = now + timedelta(minutes=5)
    for n in (1, 2, 3):
        assert push_store.begin_delivery(A, "t1", "a", f"h{n}", until)
        off = now + timedelta(seconds=5 * 2**n)
        push_store.attempt_failed(
            A, "t1", "a", f"h{n}", "HTTP 500", at=now, retry_at=until, backoff_until=off
        )
        push_store.attempt_failed(A, "t1", "a", "other", "x", at=now, retry_at=None)  # no holder
        push_store.end_delivery(A, "t1", "a", f"h{n}")
        stored = push_store.get(A, "t1", "a")
        assert stored is not None and stored.failures == n
        assert stored.backoff_until is not None
        assert abs((stored.backoff_until - off).total_seconds()) < 0.01
    assert push_store.begin_delivery(A, "t1", "a", "h4", until)
    push_store.delivered(A, "t1", "a", "h4", 1)  # one event got through: no back-off
    push_store.end_delivery(A, "t1", "a", "h4")
    stored = push_store.get(A, "t1", "a")
    assert stored is not None and (stored.failures, stored.backoff_until) == (0, None)
    assert push_store.begin_delivery(A, "t1", "a", "h5", until)
    push_store.attempt_failed(A, "t1", "a", "h5", "x", at=now, retry_at=None, backoff_until=until)
    push_store.end_delivery(A, "t1", "a", "h5")
    # Replacing the config retries it at once.
    replaced = push_store.put(A, config("a", url="https://new.example.com/"), dialect="1.0")
    assert (replaced.failures, replaced.backoff_until) == (0, None)
    stored = push_store.get(A, "t1", "a")
    assert stored is not None and (stored.failures, stored.backoff_until) == (0, None)


def test_the_lease_is_kept_while_more_is_wanted_than_was_delivered(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    now = utc_now()
    until = now + timedelta(minutes=5)
    push_store.want(A, "t1", "a", 1, now)
    assert push_store.begin_delivery(A, "t1", "a", "h1", until)
    push_store.delivered(A, "t1", "a", "h1", 1)
    push_store.want(A, "t1", "a", 3, now)  # a commit while h1 sent
    kept = push_store.end_delivery(A, "t1", "a", "h1", unless_wanted=True)
    assert kept is not None and (kept.delivered_seq, kept.wanted_seq) == (1, 3)
    assert push_store.begin_delivery(A, "t1", "a", "h2", until) is None  # h1 holds it still
    assert push_store.end_delivery(A, "t1", "a", "h2", unless_wanted=True) is None  # no holder
    push_store.delivered(A, "t1", "a", "h1", 3)
    assert push_store.end_delivery(A, "t1", "a", "h1", unless_wanted=True) is None  # let go
    assert push_store.begin_delivery(A, "t1", "a", "h2", until)
    push_store.want(A, "t1", "a", 4, now)
    # Without `unless_wanted` (a failed or cut-short delivery), the lease goes whatever lags.
    assert push_store.end_delivery(A, "t1", "a", "h2") is None
    assert push_store.begin_delivery(A, "t1", "a", "h3", until)


def test_a_want_racing_the_release_is_seen_by_the_holder_or_its_own_delivery(
    push_store: PushConfigStore,
) -> None:
    """Of a commit's `want` then `begin_delivery`, racing the holder's release: either the
    holder keeps the lease and sees the event wanted, or the commit's delivery takes it."""
    push_store.put(A, config("a"), dialect="1.0")
    until = utc_now() + timedelta(minutes=5)

    def race(seq: int) -> tuple[StoredPushConfig | None, StoredPushConfig | None]:
        start = threading.Barrier(2)

        def release() -> StoredPushConfig | None:
            start.wait()
            return push_store.end_delivery(A, "t1", "a", f"h{seq}", unless_wanted=True)

        def commit() -> StoredPushConfig | None:
            start.wait()
            push_store.want(A, "t1", "a", seq, utc_now())
            return push_store.begin_delivery(A, "t1", "a", f"c{seq}", until)

        with ThreadPoolExecutor(2) as pool:
            kept, took = pool.submit(release), pool.submit(commit)
            return kept.result(), took.result()

    for seq in range(1, 9):
        assert push_store.begin_delivery(A, "t1", "a", f"h{seq}", until)
        push_store.delivered(A, "t1", "a", f"h{seq}", seq - 1)
        kept, took = race(seq)
        assert (kept is None) != (took is None), (seq, kept, took)
        if kept is not None:
            assert kept.wanted_seq == seq
            push_store.end_delivery(A, "t1", "a", f"h{seq}")
        else:
            push_store.end_delivery(A, "t1", "a", f"c{seq}")


@given(
    st.lists(
        st.tuples(st.sampled_from(["want", "delivered", "failed"]), st.integers(0, 50)),
        max_size=30,
    )
)
def test_a_config_lags_exactly_while_it_has_not_got_what_was_wanted(
    steps: list[tuple[str, int]],
) -> None:
    """Any interleaving of commits (want), deliveries and last failed attempts: a sweep finds
    the config exactly when it lags and its last attempt did not fail since."""
    store = MemoryPushConfigStore()
    store.put(A, config("a"), dialect="1.0")
    now = utc_now()
    assert store.begin_delivery(A, "t1", "a", "h", now + timedelta(days=1))
    wanted = delivered = 0
    given_up = False
    for kind, seq in steps:
        if kind == "want":
            store.want(A, "t1", "a", seq, now)  # a commit: it retries a failed config
            wanted, given_up = max(wanted, seq), False
        elif kind == "delivered":
            store.delivered(A, "t1", "a", "h", seq)
            delivered = seq
            given_up = given_up and seq < wanted
        else:
            store.attempt_failed(A, "t1", "a", "h", "x", at=now, retry_at=None)
            given_up = True
    stored = store.get(A, "t1", "a")
    assert stored is not None and (stored.wanted_seq, stored.delivered_seq) == (wanted, delivered)
    lags = wanted > delivered and not given_up
    assert bool(store.lagging(now + timedelta(days=2), 10)) == lags
    assert bool(store.lagging(now + timedelta(days=2), 10)) == lags  # looking changes nothing


def test_a_want_that_comes_after_its_delivery_is_forgotten_by_the_sweep(
    push_store: PushConfigStore,
) -> None:
    push_store.put(A, config("a"), dialect="1.0")
    push_store.put(A, config("b"), dialect="1.0")
    now = utc_now()
    assert push_store.begin_delivery(A, "t1", "a", "h", now + timedelta(minutes=5))
    push_store.delivered(A, "t1", "a", "h", 5)  # an earlier delivery sent event 5 already
    push_store.want(A, "t1", "a", 5, now)  # then the commit of event 5 says it is wanted
    push_store.want(A, "t1", "b", 5, now + timedelta(seconds=1))  # b does lag
    later = now + timedelta(minutes=1)
    assert [c.config.id for c in push_store.lagging(later, 10)] == ["b"]
    assert [c.config.id for c in push_store.lagging(later, 1)] == ["b"]  # a no longer comes first


# -- the task's push config flag: the notifier reads configs only of a task that has some --


@pytest.fixture(params=["memory", "firestore"])
def stores(
    request: pytest.FixtureRequest,
) -> tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore]:
    """A task store and the push config store beside it, as shared.app wires them."""
    if request.param == "memory":
        memory = MemoryTaskStore()
        return memory, MemoryPushConfigStore(memory.cost, tasks=memory)
    pair: tuple[FirestoreTaskStore, PushConfigStore] = request.getfixturevalue("firestore_stores")
    return pair


@pytest.fixture
def firestore_stores(make_firestore_store: MakeStore) -> tuple[FirestoreTaskStore, PushConfigStore]:
    """The Firestore task store and its push config store, as shared.app wires them."""
    tasks = make_firestore_store()
    return tasks, FirestorePushConfigStore(tasks.client, retention=tasks.retention, cost=tasks.cost)


class Queued:
    """A TaskQueue that records the names of what it was given."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def enqueue(self, name: str, payload: dict[str, Any]) -> bool:
        self.names.append(name)
        return True

    def close(self) -> None:
        """Nothing to let go of."""


def test_a_task_says_whether_a_push_config_was_put_on_it(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    task, events = new_task()
    created = tasks.create(A, task, events, dialect="v1.0")
    assert created.push_configs is False
    assert tasks.get(A, task.id) == created
    assert not read(tasks, task.id).push_configs
    mallorys = tasks.create(B, *new_task(task_id=task.id), dialect="v1.0")
    configs.put(A, config("a", task_id=task.id), dialect="1.0")
    marked = tasks.get(A, task.id)
    assert marked is not None and marked.push_configs
    done = [status(task, TaskState.COMPLETED)]
    committed = tasks.commit(marked, lifecycle.apply_all(marked.task, done), done)
    assert committed.push_configs
    assert read(tasks, task.id).push_configs
    # Another owner's task of the same id is another task: not marked.
    assert tasks.get(B, task.id) == mallorys and not mallorys.push_configs
    # Deleting the config leaves the mark: the notifier then reads an empty list.
    configs.delete(A, task.id, "a")
    assert read(tasks, task.id).push_configs


def read(tasks: MemoryTaskStore | FirestoreTaskStore, task_id: str) -> StoredTask:
    """The owner A's task as read now."""
    stored = tasks.get(A, task_id)
    assert stored is not None
    return stored


def test_a_config_of_a_missing_task_makes_no_task(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    configs.put(A, config("a", task_id="missing"), dialect="1.0")
    assert tasks.get(A, "missing") is None
    assert [c.config.id for c in configs.list(A, "missing")] == ["a"]
    created = tasks.create(A, *new_task(task_id="missing"), dialect="v1.0")
    assert created.task.id == "missing"


def test_a_commit_of_a_task_without_push_configs_reads_none(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    queue = Queued()
    notifying = NotifyingTaskStore(tasks, PushNotifier(configs, queue))
    task, events = new_task()
    created = notifying.create(A, task, events, dialect="v1.0")
    done = [status(task, TaskState.COMPLETED)]
    tasks.cost.reset()
    notifying.commit(created, lifecycle.apply_all(task, done), done)
    assert (tasks.cost.reads, tasks.cost.writes) == (0, 1)  # the task document, its log in it
    assert queue.names == []


def test_a_config_put_while_a_commit_is_under_way_hears_of_it(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    """The race: a config is put after a commit read the task and before it wrote. The commit
    either loses (Firestore: the mark moved the task's update time), and read again sees the
    mark, or builds on the marked task (memory): either way the notifier reads the config and
    queues its delivery. A config put after the commit is no concern of that commit."""
    tasks, configs = stores
    queue = Queued()
    notifying = NotifyingTaskStore(tasks, PushNotifier(configs, queue))
    task, events = new_task()
    notifying.create(A, task, events, dialect="v1.0")
    read_before = notifying.get(A, task.id)
    assert read_before is not None and not read_before.push_configs
    configs.put(A, config("a", task_id=task.id), dialect="1.0", delivered_seq=read_before.last_seq)
    done = [status(task, TaskState.COMPLETED)]
    snapshots = [read_before]

    def attempt() -> StoredTask:
        current = snapshots.pop() if snapshots else notifying.get(A, task.id)
        assert current is not None
        return notifying.commit(current, lifecycle.apply_all(current.task, done), done)

    committed = retry_on_conflict(attempt, subject="the race's commit")
    assert committed.push_configs
    assert queue.names == [PushJob(A, task.id, "a", committed.last_seq).name]
    wanted = configs.get(A, task.id, "a")
    assert wanted is not None and wanted.wanted_seq == committed.last_seq


# -- a commit whose notifier never ran: the news sweep (shared.push_notify.NewsSweeper) --


def with_config(
    tasks: TaskStore,
    configs: PushConfigStore,
    task_id: str = "t1",
    owner: str = A,
) -> StoredTask:
    """A task with one config `a` that has had every event so far, as read after the put."""
    created = tasks.create(owner, *new_task(task_id=task_id), dialect="v1.0")
    configs.put(owner, config("a", task_id=task_id), dialect="1.0", delivered_seq=created.last_seq)
    stored = tasks.get(owner, task_id)
    assert stored is not None
    return stored


def committed_alone(tasks: TaskStore, current: StoredTask, state: TaskState) -> StoredTask:
    """A commit of a status with no notifier after it: its process died right then."""
    done = [status(current.task, state)]
    return tasks.commit(current, lifecycle.apply_all(current.task, done), done)


def test_a_commit_with_news_for_configs_is_found_by_when_it_landed(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    before = utc_now()
    news = committed_alone(tasks, with_config(tasks, configs), TaskState.WORKING)
    # No news: a message joining the history of a task with configs, a task without any.
    said = [message("more", "t1")]
    committed = tasks.commit(news, lifecycle.apply_all(news.task, said), said)
    plain = tasks.create(A, *new_task(task_id="t2"), dialect="v1.0")
    committed_alone(tasks, plain, TaskState.COMPLETED)
    later = utc_now() + timedelta(seconds=1)
    found = tasks.push_news(before, later, 10)
    if isinstance(tasks, MemoryTaskStore):  # its notifier dies with all its tasks: none
        assert found == []
        return
    (only,) = found
    assert (only.owner, only.task_id, only.last_seq) == (A, "t1", committed.last_seq)
    assert before <= only.at <= later
    assert tasks.push_news(only.at + timedelta(microseconds=1), later, 10) == []  # since
    assert tasks.push_news(before, only.at, 10) == []  # before: not yet


def test_the_news_of_every_owner_comes_oldest_first_page_after_page(
    firestore_stores: tuple[FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = firestore_stores
    before = utc_now()
    order = []
    for n, owner in enumerate([A, B, A, B, A]):
        current = with_config(tasks, configs, f"t{n}", owner)
        order.append(committed_alone(tasks, current, TaskState.WORKING).task.id)
    later = utc_now() + timedelta(seconds=1)
    seen: list[str] = []
    page = tasks.push_news(before, later, 2)
    while page:
        seen += [news.task_id for news in page]
        page = tasks.push_news(before, later, 2, after=page[-1])
    assert seen == order


def test_the_news_sweep_queues_what_a_dead_notifier_never_recorded_once(
    firestore_stores: tuple[FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = firestore_stores
    queue = Queued()
    sweep = NewsSweeper(tasks, configs, queue)
    lost = committed_alone(tasks, with_config(tasks, configs, "lost"), TaskState.COMPLETED)
    notifying = NotifyingTaskStore(tasks, PushNotifier(configs, queue))
    heard = with_config(notifying, configs, "heard")
    done = [status(heard.task, TaskState.COMPLETED)]
    heard = notifying.commit(heard, lifecycle.apply_all(heard.task, done), done)
    assert queue.names == [PushJob(A, "heard", "a", heard.last_seq).name]
    (landed,) = [
        n.at for n in tasks.push_news(lost.updated_at, utc_now(), 10) if n.task_id == "lost"
    ]
    soon = landed + SWEEP_AFTER / 2
    assert sweep(soon) == 0, "a notifier has its SWEEP_AFTER to record what it wanted"
    due = landed + SWEEP_AFTER * 1.5
    assert sweep(due) == 1
    job = PushJob(A, "lost", "a", lost.last_seq)
    assert queue.names[1:] == [job.name]
    wanted = configs.get(A, "lost", "a")
    assert wanted is not None and wanted.wanted_seq == lost.last_seq, "it lags now: swept on"
    assert sweep(due + SWEEP_AFTER / 4) == 0 and len(queue.names) == 2, "recorded: not again"
    assert sweep(landed + SWEEP_AFTER * 2.5) == 0  # past the window


def test_lagging_configs_page_after_page_each_once(push_store: PushConfigStore) -> None:
    """The sweep's pages: each goes on past the last config of the one before, ties (the
    configs of one commit share their sweep time) included."""
    now = utc_now()
    for n in range(5):
        push_store.put(A, config(f"c{n}", task_id=f"t{n // 3}"), dialect="1.0")
        push_store.want(A, f"t{n // 3}", f"c{n}", 3, now + timedelta(seconds=n // 3))
    later = now + timedelta(minutes=1)
    seen: list[str] = []
    page = push_store.lagging(later, 2)
    while page:
        assert len(page) <= 2
        seen += [c.config.id for c in page]
        page = push_store.lagging(later, 2, after=page[-1])
    assert sorted(seen) == [f"c{n}" for n in range(5)]  # each once
    assert set(seen[:3]) == {"c0", "c1", "c2"}  # the longest waiting first


# -- the per-task limit: counted and written in one atomic step --


def test_a_limited_put_refuses_a_new_config_at_the_limit(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    task, events = new_task()
    tasks.create(A, task, events, dialect="v1.0")
    tasks.create(B, *new_task(task_id=task.id), dialect="v1.0")
    for n in range(2):
        configs.put(A, config(f"c{n}", task_id=task.id), dialect="1.0", limit=2)
    with pytest.raises(TooManyPushConfigs) as refused:
        configs.put(A, config("c2", task_id=task.id), dialect="1.0", limit=2)
    assert (refused.value.task_id, refused.value.count, refused.value.limit) == (task.id, 2, 2)
    assert configs.get(A, task.id, "c2") is None
    # Replacing one by its id stays allowed at the limit, and keeps its place.
    other = config("c0", task_id=task.id, url="https://other.example.com/")
    assert configs.put(A, other, dialect="0.3", limit=2).config == other
    assert [c.config for c in configs.list(A, task.id)] == [other, config("c1", task_id=task.id)]
    # Another owner's task of the same id has configs of its own to count.
    configs.put(B, config("c2", task_id=task.id), dialect="1.0", limit=1)
    # A deleted config frees its place.
    configs.delete(A, task.id, "c1")
    configs.put(A, config("c2", task_id=task.id), dialect="1.0", limit=2)
    assert [c.config.id for c in configs.list(A, task.id)] == ["c0", "c2"]


RACERS = 8


def test_racing_puts_of_new_ids_never_pass_the_limit(
    stores: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = stores
    task, events = new_task()
    tasks.create(A, task, events, dialect="v1.0")
    configs.put(A, config("c0", task_id=task.id), dialect="1.0", limit=3)
    start = threading.Barrier(RACERS)

    def put(n: int) -> bool:
        """Racer 0 replaces c0, the others put new ids, all at once: True if it was stored."""
        start.wait(timeout=10)
        try:
            configs.put(A, config(f"c{n}", task_id=task.id), dialect="1.0", limit=3)
        except TooManyPushConfigs as exc:
            assert (exc.count, exc.limit) == (3, 3)
            return False
        return True

    with ThreadPoolExecutor(RACERS) as pool:
        stored = list(pool.map(put, range(RACERS)))
    assert stored[0]  # the replacement, whoever won the new places
    assert stored.count(True) == 3  # c0 and two new ones
    listed = [c.config.id for c in configs.list(A, task.id)]
    assert len(listed) == 3 and listed[0] == "c0"
    assert sorted(listed[1:]) == sorted(f"c{n}" for n in range(1, RACERS) if stored[n])


# -- the per-owner limit: on all the owner's tasks, counted and written in one atomic step --


@pytest.fixture(params=["memory", "firestore"])
def owned(
    request: pytest.FixtureRequest,
) -> tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore]:
    """Stores as `stores`, the push config store holding at most 3 configs an owner."""
    if request.param == "memory":
        memory = MemoryTaskStore()
        return memory, MemoryPushConfigStore(memory.cost, tasks=memory, owner_limit=3)
    make: MakeStore = request.getfixturevalue("make_firestore_store")
    tasks = make()
    configs = FirestorePushConfigStore(
        tasks.client, retention=tasks.retention, cost=tasks.cost, owner_limit=3
    )
    return tasks, configs


def test_an_owner_has_at_most_its_limit_of_configs_on_all_its_tasks(
    owned: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = owned
    ids = []
    for owner in (A, A, B):
        task, events = new_task()
        tasks.create(owner, task, events, dialect="v1.0")
        ids.append(task.id)
    first, second, bobs = ids
    configs.put(A, config("c0", task_id=first), dialect="1.0", limit=10)
    configs.put(A, config("c1", task_id=first), dialect="1.0", limit=10)
    configs.put(A, config("c2", task_id=second), dialect="1.0", limit=10)
    with pytest.raises(PushConfigQuotaError) as refused:
        configs.put(A, config("c3", task_id=second), dialect="1.0", limit=10)
    assert (refused.value.count, refused.value.limit) == (3, 3)
    assert "A2A_MAX_PUSH_CONFIGS_PER_OWNER=3" in str(refused.value)
    assert refused.value.metadata == {"limit": "3", "setting": "A2A_MAX_PUSH_CONFIGS_PER_OWNER"}
    assert configs.get(A, second, "c3") is None
    # Without a per-task limit too; replacing one by its id stays allowed.
    with pytest.raises(PushConfigQuotaError):
        configs.put(A, config("c3", task_id=second), dialect="1.0")
    other = config("c2", task_id=second, url="https://other.example.com/")
    assert configs.put(A, other, dialect="1.0", limit=10).config == other
    # Another owner has a limit of its own; a deleted config frees its place.
    for n in range(3):
        configs.put(B, config(f"b{n}", task_id=bobs), dialect="1.0", limit=10)
    assert configs.delete(A, first, "c0")
    configs.put(A, config("c3", task_id=second), dialect="1.0", limit=10)
    assert [c.config.id for c in configs.list(A, second)] == ["c2", "c3"]


def test_racing_puts_on_several_tasks_never_pass_the_owners_limit(
    owned: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = owned
    task_ids = []
    for _ in range(RACERS):
        task, events = new_task()
        tasks.create(A, task, events, dialect="v1.0")
        task_ids.append(task.id)
    start = threading.Barrier(RACERS)

    def put(n: int) -> bool:
        start.wait(timeout=10)
        try:
            configs.put(A, config("c", task_id=task_ids[n]), dialect="1.0", limit=10)
        except PushConfigQuotaError as exc:
            assert exc.limit == 3
            return False
        return True

    with ThreadPoolExecutor(RACERS) as pool:
        stored = list(pool.map(put, range(RACERS)))
    assert stored.count(True) == 3
    assert sum(len(configs.list(A, task_id)) for task_id in task_ids) == 3


def test_many_concurrent_new_configs_far_below_the_owners_limit_all_succeed(
    make_firestore_store: MakeStore,
) -> None:
    # 50 sends of one owner, each with a push config, at once (tests/system/test_faults_
    # stack.py): serialized on one owner document, each would count again after every commit
    # of another, and most would give up. Far below the limit they need not wait.
    tasks = make_firestore_store()
    configs = FirestorePushConfigStore(
        tasks.client, retention=tasks.retention, cost=tasks.cost, owner_limit=1000
    )
    racers = 50
    task_ids = []
    for _ in range(racers):
        task, events = new_task()
        tasks.create(A, task, events, dialect="v1.0")
        task_ids.append(task.id)
    start = threading.Barrier(racers)

    def put(n: int) -> None:
        start.wait(timeout=10)
        configs.put(A, config("c", task_id=task_ids[n]), dialect="1.0", limit=10)

    with ThreadPoolExecutor(racers) as pool:
        list(pool.map(put, range(racers)))
    assert all(len(configs.list(A, task_id)) == 1 for task_id in task_ids)


def test_require_room_refuses_at_the_owner_s_limit_before_anything_is_written(
    owned: tuple[MemoryTaskStore | FirestoreTaskStore, PushConfigStore],
) -> None:
    tasks, configs = owned
    task, events = new_task()
    tasks.create(A, task, events, dialect="v1.0")
    for n in range(3):
        configs.require_room(A)
        configs.put(A, config(f"c{n}", task_id=task.id), dialect="1.0", limit=10)
    with pytest.raises(PushConfigQuotaError) as refused:
        configs.require_room(A)
    assert (refused.value.count, refused.value.limit) == (3, 3)
    configs.require_room(B)  # another owner's limit is its own
    assert configs.delete(A, task.id, "c0")
    configs.require_room(A)
