"""The soak's load: client threads of several owners (API keys), each drawing scenarios from
its own seeded generator until the load's end, each writing a JSON-lines log of every request
it sent and what it saw (`Record`): the ledger's evidence.

Scenarios: a blocking send; `returnImmediately` and GetTask polling; a streamed send (resumed
with `Last-Event-ID` on another instance when it breaks, or on purpose mid-stream); multi-turn
(input-required, then an answer, or left so); push-subscribed; a cancel of a slow task; the
same message resent to two instances at once and once more. A send that gets no answer (its
instance died, an emulator is paused) is resent, the same message, to another instance: so
resends come from the faults too.
"""

from __future__ import annotations

import json
import random
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import requests

from tests import sse
from tests.soak.receiver import Receiver
from tests.soak.stack import api_key

SCENARIOS = (
    ("blocking", 3),
    ("poll", 3),
    ("stream", 2),
    ("resume", 1),
    ("multi_turn", 2),
    ("push", 2),
    ("cancel", 1),
    ("resend", 1),
)
TERMINAL = {
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
}
SETTLED = TERMINAL | {"TASK_STATE_INPUT_REQUIRED"}
TIMEOUT = 60.0  # seconds a request may take: longer than any fault (an emulator paused 15 s)
ATTEMPTS = 6  # sends of one message before the client gives it up
FOLLOW = 90.0  # seconds a client follows one task to its end
POLL = 0.3  # seconds between two GetTasks of a polling client


class Log:
    """One client's JSON-lines log; times are monotonic seconds since the load's origin."""

    def __init__(self, path: Path, origin: float) -> None:
        self._file: IO[str] = path.open("w")
        self._origin = origin
        self._lock = threading.Lock()

    def now(self) -> float:
        return round(time.monotonic() - self._origin, 3)

    def write(self, record: dict[str, Any]) -> None:
        with self._lock:
            # A load stopped early (a signal) closes the logs while clients are still in
            # their requests: what they see then is no evidence of the run.
            if not self._file.closed:
                self._file.write(json.dumps(record) + "\n")

    def close(self) -> None:
        with self._lock:
            self._file.close()


@dataclass
class Outcome:
    """What one request got: its JSON-RPC result, or error, or no answer (`transport`)."""

    result: Any = None
    error: dict[str, Any] | None = None
    transport: str | None = None


def task_state(result: Any) -> tuple[str | None, str | None]:
    """A send's or get's task id and state."""
    if not isinstance(result, dict):
        return None, None
    task = result.get("task", result)
    status = task.get("status") or {}
    return task.get("id"), status.get("state")


