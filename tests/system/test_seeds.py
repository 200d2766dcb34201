"""Every request in the seed documents, sent as written to a running `a2a` function.

The seeds reuse one task id across sections, so each section gets a fresh server, set up in
the state the section describes. Streams are read as the seeds' clients read them: event by
event, as they arrive. Requests of later issues (push) must still get a well-formed error in
the caller's dialect.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import requests

from tests import sse
from tests.conftest import Server

SEEDS = Path(__file__).parent / "seeds"
TASK = "de38c76d-d54c-436c-8b9f-4c2703648d64"


def seed(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SEEDS / f"{name}.json").read_text())
    return data


S000 = seed("seed000")["requests"]
S004 = seed("seed004")["requests"]

Start = Callable[..., Server]


def assert_v03_task(result: dict[str, Any], task_id: str | None = None) -> None:
    assert result["kind"] == "task"
    assert result["contextId"]
    if task_id:
        assert result["id"] == task_id


def test_seed000_send_then_get(start_server: Start) -> None:
    server = start_server()
    sent = server.rpc(S000["send_joke"])
    assert sent["id"] == 1
    result = sent["result"]
    assert_v03_task(result, TASK)
    assert result["status"]["state"] == "completed"
    assert result["sessionId"] == result["contextId"]  # the client spoke v0.1 names
    [joke] = result["artifacts"]
    assert joke["name"] == "joke"
    assert joke["parts"] == [
        {"kind": "text", "text": "Why did the chicken cross the road? To get to the other side!"}
    ]

    got = server.rpc(S000["get_task"])["result"]
    assert_v03_task(got, TASK)
    assert got["status"]["state"] == "completed"
    assert got["artifacts"] == result["artifacts"]
    assert [m["parts"][0]["text"] for m in got["history"]] == ["tell me a joke"]
    assert got["history"][0]["role"] == "user"


def test_seed000_cancel(start_server: Start) -> None:
    server = start_server()
    # The section cancels a task that is still open: put one in input-required first.
    waiting = server.rpc(S000["phone_seq1"])["result"]
    assert waiting["status"]["state"] == "input-required"
    canceled = server.rpc(S000["cancel_task"])
    assert canceled["id"] == 1
    assert canceled["result"]["id"] == TASK
    assert canceled["result"]["status"]["state"] == "canceled"
    again = server.rpc(S000["cancel_task"])
    assert again["error"]["code"] == -32002


def test_seed000_multi_turn_phone_order(start_server: Start) -> None:
    server = start_server()
    first = server.rpc(S000["phone_seq1"])["result"]
    assert_v03_task(first, TASK)
    assert first["status"]["state"] == "input-required"
    question = first["status"]["message"]
    assert question["role"] == "agent"
    assert question["parts"] == [{"kind": "text", "text": "Select a phone type (iPhone/Android)"}]

    # As written, seq 3 carries the sessionId of the seed's own server, not ours: v0.1's
    # sessionId never contradicts the task's context, so the order goes through.
    second = server.rpc(S000["phone_seq3"])
    assert second["id"] == 2
    result = second["result"]
    assert result["id"] == TASK
    assert result["contextId"] == first["contextId"]
    assert result["status"]["state"] == "completed"
    [order] = result["artifacts"]
    assert order["name"] == "order-confirmation"
    text = order["parts"][0]["text"]
    assert text.startswith("I have ordered a new Android device for you. Your request number is R")
    texts = [m["parts"][0]["text"] for m in result["history"]]
    assert texts == [
        "request a new phone for me",
        "Select a phone type (iPhone/Android)",
        "Android",
    ]


# The seeds' webhooks are example hosts, which do not resolve here: allow them by name, as a
# deployment allows chosen hosts (the URL check refuses names it cannot resolve).
SEED_HOOKS = {"A2A_PUSH_ALLOWED_HOSTS": "example.com,client.example.com"}


def test_seed000_push_set_and_get(start_server: Start) -> None:
    server = start_server(**SEED_HOOKS)
    server.rpc(S000["send_joke"])  # the section's task
    expected = {
        "id": TASK,
        "pushNotificationConfig": {
            "url": "https://example.com/callback",
            "authentication": {"schemes": ["jwt"]},
        },
    }
    for name in ("set_push", "get_push"):
        answer = server.rpc(S000[name])
        assert answer["id"] == 1
        assert answer["result"] == expected


def test_seed000_stream_then_resubscribe(start_server: Start) -> None:
    server = start_server()
    # No "jsonrpc", no "id": answered all the same, with id null, in v0.3 with v0.1 names.
    frames = list(sse.read(sse.stream(server.url, S000["stream"])))
    assert all(f.data["id"] is None and "error" not in f.data for f in frames)
    results = [f.data["result"] for f in frames]
    assert_v03_task(results[0], TASK)
    assert results[0]["sessionId"] == results[0]["contextId"]
    assert [r["kind"] for r in results[1:]] == [
        "status-update",
        "artifact-update",
        "status-update",
    ]
    assert "image/png" in results[2]["artifact"]["parts"][0]["text"]
    assert results[-1]["status"]["state"] == "completed"
    assert [r["final"] for r in results if r["kind"] == "status-update"] == [False, True]
    seqs = [int(f.id or "") for f in frames]
    assert seqs == sorted(set(seqs))  # every frame has id: <seq>, increasing

    # The task is over: resubscribing to it is refused, in a plain JSON-RPC answer.
    answer = server.rpc(S000["resubscribe"])
    assert answer["id"] is None
    assert answer["error"]["code"] == -32004


def test_seed000_resubscribe_follows_a_waiting_task(start_server: Start) -> None:
    server = start_server()
    assert server.rpc(S000["phone_seq1"])["result"]["status"]["state"] == "input-required"
    stream = sse.read(sse.stream(server.url, S000["resubscribe"]))
    opening = next(stream).data["result"]
    assert_v03_task(opening, TASK)
    assert opening["status"]["state"] == "input-required"
    assert server.rpc(S000["phone_seq3"])["result"]["status"]["state"] == "completed"
    rest = [f.data["result"] for f in stream]  # ends after the final event
    assert [r.get("status", {}).get("state") for r in rest] == ["working", None, "completed"]
    assert rest[1]["artifact"]["name"] == "order-confirmation"
    assert rest[-1]["final"] is True


def test_seed000_non_textual_media(start_server: Start) -> None:
    server = start_server()
    sent = server.rpc(S000["media_seq1"])
    assert sent["id"] == 9
    result = sent["result"]
    assert_v03_task(result, TASK)
    assert result["status"]["state"] == "completed"
    [analysis] = result["artifacts"]
    assert "application/pdf" in analysis["parts"][0]["text"]
    # The progress message the agent sent on the way is history now.
    assert "analysis in progress, please wait" in json.dumps(result["history"])

    got = server.rpc(S000["media_seq3"])
    assert got["id"] == 10
    assert got["result"]["status"]["state"] == "completed"
    assert got["result"]["artifacts"] == result["artifacts"]


def test_seed000_structured_output(start_server: Start) -> None:
    server = start_server()
    result = server.rpc(S000["structured"])["result"]
    assert_v03_task(result, TASK)
    assert result["status"]["state"] == "completed"
    tickets = [
        {"ticketNumber": "REQ12312", "description": "request for VPN access"},
        {"ticketNumber": "REQ23422", "description": "Add to DL - team-gcp-onboarding"},
    ]
    [artifact] = result["artifacts"]
    # 0.3 data parts hold objects: a list goes out wrapped (docs/protocol.md).
    assert artifact["parts"][0] == {"kind": "data", "data": {"value": tickets}}
    assert json.loads(result["status"]["message"]["parts"][0]["text"]) == tickets


def test_seed000_agent_card_example_fields_are_served(server: Server) -> None:
    """The seed's card shows the fields a card has; ours has each of them (or its 1.0 form)."""
    example = seed("seed000")["agent_card_example"]
    card = requests.get(f"{server.url}/.well-known/agent-card.json", timeout=5).json()
    for field in ("name", "description", "url", "version", "capabilities", "skills"):
        assert field in example and field in card
    for skill in card["skills"]:
        assert {"id", "name", "description", "tags"} <= skill.keys()


