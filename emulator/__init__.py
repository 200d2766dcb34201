"""Local Google services for tests and manual use: the Firestore and Cloud Tasks emulators.

`emulator.firestore` and `emulator.cloud_tasks` start, reset and stop them by PID;
`emulator.tasks_launcher` is the Cloud Tasks launcher that runs in its own venv;
`emulator.oidc` mints the emulator's OIDC-shaped tokens;
`emulator.pytest_plugin` has the session fixtures; `python -m emulator` runs both by hand.
`emulator.dev` is `make dev`; `emulator.run`, `emulator.handler` and `emulator.ready` are
`make run`'s checks before it starts and its "ready" (the handler lookup and ready, make dev's too).
Importing this package imports only the standard library (the launcher's venv imports it too).
"""

from emulator._process import EmulatorError
from emulator.cloud_tasks import (
    TasksEmulator,
    ensure_tasks_venv,
    start_tasks_emulator,
    tasks_client,
)
from emulator.firestore import FirestoreEmulator, find_jar, start_firestore

__all__ = [
    "EmulatorError",
    "FirestoreEmulator",
    "TasksEmulator",
    "ensure_tasks_venv",
    "find_jar",
    "start_firestore",
    "start_tasks_emulator",
    "tasks_client",
]