class Client:
    def __init__(
        self,
        number: int,
        owner: str,
        *,
        seed: int,
        a2a: list[str],
        receiver: Receiver,
        log: Log,
        until: float,
    ) -> None:
        self.number = number
        self.owner = owner
        self.rng = random.Random(f"load-{seed}-{number}")
        self.a2a = a2a
        self.receiver = receiver
        self.log = log
        self.until = until
        self.headers = {
            "A2A-Version": "1.0",
            "Content-Type": "application/json",
            "X-API-Key": api_key(owner, seed),
        }
        self.session = requests.Session()
        self.scenarios = [name for name, weight in SCENARIOS for _ in range(weight)]
        self.counts: dict[str, int] = {}

    def run(self) -> None:
        try:
            while time.monotonic() < self.until:
                name = self.rng.choice(self.scenarios)
                self.counts[name] = self.counts.get(name, 0) + 1
                getattr(self, name)()
        finally:
            self.session.close()

    # -- requests ----------------------------------------------------------------------------

    def server(self) -> str:
        return self.rng.choice(self.a2a)

    def call(
        self, method: str, params: dict[str, Any], server: str | None = None, **note: Any
    ) -> Outcome:
        server = server or self.server()
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        started = self.log.now()
        record: dict[str, Any] = {
            "client": self.number,
            "owner": self.owner,
            "op": method,
            "server": server,
            "t0": started,
            **note,
        }
        outcome = Outcome()
        try:
            answer = self.session.post(
                server, data=json.dumps(body), headers=self.headers, timeout=TIMEOUT
            )
            record["http"] = answer.status_code
            payload = answer.json() if answer.status_code == 200 else None
            if isinstance(payload, dict) and "error" in payload:
                outcome.error = payload["error"]
                record["error"] = payload["error"].get("code")
            elif isinstance(payload, dict):
                outcome.result = payload.get("result")
        except (requests.RequestException, ValueError) as exc:
            outcome.transport = type(exc).__name__
            record["transport"] = outcome.transport
        task_id, state = task_state(outcome.result)
        record.update(t1=self.log.now(), task=task_id, state=state)
        self.log.write(record)
        return outcome

    def send(
        self,
        text: str,
        *,
        task_id: str | None = None,
        immediately: bool = False,
        push: dict[str, Any] | None = None,
        message_id: str | None = None,
        server: str | None = None,
    ) -> Outcome:
        """SendMessage, resent (same message) to another instance while no answer comes."""
        message: dict[str, Any] = {
            "messageId": message_id or str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": text}],
        }
        if task_id is not None:
            message["taskId"] = task_id
        configuration: dict[str, Any] = {"returnImmediately": immediately}
        if push is not None:
            configuration["taskPushNotificationConfig"] = push
        params = {"message": message, "configuration": configuration}
        outcome = Outcome(transport="not sent")
        for attempt in range(ATTEMPTS):
            outcome = self.call(
                "SendMessage",
                params,
                server if attempt == 0 else None,
                mid=message["messageId"],
                to=task_id,
                attempt=attempt,
            )
            if outcome.transport is None and not _retryable(outcome):
                return outcome
            time.sleep(self.rng.uniform(0.2, 1.0))  # a client's back-off before its resend
        return outcome

    def follow(
        self, task_id: str, until: Callable[[str | None], bool] = TERMINAL.__contains__
    ) -> str | None:
        """GetTask until its state passes `until` (or FOLLOW seconds): the last state seen."""
        deadline = time.monotonic() + FOLLOW
        state: str | None = None
        while time.monotonic() < deadline:
            outcome = self.call("GetTask", {"id": task_id})
            if outcome.transport is None and outcome.error is None:
                state = task_state(outcome.result)[1]
                if until(state):
                    return state
            time.sleep(POLL)
        return state

    # -- scenarios ---------------------------------------------------------------------------

    def work(self) -> str:
        steps, delay = self.rng.randint(1, 4), self.rng.choice((0.01, 0.05, 0.1))
        return f"steps={steps} delay={delay} arts={self.rng.randint(1, 3)}"

    def blocking(self) -> None:
        self.send(self.work())

    def poll(self) -> None:
        outcome = self.send(self.work(), immediately=True)
        task_id, state = task_state(outcome.result)
        if task_id is not None and state not in TERMINAL:
            self.follow(task_id)

    def multi_turn(self) -> None:
        outcome = self.send(f"ask {self.work()}")
        task_id, state = task_state(outcome.result)
        if task_id is None or state != "TASK_STATE_INPUT_REQUIRED" or self.rng.random() < 0.1:
            return  # left as the load found it
        immediately = self.rng.random() < 0.5
        answer = self.send(self.work(), task_id=task_id, immediately=immediately)
        if immediately and answer.result is not None:
            self.follow(task_id)

    def push(self) -> None:
        config_id = f"c{uuid.uuid4().hex[:12]}"
        config = {"url": self.receiver.url(self.owner, config_id), "id": config_id, "token": "soak"}
        outcome = self.send(self.work(), immediately=True, push=config)
        task_id, state = task_state(outcome.result)
        if task_id is None:
            return
        self.log.write(
            {
                "client": self.number,
                "owner": self.owner,
                "op": "push-config",
                "task": task_id,
                "config": config_id,
                "path": f"/hook/{self.owner}/{config_id}",
                "t0": self.log.now(),
            }
        )
        if state not in TERMINAL:
            self.follow(task_id)

    def cancel(self) -> None:
        outcome = self.send("steps=40 delay=0.1 arts=1", immediately=True)
        task_id, _ = task_state(outcome.result)
        if task_id is None:
            return
        time.sleep(self.rng.uniform(0.1, 1.5))  # the client changes its mind after a while
        self.call("CancelTask", {"id": task_id})
        self.follow(task_id)

    def resend(self) -> None:
        """One message to two instances at once, then once more: all name one task."""
        message_id = str(uuid.uuid4())
        text = self.work()
        first, second = self.rng.sample(self.a2a, 2)
        with ThreadPoolExecutor(2) as pool:
            both = [
                pool.submit(self.send, text, message_id=message_id, server=s, immediately=True)
                for s in (first, second)
            ]
            for future in both:
                future.result()
        outcome = self.send(text, message_id=message_id)
        task_id, state = task_state(outcome.result)
        if task_id is not None and state not in TERMINAL:
            self.follow(task_id)

    def stream(self, resume_after: int | None = None) -> None:
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "parts": [{"text": self.work().replace("steps=", "steps=1")}],  # 10-14 steps
        }
        chain = uuid.uuid4().hex[:12]
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": {"message": message},
        }
        task_id, last, ended = self.read_stream(
            body, None, chain, resume_after, mid=message["messageId"]
        )
        for _ in range(ATTEMPTS):
            if ended:
                return
            if task_id is None:  # no task frame came: send the same message again
                task_id, last, ended = self.read_stream(
                    body, None, chain, None, mid=message["messageId"]
                )
                continue
            resubscribe = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "SubscribeToTask",
                "params": {"id": task_id},
            }
            _, last, ended = self.read_stream(resubscribe, last, chain, None)

    def resume(self) -> None:
        self.stream(resume_after=self.rng.randint(1, 6))

    def read_stream(
        self,
        body: dict[str, Any],
        last_event_id: str | None,
        chain: str,
        stop_after: int | None,
        **note: Any,
    ) -> tuple[str | None, str | None, bool]:
        """One stream connection, logged with every event it saw: the task id, the last
        event id, and whether it saw the task settle."""
        headers = {**self.headers, "Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        server = self.server()
        record: dict[str, Any] = {
            "client": self.number,
            "owner": self.owner,
            "op": body["method"],
            "server": server,
            "t0": self.log.now(),
            "chain": chain,
            "after": last_event_id,
            "events": [],
            **note,
        }
        task_id: str | None = body["params"].get("id")
        last, ended = last_event_id, False
        try:
            with self.session.post(
                server, data=json.dumps(body), headers=headers, stream=True, timeout=(10, 45)
            ) as answer:
                record["http"] = answer.status_code
                if not answer.headers.get("Content-Type", "").startswith("text/event-stream"):
                    payload = answer.json()
                    record["error"] = (payload.get("error") or {}).get("code")
                    # a resubscribe to a task that ended meanwhile: nothing more to see
                    ended = record["error"] is not None and task_id is not None
                else:
                    for event in sse.read(answer):
                        data = event.data
                        if "error" in data:
                            record["error"] = (
                                data["error"].get("code") if isinstance(data["error"], dict) else -1
                            )
                            break
                        kind, tid, state = _frame(data.get("result", {}))
                        task_id = task_id or tid
                        record["events"].append([event.id, kind, state])
                        if event.id is not None:
                            last = event.id
                        if state in SETTLED and kind in ("task", "status"):
                            ended = True
                        if (
                            stop_after is not None
                            and len(record["events"]) >= stop_after
                            and not ended
                        ):
                            record["cut"] = True  # the client leaves on purpose, to resume
                            break
        except (requests.RequestException, ValueError) as exc:
            record["transport"] = type(exc).__name__
        record.update(t1=self.log.now(), task=task_id, ended=ended)
        self.log.write(record)
        return task_id, last, ended


def _frame(result: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """A stream frame's kind, task id and (for a task or status) state."""
    if "task" in result:
        task = result["task"]
        return "task", task.get("id"), task.get("status", {}).get("state")
    if "statusUpdate" in result:
        update = result["statusUpdate"]
        return "status", update.get("taskId"), update.get("status", {}).get("state")
    if "artifactUpdate" in result:
        return "artifact", result["artifactUpdate"].get("taskId"), None
    return "message", None, None


def _retryable(outcome: Outcome) -> bool:
    """An answer a client sends the same message again for: the server could not say."""
    return outcome.error is not None and outcome.error.get("code") == -32603


def run_clients(
    owners: list[str],
    *,
    per_owner: int,
    seed: int,
    a2a: list[str],
    receiver: Receiver,
    logs: Path,
    origin: float,
    seconds: float,
) -> dict[str, int]:
    """The whole load, until `seconds` after `origin`; the scenarios' counts."""
    clients: list[Client] = []
    files: list[Log] = []
    for number in range(len(owners) * per_owner):
        log = Log(logs / f"client-{number}.jsonl", origin)
        files.append(log)
        clients.append(
            Client(
                number,
                owners[number % len(owners)],
                seed=seed,
                a2a=a2a,
                receiver=receiver,
                log=log,
                until=origin + seconds,
            )
        )
    threads = [
        threading.Thread(target=c.run, name=f"client-{c.number}", daemon=True) for c in clients
    ]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for log in files:
            log.close()
    counts: dict[str, int] = {}
    for client in clients:
        for name, count in client.counts.items():
            counts[name] = counts.get(name, 0) + count
    return counts
