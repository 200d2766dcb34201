"""Each protocol version gets its own wire format back, for the same task."""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shared.dialects import decode, v0_1
from shared.errors import InvalidParamsError
from shared.identity.api_key import hashed
from shared.model import Message, Part, Role, TaskState
from tests import sse
from tests.conftest import Client

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

TEXT = "hello there"


def test_v1_send_is_wrapped_protojson(client: Client) -> None:
    result = client.result(
        "SendMessage",
        {"message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": TEXT}]}},
        version="1.0",
    )
    task = result["task"]
    assert set(task) == {"id", "contextId", "status", "artifacts", "history"}
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["status"]["timestamp"].endswith("Z")
    assert task["history"][0] == {
        "messageId": "m1",
        "role": "ROLE_USER",
        "parts": [{"text": TEXT}],
        "contextId": task["contextId"],
        "taskId": task["id"],
    }
    [artifact] = task["artifacts"]
    assert artifact["parts"] == [{"text": TEXT}]
    assert "kind" not in str(result)


def test_v03_send_is_bare_with_kinds(client: Client) -> None:
    result = client.result(
        "message/send",
        {
            "message": {
                "messageId": "m1",
                "role": "user",
                "parts": [{"kind": "text", "text": TEXT}],
                "kind": "message",
            }
        },
    )
    assert result["kind"] == "task"
    assert result["status"]["state"] == "completed"
    assert result["history"][0]["kind"] == "message"
    assert result["history"][0]["role"] == "user"
    assert result["artifacts"][0]["parts"] == [{"kind": "text", "text": TEXT}]
    assert "sessionId" not in result


def test_v01_send_uses_client_id_and_session(client: Client) -> None:
    params = {
        "id": "client-task-1",
        "sessionId": "session-9",
        "message": {"role": "user", "parts": [{"type": "text", "text": TEXT}]},
        "historyLength": 5,
    }
    result = client.result("tasks/send", params)
    assert result["id"] == "client-task-1"
    assert result["sessionId"] == "session-9"
    assert result["status"]["state"] == "completed"
    assert result["artifacts"][0] == {
        "name": "echo",
        "parts": [{"type": "text", "text": TEXT}],
        "index": 0,
    }
    assert result["history"][0] == {"role": "user", "parts": [{"type": "text", "text": TEXT}]}
    # A v0.1 reader asking nothing gets no history, as v0.1 said.
    got = client.result("tasks/get", {"id": "client-task-1"})
    assert "history" not in got and got["sessionId"] == "session-9"


