"""The PushConfigStore contract, run against the memory store and Firestore."""

from __future__ import annotations

import pytest

from shared.model import PushAuthentication, PushConfig
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


def config(config_id: str, task_id: str = "t1", url: str = "https://h.example.com/") -> PushConfig:
    auth = PushAuthentication(schemes=("Bearer",), credentials="c")
    return PushConfig(id=config_id, task_id=task_id, url=url, token="tok", authentication=auth)


def test_put_get_list_delete(push_store: PushConfigStore) -> None:
    assert push_store.get("t1", "a") is None
    assert push_store.list("t1") == []
    stored = push_store.put(config("a"), dialect="1.0")
    assert (stored.config, stored.dialect, stored.delivered_seq) == (config("a"), "1.0", 0)
    push_store.put(config("b"), dialect="0.3")
    push_store.put(config("x", task_id="t2"), dialect="0.1")
    assert [c.config.id for c in push_store.list("t1")] == ["a", "b"]  # oldest first
    got = push_store.get("t1", "b")
    assert got is not None and got.dialect == "0.3"
    assert push_store.delete("t1", "a") is True
    assert push_store.delete("t1", "a") is False
    assert [c.config.id for c in push_store.list("t1")] == ["b"]
    assert [c.config.id for c in push_store.list("t2")] == ["x"]


def test_put_replaces_and_keeps_the_order(push_store: PushConfigStore) -> None:
    push_store.put(config("a"), dialect="1.0")
    push_store.put(config("b"), dialect="1.0")
    push_store.put(config("a", url="https://other.example.com/"), dialect="0.3")
    listed = push_store.list("t1")
    assert [(c.config.id, c.config.url, c.dialect) for c in listed] == [
        ("a", "https://other.example.com/", "0.3"),
        ("b", "https://h.example.com/", "1.0"),
    ]
