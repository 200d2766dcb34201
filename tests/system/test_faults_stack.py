"""Faults on one emulator stack, as an operator meets them: two `a2a` processes, `worker` and
`deliver`, the Firestore and Cloud Tasks emulators. Pausing a process (SIGSTOP, then SIGCONT)
is an outage that keeps its data; SIGKILL is an instance that dies. Each test is bounded in
seconds and says which promise broke:

- an `a2a` instance killed mid inline turn: the task ends (re-run by the worker), and a stream
  resumed on the other instance sees its end;
- Cloud Tasks paused 12 s during 50 non-blocking, push-subscribed sends: every send is
  answered with its task, every task ends, and every notification arrives once, in order,
  within a minute of the pause;
- the worker down through the work queue's last attempt: the task does not stay `working`;
- a webhook that hangs for 40 s (the push queue makes 4 attempts): once it answers again,
  every notification arrives; a webhook that never answers has its failure on its config.

The suite waits out the 40 s hang once: the hanging webhook gets its task before the first
test (`hang`, a fixture), and the other scenarios run meanwhile, one after the other (each
needs Cloud Tasks or the worker that another one takes away); the last test ends the hang.
The queues retry as the deploy's do, only sooner, and the functions are told their retry
span as `make deploy` tells them (infra.settings.QueueSettings.retry_span).
"""

from __future__ import annotations

import json
import os
import signal
import socketserver
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest
import requests

from emulator.cloud_tasks import TasksEmulator
from emulator.firestore import FirestoreEmulator
from infra.settings import QueueSettings, seconds
from shared.dialects.v1_0 import V1
from shared.extensions import DELIVERY_STATUS
from shared.model import ArtifactUpdate, StatusUpdate
from shared.store.firestore import FirestoreTaskStore
from shared.store.firestore_push import FirestorePushConfigStore
from tests import sse
from tests.conftest import (
    LOCATION,
    SA,
    Server,
    free_port,
    make_queue,
    wait_queue_empty,
    wait_until,
)
from tests.webhook import Webhook

if TYPE_CHECKING:
    from google.cloud.tasks_v2 import CloudTasksClient

pytestmark = pytest.mark.emulator