def test_one_task_read_in_every_version(client: Client) -> None:
    sent = client.result(
        "SendMessage",
        {
            "message": {
                "messageId": "m1",
                "role": "ROLE_USER",
                "parts": [{"text": "request a new phone"}],
            }
        },
        version="1.0",
    )
    task_id = sent["task"]["id"]
    v1 = client.result("GetTask", {"id": task_id}, version="1.0")
    v03 = client.result("tasks/get", {"id": task_id})
    assert v1["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert v03["status"]["state"] == "input-required"
    assert v1["status"]["message"]["role"] == "ROLE_AGENT"
    assert v03["status"]["message"]["role"] == "agent"
    assert v1["id"] == v03["id"] == task_id


def test_canceled_and_rejected_states(make_client: Any) -> None:
    tck = make_client(handler="tests.handlers.tck")
    rejected = tck.result(
        "SendMessage",
        {
            "message": {
                "messageId": "tck-reject-task-1",
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
            }
        },
    )["task"]
    assert rejected["status"]["state"] == "TASK_STATE_REJECTED"
    assert tck.result("tasks/get", {"id": rejected["id"]})["status"]["state"] == "rejected"
    waiting = tck.result(
        "message/send",
        {
            "message": {
                "messageId": "tck-input-required-1",
                "role": "user",
                "parts": [{"kind": "text", "text": "x"}],
            }
        },
    )
    canceled = tck.result("CancelTask", {"id": waiting["id"]}, version="1.0")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert tck.result("tasks/get", {"id": waiting["id"]})["status"]["state"] == "canceled"


@pytest.mark.parametrize("value", [[1, "two", {"three": 3}], "text", 4.5, True, None])
def test_data_that_is_not_an_object_is_wrapped_for_v0_clients(client: Client, value: Any) -> None:
    # 1.0 carries any JSON value; v0.3 and v0.1 define DataPart.data as an object.
    sent = client.result(
        "SendMessage",
        {"message": {"messageId": "m-data", "role": "ROLE_USER", "parts": [{"data": value}]}},
        version="1.0",
    )
    task_id = sent["task"]["id"]
    v1 = client.result("GetTask", {"id": task_id}, version="1.0")
    assert v1["history"][0]["parts"] == [{"data": value}]
    v03 = client.result("tasks/get", {"id": task_id})
    assert v03["history"][0]["parts"] == [{"kind": "data", "data": {"value": value}}]
    stored = Message(message_id="m", role=Role.USER, parts=(Part(data=value),))
    assert v0_1.message(stored)["parts"] == [{"type": "data", "data": {"value": value}}]


# Any character a JSON string can carry through the front door (no lone surrogates).
TEXT_CHARS = st.characters(exclude_categories=["Cs"])
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53), max_value=2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(TEXT_CHARS, max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(TEXT_CHARS, max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(value=JSON_VALUES)
def test_any_json_data_is_served_in_every_versions_schema(client: Client, value: Any) -> None:
    # The schema_checked fixture validates both answers; the wrap is exact.
    message = {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": value}]}
    task_id = client.result("SendMessage", {"message": message}, version="1.0")["task"]["id"]
    v1 = client.result("GetTask", {"id": task_id}, version="1.0")
    assert v1["history"][0]["parts"] == [{"data": value}]
    v03 = client.result("tasks/get", {"id": task_id})
    wrapped = value if isinstance(value, dict) else {"value": value}
    assert v03["history"][0]["parts"] == [{"kind": "data", "data": wrapped}]


def test_object_data_is_not_wrapped(client: Client) -> None:
    value = {"value": [1], "other": None}
    sent = client.result(
        "message/send",
        {
            "message": {
                "messageId": "m-obj",
                "role": "user",
                "parts": [{"kind": "data", "data": value}],
            }
        },
    )
    got = client.result("tasks/get", {"id": sent["id"]})
    assert got["history"][0]["parts"] == [{"kind": "data", "data": value}]
    v1 = client.result("GetTask", {"id": sent["id"]}, version="1.0")
    assert v1["history"][0]["parts"] == [{"data": value}]


def test_file_and_data_parts_in_each_version(make_client: Any) -> None:
    tck = make_client(handler="tests.handlers.tck")

    def send(method: str, mid: str, version: str | None = None) -> dict[str, Any]:
        part = {"text": "x"} if method == "SendMessage" else {"kind": "text", "text": "x"}
        role = "ROLE_USER" if method == "SendMessage" else "user"
        result: dict[str, Any] = tck.result(
            method, {"message": {"messageId": mid, "role": role, "parts": [part]}}, version=version
        )
        task: dict[str, Any] = result.get("task", result)
        return task

    v1_file = send("SendMessage", "tck-artifact-file-1", "1.0")["artifacts"][0]["parts"][0]
    assert v1_file == {
        "raw": base64.b64encode(b"tck").decode(),
        "filename": "output.txt",
        "mediaType": "text/plain",
    }
    v03_file = send("message/send", "tck-artifact-file-2")["artifacts"][0]["parts"][0]
    assert v03_file == {
        "kind": "file",
        "file": {"bytes": "dGNr", "name": "output.txt", "mimeType": "text/plain"},
    }
    v03_url = send("message/send", "tck-artifact-file-url-3")["artifacts"][0]["parts"][0]
    assert v03_url["file"]["uri"] == "https://example.com/output.txt"
    v1_data = send("SendMessage", "tck-artifact-data-4", "1.0")["artifacts"][0]["parts"][0]
    assert v1_data == {"data": {"key": "value", "count": 42}}
    v03_data = send("message/send", "tck-artifact-data-5")["artifacts"][0]["parts"][0]
    assert v03_data == {"kind": "data", "data": {"key": "value", "count": 42}}


def test_message_results_per_version(make_client: Any) -> None:
    tck = make_client(handler="tests.handlers.tck")
    v1 = tck.result(
        "SendMessage",
        {
            "message": {
                "messageId": "tck-message-response-1",
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
            }
        },
    )
    assert set(v1) == {"message"}
    assert v1["message"]["parts"] == [{"text": "Direct message response"}]
    assert v1["message"]["role"] == "ROLE_AGENT"
    assert "taskId" not in v1["message"]
    v03 = tck.result(
        "message/send",
        {
            "message": {
                "messageId": "tck-message-response-2",
                "role": "user",
                "parts": [{"kind": "text", "text": "x"}],
            }
        },
    )
    assert v03["kind"] == "message"
    # v0.1 has no message results: the reply is a completed task's status message.
    v01 = tck.result(
        "tasks/send",
        {
            "id": "t-v01",
            "message": {
                "messageId": "tck-message-response-3",
                "role": "user",
                "parts": [{"type": "text", "text": "x"}],
            },
        },
    )
    assert v01["status"]["state"] == "completed"
    assert v01["status"]["message"]["parts"] == [
        {"type": "text", "text": "Direct message response"}
    ]


def test_error_shapes_per_version(client: Client) -> None:
    v1 = client.error("GetTask", {"id": "missing"}, version="1.0")
    assert v1 == {
        "code": -32001,
        "message": "Task not found: no task missing",
        "data": [
            {
                "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                "reason": "TASK_NOT_FOUND",
                "domain": "a2a-protocol.org",
                "metadata": {"detail": "no task missing"},
            }
        ],
    }
    v03 = client.error("tasks/get", {"id": "missing"})
    assert v03 == {
        "code": -32001,
        "message": "Task not found: no task missing",
        "data": {"field": "params.id", "detail": "no task missing"},
    }


@pytest.mark.parametrize(
    ("method", "code"),
    [
        ("GetExtendedAgentCard", -32004),
        ("agent/getAuthenticatedExtendedCard", -32004),
    ],
)
def test_methods_of_later_issues_say_unsupported(client: Client, method: str, code: int) -> None:
    assert client.error(method, {})["code"] == code


def test_lenient_part_forms_decode_alike() -> None:
    forms = [
        {"kind": "text", "text": "a"},
        {"type": "text", "text": "a"},
        {"text": "a"},
    ]
    assert {decode.part(f, "p").text for f in forms} == {"a"}
    file_forms = [
        {"kind": "file", "file": {"bytes": "QQ==", "mimeType": "x/y", "name": "n"}},
        {"kind": "file", "file": {"data": "QQ==", "mimeType": "x/y", "name": "n"}},
        {"raw": "QQ==", "mediaType": "x/y", "filename": "n"},
        {"raw": "QQ==", "media_type": "x/y", "filename": "n"},
    ]
    parts = [decode.part(f, "p") for f in file_forms]
    assert {(p.raw, p.media_type, p.filename) for p in parts} == {("QQ==", "x/y", "n")}


@settings(max_examples=200)
@given(st.binary(max_size=64), st.booleans(), st.booleans())
def test_any_base64_the_protojson_way_is_taken_as_sent(
    data: bytes, url_safe: bool, pad: bool
) -> None:
    text = (base64.urlsafe_b64encode if url_safe else base64.b64encode)(data).decode()
    text = text if pad else text.rstrip("=")
    assert decode.part({"raw": text}, "p").raw == text
    assert decode.part({"kind": "file", "file": {"bytes": text}}, "p").raw == text


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_bytes_that_do_not_decode_are_refused_naming_the_field(text: str) -> None:
    padded = text.replace("-", "+").replace("_", "/")
    try:
        base64.b64decode(padded + "=" * (-len(padded) % 4), validate=True)
        decodes = len(text.rstrip("=")) % 4 != 1 and (
            text == text.rstrip("=") or len(text) % 4 == 0
        )
    except ValueError:
        decodes = False
    if decodes:
        assert decode.part({"raw": text}, "p").raw == text
    else:
        with pytest.raises(InvalidParamsError, match=r"'p\.raw' is not base64") as raised:
            decode.part({"raw": text}, "p")
        assert raised.value.field == "p.raw"


def test_the_seeds_informal_file_data_that_is_not_base64_is_stored_as_its_content() -> None:
    # Seed 000 sends "<base64-encoded-content>" as a file's `data`: taken as it must be, and
    # stored as bytes every reader can decode; the official `bytes` is held to base64.
    seeds = {"kind": "file", "file": {"mimeType": "image/png", "data": "<base64-encoded-content>"}}
    assert base64.b64decode(decode.part(seeds, "p").raw or "") == b"<base64-encoded-content>"
    official = {"kind": "file", "file": {"bytes": "<base64-encoded-content>"}}
    with pytest.raises(InvalidParamsError, match=r"'p\.file\.bytes' is not base64"):
        decode.part(official, "p")


def test_lenient_message_and_states() -> None:
    message = decode.message(
        {"message_id": "m", "role": "ROLE_AGENT", "content": [{"text": "a"}], "context_id": "c"},
        "m",
    )
    # An agent's role from a client is the user's (shared.dialects.decode, _ROLES).
    assert (message.message_id, message.role, message.context_id) == ("m", Role.USER, "c")
    assert decode.state("TASK_STATE_CANCELLED", "s") is TaskState.CANCELED
    assert decode.state("input-required", "s") is TaskState.INPUT_REQUIRED
    with pytest.raises(InvalidParamsError):
        decode.state("sleeping", "s")


HOOK = "https://hooks.example.com/a2a"


def _stream(client: Client, method: str, params: dict[str, Any], version: str) -> list[Any]:
    """A whole stream's frames (the handler finishes the task, so the stream ends)."""
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    headers = {"Content-Type": "application/json", "A2A-Version": version}
    response = client.http.post("/", content=json.dumps(body), headers=headers)
    assert response.headers["Content-Type"].startswith("text/event-stream"), response.text
    return [event.data for event in sse.parse(response.text)]


@pytest.fixture
def tck_push(make_client: Any) -> Client:
    client: Client = make_client(
        handler="tests.handlers.tck",
        push_notifications=True,
        push_allowed_hosts=("hooks.example.com",),
    )
    return client


def test_every_v0_3_method_answers_in_the_v0_3_schema(tck_push: Client) -> None:
    # Each answer and frame passes the schema_checked fixture; the asserts say it was served.
    c = tck_push

    def send(mid: str) -> Any:
        message = {"messageId": mid, "role": "user", "parts": [{"kind": "text", "text": "x"}]}
        return c.result("message/send", {"message": message})

    for mid in (
        "tck-artifact-file-url",
        "tck-artifact-file",
        "tck-artifact-data",
        "tck-reject-task",
    ):
        assert send(mid)["kind"] == "task"
    assert send("tck-message-response")["kind"] == "message"
    waiting = send("tck-input-required")
    config = {
        "url": HOOK,
        "token": "t",
        "authentication": {"schemes": ["Bearer"], "credentials": "c"},
    }
    made = c.result(
        "tasks/pushNotificationConfig/set",
        {"taskId": waiting["id"], "pushNotificationConfig": config},
    )
    config_id = made["pushNotificationConfig"]["id"]
    ids = {"id": waiting["id"], "pushNotificationConfigId": config_id}
    assert c.result("tasks/pushNotificationConfig/get", ids) == made
    assert c.result("tasks/pushNotificationConfig/list", {"id": waiting["id"]}) == [made]
    assert c.result("tasks/pushNotificationConfig/delete", ids) is None
    assert c.result("tasks/get", {"id": waiting["id"], "historyLength": 9})["history"]
    assert c.result("tasks/cancel", {"id": waiting["id"]})["status"]["state"] == "canceled"
    assert c.error("tasks/resubscribe", {"id": waiting["id"]})["code"] == -32004
    assert c.error("tasks/get", {"id": "missing"})["code"] == -32001
    assert c.error("agent/getAuthenticatedExtendedCard")["code"]
    for mid in ("tck-stream-artifact-chunked-1", "tck-stream-artifact-file-1"):
        message = {"messageId": mid, "role": "user", "parts": [{"kind": "text", "text": "x"}]}
        frames = _stream(c, "message/stream", {"message": message}, "0.3")
        assert frames[-1]["result"]["final"] is True


def test_every_v1_method_answers_in_the_v1_types(tck_push: Client) -> None:
    c = tck_push

    def send(mid: str) -> Any:
        message = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": "x"}]}
        return c.result("SendMessage", {"message": message}, version="1.0")

    for mid in (
        "tck-artifact-file-url",
        "tck-artifact-file",
        "tck-artifact-data",
        "tck-reject-task",
    ):
        assert "task" in send(mid)
    assert "message" in send("tck-message-response")
    waiting = send("tck-input-required")["task"]
    config = {
        "taskId": waiting["id"],
        "url": HOOK,
        "token": "t",
        "authentication": {"scheme": "Bearer", "credentials": "c"},
    }
    made = c.result("CreateTaskPushNotificationConfig", config, version="1.0")
    ids = {"taskId": waiting["id"], "id": made["id"]}
    assert c.result("GetTaskPushNotificationConfig", ids, version="1.0") == made
    listed = c.result("ListTaskPushNotificationConfigs", {"taskId": waiting["id"]}, version="1.0")
    assert listed["configs"] == [made]
    c.result("DeleteTaskPushNotificationConfig", ids, version="1.0")
    assert c.result("ListTasks", {"pageSize": 2}, version="1.0")["tasks"]
    assert c.result("GetTask", {"id": waiting["id"], "historyLength": 9}, version="1.0")["history"]
    canceled = c.result("CancelTask", {"id": waiting["id"]}, version="1.0")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert c.error("SubscribeToTask", {"id": waiting["id"]}, version="1.0")["code"] == -32004
    assert c.error("GetTask", {"id": "missing"}, version="1.0")["code"] == -32001
    assert c.error("GetExtendedAgentCard", {}, version="1.0")["code"]
    for mid in ("tck-stream-artifact-chunked-1", "tck-stream-artifact-file-1"):
        message = {"messageId": mid, "role": "ROLE_USER", "parts": [{"text": "x"}]}
        frames = _stream(c, "SendStreamingMessage", {"message": message}, "1.0")
        assert "statusUpdate" in frames[-1]["result"]


def test_every_v0_1_method_answers_objects_in_its_data_parts(tck_push: Client) -> None:
    c = tck_push
    message = {"role": "user", "parts": [{"type": "text", "text": "x"}]}
    sent = c.result("tasks/send", {"id": "t01", "message": message, "historyLength": 5})
    assert sent["id"] == "t01"
    config = {"url": HOOK, "token": "t"}
    made = c.result("tasks/pushNotification/set", {"id": "t01", "pushNotificationConfig": config})
    assert c.result("tasks/pushNotification/get", {"id": "t01"}) == made
    assert c.result("tasks/get", {"id": "t01", "historyLength": 5})["history"]
    frames = _stream(c, "tasks/sendSubscribe", {"id": "t02", "message": message}, "0.1")
    assert frames[-1]["result"]["final"] is True


@pytest.mark.parametrize(
    ("style", "method", "version"),
    [
        ("hybrid", "agent/getAuthenticatedExtendedCard", None),
        ("v1", "GetExtendedAgentCard", "1.0"),
        # The extended card follows the asking method's version, not the public card's style.
        ("hybrid", "GetExtendedAgentCard", "1.0"),
        ("v1", "agent/getAuthenticatedExtendedCard", None),
    ],
)
def test_the_extended_card_answers_in_its_versions_schema(
    make_client: Any, style: str, method: str, version: str | None
) -> None:
    c = make_client(
        handler="tests.handlers.members",
        auth="api-key",
        api_keys={hashed("k"): "alice"},
        card_style=style,
    )
    params: dict[str, Any] | None = {} if version else None
    card = c.result(method, params, version=version, headers={"X-API-Key": "k"})
    assert [s["id"] for s in card["skills"]] == ["hello", "vault"]


@pytest.mark.parametrize(
    ("binding", "role", "user"),
    [
        ("jsonrpc-1.0", "ROLE_AGENT", "ROLE_USER"),
        ("jsonrpc-0.3", "agent", "user"),
        ("rest-1.0", "ROLE_AGENT", "ROLE_USER"),
        ("rest-0.3", "ROLE_AGENT", "ROLE_USER"),
    ],
)
def test_a_clients_agent_role_message_is_stored_as_the_users(
    client: Client, binding: str, role: str, user: str
) -> None:
    # As a2a-python's server, the message is accepted; unlike it, it joins the history as
    # the user's, so no handler reads a client's words as its own.
    message_id = f"claims-{binding}"
    if binding == "jsonrpc-1.0":
        sent = {"messageId": message_id, "role": role, "parts": [{"text": "new phone"}]}
        task = client.result("SendMessage", {"message": sent}, version="1.0")["task"]
    elif binding == "jsonrpc-0.3":
        sent = {"messageId": message_id, "role": role, "kind": "message"}
        sent["parts"] = [{"kind": "text", "text": "new phone"}]
        task = client.result("message/send", {"message": sent})
    else:
        path = "/message:send" if binding == "rest-1.0" else "/v1/message:send"
        parts = "parts" if binding == "rest-1.0" else "content"
        sent = {"messageId": message_id, "role": role, parts: [{"text": "new phone"}]}
        version = {"A2A-Version": "1.0" if binding == "rest-1.0" else "0.3"}
        response = client.post({"message": sent}, version, path=path)
        assert response.status_code == 200, response.content
        task = json.loads(response.content)["task"]
    [first] = [m for m in task["history"] if m["messageId"] == message_id]
    assert first["role"] == user
    stored = client.app.service.ports.store.get("anonymous", task["id"])
    assert stored is not None and stored.task.history[0].role is Role.USER
