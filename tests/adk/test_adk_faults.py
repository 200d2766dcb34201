"""An ADK agent's LONG_RUNNING turn on the emulator stack (one `a2a`, one `worker`, the
Firestore and Cloud Tasks emulators): the worker killed (SIGKILL) mid-run, the task still ends,
each of its artifacts once (the re-run replaces what the killed run stored)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from tests.conftest import LOCATION, SA, make_queue, wait_until
from tests.system.test_faults_turns import ATTEMPTS, LEASE, Stack, Started

pytestmark = pytest.mark.emulator

STEPS = 20  # of 0.1 s each: the run lasts 2 s, the kill lands in its middle


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, tasks_emulator: TasksEmulator) -> Iterator[Stack]:
    project = firestore_emulator.project
    queue = make_queue(tasks_emulator, project, "adk", ATTEMPTS, backoff=(0.2, 0.5, 1))
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.adk.long",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_LEASE_SECONDS": str(LEASE),
        "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
        "A2A_WORK_MAX_ATTEMPTS": str(ATTEMPTS),
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": queue.rsplit("/", 1)[-1],
    }
    worker = Started(env, target="worker")
    a2a_env = {**env, "A2A_WORKER_URL": f"{worker.url}/"}
    a2a = Started(a2a_env)
    # Stack talks to instance 1: the one instance serves as both.
    made = Stack(a2a_env, worker, [a2a, a2a], queue, tasks_emulator)
    try:
        yield made
    finally:
        a2a.stop()
        made.worker.stop()


def test_the_worker_killed_mid_run_the_task_still_ends(stack: Stack) -> None:
    task_id = stack.send(f"steps {STEPS}")["id"]

    def steps_stored() -> int:
        return len(stack.rpc("GetTask", {"id": task_id}).get("artifacts", []))

    wait_until(lambda: steps_stored() >= 3, 30, lambda: f"{steps_stored()} steps stored")
    stack.worker.kill()  # mid-run: nothing of the worker cleans up
    stack.worker = stack.restart(stack.worker)
    assert stack.wait_terminal([task_id], timeout=60)[task_id] == "TASK_STATE_COMPLETED"
    texts = [a["parts"][0]["text"] for a in stack.rpc("GetTask", {"id": task_id})["artifacts"]]
    assert sorted(texts) == sorted([*(f"step {n}" for n in range(STEPS)), "done"])
