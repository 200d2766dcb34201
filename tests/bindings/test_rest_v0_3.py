"""v0.3's HTTP+JSON binding (`/v1/...`): every route in v0.3's ProtoJSON, its error bodies and
statuses, streams of bare StreamResponses, push config CRUD in both clients' body forms, the
extended card, owner scoping, hostile bodies, and the 1.0 paths beside it untouched."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.bindings import rest_v0_3
from shared.identity.api_key import hashed
from shared.queue.inline import InlineQueue
from tests import sse
from tests.conftest import Client
from tests.test_ids import text_id

# Every answer these tests get is valid in its version's official schema (0.3 REST answers
# parse into the SDK's v0.3 protobuf types, unknown fields rejected).
pytestmark = pytest.mark.usefixtures("schema_checked")

HOOK = "https://hooks.example.com/a2a"
BLOCKING = {"blocking": True}


def message(text: str, **fields: Any) -> dict[str, Any]:
    """A proto Message (`content`, ROLE_USER)."""
    return {
        "messageId": fields.pop("messageId", text_id(text)),
        "role": "ROLE_USER",
        "content": [{"text": text}],
        **fields,
    }


def post(client: Client, path: str, body: Any = None, **headers: str) -> httpx.Response:
    data = b"" if body is None else json.dumps(body).encode()
    return client.http.post(
        path, content=data, headers={"Content-Type": "application/json", **headers}
    )


def ok(response: httpx.Response) -> Any:
    assert response.status_code == 200, response.content
    assert response.headers["Content-Type"] == "application/json"
    return response.json()


def failed(response: httpx.Response, status: int, code: int) -> dict[str, Any]:
    """The binding's error body, with the A2A error's JSON-RPC code."""
    assert response.status_code == status, response.content
    error: dict[str, Any] = response.json()
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert "Traceback" not in response.text
    return error


def send(client: Client, text: str, **headers: str) -> dict[str, Any]:
    body = {"message": message(text), "configuration": BLOCKING}
    task: dict[str, Any] = ok(post(client, "/v1/message:send", body, **headers))["task"]
    return task


def new_task(client: Client) -> dict[str, Any]:
    """A task waiting for input (the sample agent's phone order)."""
    task = send(client, "new phone")
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return task


@pytest.fixture
def push(make_client: Any) -> Client:
    client: Client = make_client(push_notifications=True, push_allowed_hosts=("hooks.example.com",))
    return client


def test_send_answers_a_send_message_response(client: Client) -> None:
    task = send(client, "hello")
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "hello"}]
    (sent,) = task["history"]
    assert sent["role"] == "ROLE_USER" and sent["content"] == [{"text": "hello"}]
    assert "kind" not in task and "kind" not in sent


