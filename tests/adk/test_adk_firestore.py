"""shared/adk.py on the Firestore store (the emulator): a new task in a context continues the
context's conversation, read with one query (Context.context_history)."""

from __future__ import annotations

import pytest

from emulator.firestore import FirestoreEmulator
from shared.app import build
from shared.settings import Settings
from shared.store.firestore import FirestoreTaskStore
from tests.adk.test_adk import CUSTOM, artifact_parts, send
from tests.conftest import Client

pytestmark = pytest.mark.emulator


def test_a_new_task_continues_its_context_read_from_firestore(
    clean_firestore: FirestoreEmulator,
) -> None:
    store = FirestoreTaskStore(clean_firestore.project)
    client = Client(build(Settings(handler=CUSTOM), store=store))
    try:
        first = send(client, {"text": "hello"})
        store.cost.reset()
        second = send(client, {"text": "again"}, context_id=first["contextId"])
        said = "seen ['user: hello', \"scenes: seen ['user: hello']\", 'user: again']"
        assert artifact_parts(second) == [[{"text": said}]]
        assert store.cost.reads == 2  # one query: the first task, and the count
    finally:
        client.app.close()
