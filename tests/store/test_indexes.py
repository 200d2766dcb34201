"""`infra/firestore.indexes.json` serves every query the Firestore store makes, and no more.

The emulator runs any query without an index; production refuses a query whose composite
index is missing. So the test records the structured query of every query the store sends
while it walks each of its query paths, derives the index each one needs by Firestore's
rules, and looks for it in the file.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from google.cloud.firestore_v1.base_query import BaseQuery
from google.cloud.firestore_v1.types import StructuredQuery

from shared.model import PushConfig, TaskState, utc_now
from shared.ports import TaskQuery
from shared.store.cost import LOG_IN_TASK_BYTES
from shared.store.firestore import (
    EVENTS,
    IDEMPOTENCY,
    LIVE_OWNERS,
    PUSH_CONFIGS,
    TASKS,
    FirestoreTaskStore,
)
from shared.store.firestore_push import PUSH_OWNERS, FirestorePushConfigStore
from tests.store.conftest import MakeStore
from tests.store.factory import ALICE, message, new_task

INDEX_FILE = Path(__file__).parents[2] / "infra" / "firestore.indexes.json"
EQUAL = StructuredQuery.FieldFilter.Operator.EQUAL
# A disjunction of equalities: served as equalities are (merged single-field indexes).
EQUALITIES = {EQUAL, StructuredQuery.FieldFilter.Operator.IN}


@dataclass(frozen=True)
class Need:
    """What one query asks of the indexes."""

    collection: str
    scope: str
    equalities: frozenset[str]
    orders: tuple[tuple[str, str], ...]  # (field, direction), the implicit __name__ left out

    @property
    def composite(self) -> bool:
        # Equalities alone merge single-field indexes; one ordered field uses its own.
        return bool(self.orders) and len(self.equalities) + len(self.orders) > 1

    def as_index(self) -> dict[str, Any]:
        fields = [{"fieldPath": f, "order": "ASCENDING"} for f in sorted(self.equalities)]
        fields += [{"fieldPath": f, "order": d} for f, d in self.orders]
        return {"collectionGroup": self.collection, "queryScope": self.scope, "fields": fields}


def need_of(query: StructuredQuery) -> Need:
    (source,) = query.from_
    where = query.where
    if "composite_filter" in where:
        filters = [f.field_filter for f in where.composite_filter.filters]
    else:
        filters = [where.field_filter] if "field_filter" in where else []
    orders = [(o.field.field_path, o.direction.name) for o in query.order_by]
    for ranged in {f.field.field_path for f in filters if f.op not in EQUALITIES}:
        # Firestore would order by it implicitly; the store says so itself, which keeps
        # this derivation simple and the store's queries explicit.
        assert ranged in [field for field, _ in orders], f"order the query by {ranged}"
    # Every index ends with __name__ in the direction of its last field.
    if orders and orders[-1][0] == "__name__":
        before = orders[-2][1] if len(orders) > 1 else "ASCENDING"
        if orders[-1][1] == before:
            orders.pop()
    return Need(
        collection=source.collection_id,
        scope="COLLECTION_GROUP" if source.all_descendants else "COLLECTION",
        equalities=frozenset(f.field.field_path for f in filters if f.op in EQUALITIES),
        orders=tuple(orders),
    )


def serves(index: dict[str, Any], need: Need) -> bool:
    if (index["collectionGroup"], index["queryScope"]) != (need.collection, need.scope):
        return False
    fields = [(f["fieldPath"], f.get("order")) for f in index["fields"]]
    count = len(need.equalities)
    equalities, rest = fields[:count], fields[count:]
    if {f for f, _ in equalities} != need.equalities or any(o is None for _, o in equalities):
        return False
    orders = list(need.orders)
    if not orders:
        return not rest
    return rest in (orders, [*orders, ("__name__", orders[-1][1])])


def declared() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(INDEX_FILE.read_text())
    return loaded


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[StructuredQuery]]:
    """Every structured query this test's thread builds while the fixture is active (queries
    and aggregations): not another test's, whose background threads (a sweeper of an app an
    earlier module built) may still query in this process."""
    made: list[StructuredQuery] = []
    original = BaseQuery._to_protobuf
    mine = threading.get_ident()

    def recording(self: BaseQuery) -> StructuredQuery:
        query = original(self)
        if threading.get_ident() == mine:
            made.append(query)
        return query

    monkeypatch.setattr(BaseQuery, "_to_protobuf", recording)
    yield made


def walk_every_query_path(store: FirestoreTaskStore) -> None:
    for _ in range(3):
        task, events = new_task(context_id="c1")
        stored = store.create(ALICE, task, events, dialect="v1.0")
    # Past what its document keeps beside the task: the log moves into event documents.
    big = [message("x" * LOG_IN_TASK_BYTES, task.id)]
    store.commit(stored, stored.task, big)
    store.events(ALICE, task.id, after_seq=1)
    store.get(ALICE, task.id)  # over its tiny budget: read back through the log
    store.live_tasks(ALICE, 10)
    store.push_news(utc_now() - timedelta(hours=1), utc_now(), 10)
    store.expired_leases(utc_now(), 10)
    for context_id in (None, "c1"):
        for state in (None, TaskState.WORKING):
            for after in (None, task.status.timestamp.replace(year=2000)):
                query = TaskQuery(context_id, state, after, page_size=1)
                token = store.list(ALICE, query).next_page_token
                assert token, "walk a second page too: cursors are part of the query"
                store.list(ALICE, replace(query, page_token=token))


def test_every_query_has_its_index_and_every_index_a_query(
    make_firestore_store: MakeStore, recorded: list[StructuredQuery]
) -> None:
    walk_every_query_path(make_firestore_store(task_budget=200))
    needs = {need_of(query) for query in recorded}
    indexes = declared()["indexes"]
    exempted = {
        (o["collectionGroup"], o["fieldPath"])
        for o in declared().get("fieldOverrides", [])
        if o["indexes"] == []
    }
    assert {n.collection for n in needs} == {TASKS, EVENTS}
    for need in needs:
        if need.composite:
            assert any(serves(index, need) for index in indexes), (
                f"{INDEX_FILE.name} has no index for {need}; add {json.dumps(need.as_index())}"
            )
        else:
            used = need.equalities | {field for field, _ in need.orders}
            assert not {(need.collection, f) for f in used} & exempted, need
    for index in indexes:
        assert any(serves(index, need) for need in needs), f"no query uses {index}"


def test_ttl_is_declared_on_every_collection_the_store_writes() -> None:
    ttl = {
        (o["collectionGroup"], o["fieldPath"]) for o in declared()["fieldOverrides"] if o.get("ttl")
    }
    expected = {TASKS, EVENTS, IDEMPOTENCY, PUSH_CONFIGS, PUSH_OWNERS, LIVE_OWNERS}
    assert ttl == {(group, "expireAt") for group in expected}


def test_the_file_is_in_firebase_cli_format() -> None:
    document = declared()
    assert set(document) <= {"indexes", "fieldOverrides"}
    for index in document["indexes"]:
        assert set(index) == {"collectionGroup", "queryScope", "fields"}
        assert index["queryScope"] in {"COLLECTION", "COLLECTION_GROUP"}
        for field in index["fields"]:
            assert set(field) == {"fieldPath", "order"}
            assert field["order"] in {"ASCENDING", "DESCENDING"}
    for override in document["fieldOverrides"]:
        assert set(override) <= {"collectionGroup", "fieldPath", "ttl", "indexes"}
        assert isinstance(override["indexes"], list)


def test_the_sweep_of_lagging_push_configs_has_its_collection_group_index(
    make_firestore_store: MakeStore, recorded: list[StructuredQuery]
) -> None:
    tasks = make_firestore_store()
    FirestorePushConfigStore(tasks.client, retention=tasks.retention, cost=tasks.cost).lagging(
        utc_now(), 10
    )
    [need] = {need_of(query) for query in recorded}
    assert (need.collection, need.scope, need.equalities) == (
        PUSH_CONFIGS,
        "COLLECTION_GROUP",
        frozenset(),
    )
    [(field, order)] = need.orders
    # One field across every task's configs: a single-field index of collection-group scope,
    # which Firestore does not make by itself.
    declared_scopes = [
        index
        for override in declared()["fieldOverrides"]
        if (override["collectionGroup"], override["fieldPath"]) == (PUSH_CONFIGS, field)
        for index in override["indexes"]
    ]
    assert {"order": order, "queryScope": "COLLECTION_GROUP"} in declared_scopes


def test_the_count_of_an_owners_push_configs_has_its_collection_group_index(
    make_firestore_store: MakeStore, recorded: list[StructuredQuery]
) -> None:
    tasks = make_firestore_store()
    task, events = new_task()
    tasks.create(ALICE, task, events, dialect="v1.0")
    configs = FirestorePushConfigStore(
        tasks.client, retention=tasks.retention, cost=tasks.cost, owner_limit=5
    )
    configs.put(
        ALICE, PushConfig(id="c", task_id=task.id, url="https://h.example.com/"), dialect="1.0"
    )
    [need] = {need_of(query) for query in recorded}
    assert (need.collection, need.scope, need.equalities, need.orders) == (
        PUSH_CONFIGS,
        "COLLECTION_GROUP",
        frozenset({"owner"}),
        (),
    )
    declared_scopes = [
        index
        for override in declared()["fieldOverrides"]
        if (override["collectionGroup"], override["fieldPath"]) == (PUSH_CONFIGS, "owner")
        for index in override["indexes"]
    ]
    assert {"order": "ASCENDING", "queryScope": "COLLECTION_GROUP"} in declared_scopes
