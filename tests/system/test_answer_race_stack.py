"""Two answers to one input-required task, sent at once through two `a2a` instances, on the
emulator stack (the Firestore and Cloud Tasks emulators, one worker, started as
tests/system/test_live_progress_stack.py starts it: without a URL of its own), as busy clients
send them: 4 clients in parallel, each pair at a barrier, with `returnImmediately` (the worker
runs the turns). Every answer acknowledged is run by a turn of the handler
(tests.handlers.answers names it in the task) or refused with a clear error, and no task is
left `submitted` or `working`: the test follows them with ListTasks, a read that recovers
nothing, so only the stack itself can run what waits (issue 27).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pytest

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from tests.conftest import LOCATION, SA, Server, free_port, make_queue, wait_until

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

pytestmark = pytest.mark.emulator

V1_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
TASKS = 20
CLIENTS = 4
SETTLED = {"TASK_STATE_COMPLETED", "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_FAILED"}
ACKNOWLEDGED = {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}


@dataclass
class Stack:
    a2a: tuple[Server, Server]

    def call(self, server: Server, method: str, params: dict[str, Any]) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer: dict[str, Any] = server.rpc(body, V1_HEADERS)
        return answer


@pytest.fixture(scope="module")
def stack(
    firestore_emulator: FirestoreEmulator,
    tasks_emulator: TasksEmulator,
    tasks_client: CloudTasksClient,
) -> Iterator[Stack]:
    project = firestore_emulator.project
    work = make_queue(tasks_emulator, project, "work-race", 3, backoff=(0.2, 1, 1))
    worker_port = free_port()
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.answers",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
    }
    a2a_env = {**env, "A2A_WORKER_URL": f"http://localhost:{worker_port}/"}
    started: list[Server] = []
    try:
        started.append(Server(env, target="worker", port=worker_port))
        started.append(Server(a2a_env))
        started.append(Server(a2a_env))
        yield Stack((started[1], started[2]))
    finally:
        for server in started:
            server.stop()


def message(mid: str, **extra: Any) -> dict[str, Any]:
    return {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": mid}], **extra}


def agent_texts(task: dict[str, Any]) -> list[str]:
    """What the agent said in the task: its messages in history, and its status's."""
    said = [m for m in task.get("history", []) if m["role"] == "ROLE_AGENT"]
    if "message" in task["status"]:
        said.append(task["status"]["message"])
    return [part["text"] for m in said for part in m["parts"] if "text" in part]


def test_two_answers_at_once_are_each_run_or_refused(stack: Stack) -> None:
    answered: dict[str, tuple[str, dict[str, Any]]] = {}  # answer id -> (task id, answer)

    def one_task(_: int) -> str:
        first = stack.call(stack.a2a[0], "SendMessage", {"message": message(str(uuid.uuid4()))})
        task = first["result"]["task"]
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", first
        barrier = threading.Barrier(2)

        def answer(server: Server) -> None:
            mid = str(uuid.uuid4())
            params = {
                "message": message(mid, taskId=task["id"]),
                "configuration": {"returnImmediately": True},
            }
            barrier.wait()
            answered[mid] = (task["id"], stack.call(server, "SendMessage", params))

        pair = [threading.Thread(target=answer, args=(server,)) for server in stack.a2a]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join()
        return str(task["id"])

    with ThreadPoolExecutor(CLIENTS) as clients:
        task_ids = set(clients.map(one_task, range(TASKS)))
    assert len(answered) == 2 * TASKS

    tasks: dict[str, dict[str, Any]] = {}

    def settled() -> bool:
        listed = stack.call(stack.a2a[1], "ListTasks", {"pageSize": 100})["result"]["tasks"]
        tasks.update((task["id"], task) for task in listed if task["id"] in task_ids)
        return len(tasks) == TASKS and all(t["status"]["state"] in SETTLED for t in tasks.values())

    def unsettled() -> str:
        states = {i: t["status"]["state"] for i, t in tasks.items()}
        return f"tasks left with a turn to run: {[s for s in states.values() if s not in SETTLED]}"

    wait_until(settled, 30, unsettled)
    for mid, (task_id, answer) in answered.items():
        if "error" in answer:  # the loser of the race, refused clearly: the task had ended
            assert answer["error"]["code"] == -32004, answer
            continue
        assert answer["result"]["task"]["status"]["state"] in ACKNOWLEDGED, answer
        assert f"got {mid}" in agent_texts(tasks[task_id]), (mid, tasks[task_id])
