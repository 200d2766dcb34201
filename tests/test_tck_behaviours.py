"""The newer A2A TCK's behaviours (pinned to v1.0.1), as tests of our own, each named after
the requirement it checks: blocking and non-blocking sends (CORE-EXECUTION-MODE-001/002),
the input-required and auth-required lifecycles (AUTH-INTASK-001/002, with a message that
resumes the task: S1 §7.6.1), and more than one stream on one task (STREAM-ORDER-002/003/004).

They drive the TCK's own scenario handler (`tests.handlers.tck`) on a real server (as
`make run` serves it), over JSON-RPC and HTTP+JSON 1.0, as the TCK does; no code of the TCK
is used.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests import sse
from tests.conftest import Server, wait_until
from tests.handlers import tck

V1 = {"A2A-Version": "1.0"}
TRANSPORTS = ("jsonrpc", "http_json")
TERMINAL = {"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED"}
TERMINAL |= {"TASK_STATE_REJECTED"}


class Agent:
    """A 1.0 client of the server, the TCK's way: JSON-RPC calls and REST requests."""

    def __init__(self, url: str) -> None:
        self.http = httpx.Client(base_url=url, timeout=30)

    def rpc(self, method: str, params: Any, version: str = "1.0") -> dict[str, Any]:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        headers = {"Content-Type": "application/json", "A2A-Version": version}
        answer: dict[str, Any] = self.http.post(
            "/", content=json.dumps(body), headers=headers
        ).json()
        return answer


@pytest.fixture(scope="module")
def agent() -> Iterator[Agent]:
    server = Server({"A2A_HANDLER": "tests.handlers.tck"})
    client = Agent(server.url)
    yield client
    client.http.close()
    server.stop()


def message(scenario: str, task_id: str | None = None) -> dict[str, Any]:
    """A message that routes to a TCK scenario by its id's prefix, as the TCK's own do."""
    sent: dict[str, Any] = {
        "role": "ROLE_USER",
        "parts": [{"text": f"TCK {scenario}"}],
        "messageId": f"tck-{scenario}-{uuid.uuid4()}",
    }
    if task_id is not None:
        sent["taskId"] = task_id
    return sent


def send(
    agent: Agent, transport: str, sent: dict[str, Any], **configuration: Any
) -> dict[str, Any]:
    """SendMessage's task, over the transport."""
    params: dict[str, Any] = {"message": sent}
    if configuration:
        params["configuration"] = configuration
    if transport == "jsonrpc":
        answer = agent.rpc("SendMessage", params, version="1.0")
        assert "result" in answer, answer
        result: dict[str, Any] = answer["result"]
    else:
        response = agent.http.post(
            "/message:send",
            content=json.dumps(params),
            headers={"Content-Type": "application/a2a+json", **V1},
        )
        assert response.status_code == 200, response.content
        result = response.json()
    task: dict[str, Any] = result["task"]
    return task


def get(agent: Agent, transport: str, task_id: str) -> dict[str, Any]:
    if transport == "jsonrpc":
        answer = agent.rpc("GetTask", {"id": task_id}, version="1.0")
        assert "result" in answer, answer
        task: dict[str, Any] = answer["result"]
        return task
    response = agent.http.get(f"/tasks/{task_id}", headers=V1)
    assert response.status_code == 200, response.content
    task = response.json()
    return task