def test_seed002_stream_on_its_own_path(server: Server) -> None:
    data = seed("seed002")
    frames = list(sse.read(sse.stream(server.url + data["path"], data["requests"]["stream"])))
    assert {f.data["id"] for f in frames} == {"791"}
    results = [f.data["result"] for f in frames]
    assert results[0]["kind"] == "task"
    assert results[-1]["kind"] == "status-update"
    assert results[-1]["status"]["state"] == "completed"
    assert results[-1]["final"] is True
    artifact = next(r["artifact"] for r in results if r["kind"] == "artifact-update")
    assert artifact["parts"] == [{"kind": "text", "text": "Hello"}]


def test_seed003_v01_send_with_parts_under_data(start_server: Start) -> None:
    server = start_server()
    answer = server.rpc(seed("seed003")["requests"]["send_joke"])
    assert answer["id"] == 1
    result = answer["result"]
    assert result["id"] == TASK
    assert result["sessionId"]
    assert "kind" not in result and "contextId" not in result  # v0.1 answers in v0.1
    assert result["status"]["state"] == "completed"
    assert result["artifacts"] == [
        {
            "name": "joke",
            "parts": [
                {
                    "type": "text",
                    "text": "Why did the chicken cross the road? To get to the other side!",
                }
            ],
            "index": 0,
        }
    ]


