"""Fixtures for the emulator tests: a recording HTTP target and a fresh queue per test.

The emulator fixtures themselves (tasks_client, firestore_emulator, ...) come from
emulator.pytest_plugin, registered in tests/conftest.py.
"""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from emulator.http_target import HttpTarget

PROJECT = "demo-a2a-functions"
LOCATION = "local"


@pytest.fixture(scope="session")
def target() -> Iterator[HttpTarget]:
    """The recording HTTP target, shared by the session; each test uses paths of its own."""
    with HttpTarget.start() as server:
        yield server


@pytest.fixture
def unique() -> str:
    """A short unique token for queue names and target paths."""
    return uuid.uuid4().hex[:10]


@pytest.fixture
def make_queue(tasks_client: Any, unique: str) -> Callable[..., str]:
    """Create a queue of this test's own, with optional retry and rate settings; its name."""
    made = itertools.count()

    def make(**settings: Any) -> str:
        from google.cloud import tasks_v2

        parent = f"projects/{PROJECT}/locations/{LOCATION}"
        name = f"{parent}/queues/q-{unique}-{next(made)}"
        tasks_client.create_queue(parent=parent, queue=tasks_v2.Queue(name=name, **settings))
        return name

    return make