def state(task: dict[str, Any]) -> str:
    value: str = task["status"]["state"]
    return value


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_core_execution_mode_001_a_blocking_send_waits_for_the_end(
    agent: Agent, transport: str
) -> None:
    task = send(agent, transport, message("delayed-complete"), returnImmediately=False)
    assert state(task) == "TASK_STATE_COMPLETED"
    assert task["status"]["message"]["parts"][0]["text"] == "Delayed completion"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_core_execution_mode_002_a_non_blocking_send_answers_before_the_end(
    agent: Agent, transport: str
) -> None:
    task = send(agent, transport, message("delayed-complete"), returnImmediately=True)
    assert state(task) not in TERMINAL, task
    # ... and the task still completes on its own, without the client (another process: the
    # TCK's way to see it, GetTask again).
    wait_until(
        lambda: state(get(agent, transport, task["id"])) == "TASK_STATE_COMPLETED",
        tck._DELAY_SECONDS + 10,
        lambda: f"task {task['id']} did not complete",
    )


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_core_execution_mode_001_a_blocking_send_stops_at_input_required_and_resumes(
    agent: Agent, transport: str
) -> None:
    asked = send(agent, transport, message("input-required"))
    assert state(asked) == "TASK_STATE_INPUT_REQUIRED"
    answered = send(agent, transport, message("complete-task", asked["id"]))
    assert answered["id"] == asked["id"] and state(answered) == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_auth_intask_001_002_authorization_is_a_task_in_auth_required(
    agent: Agent, transport: str
) -> None:
    asked = send(agent, transport, message("auth-required"))
    # A blocking send stops at the interrupted state (CORE-EXECUTION-MODE-001), never
    # reporting the gated operation as settled.
    assert state(asked) == "TASK_STATE_AUTH_REQUIRED"
    assert "authorization" in asked["status"]["message"]["parts"][0]["text"]
    tracked = get(agent, transport, asked["id"])  # the request is addressable by its task
    assert state(tracked) == "TASK_STATE_AUTH_REQUIRED"
    # S1 §7.6.1: a message to the task while it waits resumes it (after the client signed in).
    resumed = send(agent, transport, message("complete-task", asked["id"]))
    assert resumed["id"] == asked["id"] and state(resumed) == "TASK_STATE_COMPLETED"


def subscribe(http: httpx.Client, transport: str, task_id: str) -> Any:
    """A stream of the task's events (a context manager), over the transport."""
    if transport == "jsonrpc":
        body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream", **V1}
        return http.stream("POST", "/", content=json.dumps(body), headers=headers)
    headers = {"Accept": "text/event-stream", **V1}
    return http.stream("GET", f"/tasks/{task_id}:subscribe", headers=headers)


def frames(response: httpx.Response, transport: str) -> Iterator[dict[str, Any]]:
    """Each event's StreamResponse (JSON-RPC's result, REST's bare object)."""
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    for event in sse.events(response.iter_lines()):
        payload: dict[str, Any] = event.data
        yield payload["result"] if transport == "jsonrpc" else payload


def until_final(stream: Iterator[dict[str, Any]]) -> list[dict[str, Any]]:
    """The frames of a stream after its first, up to and including the final status."""
    seen = []
    for frame in stream:
        seen.append(frame)
        if state(frame.get("statusUpdate", {"status": {"state": ""}})) in TERMINAL:
            return seen
    return seen


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_order_002_003_every_stream_gets_the_same_events_in_order(
    agent: Agent, transport: str
) -> None:
    task = send(agent, transport, message("input-required"))
    with (
        subscribe(agent.http, transport, task["id"]) as one,
        subscribe(agent.http, transport, task["id"]) as two,
    ):
        first, second = frames(one, transport), frames(two, transport)
        # Each stream opens with the task as it stands: both are listening from here on.
        assert next(first)["task"]["id"] == next(second)["task"]["id"] == task["id"]
        send(agent, transport, message("complete-task", task["id"]))
        seen_one, seen_two = until_final(first), until_final(second)
    assert seen_one == seen_two  # STREAM-ORDER-003: the same events, in the same order
    assert seen_one and state(seen_one[-1]["statusUpdate"]) == "TASK_STATE_COMPLETED"  # 002


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_stream_order_004_closing_one_stream_leaves_the_others(
    agent: Agent, transport: str
) -> None:
    task = send(agent, transport, message("input-required"))
    with subscribe(agent.http, transport, task["id"]) as kept:
        kept_frames = frames(kept, transport)
        with subscribe(agent.http, transport, task["id"]) as closed:
            assert next(frames(closed, transport))["task"]["id"] == task["id"]
        assert next(kept_frames)["task"]["id"] == task["id"]
        send(agent, transport, message("complete-task", task["id"]))
        seen = until_final(kept_frames)
    assert seen and state(seen[-1]["statusUpdate"]) == "TASK_STATE_COMPLETED"