def test_seed004_informal_forms(start_server: Start) -> None:
    server = start_server(**SEED_HOOKS)
    for name in ("envelope", "send"):
        answer = server.rpc(S004[name])
        assert answer["id"] == S004[name]["id"]
        assert_v03_task(answer["result"])
        assert answer["result"]["status"]["state"] == "completed"

    # The section's task id is "task-7f3a"; a v0.1 client can name its task, so make it so,
    # in input-required so that the seed's cancel has something to cancel.
    opened = server.rpc(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "tasks/send",
            "params": {
                "id": "task-7f3a",
                "message": {
                    "role": "user",
                    "parts": [{"type": "text", "text": "new phone please"}],
                },
            },
        }
    )
    assert opened["result"]["status"]["state"] == "input-required"

    got = server.rpc(S004["get"])
    assert got["id"] == "2"
    assert got["result"]["id"] == "task-7f3a"
    assert got["result"]["status"]["state"] == "input-required"
    assert [m["parts"][0]["text"] for m in got["result"]["history"]] == ["new phone please"]

    listed = server.rpc(S004["messages_list"])
    assert listed["id"] == "5"
    texts = [m["parts"][0]["text"] for m in listed["result"]]
    assert texts == ["new phone please", "Select a phone type (iPhone/Android)"]
    assert [m["role"] for m in listed["result"]] == ["user", "agent"]

    pushed = server.rpc(S004["push_config"])
    assert pushed["id"] == "4"
    assert pushed["result"] == {
        "taskId": "task-7f3a",
        "pushNotificationConfig": {
            "id": "task-7f3a",
            "url": "https://client.example.com/hooks/a2a",
        },
    }

    canceled = server.rpc(S004["cancel"])
    assert canceled["id"] == "3"
    assert canceled["result"]["status"]["state"] == "canceled"


@pytest.mark.parametrize("path", ["/.well-known/agent-card", "/.well-known/agent.json"])
def test_seed004_card_paths(server: Server, path: str) -> None:
    response = requests.get(f"{server.url}{path}", timeout=5)
    assert response.status_code == 200
    assert response.json()["name"]


def test_seed004_sse_route_streams_task_updates(start_server: Start) -> None:
    server = start_server()
    opened = server.rpc(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "tasks/send",
            "params": {
                "id": "task-7f3a",
                "message": {"role": "user", "parts": [{"type": "text", "text": "new phone"}]},
            },
        }
    )
    assert opened["result"]["status"]["state"] == "input-required"
    stream = sse.read(sse.stream(server.url + seed("seed004")["http"]["sse"]))
    first = next(stream)
    assert first.event == "task_update"
    question = {"role": "agent", "parts": [{"text": "Select a phone type (iPhone/Android)"}]}
    assert first.data == {"state": "input-required", "message": question}
    server.rpc(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tasks/send",
            "params": {
                "id": "task-7f3a",
                "message": {"role": "user", "parts": [{"type": "text", "text": "iPhone"}]},
            },
        }
    )
    rest = list(stream)
    assert {f.event for f in rest} == {"task_update"}
    assert [f.data["state"] for f in rest] == ["working", "working", "completed"]
    assert "iPhone" in rest[1].data["message"]["parts"][0]["text"]
    assert int(first.id or 0) < int(rest[0].id or 0)


def test_seed004_sse_after_the_task_finished_sends_its_end(server: Server) -> None:
    """The seed's flow: send, then listen on `GET /sse?taskId=` to a task that is over by
    then: one `task_update` with its final state, and the stream closes."""
    done = server.rpc(S004["send"])["result"]
    assert done["status"]["state"] == "completed"
    waiting = server.rpc(
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "message/send",
            "params": {"message": {"role": "user", "parts": [{"text": "new phone"}]}},
        }
    )["result"]
    canceled = server.rpc(
        {"jsonrpc": "2.0", "id": 1, "method": "tasks/cancel", "params": {"id": waiting["id"]}}
    )["result"]
    for task, state in ((done, "completed"), (canceled, "canceled")):
        frames = list(sse.read(sse.stream(f"{server.url}/sse?taskId={task['id']}")))
        assert [(f.event, f.data["state"]) for f in frames] == [("task_update", state)]
        status_message = task["status"].get("message")
        if status_message is not None:
            assert (
                frames[0].data["message"]["parts"][0]["text"]
                == (status_message["parts"][0]["text"])
            )
        # A2A's resubscribe keeps the spec's error: nothing more will happen to the task.
        for method, headers in (
            ("SubscribeToTask", {"A2A-Version": "1.0"}),
            ("tasks/resubscribe", {}),
        ):
            body = {"jsonrpc": "2.0", "id": 2, "method": method, "params": {"id": task["id"]}}
            assert server.rpc(body, headers=headers)["error"]["code"] == -32004


def test_seed004_sse_route_errors_are_json(server: Server) -> None:
    response = requests.get(f"{server.url}/sse?taskId=no-such-task", timeout=5)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == -32001
    response = requests.get(f"{server.url}/sse", timeout=5)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == -32602
