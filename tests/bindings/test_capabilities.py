"""A capability turned off is refused with the spec's error on every binding: streams and
subscriptions with A2A_STREAMING=false (UnsupportedOperationError), push configs with
A2A_PUSH_NOTIFICATIONS=false (PushNotificationNotSupportedError); the card says which are off."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Client
from tests.test_ids import text_id

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

V1 = {"A2A-Version": "1.0"}
CARD = "/.well-known/agent-card.json"


def _v1_message(text: str) -> dict[str, Any]:
    return {"messageId": text_id(text), "role": "ROLE_USER", "parts": [{"text": text}]}


def _v03_message(text: str) -> dict[str, Any]:
    return {"messageId": text_id(text), "role": "user", "parts": [{"kind": "text", "text": text}]}


@pytest.fixture
def still(make_client: Any) -> Client:
    """An agent that does not stream, with one finished task."""
    client: Client = make_client(streaming=False)
    return client


def _task(client: Client) -> str:
    sent = client.result("SendMessage", {"message": _v1_message("hello")}, version="1.0")
    task_id: str = sent["task"]["id"]
    return task_id


def test_the_card_says_streaming_is_off_and_sends_still_work(still: Client) -> None:
    assert still.http.get(CARD).json()["capabilities"]["streaming"] is False
    assert _task(still)
    assert still.result("message/send", {"message": _v03_message("hi")})["kind"] == "task"


@pytest.mark.parametrize(
    ("method", "version", "params"),
    [
        ("SendStreamingMessage", "1.0", lambda task_id: {"message": _v1_message("s")}),
        ("SubscribeToTask", "1.0", lambda task_id: {"id": task_id}),
        ("message/stream", None, lambda task_id: {"message": _v03_message("s")}),
        ("tasks/resubscribe", None, lambda task_id: {"id": task_id}),
        (
            "tasks/sendSubscribe",
            None,
            lambda task_id: {
                "id": "t-v01",
                "message": {"role": "user", "parts": [{"type": "text", "text": "s"}]},
            },
        ),
    ],
)
def test_jsonrpc_streams_are_unsupported_when_off(
    still: Client, method: str, version: str | None, params: Any
) -> None:
    error = still.error(method, params(_task(still)), version=version)
    assert error["code"] == -32004
    assert "A2A_STREAMING=false" in error["message"]
    if version == "1.0":
        assert error["data"][0]["reason"] == "UNSUPPORTED_OPERATION"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/message:stream", {"message": _v1_message("s")}),
        ("POST", "/tasks/{id}:subscribe", None),
        ("GET", "/tasks/{id}:subscribe", None),
    ],
)
def test_rest_streams_are_400_unsupported_when_off(
    still: Client, method: str, path: str, body: Any
) -> None:
    data = json.dumps(body) if body is not None else b""
    response = still.http.request(
        method,
        path.format(id=_task(still)),
        content=data,
        headers={"Content-Type": "application/json", **V1},
    )
    assert (
        response.status_code == 400 and response.headers["Content-Type"] == "application/a2a+json"
    )
    error = response.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"][0]["reason"] == "UNSUPPORTED_OPERATION"


def test_the_seeds_event_stream_is_unsupported_when_off(still: Client) -> None:
    response = still.http.get(f"/sse?taskId={_task(still)}")
    assert response.status_code == 400 and response.headers["Content-Type"] == "application/json"
    assert response.json()["error"]["code"] == -32004


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/tasks/{id}/pushNotificationConfigs"),
        ("GET", "/tasks/{id}/pushNotificationConfigs"),
        ("GET", "/tasks/{id}/pushNotificationConfigs/c1"),
        ("DELETE", "/tasks/{id}/pushNotificationConfigs/c1"),
    ],
)
def test_every_rest_push_route_is_400_not_supported_when_off(
    make_client: Any, method: str, path: str
) -> None:
    client: Client = make_client(push_notifications=False)
    assert client.http.get(CARD).json()["capabilities"]["pushNotifications"] is False
    response = client.http.request(
        method,
        path.format(id=_task(client)),
        content=json.dumps({"url": "https://hooks.example.com/a2a"}) if method == "POST" else b"",
        headers={"Content-Type": "application/json", **V1},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"][0]["reason"] == "PUSH_NOTIFICATION_NOT_SUPPORTED"
