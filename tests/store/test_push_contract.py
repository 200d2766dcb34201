"""The PushConfigStore contract, run against the memory store and Firestore: configs scoped
by owner (another owner's config is never read, replaced, listed, leased or deleted), and the
sending lease (one holder at a time; only the holder records progress or gives it back)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from shared.model import PushAuthentication, PushConfig, utc_now
from shared.ports import PushConfigStore
from shared.store.firestore_push import FirestorePushConfigStore
from shared.store.memory_push import MemoryPushConfigStore
from tests.store.conftest import MakeStore


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
