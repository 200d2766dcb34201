"""JSON-RPC 2.0 done right: envelopes, standard errors, batches, notifications, headers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from shared.bindings import rest
from shared.bindings.operations import OPERATIONS, STREAMING
from shared.dialects.registry import METHODS
from tests.conftest import Client

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

SEND_V1 = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}


def body(response: Any) -> Any:
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("application/json")
    return response.json()


def test_parse_error_has_null_id(client: Client) -> None:
    answer = body(client.post(b'{"jsonrpc": "2.0", "id": 7, "method": '))
    assert answer["id"] is None
    assert answer["error"]["code"] == -32700
    assert answer["error"]["message"].startswith("Invalid JSON payload")


def test_body_that_is_not_utf8_is_a_parse_error(client: Client) -> None:
    answer = body(client.post(b"\xff\xfe{}"))
    assert answer["error"]["code"] == -32700


@pytest.mark.parametrize(
    ("request_body", "answer_id"),
    [
        ({"jsonrpc": "1.0", "id": 3, "method": "GetTask"}, 3),
        ({"jsonrpc": "2.0", "id": 3}, 3),
        ({"jsonrpc": "2.0", "id": 3, "method": 12}, 3),
        ({"jsonrpc": "2.0", "id": {"a": 1}, "method": "GetTask"}, None),
        ({"jsonrpc": "2.0", "id": True, "method": "GetTask"}, None),
        (b'"just a string"', None),
    ],
)
def test_invalid_request(client: Client, request_body: Any, answer_id: Any) -> None:
    answer = body(client.post(request_body))
    assert answer["error"]["code"] == -32600
    assert answer["id"] == answer_id


def test_method_not_found_names_the_method(client: Client) -> None:
    error = client.error("tasks/frobnicate", {})
    assert error["code"] == -32601
    assert "tasks/frobnicate" in error["message"]


@pytest.mark.parametrize("params", [[1, 2], "x", 5])
def test_params_must_be_an_object(client: Client, params: Any) -> None:
    error = client.error("GetTask", params, version="1.0")
    assert error["code"] == -32602


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({}, "params.message"),
        ({"message": {"role": "ROLE_USER", "parts": []}}, "params.message.parts"),
        ({"message": {"role": "robot", "parts": [{"text": "x"}]}}, "params.message.role"),
        (
            {"message": {"role": "user", "parts": [{"kind": "video"}]}},
            "params.message.parts[0].kind",
        ),
        ({"message": {"role": "user", "parts": [{"nothing": 1}]}}, "params.message.parts[0]"),
        (
            {
                "message": {"role": "user", "parts": [{"text": "x"}]},
                "configuration": {"historyLength": -1},
            },
            "params.configuration.historyLength",
        ),
    ],
)
def test_invalid_params_name_the_field(client: Client, params: Any, field: str) -> None:
    error = client.error("SendMessage", params, version="1.0")
    assert error["code"] == -32602
    assert field in error["message"]
    violations = error["data"][0]["fieldViolations"]
    assert violations[0]["field"] == field


def test_v03_invalid_params_data_is_an_object(client: Client) -> None:
    error = client.error("message/send", {})
    assert error["code"] == -32602
    assert error["data"]["field"] == "params.message"


def test_wrong_content_type_is_checked_before_parsing(client: Client) -> None:
    response = client.post("{'not': 'json'}", headers={"Content-Type": "text/plain"})
    answer = body(response)
    assert answer["error"]["code"] == -32005
    assert answer["error"]["message"].startswith("Incompatible content types")
    assert answer["id"] is None


def test_wrong_content_type_keeps_the_id_when_it_can(client: Client) -> None:
    request = {"jsonrpc": "2.0", "id": "abc", "method": "GetTask", "params": {"id": "x"}}
    answer = body(client.post(request, headers={"Content-Type": "text/plain"}))
    assert answer == {
        "jsonrpc": "2.0",
        "id": "abc",
        "error": {
            "code": -32005,
            "message": "Incompatible content types: "
            "send Content-Type: application/json, not text/plain",
            "data": {
                "detail": "send Content-Type: application/json, not text/plain",
                "contentType": "text/plain",
            },
        },
    }


@pytest.mark.parametrize(
    "content_type", ["application/json; charset=utf-8", "application/a2a+json"]
)
def test_json_content_types_are_accepted(client: Client, content_type: str) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND_V1}
    answer = body(client.post(request, headers={"Content-Type": content_type}))
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_unsupported_version_is_refused_in_the_methods_dialect(client: Client) -> None:
    error = client.error("SendMessage", SEND_V1, version="99.0")
    assert error["code"] == -32009
    [info] = error["data"]
    assert info["reason"] == "VERSION_NOT_SUPPORTED"
    assert info["domain"] == "a2a-protocol.org"
    v03 = client.error(
        "message/send", {"message": {"role": "user", "parts": [{"text": "x"}]}}, version="7.1"
    )
    assert v03["code"] == -32009
    assert v03["data"]["requestedVersion"] == "7.1"


@pytest.mark.parametrize("version", ["", "1.0", "0.3", "1.0.1"])
def test_supported_or_missing_version_is_served(client: Client, version: str) -> None:
    result = client.result("SendMessage", SEND_V1, version=version or None)
    assert result["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_version_as_query_parameter(client: Client) -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND_V1}
    answer = body(client.post(request, path="/?A2A-Version=9.9"))
    assert answer["error"]["code"] == -32009


def test_batch_is_answered_element_by_element(client: Client) -> None:
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": SEND_V1},
        {"jsonrpc": "2.0", "method": "SendMessage", "params": SEND_V1},  # a notification
        {"jsonrpc": "2.0", "id": 3, "method": "nope"},
        {"foo": "bar"},
    ]
    answers = body(client.post(batch))
    assert [a["id"] for a in answers] == [1, 3, None]
    assert "task" in answers[0]["result"]
    assert answers[1]["error"]["code"] == -32601
    assert answers[2]["error"]["code"] == -32600


def test_empty_batch_is_invalid(client: Client) -> None:
    answer = body(client.post([]))
    assert answer["error"]["code"] == -32600


def test_notification_gets_no_answer_but_is_served(client: Client) -> None:
    response = client.post({"jsonrpc": "2.0", "method": "SendMessage", "params": SEND_V1})
    assert response.status_code == 204
    assert response.content == b""
    listed = client.result("ListTasks", {}, version="1.0")
    assert listed["totalSize"] == 1


def test_all_notification_batch_gets_no_answer(client: Client) -> None:
    response = client.post([{"jsonrpc": "2.0", "method": "SendMessage", "params": SEND_V1}])
    assert response.status_code == 204


def test_oversized_body_is_refused_before_reading(make_client: Any) -> None:
    small = make_client(max_body_bytes=2048)
    big = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"pad": "x" * 4096}}
    response = small.post(big)
    assert response.status_code == 413
    answer = response.json()
    assert answer["error"]["code"] == -32600
    assert "A2A_MAX_BODY_BYTES" in answer["error"]["message"]


def _chunked(client: Client, data: bytes) -> Any:
    """A POST without Content-Length: its body chunked (httpx chunks an iterator's)."""
    return client.http.post("/", content=iter([data]), headers={"Content-Type": "application/json"})


def test_a_chunked_body_over_the_limit_is_refused(make_client: Any) -> None:
    small = make_client(max_body_bytes=2048)
    big = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"pad": "x" * 4096}}
    response = _chunked(small, json.dumps(big).encode())
    assert response.status_code == 413
    message = response.json()["error"]["message"]
    assert "exceeds 2048 bytes" in message and "A2A_MAX_BODY_BYTES" in message


