"""Store fixtures: every TaskStore under contract, the Firestore one on the session's emulator.

The emulator itself (`clean_firestore`: started once, emptied per test, failing loudly with
the fix when its jar is missing) comes from `emulator.pytest_plugin`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from emulator.firestore import FirestoreEmulator
from shared.observability.store import TracedTaskStore
from shared.ports import TaskStore
from shared.store.firestore import FirestoreTaskStore
from shared.store.memory import MemoryTaskStore
from shared.store.notifying import NotifyingTaskStore

MakeStore = Callable[..., FirestoreTaskStore]


@pytest.fixture
def make_firestore_store(clean_firestore: FirestoreEmulator) -> MakeStore:
    """A FirestoreTaskStore factory on the emptied emulator: call it with settings."""

    def make(**settings: Any) -> FirestoreTaskStore:
        return FirestoreTaskStore(clean_firestore.project, **settings)

    return make


@pytest.fixture(params=["memory", "notifying", "traced", "firestore"])
def store(request: pytest.FixtureRequest) -> TaskStore:
    """Every TaskStore: the two adapters, and the two decorators (around memory)."""
    if request.param == "memory":
        return MemoryTaskStore()
    if request.param == "notifying":
        return NotifyingTaskStore(MemoryTaskStore(), lambda stored, events: None)
    if request.param == "traced":
        return TracedTaskStore(MemoryTaskStore())
    make: MakeStore = request.getfixturevalue("make_firestore_store")
    return make()


@pytest.fixture(params=["memory", "firestore-listener", "firestore-polling"])
def tailing_store(request: pytest.FixtureRequest) -> MemoryTaskStore | FirestoreTaskStore:
    """The stores whose tails follow a log differently: the embedded one (its condition
    variable), Firestore's through its snapshot listener, and polling."""
    if request.param == "memory":
        return MemoryTaskStore()
    make: MakeStore = request.getfixturevalue("make_firestore_store")
    return make(tail=request.param.removeprefix("firestore-"))