def test_absent_blocking_is_false_as_in_the_proto(client: Client) -> None:
    # proto3: an absent bool is false, so the send answers before the turn has run.
    answered = ok(post(client, "/v1/message:send", {"message": message("hello")}))["task"]
    assert answered["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    queue = client.app.service.ports.turns.queue
    assert isinstance(queue, InlineQueue) and queue.join(10)
    done = ok(client.http.get(f"/v1/tasks/{answered['id']}"))
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"


def test_a_multi_turn_conversation_and_history_length(client: Client) -> None:
    task = new_task(client)
    question = task["status"]["message"]
    assert question["role"] == "ROLE_AGENT" and question["content"][0]["text"]
    reply = message("Android", taskId=task["id"], contextId=task["contextId"])
    done = ok(post(client, "/v1/message:send", {"message": reply, "configuration": BLOCKING}))
    assert done["task"]["id"] == task["id"]
    assert done["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    full = ok(client.http.get(f"/v1/tasks/{task['id']}"))
    assert len(full["history"]) >= 2
    last = ok(client.http.get(f"/v1/tasks/{task['id']}?historyLength=1"))
    assert last["history"] == full["history"][-1:]
    failed(client.http.get(f"/v1/tasks/{task['id']}?historyLength=-1"), 400, -32602)


def test_file_and_data_parts_in_proto_form(client: Client) -> None:
    files = {
        "message": {
            "messageId": "m-files",
            "role": "ROLE_USER",
            "content": [
                {"file": {"fileWithBytes": "aGVsbG8=", "mimeType": "text/plain", "name": "a.txt"}},
                {"file": {"file_with_uri": "https://files.example.com/b.pdf", "mime_type": "x/y"}},
            ],
        },
        "configuration": BLOCKING,
    }
    task = ok(post(client, "/v1/message:send", files))["task"]
    assert task["artifacts"][0]["parts"][0]["text"].startswith("Received a.txt (text/plain), 5")
    assert task["history"][0]["content"] == [
        {"file": {"fileWithBytes": "aGVsbG8=", "mimeType": "text/plain", "name": "a.txt"}},
        {"file": {"fileWithUri": "https://files.example.com/b.pdf", "mimeType": "x/y"}},
    ]
    data = {
        "message": {
            "messageId": "m-data",
            "role": "ROLE_USER",
            "content": [{"data": {"data": {"n": 1}}}],
        },
        "configuration": BLOCKING,
    }
    echoed = ok(post(client, "/v1/message:send", data))["task"]
    # The echo's data is a list of the parts' data: a Struct holds an object, so it is wrapped.
    assert echoed["artifacts"][0]["parts"] == [{"data": {"data": {"value": [{"n": 1}]}}}]


@pytest.mark.parametrize("data", [{"n": 1}, {"data": [1]}, {"data": {}, "x": 1}, [1], "x"])
def test_a_data_part_must_be_a_data_part(client: Client, data: Any) -> None:
    body = {"message": {"messageId": "m", "role": "ROLE_USER", "content": [{"data": data}]}}
    error = failed(post(client, "/v1/message:send", body), 400, -32602)
    assert error["data"]["field"] == "message.content[0].data"
    assert '{"data": {"data": {...}}}' in error["message"]


def test_cancel_and_its_errors(client: Client) -> None:
    task = new_task(client)
    # The Python SDK posts CancelTaskRequest's `name`; the JS SDK posts nothing.
    canceled = ok(post(client, f"/v1/tasks/{task['id']}:cancel", {"name": f"tasks/{task['id']}"}))
    assert canceled["status"]["state"] == "TASK_STATE_CANCELLED"
    failed(post(client, f"/v1/tasks/{task['id']}:cancel"), 400, -32002)


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/tasks/nope"),
        ("POST", "/v1/tasks/nope:cancel"),
        ("GET", "/v1/tasks/nope:subscribe"),
        ("POST", "/v1/tasks/nope:subscribe"),
    ],
)
def test_unknown_task_is_404(client: Client, method: str, path: str) -> None:
    error = failed(client.http.request(method, path), 404, -32001)
    assert error["message"].startswith("Task not found")


def test_stream_sends_bare_stream_responses(client: Client) -> None:
    response = post(client, "/v1/message:stream", {"message": message("new phone")})
    assert response.status_code == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    events = sse.parse(response.text)
    assert [next(iter(e.data)) for e in events] == ["task", "statusUpdate"]
    update = events[-1].data["statusUpdate"]
    assert update["status"]["state"] == "TASK_STATE_INPUT_REQUIRED" and update["final"] is True


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_subscribe_opens_with_a_snapshot(make_client: Any, method: str) -> None:
    # The task waits for input: the stream ends soon without news.
    client = make_client(stream_idle=0.2)
    task = new_task(client)
    response = client.http.request(method, f"/v1/tasks/{task['id']}:subscribe")
    assert response.status_code == 200, response.content
    events = sse.parse(response.text)
    assert events[0].data["task"]["id"] == task["id"]


def test_subscribe_to_a_finished_task_is_refused(client: Client) -> None:
    task = send(client, "hello")
    failed(client.http.get(f"/v1/tasks/{task['id']}:subscribe"), 400, -32004)


def test_push_config_crud_in_both_body_forms(push: Client) -> None:
    task = new_task(push)
    base = f"/v1/tasks/{task['id']}/pushNotificationConfigs"
    # The Python SDK: a CreateTaskPushNotificationConfigRequest.
    python = {
        "parent": f"tasks/{task['id']}",
        "configId": "py",
        "config": {
            "name": f"tasks/{task['id']}/pushNotificationConfigs/py",
            "pushNotificationConfig": {"url": HOOK, "token": "tok"},
        },
    }
    created = ok(post(push, base, python))
    assert created == {
        "name": f"tasks/{task['id']}/pushNotificationConfigs/py",
        "pushNotificationConfig": {"id": "py", "url": HOOK, "token": "tok"},
    }
    # The JS SDK: the TaskPushNotificationConfig itself (the proto's HTTP body).
    js = {
        "name": f"tasks/{task['id']}/pushNotificationConfigs/js",
        "pushNotificationConfig": {
            "url": HOOK,
            "authentication": {"schemes": ["Bearer"], "credentials": "c"},
        },
    }
    other = ok(post(push, base, js))
    assert other["pushNotificationConfig"]["id"] == "js"
    assert ok(push.http.get(f"{base}/py")) == created
    assert ok(push.http.get(base)) == {"configs": [created, other]}
    assert ok(push.http.delete(f"{base}/py")) == {}
    failed(push.http.get(f"{base}/py"), 404, -32001)
    assert ok(push.http.get(base)) == {"configs": [other]}


