"""Turn faults on the emulator stack: two `a2a` processes, one `worker`, the Firestore and
Cloud Tasks emulators. Each fault is injected as an operator would meet it, and each test is
bounded in seconds:

- an `a2a` instance killed (SIGKILL) mid inline turn: the turn is re-run by the worker and a
  stream resumed on the other instance sees its end;
- the Cloud Tasks emulator paused (SIGSTOP, then SIGCONT: nothing of its data is lost) for
  12 s while 50 non-blocking sends arrive: every send is answered with its task, and every
  task ends;
- the worker down through the work queue's last attempt: the task does not stay `working`
  (a reader re-drives the turn, which runs once the worker is back).

The work queue makes two attempts (A2A_WORK_MAX_ATTEMPTS matches): a turn it gave up on is
due 5 s later (the Cloud Tasks backoff of `make deploy`'s queue, as shared.app reckons it).
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from tests import sse
from tests.conftest import LOCATION, SA, Server, make_queue, wait_queue_empty, wait_until

pytestmark = pytest.mark.emulator

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}
LEASE = 1.5  # seconds; an inline turn silent this long (and as long again) is re-driven
ATTEMPTS = 2
OUTAGE = 12.0  # seconds the Cloud Tasks emulator is paused: longer than one enqueue attempt
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


class Started(Server):
    """A Server whose start-up check waits for the first answer as long as it takes: that
    request builds the function's app, which takes seconds on a loaded 2-core machine."""

    def _wait(self) -> None:
        def answers() -> bool:
            if self.process.poll() is not None:
                raise RuntimeError(f"the server exited at start:\n{self.output()}")
            try:
                requests.get(f"{self.url}/.well-known/agent-card.json", timeout=20)
                return True
            except requests.ConnectionError:
                return False

        wait_until(answers, 30, lambda: "the server did not answer within 30 s")


@dataclass
class Stack:
    env: dict[str, str]
    worker: Server
    a2a: list[Server]
    queue: str
    tasks: TasksEmulator

    def rpc(self, method: str, params: dict[str, Any], instance: int = 1) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer = requests.post(
            self.a2a[instance].url, data=json.dumps(body), headers=V1, timeout=60
        )
        assert answer.status_code == 200, answer.text
        payload: dict[str, Any] = answer.json()
        assert "result" in payload, payload
        result: dict[str, Any] = payload["result"]
        return result

    def send(self, text: str, instance: int = 1) -> dict[str, Any]:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        params = {"message": message, "configuration": {"returnImmediately": True}}
        task: dict[str, Any] = self.rpc("SendMessage", params, instance)["task"]
        return task

    def state(self, task_id: str) -> str:
        state: str = self.rpc("GetTask", {"id": task_id})["status"]["state"]
        return state

    def wait_terminal(self, task_ids: list[str], timeout: float) -> dict[str, str]:
        """Each task's end state, read through a2a (each read may recover the task)."""
        states: dict[str, str] = {}

        def all_ended() -> bool:
            for task_id in task_ids:
                if states.get(task_id) not in TERMINAL:
                    states[task_id] = self.state(task_id)
            return all(s in TERMINAL for s in states.values())

        wait_until(all_ended, timeout, lambda: f"tasks still not ended: {states}")
        return states

    def restart(self, server: Server) -> Server:
        server.log.close()
        return Started(self.env, target=server.target, port=server.port)


@pytest.fixture(scope="module")
def stack(firestore_emulator: FirestoreEmulator, tasks_emulator: TasksEmulator) -> Iterator[Stack]:
    project = firestore_emulator.project
    queue = make_queue(tasks_emulator, project, "faults", ATTEMPTS, backoff=(0.2, 0.5, 1))
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_LEASE_SECONDS": str(LEASE),
        "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
        "A2A_WORK_MAX_ATTEMPTS": str(ATTEMPTS),
        "A2A_STREAM_KEEPALIVE_SECONDS": "0.5",
        "A2A_REGION": LOCATION,
        "A2A_WORK_QUEUE": queue.rsplit("/", 1)[-1],
        # 50 sends that wait out an outage hold 50 threads across the two instances.
        "THREADS": "32",
    }
    worker = Started(env, target="worker")
    a2a_env = {**env, "A2A_WORKER_URL": f"{worker.url}/"}
    made = Stack(a2a_env, worker, [Started(a2a_env), Started(a2a_env)], queue, tasks_emulator)
    try:
        yield made
    finally:
        for server in [*made.a2a, made.worker]:
            server.stop()


def test_an_instance_killed_mid_inline_turn_the_task_ends_and_a_resumed_stream_sees_it(
    stack: Stack,
) -> None:
    # 3 s of work for a handler that is not LONG_RUNNING: the turn runs in the request.
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "steps=30 delay=0.1"}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    response = sse.stream(stack.a2a[0].url, {**body, "params": {"message": message}}, V1)
    events = sse.read(response)
    seen = [next(events) for _ in range(4)]  # the task, working, two steps: mid-turn
    task_id = seen[0].data["result"]["task"]["id"]
    stack.a2a[0].kill()  # the instance dies: nothing of it runs or cleans up
    response.close()
    started = time.monotonic()
    try:
        resumed = sse.stream(
            stack.a2a[1].url,
            {**body, "method": "SubscribeToTask", "params": {"id": task_id}},
            {**V1, "Last-Event-ID": seen[-1].id or ""},
            timeout=60,
        )
        rest = list(sse.read(resumed))
        final = rest[-1].data["result"]["statusUpdate"]["status"]["state"]
        assert final == "TASK_STATE_COMPLETED"  # re-run to its end by the worker
        assert time.monotonic() - started < 30
        assert stack.state(task_id) == "TASK_STATE_COMPLETED"
        got = stack.rpc("GetTask", {"id": task_id})
        assert [a["parts"] for a in got["artifacts"]] == [[{"text": "done"}]]  # once
    finally:
        stack.a2a[0] = stack.restart(stack.a2a[0])


def test_cloud_tasks_paused_during_fifty_sends_every_task_ends(stack: Stack) -> None:
    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        try:
            task = stack.send("steps=2 delay=0.01", instance=n % 2)
        except BaseException as exc:
            with lock:
                failures.append(exc)
            return
        with lock:
            answers.append(task)

    os.kill(stack.tasks.pid, signal.SIGSTOP)
    try:
        threads = [threading.Thread(target=send, args=(n,), daemon=True) for n in range(50)]
        for thread in threads:
            thread.start()
        time.sleep(OUTAGE)  # the outage itself, not a wait for something to happen
    finally:
        os.kill(stack.tasks.pid, signal.SIGCONT)
    resumed = time.monotonic()
    for thread in threads:
        thread.join(60)
    assert not failures, failures[:3]
    assert len(answers) == 50  # every send answered with its task, none with -32603
    states = stack.wait_terminal([t["id"] for t in answers], timeout=60)
    assert set(states.values()) == {"TASK_STATE_COMPLETED"}
    assert time.monotonic() - resumed < 60


def test_the_worker_down_through_the_last_attempt_leaves_no_task_working(
    stack: Stack,
) -> None:
    stack.worker.kill()
    try:
        task = stack.send("steps=2 delay=0.01")
        # Both attempts met no worker: the queue gave the turn up.
        wait_queue_empty(stack.tasks.client(), stack.queue, timeout=20)
        assert stack.state(task["id"]) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    finally:
        stack.worker = stack.restart(stack.worker)
    states = stack.wait_terminal([task["id"]], timeout=30)
    assert states[task["id"]] == "TASK_STATE_COMPLETED"  # re-driven once the worker was back
