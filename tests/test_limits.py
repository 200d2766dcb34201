"""Every limit of shared.limits, on JSON-RPC and REST: the exact error naming the limit and
its setting, and the task exactly as it was before the refused request."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from shared.limits import Limits, json_bytes
from shared.settings import Settings
from tests.conftest import Client

MakeClient = Callable[..., Client]
V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}


def message(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {
        "messageId": extra.pop("messageId", text[:20]),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **extra,
    }


def refused(client: Client, params: dict[str, Any], setting: str, field: str) -> str:
    """The JSON-RPC and REST refusals of one send: -32602 / 400, naming setting and field."""
    error = client.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602, error
    assert setting in error["message"]
    assert error["data"][0]["fieldViolations"][0]["field"] == f"params.{field}"
    response = client.http.post("/message:send", data=json.dumps(params), headers=V1)
    assert response.status_code == 400
    status = response.get_json()["error"]
    assert status["status"] == "INVALID_ARGUMENT" and setting in status["message"]
    assert status["details"][1]["fieldViolations"][0]["field"] == f"params.{field}"
    return str(error["message"])


@pytest.fixture
def limited(make_client: MakeClient) -> Client:
    return make_client(
        handler="tests.handlers.limits",
        max_parts=3,
        max_metadata_bytes=64,
        max_message_bytes=2048,
        max_artifact_bytes=2048,
        max_history_messages=5,
        max_history_bytes=4096,
    )


def tasks(client: Client) -> Any:
    return client.result(
        "ListTasks", {"historyLength": 100, "includeArtifacts": True}, version="1.0"
    )


def test_parts_per_message(limited: Client) -> None:
    params = {"message": {**message(), "parts": [{"text": "a"}] * 4}}
    text = refused(limited, params, "A2A_MAX_PARTS", "message.parts")
    assert "has 4 parts; the limit is 3 (A2A_MAX_PARTS)" in text
    assert tasks(limited)["totalSize"] == 0
    params["message"]["parts"] = [{"text": "a"}] * 3
    assert "task" in limited.result("SendMessage", params, version="1.0")


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (lambda m: {"message": {**m, "metadata": {"k": "x" * 80}}}, "message.metadata"),
        (
            lambda m: {"message": {**m, "parts": [{"text": "a", "metadata": {"k": "x" * 80}}]}},
            "message.parts[0].metadata",
        ),
        (lambda m: {"message": m, "metadata": {"k": "x" * 80}}, "metadata"),
    ],
)
def test_metadata_bytes(limited: Client, where: Callable[..., Any], field: str) -> None:
    text = refused(limited, where(message()), "A2A_MAX_METADATA_BYTES", field)
    assert "the limit is 64 (A2A_MAX_METADATA_BYTES)" in text
    assert field in text
    assert tasks(limited)["totalSize"] == 0


def test_message_bytes(limited: Client) -> None:
    text = refused(limited, {"message": message("x" * 3000)}, "A2A_MAX_MESSAGE_BYTES", "message")
    assert "the limit is 2048 (A2A_MAX_MESSAGE_BYTES)" in text
    assert tasks(limited)["totalSize"] == 0


def test_history_messages_leave_the_task_as_it_was(limited: Client) -> None:
    task = limited.result("SendMessage", {"message": message("one")}, version="1.0")["task"]
    sent = 1
    while True:
        sent += 1
        params = {"message": message(f"more {sent}", taskId=task["id"])}
        before = tasks(limited)
        answer = limited.rpc("SendMessage", params, version="1.0")
        if "error" in answer:
            break
        assert sent < 10, "the history limit was never reached"
    error = answer["error"]
    assert error["code"] == -32602
    assert "the limit is 5 (A2A_MAX_HISTORY_MESSAGES)" in error["message"]
    assert "without a taskId" in error["message"]
    assert tasks(limited) == before  # nothing stored
    # The same context goes on in a new task.
    follow = message("next", messageId="next", contextId=task["contextId"])
    assert limited.result("SendMessage", {"message": follow}, version="1.0")["task"]["id"]


def test_history_bytes(make_client: MakeClient) -> None:
    client = make_client(
        handler="tests.handlers.limits", max_history_bytes=2048, max_message_bytes=1024
    )
    task = client.result("SendMessage", {"message": message("a" * 700)}, version="1.0")["task"]
    before = tasks(client)
    params = {"message": message("b" * 700, taskId=task["id"])}
    ok = client.rpc("SendMessage", params, version="1.0")
    if "error" not in ok:  # two fit with the agent's question; the third cannot
        before = tasks(client)
        params = {"message": message("c" * 700, taskId=task["id"])}
    error = client.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602
    assert "the limit is 2048 (A2A_MAX_HISTORY_BYTES)" in error["message"]
    assert error["data"][0]["fieldViolations"][0]["field"] == "params.message.taskId"
    assert tasks(client) == before


@pytest.mark.parametrize("text", ["artifact 3000", "chunks 4"])
def test_a_handler_artifact_over_the_limit_fails_the_task(limited: Client, text: str) -> None:
    result = limited.result("SendMessage", {"message": message(text)}, version="1.0")
    status = result["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    reason = status["message"]["parts"][0]["text"]
    setting = "A2A_MAX_ARTIFACT_BYTES" if text.startswith("artifact") else "A2A_MAX_PARTS"
    assert setting in reason and "The agent made an artifact" in reason
    # What was stored reads back: no artifact over the limit.
    stored = limited.result("GetTask", {"id": result["task"]["id"]}, version="1.0")
    for artifact in stored.get("artifacts", []):
        assert len(artifact["parts"]) <= 3 and json_bytes(artifact) <= 2048 + 512


def test_settings_make_the_limits() -> None:
    settings = Settings(max_parts=7, max_history_bytes=4096)
    assert settings.limits == Limits(parts=7, history_bytes=4096)
    assert Settings().limits == Limits()