def test_push_config_without_an_id_is_the_tasks_one(push: Client) -> None:
    task = new_task(push)
    base = f"/v1/tasks/{task['id']}/pushNotificationConfigs"
    created = ok(post(push, base, {"pushNotificationConfig": {"url": HOOK}}))
    assert created["pushNotificationConfig"]["id"] == task["id"]


@pytest.mark.parametrize(
    "body",
    [{}, {"pushNotificationConfig": "x"}, {"config": {"pushNotificationConfig": {}}}],
)
def test_a_bad_push_config_is_400(push: Client, body: Any) -> None:
    task = new_task(push)
    failed(post(push, f"/v1/tasks/{task['id']}/pushNotificationConfigs", body), 400, -32602)


def test_push_unsupported_is_400(make_client: Any) -> None:
    client = make_client(push_notifications=False)
    task = new_task(client)
    path = f"/v1/tasks/{task['id']}/pushNotificationConfigs"
    failed(post(client, path, {"pushNotificationConfig": {"url": HOOK}}), 400, -32003)


def test_a_send_with_an_inline_push_config(push: Client) -> None:
    body = {
        "message": message("new phone"),
        "configuration": {"blocking": True, "pushNotification": {"id": "inline", "url": HOOK}},
    }
    task = ok(post(push, "/v1/message:send", body))["task"]
    got = ok(push.http.get(f"/v1/tasks/{task['id']}/pushNotificationConfigs/inline"))
    assert got["pushNotificationConfig"]["url"] == HOOK


def test_the_extended_card(make_client: Any) -> None:
    failed(make_client().http.get("/v1/card"), 400, -32004)  # the sample has none
    members = make_client(
        handler="tests.handlers.members", auth="api-key", api_keys={hashed("k1"): "alice"}
    )
    refused = failed(members.http.get("/v1/card"), 401, -32600)
    assert "vault" not in json.dumps(refused)
    # The hybrid card (its JSON form, which the 0.3 SDKs read), with the members' skills.
    card = ok(members.http.get("/v1/card", headers={"X-API-Key": "k1"}))
    assert card["protocolVersion"] == "0.3.0" and card["supportsAuthenticatedExtendedCard"]
    assert [s["id"] for s in card["skills"]] == ["hello", "vault"]


def test_each_owner_sees_only_their_tasks(make_client: Any) -> None:
    guarded = make_client(auth="api-key", api_keys={hashed("k1"): "alice", hashed("k2"): "bob"})
    refused = post(guarded, "/v1/message:send", {"message": message("hello")})
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"] == 'ApiKey header="X-API-Key"'
    task = send(guarded, "hello", **{"X-API-Key": "k1"})
    path = f"/v1/tasks/{task['id']}"
    assert ok(guarded.http.get(path, headers={"X-API-Key": "k1"}))["id"] == task["id"]
    failed(guarded.http.get(path, headers={"X-API-Key": "k2"}), 404, -32001)
    failed(post(guarded, f"{path}:cancel", **{"X-API-Key": "k2"}), 404, -32001)


def test_a_task_reads_the_same_in_both_0_3_forms(client: Client) -> None:
    # Made over JSON-RPC (v0.3 JSON), read over REST (ProtoJSON), and the other way round.
    made = client.result(
        "message/send",
        {
            "message": {
                "kind": "message",
                "messageId": "m-rpc",
                "role": "user",
                "parts": [{"kind": "text", "text": "hi"}],
            }
        },
    )
    read = ok(client.http.get(f"/v1/tasks/{made['id']}"))
    assert read["status"]["state"] == "TASK_STATE_COMPLETED" and "kind" not in read
    rest_made = send(client, "hello")
    rpc_read = client.result("tasks/get", {"id": rest_made["id"]})
    assert rpc_read["kind"] == "task" and rpc_read["status"]["state"] == "completed"


