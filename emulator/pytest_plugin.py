"""Pytest fixtures that start the real emulators once per session and stop them by PID.

Register suite-wide in the top-level tests/conftest.py:

    pytest_plugins = ["emulator.pytest_plugin"]

Fixtures:
- firestore_emulator (session): a FirestoreEmulator; $FIRESTORE_EMULATOR_HOST is set while it runs.
- clean_firestore (function): the same emulator, emptied before the test.
- tasks_emulator (session): a TasksEmulator whose tokens are signed with a per-session secret;
  $CLOUD_TASKS_EMULATOR_HOST and $CLOUD_TASKS_EMULATOR_SECRET are set while it runs.
- tasks_client (session): a CloudTasksClient connected to it.
When java, the jar or the tasks venv cannot be had, the fixture fails (never skips) with the fix.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from emulator._process import EmulatorError
from emulator.cloud_tasks import TasksEmulator, start_tasks_emulator
from emulator.firestore import FirestoreEmulator, start_firestore

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient


@pytest.fixture(scope="session")
def firestore_emulator() -> Iterator[FirestoreEmulator]:
    """The Firestore emulator on a free port, for the whole session."""
    try:
        emu = start_firestore()
    except EmulatorError as exc:
        pytest.fail(f"Firestore emulator unavailable: {exc}", pytrace=False)
    try:
        # Child processes (functions-framework under test) inherit the variable.
        with pytest.MonkeyPatch.context() as patch:
            for key, value in emu.env().items():
                patch.setenv(key, value)
            yield emu
    finally:
        emu.stop()


@pytest.fixture
def clean_firestore(firestore_emulator: FirestoreEmulator) -> FirestoreEmulator:
    """The session's Firestore emulator, with the default project's documents deleted."""
    firestore_emulator.reset()
    return firestore_emulator


@pytest.fixture(scope="session")
def tasks_emulator() -> Iterator[TasksEmulator]:
    """The Cloud Tasks emulator (launcher) on a free port, for the whole session."""
    try:
        emu = start_tasks_emulator(secret=secrets.token_urlsafe(24))
    except EmulatorError as exc:
        pytest.fail(f"Cloud Tasks emulator unavailable: {exc}", pytrace=False)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for key, value in emu.env().items():
                patch.setenv(key, value)
            yield emu
    finally:
        emu.stop()


@pytest.fixture(scope="session")
def tasks_client(tasks_emulator: TasksEmulator) -> Iterator[CloudTasksClient]:
    """A CloudTasksClient on the session's Cloud Tasks emulator."""
    client = tasks_emulator.client()
    try:
        yield client
    finally:
        client.transport.close()  # type: ignore[no-untyped-call]