V1_HEADERS = {"A2A-Version": "1.0", "Content-Type": "application/json"}
LEASE = 3.0  # seconds; an inline turn silent this long (and as long again) is re-driven;
# a queued turn no worker took this long after its queue gave up (a backlog of 50 on a busy
# machine takes seconds to dispatch: shorter, its reader re-drives it until it fails)
OUTAGE = 12.0  # seconds Cloud Tasks is paused: longer than one enqueue attempt
HANG = 40.0  # seconds the webhook hangs
SENDS = 50
COMPLETED = "TASK_STATE_COMPLETED"
TERMINAL = {COMPLETED, "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}


def retry(attempts: int, low: float, high: float, doublings: int) -> QueueSettings:
    """A test queue's retry policy, in the deploy's terms (no max_retry_duration)."""
    return QueueSettings(
        name="faults",
        max_attempts=attempts,
        min_backoff=f"{low}s",
        max_backoff=f"{high}s",
        max_doublings=doublings,
        max_retry_duration="0s",
        max_dispatches_per_second=500,
        max_concurrent_dispatches=1000,
    )


# Two attempts: a turn the queue gave up on is due at once past its lease.
WORK = retry(2, 0.2, 0.5, 1)
# Four attempts, 1 s apart at first, doubling twice (the deploy's: 30, from 5 s).
PUSH = retry(4, 1, 4, 2)


def on_emulator(emulator: TasksEmulator, project: str, prefix: str, policy: QueueSettings) -> str:
    """A queue of this module's own with that retry policy."""
    low, high = seconds(policy.min_backoff), seconds(policy.max_backoff)
    backoff = (low, high, policy.max_doublings)
    return make_queue(emulator, project, prefix, policy.max_attempts, backoff=backoff)


class Process(Server):
    """A Server that starts without waiting for its first answer: start them all, then wait
    for each (`ready`), so their start-ups overlap."""

    def __init__(self, env: dict[str, str], target: str = "a2a", port: int | None = None) -> None:
        self.env = env  # to start it again in its place
        super().__init__(env, target, port)

    def _wait(self) -> None:
        pass

    def ready(self) -> Process:
        Server._wait(self)
        return self


@dataclass
class Stack:
    a2a: Process  # every scenario's client calls go here
    doomed: Process  # another a2a instance, to be killed mid-turn
    worker: Process
    deliver: Process
    work_queue: str
    push_queue: str
    tasks: TasksEmulator
    queues: CloudTasksClient
    store: FirestoreTaskStore
    configs: FirestorePushConfigStore
    # What the outage's webhook must have received, checked again once the queues are empty.
    steady: Webhook | None = None
    steady_wanted: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    def rpc(
        self,
        method: str,
        params: dict[str, Any],
        version: str = "1.0",
        headers: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {**V1_HEADERS, "A2A-Version": version, **(headers or {})}
        answer = requests.post(self.a2a.url, data=json.dumps(body), headers=headers, timeout=60)
        assert answer.status_code == 200, answer.text
        payload: dict[str, Any] = answer.json()
        assert "result" in payload, payload
        result: dict[str, Any] = payload["result"]
        return result

    def send(
        self,
        text: str,
        *,
        blocking: bool = False,
        push: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        message = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": [{"text": text}]}
        configuration: dict[str, Any] = {"returnImmediately": not blocking}
        if push is not None:
            configuration["taskPushNotificationConfig"] = push
        params = {"message": message, "configuration": configuration}
        task: dict[str, Any] = self.rpc("SendMessage", params)["task"]
        return task

    def restart(self, process: Process) -> Process:
        """The same function on the same port, in a new process (not waited for)."""
        process.log.close()
        return Process(process.env, target=process.target, port=process.port)

    def stop(self) -> None:
        """Stop every process, all at once (each may take its time to close)."""
        stopping = [
            threading.Thread(target=process.stop)
            for process in [self.a2a, self.doomed, self.worker, self.deliver]
        ]
        for thread in stopping:
            thread.start()
        for thread in stopping:
            thread.join()

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

    def expected(self, task_id: str) -> list[dict[str, Any]]:
        """The task's notifications as its v1.0 webhook must receive them, in order."""
        stored = self.store.get("anonymous", task_id)
        assert stored is not None
        return [
            V1.stream_update(e.event, stored.task)
            for e in self.store.events("anonymous", task_id)
            if isinstance(e.event, StatusUpdate | ArtifactUpdate)
        ]

    def caught_up(self, task_id: str, config_id: str) -> bool:
        """Whether the config got every event of its task (no delivery has more to post)."""
        stored = self.store.get("anonymous", task_id)
        config = self.configs.get("anonymous", task_id, config_id)
        return stored is not None and config is not None and config.delivered_seq >= stored.last_seq


@pytest.fixture(scope="module")
def stack(
    firestore_emulator: FirestoreEmulator,
    tasks_emulator: TasksEmulator,
    tasks_client: CloudTasksClient,
) -> Iterator[Stack]:
    project = firestore_emulator.project
    work = on_emulator(tasks_emulator, project, "work-faults", WORK)
    push = on_emulator(tasks_emulator, project, "push-faults", PUSH)
    worker_port, deliver_port = free_port(), free_port()
    deliver_url = f"http://localhost:{deliver_port}/"
    env = {
        "A2A_BACKEND": "firestore",
        "GOOGLE_CLOUD_PROJECT": project,
        "A2A_HANDLER": "tests.handlers.slow",
        "A2A_TASKS_SERVICE_ACCOUNT": SA,
        "A2A_REGION": LOCATION,
        "A2A_LEASE_SECONDS": str(LEASE),
        "A2A_COMMIT_INTERVAL_SECONDS": "0.1",
        "A2A_STREAM_KEEPALIVE_SECONDS": "0.5",
        "A2A_WORK_QUEUE": work.rsplit("/", 1)[-1],
        "A2A_WORK_MAX_ATTEMPTS": str(WORK.max_attempts),
        "A2A_WORK_RETRY_SECONDS": str(WORK.retry_span()),
        "A2A_PUSH_QUEUE": push.rsplit("/", 1)[-1],
        "A2A_PUSH_MAX_ATTEMPTS": str(PUSH.max_attempts),
        "A2A_PUSH_ALLOWED_HOSTS": "localhost",
        "A2A_DELIVER_URL": deliver_url,
        # 50 sends that wait out an outage hold 50 threads of one instance.
        "THREADS": "64",
    }
    a2a_env = {**env, "A2A_WORKER_URL": f"http://localhost:{worker_port}/"}
    store = FirestoreTaskStore(project)
    made = Stack(
        Process(a2a_env),
        Process(a2a_env),
        Process(env, target="worker", port=worker_port),
        # As deployed (infra/deploy.toml): deliver's timeout bounds its sending lease.
        Process({**env, "A2A_FUNCTION_TIMEOUT": "60"}, target="deliver", port=deliver_port),
        work,
        push,
        tasks_emulator,
        tasks_client,
        store,
        FirestorePushConfigStore(store.client, retention=store.retention, cost=store.cost),
    )
    try:
        for process in [made.a2a, made.doomed, made.worker, made.deliver]:
            process.ready()
        yield made
    finally:
        made.stop()


class HangingWebhook(Webhook):
    """A Webhook that can also hang: take each connection and never answer, until `up()`."""

    _release: threading.Event | None = None

    def hang(self) -> None:
        release = self._release = threading.Event()

        class Hang(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                release.wait(120)

        server = socketserver.ThreadingTCPServer(("127.0.0.1", self.port), Hang, False)
        server.allow_reuse_address = True
        server.daemon_threads = True
        self.close()
        server.server_bind()
        server.server_activate()
        self._serve(server)

    def up(self) -> None:
        if self._release is not None:
            self._release.set()
        super().up()


@dataclass
class Hang:
    """The webhook that hangs, its task, and the task whose webhook never answers."""

    webhook: HangingWebhook
    task_id: str
    since: float  # time.monotonic() when its notifications started to hang
    refused_task_id: str


@pytest.fixture(scope="module")
def hang(stack: Stack) -> Iterator[Hang]:
    """Starts the 40 s hang before the other scenarios, so that they run within it."""
    webhook = HangingWebhook()
    webhook.hang()
    dead = f"http://localhost:{free_port()}/hook"  # nothing listens: every POST is refused
    try:
        since = time.monotonic()  # its notifications hang from the task's first commit on
        hung = stack.send(
            "steps=4 delay=0.2", blocking=True, push={"url": webhook.url(), "id": "hangs"}
        )
        refused = stack.send("steps=1 delay=0", blocking=True, push={"url": dead, "id": "dead"})
        for task in (hung, refused):
            assert task["status"]["state"] == "TASK_STATE_COMPLETED", task
        yield Hang(webhook, hung["id"], since, refused["id"])
    finally:
        webhook.up()
        webhook.close()


def test_an_instance_killed_mid_inline_turn_the_task_ends_and_a_resumed_stream_sees_it(
    stack: Stack, hang: Hang
) -> None:
    # 2 s of work for a handler that is not LONG_RUNNING: the turn runs in the request.
    message = {
        "messageId": str(uuid.uuid4()),
        "role": "ROLE_USER",
        "parts": [{"text": "steps=20 delay=0.1"}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage"}
    response = sse.stream(stack.doomed.url, {**body, "params": {"message": message}}, V1_HEADERS)
    events = sse.read(response)
    seen = [next(events) for _ in range(4)]  # the task, working, two steps: mid-turn
    task_id = seen[0].data["result"]["task"]["id"]
    stack.doomed.kill()  # the instance dies: nothing of it runs or cleans up
    killed = time.monotonic()
    response.close()
    resumed = sse.stream(
        stack.a2a.url,
        {**body, "method": "SubscribeToTask", "params": {"id": task_id}},
        {**V1_HEADERS, "Last-Event-ID": seen[-1].id or ""},
        timeout=30,
    )
    rest = list(sse.read(resumed))
    final = rest[-1].data["result"]["statusUpdate"]["status"]["state"]
    assert final == "TASK_STATE_COMPLETED", "the resumed stream did not see the re-run's end"
    assert time.monotonic() - killed < 30, "the dead instance's turn took over 30 s to end"
    got = stack.rpc("GetTask", {"id": task_id})
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [a["parts"] for a in got["artifacts"]] == [[{"text": "done"}]], "artifact not once"


def test_cloud_tasks_paused_during_fifty_push_subscribed_sends_nothing_is_lost(
    stack: Stack, hang: Hang
) -> None:
    steady = stack.steady = Webhook()
    answers: list[dict[str, Any]] = []
    failures: list[BaseException] = []
    lock = threading.Lock()

    def send(n: int) -> None:
        try:
            task = stack.send(f"steps=2 delay=0.01 n={n}", push={"url": steady.url(), "id": "s"})
        except BaseException as exc:
            with lock:
                failures.append(exc)
            return
        with lock:
            answers.append(task)

    threads = [threading.Thread(target=send, args=(n,), daemon=True) for n in range(SENDS)]
    os.kill(stack.tasks.pid, signal.SIGSTOP)
    try:
        for thread in threads:
            thread.start()
        time.sleep(OUTAGE)  # the outage itself, not a wait for something to happen
    finally:
        os.kill(stack.tasks.pid, signal.SIGCONT)
    resumed = time.monotonic()
    for thread in threads:
        thread.join(60)
    assert not failures, f"sends failed in the outage: {failures[:3]}"
    assert len(answers) == SENDS, "a send was not answered with its task"
    task_ids = [t["id"] for t in answers]
    states = stack.wait_terminal(task_ids, timeout=60)
    ended = [stack.rpc("GetTask", {"id": t})["status"] for t, s in states.items() if s != COMPLETED]
    assert not ended, f"{len(ended)} tasks did not end completed, the first: {ended[0]}"

    wanted = stack.steady_wanted = {task_id: stack.expected(task_id) for task_id in task_ids}
    left = 60 - (time.monotonic() - resumed)
    steady.wait_accepted(sum(len(u) for u in wanted.values()), timeout=max(left, 0.1))
    wait_until(
        lambda: all(stack.caught_up(task_id, "s") for task_id in task_ids),
        max(60 - (time.monotonic() - resumed), 0.1),
        lambda: "a config still lags its task a minute after the outage",
    )
    assert_received_once_in_order(steady, wanted)


def assert_received_once_in_order(
    webhook: Webhook, wanted: dict[str, list[dict[str, Any]]]
) -> None:
    got = [r.json for r in webhook.accepted()]
    for task_id, updates in wanted.items():
        mine = [p for p in got if task_of(p) == task_id]
        assert mine == updates, f"task {task_id}: notifications not each once, in order"


def task_of(payload: dict[str, Any]) -> str:
    """The task a v1.0 StreamResponse is about."""
    (update,) = payload.values()
    return str(update["taskId"])


def test_the_worker_down_through_the_last_attempt_leaves_no_task_working(
    stack: Stack, hang: Hang
) -> None:
    stack.worker.kill()
    try:
        task = stack.send("steps=2 delay=0.01")
        # Both attempts met no worker: the queue gave the turn up.
        wait_queue_empty(stack.queues, stack.work_queue, timeout=20)
        assert stack.state(task["id"]) in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    finally:
        stack.worker = stack.restart(stack.worker).ready()
    states = stack.wait_terminal([task["id"]], timeout=30)
    assert states[task["id"]] == "TASK_STATE_COMPLETED", "the given-up turn was not re-driven"


def test_a_webhook_that_never_answers_has_its_failure_on_its_config(
    stack: Stack, hang: Hang
) -> None:
    def config() -> dict[str, Any]:
        params = {"id": hang.refused_task_id, "pushNotificationConfigId": "dead"}
        return stack.rpc("tasks/pushNotificationConfig/get", params, version="0.3")

    wait_until(
        lambda: "metadata" in config(),
        30,
        lambda: f"the queue's last attempt failed and the config does not say so: {config()}",
    )
    failure = config()["metadata"]
    assert failure["lastError"] == "could not connect"  # a timeout: no answer came
    assert failure["failedAt"].endswith("Z")
    # A 1.0 client sees it too, when it activates the kit's extension for it.
    params = {"taskId": hang.refused_task_id, "id": "dead"}
    ask = {"A2A-Extensions": DELIVERY_STATUS.uri}
    v1 = stack.rpc("GetTaskPushNotificationConfig", params, headers=ask)
    assert v1["metadata"] == {DELIVERY_STATUS.uri: failure}, "1.0 does not show the failure"


def test_a_webhook_that_hung_for_40_s_gets_everything_once_it_answers(
    stack: Stack, hang: Hang
) -> None:
    # The fault's length, counted from its task's notifications (not a wait for an event).
    time.sleep(max(0.0, HANG - (time.monotonic() - hang.since)))
    hang.webhook.up()
    recovered = time.monotonic()
    updates = stack.expected(hang.task_id)
    hang.webhook.wait_accepted(len(updates), timeout=30)
    assert time.monotonic() - recovered < 30
    wait_queue_empty(stack.queues, stack.push_queue)  # nothing more will be posted
    assert [r.json for r in hang.webhook.accepted()] == updates, "not each once, in order"
    if stack.steady is not None:  # the outage's notifications: none posted twice since
        assert_received_once_in_order(stack.steady, stack.steady_wanted)
        stack.steady.close()
