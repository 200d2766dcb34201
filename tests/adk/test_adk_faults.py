"""An ADK agent's LONG_RUNNING turn on the emulator stack (one `a2a`, one `worker`, the
Firestore and Cloud Tasks emulators): the worker killed (SIGKILL) mid-run, the task still ends,
each of its artifacts once (the re-run replaces what the killed run stored)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from tests.conftest import LOCATION, SA, wait_until
from tests.system.test_faults_stack import LEASE, TERMINAL, WORK, Process, on_emulator

pytestmark = pytest.mark.emulator

STEPS = 20  # of 0.1 s each: the run lasts 2 s, the kill lands in its middle


@dataclass
class Stack:
    a2a: Process
    worker: Process

    def rpc(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"A2A-Version": "1.0", "Content-Type": "application/json"}
        answer = requests.post(self.a2a.url, data=json.dumps(body), headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        result: dict[str, Any] = answer.json()["result"]
        return result

    def state(self, task_id: str) -> str:
        state: str = self.rpc("GetTask", {"id": task_id})["status"]["state"]
        return state


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, tasks_emulator: TasksEmulator) -> Iterator[Stack]:
    project = firestore_emulator.project
    queue = on_emulator(tasks_emulator, project, "adk", WORK)
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.adk.long",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_LEASE_SECONDS": str(LEASE),
        "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
        "A2A_WORK_MAX_ATTEMPTS": str(WORK.max_attempts),
        "A2A_WORK_RETRY_SECONDS": str(WORK.retry_span()),
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": queue.rsplit("/", 1)[-1],
    }
    worker = Process(env, target="worker")
    a2a = Process({**env, "A2A_WORKER_URL": f"{worker.url}/"})
    made = Stack(a2a.ready(), worker.ready())
    try:
        yield made
    finally:
        made.a2a.stop()
        made.worker.stop()


def test_the_worker_killed_mid_run_the_task_still_ends(stack: Stack) -> None:
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": f"steps {STEPS}"}],
    }
    params = {"message": message, "configuration": {"returnImmediately": True}}
    task_id = stack.rpc("SendMessage", params)["task"]["id"]

    def steps_stored() -> int:
        return len(stack.rpc("GetTask", {"id": task_id}).get("artifacts", []))

    wait_until(lambda: steps_stored() >= 3, 30, lambda: f"{steps_stored()} steps stored")
    stack.worker.kill()  # mid-run: nothing of the worker cleans up
    stack.worker.log.close()
    stack.worker = Process(stack.worker.env, target="worker", port=stack.worker.port).ready()
    wait_until(lambda: stack.state(task_id) in TERMINAL, 60, lambda: stack.state(task_id))
    assert stack.state(task_id) == "TASK_STATE_COMPLETED"
    texts = [a["parts"][0]["text"] for a in stack.rpc("GetTask", {"id": task_id})["artifacts"]]
    assert sorted(texts) == sorted([*(f"step {n}" for n in range(STEPS)), "done"])