@pytest.mark.parametrize(
    ("body", "content_type", "status", "code"),
    [
        (b"{not json", "application/json", 400, -32700),
        (b"[1, 2]", "application/json", 400, -32602),
        (b'{"message": {"role": "ROLE_USER"}}', "application/json", 400, -32602),
        (
            b'{"message": {"role": "ROLE_UNSPECIFIED", "content": [{"text": "x"}]}}',
            "application/json",
            400,
            -32602,
        ),
        # No type: a local agent (A2A_AUTH=none) refuses it (tests/bindings/test_local_only.py).
        (b'{"message": {}}', None, 400, -32005),
        (b'{"message": "x", "configuration": []}', "application/json", 400, -32602),
        (b'{"message": {}}', "text/plain", 400, -32005),
    ],
)
def test_bad_bodies(
    client: Client, body: bytes, content_type: str | None, status: int, code: int
) -> None:
    headers = {"Content-Type": content_type} if content_type else {}
    failed(client.http.post("/v1/message:send", content=body, headers=headers), status, code)


def test_body_size_limit(make_client: Any) -> None:
    small = make_client(max_body_bytes=2048)
    failed(post(small, "/v1/message:send", {"message": message("x" * 4096)}), 413, -32600)


def test_a_1_0_version_header_is_pointed_at_the_1_0_paths(client: Client) -> None:
    response = post(
        client, "/v1/message:send", {"message": message("hi")}, **{"A2A-Version": "1.0"}
    )
    error = failed(response, 400, -32009)
    assert "/message:send" in error["message"] and "A2A-Version: 0.3" in error["message"]
    assert send(client, "hi", **{"A2A-Version": "0.3"})["status"]["state"]


def test_unknown_paths_and_methods(client: Client) -> None:
    failed(client.http.get("/v1/nowhere"), 404, -32601)
    # No JSON-RPC under /v1/: a POST to an unknown path there is not found either.
    failed(
        post(client, "/v1/tasks", {"jsonrpc": "2.0", "id": 1, "method": "tasks/get"}), 404, -32601
    )
    response = client.http.put("/v1/message:send")
    failed(response, 405, -32601)
    assert response.headers["Allow"] == "POST"
    assert client.http.delete("/v1/tasks/x").headers["Allow"] == "GET"


def test_the_1_0_paths_are_untouched(client: Client) -> None:
    body = {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
    sent = post(client, "/message:send", body, **{"A2A-Version": "1.0"})
    # 1.0.1's media type on 1.0's paths; the 0.3 paths answer application/json (ok()).
    assert sent.status_code == 200 and sent.headers["Content-Type"] == "application/a2a+json"
    assert sent.json()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
FIELDS = st.sampled_from(["message", "request", "configuration", "metadata", "content", "data"])


@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.dictionaries(FIELDS, JSON, max_size=3)
    | st.builds(
        lambda parts, config: {
            "message": {"messageId": "m", "role": "ROLE_USER", "content": parts},
            "configuration": config,
        },
        st.lists(
            st.dictionaries(st.sampled_from(["text", "file", "data", "metadata"]), JSON), max_size=3
        ),
        st.dictionaries(st.sampled_from(["blocking", "historyLength", "pushNotification"]), JSON),
    )
)
def test_no_body_gets_a_server_error(client: Client, body: Any) -> None:
    """Any JSON body answers a valid send response or the binding's 4xx error (the schema
    fixture checks either)."""
    for path in ("/v1/message:send", "/v1/tasks/x/pushNotificationConfigs"):
        response = post(client, path, body)
        assert response.status_code < 500, response.content


SEGMENTS = st.text(max_size=40) | st.sampled_from(["x", "..", "a:b", "%", "a" * 300])
QUERIES = st.sampled_from(["", "?historyLength=-1", "?historyLength=x", "?historyLength=2"])


@settings(max_examples=80, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_no_route_gets_a_server_error(push: Client, data: st.DataObject) -> None:
    """Any id, method, query and body on any 0.3 route: an answer valid in v0.3 (the schema
    fixture checks it) or a 4xx error, never a 5xx."""
    route = data.draw(st.sampled_from(rest_v0_3.ROUTES))
    path = route.template
    for name in ("id", "pushNotificationConfigId"):
        # functions-framework's `/<path:path>` matches no newline (tests/conftest.py mirrors it).
        segment = data.draw(SEGMENTS).replace("\n", " ")
        path = path.replace("{" + name + "}", quote(segment, safe="", errors="surrogatepass"))
    method = data.draw(st.sampled_from([route.method, "GET", "POST", "DELETE", "PUT", "HEAD"]))
    body = data.draw(st.none() | JSON)
    response = push.http.request(
        method,
        path + data.draw(QUERIES),
        content=None if body is None else json.dumps(body),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code < 500, response.content[:500]
    response.close()
