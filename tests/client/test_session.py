"""The session's choices from the card, and 0.3's shapes read as 1.0's."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared.client.errors import CARD_INVALID, ClientError
from shared.client.session import (
    CARD_PATH,
    Interface,
    api_key_header,
    card_source,
    pick_interface,
    state_name,
    to_v03_message,
    v03_response,
)

V1_CARD: dict[str, Any] = {
    "supportedInterfaces": [
        {"url": "https://a/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        {"url": "https://a/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": "https://a/v03", "protocolBinding": "JSONRPC", "protocolVersion": "0.3"},
    ]
}
V03_CARD: dict[str, Any] = {"protocolVersion": "0.3.0", "url": "https://b/rpc"}


def test_the_first_1_0_interface_it_speaks_is_taken_and_0_3_only_when_asked() -> None:
    assert pick_interface(V1_CARD, None, [], "c") == Interface("JSONRPC", "1.0", "https://a/")
    assert pick_interface(V1_CARD, "0.3", [], "c").url == "https://a/v03"
    # A transport it does not speak is passed over for the card's order.
    assert pick_interface(V1_CARD, None, ["GRPC", "JSONRPC"], "c").url == "https://a/"


def test_the_callers_transport_order_comes_before_the_cards() -> None:
    card = {
        "supportedInterfaces": [
            {"url": "https://a/one", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://a/two", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        ]
    }
    assert pick_interface(card, None, ["HTTP+JSON"], "c").url == "https://a/one"


def test_a_0_3_card_is_not_spoken_unless_asked() -> None:
    assert pick_interface(V03_CARD, "0.3", [], "c") == Interface("JSONRPC", "0.3", "https://b/rpc")
    with pytest.raises(ClientError, match=r"offers A2A 0\.3 over JSON-RPC, not 1\.0") as caught:
        pick_interface(V03_CARD, None, [], "c")
    assert caught.value.error == "VersionNotSupportedError"
    assert "--a2a-version 0.3" in str(caught.value.hint)


def test_a_card_without_json_rpc_is_refused_by_name() -> None:
    card = {"supportedInterfaces": [{"url": "https://x", "protocolBinding": "GRPC"}]}
    with pytest.raises(ClientError, match="offers no JSON-RPC interface"):
        pick_interface(card, None, [], "c")


def test_the_tenant_of_the_chosen_interface_is_kept_exactly() -> None:
    card = {
        "supportedInterfaces": [
            {
                "url": "https://a/",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
                "tenant": "acme/eu",
            }
        ]
    }
    assert pick_interface(card, None, [], "c").tenant == "acme/eu"
    assert pick_interface(V1_CARD, None, [], "c").tenant is None


def test_card_references_resolve_as_the_specification_says(tmp_path: Any) -> None:
    assert card_source("http://localhost:8080").url == f"http://localhost:8080{CARD_PATH}"
    assert card_source("https://a.example/").url == f"https://a.example{CARD_PATH}"
    assert card_source("https://a.example/cards/x.json").url == "https://a.example/cards/x.json"
    assert card_source("localhost:8080").url == f"http://localhost:8080{CARD_PATH}"
    assert card_source("agent.example").url == f"https://agent.example{CARD_PATH}"
    card = tmp_path / "card.json"
    card.write_text("{}")
    assert card_source(str(card)).path == card
    assert card_source(f"file://{card}").path == card
    assert card_source(f"file://{card}").origin is None
    assert card_source("http://LOCALHOST:8080").origin == "http://localhost:8080"
    assert card_source("https://a.example").origin == "https://a.example:443"


def test_the_api_key_goes_where_the_card_says() -> None:
    v1 = {
        "securitySchemes": {"k": {"apiKeySecurityScheme": {"name": "X-Key", "location": "header"}}}
    }
    v03 = {"securitySchemes": {"k": {"type": "apiKey", "in": "header", "name": "X-Old"}}}
    assert api_key_header(v1) == "X-Key"
    assert api_key_header(v03) == "X-Old"
    assert api_key_header({}) == "X-API-Key"


@pytest.mark.parametrize(
    ("name", "location"),
    [
        ("Cookie", "header"),
        ("cookie", "header"),
        ("Authorization", "header"),
        ("Proxy-Authorization", "header"),
        ("Host", "header"),
        ("X-Forwarded-For", "header"),
        ("Content-Type", "header"),
        ("A2A-Version", "header"),
        ("X-Key\r\nCookie: a", "header"),
        ("session", "cookie"),
        ("key", "query"),
        (["X-Key"], "header"),
    ],
)
def test_a_card_cannot_choose_where_the_key_goes_beyond_a_plain_header(
    name: object, location: str
) -> None:
    card = {
        "securitySchemes": {"k": {"apiKeySecurityScheme": {"name": name, "location": location}}}
    }
    with pytest.raises(
        ClientError, match="this client puts a key only in a plain header"
    ) as caught:
        api_key_header(card)
    assert caught.value.error == CARD_INVALID


@given(st.text(max_size=80), st.text(max_size=10))
def test_whatever_header_a_card_names_the_key_lands_in_a_plain_one(name: str, where: str) -> None:
    card = {"securitySchemes": {"k": {"type": "apiKey", "in": where, "name": name}}}
    try:
        header = api_key_header(card)
    except ClientError:
        return
    assert header == name and where.lower() == "header"
    assert header.lower() not in ("cookie", "authorization", "host")
    assert all(c.isascii() and (c.isalnum() or c == "-") for c in header)


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