def test_a_chunked_body_within_the_limit_is_served(client: Client) -> None:
    request = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": SEND_V1}
    response = _chunked(client, json.dumps(request).encode())
    assert response.status_code == 200
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_handler_crash_is_a_failed_task_not_a_500(make_client: Any) -> None:
    crashing = make_client(handler="tests.handlers.crash")
    result = crashing.result("SendMessage", SEND_V1, version="1.0")
    status = result["task"]["status"]
    assert status["state"] == "TASK_STATE_FAILED"
    text = status["message"]["parts"][0]["text"]
    assert "reference" in text
    assert "Traceback" not in json.dumps(result) and "ZeroDivision" not in json.dumps(result)


def test_an_unexpected_server_error_is_an_internal_error(client: Client, monkeypatch: Any) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("store exploded")

    monkeypatch.setattr(client.app.service.ports.store, "get", broken)
    error = client.error("GetTask", {"id": "x"}, version="1.0")
    assert error["code"] == -32603
    assert "store exploded" not in json.dumps(error)


def test_get_on_root_explains_itself(client: Client) -> None:
    response = client.http.get("/")
    assert response.status_code == 405
    assert "agent-card.json" in response.json()["error"]["message"]


def test_unknown_path_is_a_json_404(client: Client) -> None:
    response = client.http.get("/nothing/here")
    assert response.status_code == 404
    assert response.json()["error"]["status"] == "NOT_FOUND"


def test_unknown_fields_are_ignored(client: Client) -> None:
    params = {
        "message": {**SEND_V1["message"], "tckUnknownField": "ignored"},
        "tckExtraParam": 42,
    }
    assert "task" in client.result("SendMessage", params, version="1.0")


def test_every_method_and_route_runs_an_operation_of_the_one_table() -> None:
    used = {operation for operation, _ in METHODS.values()}
    used |= {route.operation for route in rest.ROUTES}
    used.add("watch")  # the seeds' GET /sse (shared.bindings.http)
    assert used == set(OPERATIONS)  # none missing, none unreachable
    assert set(OPERATIONS) >= STREAMING
