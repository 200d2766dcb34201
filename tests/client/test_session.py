"""The session's choices from the card, and 0.3's shapes read as 1.0's."""

from __future__ import annotations

from typing import Any

import pytest

from shared.client.session import (
    api_key_header,
    pick_endpoint,
    state_name,
    to_v03_message,
    v03_response,
)
from shared.client.transport import ClientError

V1_CARD: dict[str, Any] = {
    "supportedInterfaces": [
        {"url": "https://a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "https://a/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
}
V03_CARD: dict[str, Any] = {"protocolVersion": "0.3.0", "url": "https://b/rpc"}


def test_the_first_1_0_json_rpc_interface_is_preferred() -> None:
    assert pick_endpoint(V1_CARD, None, "https://a") == ("1.0", "https://a/")
    assert pick_endpoint(V1_CARD, "0.3", "https://a") == ("0.3", "https://a/v03")


def test_a_0_3_card_is_spoken_in_0_3() -> None:
    assert pick_endpoint(V03_CARD, None, "https://b") == ("0.3", "https://b/rpc")
    with pytest.raises(ClientError, match=r"offers A2A 0\.3, not 1\.0"):
        pick_endpoint(V03_CARD, "1.0", "https://b")


def test_a_card_without_json_rpc_is_refused_by_name() -> None:
    card = {"supportedInterfaces": [{"url": "x", "protocolBinding": "GRPC"}]}
    with pytest.raises(ClientError, match="offers no JSON-RPC interface"):
        pick_endpoint(card, None, "https://c")


def test_the_api_key_goes_where_the_card_says() -> None:
    v1 = {
        "securitySchemes": {"k": {"apiKeySecurityScheme": {"name": "X-Key", "location": "header"}}}
    }
    v03 = {"securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X-Old"}}}
    assert api_key_header(v1) == "X-Key"
    assert api_key_header(v03) == "X-Old"
    assert api_key_header({}) == "X-API-Key"


def test_states_are_named_as_in_1_0() -> None:
    assert state_name("input-required") == "TASK_STATE_INPUT_REQUIRED"
    assert state_name("cancelled") == "TASK_STATE_CANCELED"
    assert state_name("TASK_STATE_WORKING") == "TASK_STATE_WORKING"


def test_0_3_events_read_as_1_0_stream_responses() -> None:
    asked = {"kind": "text", "text": "which?"}
    status = {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "final": True,
        "status": {
            "state": "input-required",
            "message": {"kind": "message", "role": "agent", "messageId": "m", "parts": [asked]},
        },
    }
    assert v03_response(status) == {
        "statusUpdate": {
            "taskId": "t",
            "contextId": "c",
            "status": {
                "state": "TASK_STATE_INPUT_REQUIRED",
                "message": {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "which?"}]},
            },
        }
    }
    artifact = {
        "kind": "artifact-update",
        "taskId": "t",
        "contextId": "c",
        "artifact": {
            "artifactId": "a",
            "parts": [
                {
                    "kind": "file",
                    "file": {"bytes": "aGk=", "name": "n", "mimeType": "a/b"},
                },
                {"kind": "data", "data": {"x": 1}},
            ],
        },
    }
    parts = v03_response(artifact)["artifactUpdate"]["artifact"]["parts"]
    assert parts == [
        {"raw": "aGk=", "filename": "n", "mediaType": "a/b"},
        {"data": {"x": 1}},
    ]
    with pytest.raises(ClientError, match="unknown kind"):
        v03_response({"kind": "surprise"})


def test_1_0_messages_are_sent_in_0_3_shapes() -> None:
    message = {
        "messageId": "m",
        "role": "ROLE_USER",
        "taskId": "t",
        "parts": [
            {"text": "hi"},
            {"data": [1]},
            {"raw": "aGk=", "filename": "f", "mediaType": "a/b"},
        ],
    }
    assert to_v03_message(message) == {
        "kind": "message",
        "messageId": "m",
        "role": "user",
        "taskId": "t",
        "parts": [
            {"kind": "text", "text": "hi"},
            {"kind": "data", "data": {"value": [1]}},
            {"kind": "file", "file": {"bytes": "aGk=", "name": "f", "mimeType": "a/b"}},
        ],
    }
