"""The HTTP+JSON (REST) binding: every route, its errors' statuses and bodies, streams of bare
StreamResponses, push config CRUD, the card's interface, and JSON-RPC beside it."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import requests

from shared.identity.api_key import hashed
from tests import sse
from tests.conftest import Client, Server
from tests.test_ids import text_id

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

V1 = {"A2A-Version": "1.0"}
HOOK = "https://hooks.example.com/a2a"


def message(text: str, message_id: str | None = None, **fields: Any) -> dict[str, Any]:
    return {
        "messageId": message_id or text_id(text),
        "role": "ROLE_USER",
        "parts": [{"text": text}],
        **fields,
    }


def post(client: Client, path: str, body: Any = None, **headers: str) -> httpx.Response:
    data = b"" if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **V1, **headers}
    return client.http.post(path, content=data, headers=hdrs)


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.content
    assert response.headers["Content-Type"] == "application/a2a+json"  # 1.0.1, S1 §11.1
    return response.json()


def failed(response: httpx.Response, status: int, grpc_status: str, reason: str) -> dict[str, Any]:
    """The google.rpc.Status body of an error, checked against its HTTP status."""
    assert response.status_code == status, response.content
    assert response.headers["Content-Type"] == "application/a2a+json"
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == status
    assert error["status"] == grpc_status
    assert isinstance(error["message"], str) and error["message"]
    info = error["details"][0]
    assert info["@type"] == "type.googleapis.com/google.rpc.ErrorInfo"
    assert info["reason"] == reason
    assert info["domain"] == "a2a-protocol.org"
    assert "Traceback" not in response.text
    return error


def new_task(client: Client, text: str = "new phone") -> dict[str, Any]:
    """A task waiting for input (the sample agent's phone order)."""
    task: dict[str, Any] = ok(post(client, "/message:send", {"message": message(text)}))["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


@pytest.fixture
def push(make_client: Any) -> Client:
    client: Client = make_client(push_notifications=True, push_allowed_hosts=("hooks.example.com",))
    return client


def test_send_answers_the_send_message_result(client: Client) -> None:
    result = ok(post(client, "/message:send", {"message": message("hello")}))
    task = result["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"]
    # The same operation as JSON-RPC's SendMessage: the task reads the same both ways.
    assert client.result("GetTask", {"id": task["id"]}, version="1.0") == ok(
        client.http.get(f"/tasks/{task['id']}", headers=V1)
    )


def test_send_takes_snake_case_and_ignores_unknown_fields(client: Client) -> None:
    body = {
        "message": {"message_id": "m-s", "role": "ROLE_USER", "parts": [{"text": "hi"}]},
        "configuration": {"history_length": 1},
        "somethingNew": {"x": 1},
    }
    assert ok(post(client, "/message:send", body))["task"]["status"]["state"]


def test_get_task_with_history_length(client: Client) -> None:
    task = new_task(client)
    reply = message("Android", "m-2", taskId=task["id"], contextId=task["contextId"])
    ok(post(client, "/message:send", {"message": reply}))
    full = ok(client.http.get(f"/tasks/{task['id']}", headers=V1))
    assert len(full["history"]) >= 2
    last = ok(client.http.get(f"/tasks/{task['id']}?historyLength=1", headers=V1))
    assert last["history"] == full["history"][-1:]
    none = ok(client.http.get(f"/tasks/{task['id']}?historyLength=0", headers=V1))
    assert "history" not in none


def test_list_tasks_reads_the_query(client: Client) -> None:
    first = new_task(client, "new phone")
    other = ok(post(client, "/message:send", {"message": message("hello")}))["task"]
    page = ok(client.http.get(f"/tasks?contextId={first['contextId']}", headers=V1))
    assert [t["id"] for t in page["tasks"]] == [first["id"]]
    assert page["nextPageToken"] == ""
    done = ok(
        client.http.get(
            "/tasks?status=TASK_STATE_COMPLETED&pageSize=5&includeArtifacts=true&historyLength=0",
            headers=V1,
        )
    )
    assert [t["id"] for t in done["tasks"]] == [other["id"]]
    assert done["tasks"][0]["artifacts"] and "history" not in done["tasks"][0]
    assert done["pageSize"] == 5


def test_list_tasks_rejects_a_bad_page_size(client: Client) -> None:
    error = failed(
        client.http.get("/tasks?pageSize=lots", headers=V1),
        400,
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert error["details"][1]["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    assert error["details"][1]["fieldViolations"][0]["field"] == "params.pageSize"


def test_cancel(client: Client) -> None:
    task = new_task(client)
    canceled = ok(post(client, f"/tasks/{task['id']}:cancel"))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    again = post(client, f"/tasks/{task['id']}:cancel", {"metadata": {"why": "twice"}})
    failed(again, 400, "FAILED_PRECONDITION", "TASK_NOT_CANCELABLE")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/tasks/nope"),
        ("POST", "/tasks/nope:cancel"),
        ("POST", "/tasks/nope:subscribe"),
        ("GET", "/tasks/nope:subscribe"),
    ],
)
def test_unknown_task_is_404(client: Client, method: str, path: str) -> None:
    response = client.http.request(method, path, headers=V1)
    error = failed(response, 404, "NOT_FOUND", "TASK_NOT_FOUND")
    assert error["message"].startswith("Task not found")


def test_stream_sends_bare_stream_responses(client: Client) -> None:
    response = post(client, "/message:stream", {"message": message("hello")})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = sse.parse(response.text)
    assert events and all(e.id is not None for e in events)
    assert "task" in events[0].data and "jsonrpc" not in events[0].data
    kinds = [next(iter(e.data)) for e in events]
    assert set(kinds[1:]) <= {"statusUpdate", "artifactUpdate"}
    assert events[-1].data["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_subscribe_opens_with_a_snapshot(make_client: Any, method: str) -> None:
    # The task waits for input: the stream ends soon without news.
    client = make_client(stream_idle=0.2)
    task = new_task(client)
    response = client.http.request(method, f"/tasks/{task['id']}:subscribe", headers=V1)
    assert response.status_code == 200, response.content
    events = sse.parse(response.text)
    assert events[0].data["task"]["id"] == task["id"]


def test_subscribe_to_a_finished_task_is_refused(client: Client) -> None:
    task = ok(post(client, "/message:send", {"message": message("hello")}))["task"]
    response = post(client, f"/tasks/{task['id']}:subscribe")
    failed(response, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")


def test_push_config_crud(push: Client) -> None:
    task = new_task(push)
    base = f"/tasks/{task['id']}/pushNotificationConfigs"
    created = ok(post(push, base, {"url": HOOK, "token": "tok", "taskId": "ignored"}))
    assert created["taskId"] == task["id"] and created["url"] == HOOK and created["id"]
    path = f"{base}/{created['id']}"
    assert ok(push.http.get(path, headers=V1)) == created
    listed = ok(push.http.get(f"{base}?pageSize=10", headers=V1))
    assert listed == {"configs": [created], "nextPageToken": ""}
    assert ok(push.http.delete(path, headers=V1)) == {}
    failed(push.http.get(path, headers=V1), 404, "NOT_FOUND", "TASK_NOT_FOUND")
    assert ok(push.http.get(base, headers=V1))["configs"] == []


def test_push_config_on_an_unknown_task_is_404(push: Client) -> None:
    response = post(push, "/tasks/nope/pushNotificationConfigs", {"url": HOOK})
    failed(response, 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_push_unsupported_is_400(make_client: Any) -> None:
    client = make_client(push_notifications=False)
    task = new_task(client)
    response = post(client, f"/tasks/{task['id']}/pushNotificationConfigs", {"url": HOOK})
    failed(response, 400, "FAILED_PRECONDITION", "PUSH_NOTIFICATION_NOT_SUPPORTED")


def test_extended_card_is_unsupported(client: Client) -> None:
    response = client.http.get("/extendedAgentCard", headers=V1)
    failed(response, 400, "FAILED_PRECONDITION", "UNSUPPORTED_OPERATION")


def test_wrong_content_type_is_400(client: Client) -> None:
    body = json.dumps({"message": message("hello")})
    response = client.http.post(
        "/message:send", content=body, headers={"Content-Type": "text/plain", **V1}
    )
    error = failed(response, 400, "INVALID_ARGUMENT", "CONTENT_TYPE_NOT_SUPPORTED")
    assert "text/plain" in error["message"]


def test_a2a_json_bodies_are_taken_and_answered_in_kind(client: Client) -> None:
    # 1.0.1 (S1 §11.1): HTTP+JSON requests and answers SHOULD be application/a2a+json.
    body = {"message": message("typed")}
    sent = post(client, "/message:send", body, **{"Content-Type": "application/a2a+json"})
    task = ok(sent)["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert ok(client.http.get(f"/tasks/{task['id']}", headers=V1))["id"] == task["id"]


def test_unsupported_version_is_400(client: Client) -> None:
    response = post(
        client, "/message:send", {"message": message("hello")}, **{"A2A-Version": "99.0"}
    )
    failed(response, 400, "FAILED_PRECONDITION", "VERSION_NOT_SUPPORTED")


def test_a_missing_version_is_served(client: Client) -> None:
    response = client.http.post(
        "/message:send",
        content=json.dumps({"message": message("hello")}),
        headers={"Content-Type": "application/json"},
    )
    assert ok(response)["task"]


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"{not json", 400, "INVALID_JSON"),
        (b"[1, 2]", 400, "INVALID_PARAMS"),
        (b'{"message": {"role": "ROLE_USER"}}', 400, "INVALID_PARAMS"),
    ],
)
def test_bad_bodies(client: Client, body: bytes, status: int, reason: str) -> None:
    response = client.http.post(
        "/message:send", content=body, headers={"Content-Type": "application/json", **V1}
    )
    failed(response, status, "INVALID_ARGUMENT", reason)


def test_body_size_limit(make_client: Any) -> None:
    small = make_client(max_body_bytes=2048)
    response = post(small, "/message:send", {"message": message("x" * 4096)})
    failed(response, 413, "INVALID_ARGUMENT", "INVALID_REQUEST")


def test_authentication(make_client: Any) -> None:
    guarded = make_client(auth="api-key", api_keys={hashed("k1"): "alice", hashed("k2"): "bob"})
    refused = post(guarded, "/message:send", {"message": message("hello")})
    failed(refused, 401, "UNAUTHENTICATED", "INVALID_REQUEST")
    assert refused.headers["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    task = ok(post(guarded, "/message:send", {"message": message("hello")}, **{"X-API-Key": "k1"}))
    path = f"/tasks/{task['task']['id']}"
    assert ok(guarded.http.get(path, headers={"X-API-Key": "k1"}))["id"] == task["task"]["id"]
    # Another caller's task does not exist for them.
    failed(guarded.http.get(path, headers={"X-API-Key": "k2"}), 404, "NOT_FOUND", "TASK_NOT_FOUND")


def test_wrong_method_on_a_rest_path_is_405(client: Client) -> None:
    response = client.http.delete("/tasks/abc", headers=V1)
    assert response.status_code == 405
    assert response.headers["Allow"] == "GET"
    assert response.json()["error"]["status"] == "METHOD_NOT_ALLOWED"
    assert client.http.get("/message:send").headers["Allow"] == "POST"


def test_unknown_get_path_is_404(client: Client) -> None:
    failed(client.http.get("/nowhere", headers=V1), 404, "NOT_FOUND", "METHOD_NOT_FOUND")


@pytest.mark.parametrize("path", ["/", "/api/a2a", "/message"])
def test_json_rpc_still_answers_other_posts(client: Client, path: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": message("hi")},
    }
    response = client.post(body, V1, path=path)
    assert response.status_code == 200
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_card_lists_the_http_json_interface(client: Client) -> None:
    card = client.http.get("/.well-known/agent-card.json").json()
    assert {
        "url": "http://localhost/",
        "protocolBinding": "HTTP+JSON",
        "protocolVersion": "1.0",
    } in (card["supportedInterfaces"])
    # Its 0.3 form (the /v1 paths, tests/bindings/test_rest_v0_3.py) is listed for v0.3 readers.
    assert {"url": "http://localhost/", "transport": "HTTP+JSON"} in card["additionalInterfaces"]


def test_over_a_real_server(server: Server) -> None:
    sent = requests.post(
        f"{server.url}/message:send",
        json={"message": message("hello", "m-real")},
        headers=V1,
        timeout=10,
    )
    assert sent.status_code == 200 and sent.headers["Content-Type"] == "application/a2a+json"
    task_id = sent.json()["task"]["id"]
    got = requests.get(f"{server.url}/tasks/{task_id}", headers=V1, timeout=10)
    assert got.json()["id"] == task_id
    missing = requests.get(f"{server.url}/tasks/nope", headers=V1, timeout=10)
    assert missing.status_code == 404 and missing.json()["error"]["status"] == "NOT_FOUND"
    streamed = sse.stream(f"{server.url}/message:stream", {"message": message("hello", "m-s")}, V1)
    frames = list(sse.read(streamed))
    assert "task" in frames[0].data
    assert frames[-1].data["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_service_errors_name_the_field_as_json_rpc_does(client: Client) -> None:
    """The REST path ids are the 1.0 params they fill: an error names them as such."""
    missing = failed(
        client.http.get("/tasks/missing", headers=V1), 404, "NOT_FOUND", "TASK_NOT_FOUND"
    )
    assert missing["details"][1]["fieldViolations"][0]["field"] == "params.id"
    bad_token = failed(
        client.http.get("/tasks?pageToken=garbage", headers=V1),
        400,
        "INVALID_ARGUMENT",
        "INVALID_PARAMS",
    )
    assert bad_token["details"][1]["fieldViolations"][0]["field"] == "params.pageToken"
    unknown = message("x", "m-9", taskId="missing")
    sent = failed(
        post(client, "/message:send", {"message": unknown}), 404, "NOT_FOUND", "TASK_NOT_FOUND"
    )
    assert sent["details"][1]["fieldViolations"][0]["field"] == "params.message.taskId"
