"""The A2A operations end to end in one process: multi-turn, cancel, list, owners, retries,
the wire fields errors name, and the in-process worker queue's wiring."""

from __future__ import annotations

import base64
import json
import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.agent import AgentInfo, Context, HandlerModule
from shared.app import build
from shared.dialects import decode
from shared.identity.api_key import hashed
from shared.model import (
    Event,
    Message,
    PushAuthentication,
    StatusUpdate,
    Task,
    TaskState,
    TaskStatus,
    utc_now,
)
from shared.ports import Lease, StoredTask, TaskQuery
from shared.queue.inline import InlineQueue
from shared.requests import InlinePushConfig, SendRequest
from shared.service.resends import _canonical, message_key
from shared.service.sending import MAX_PENDING_MESSAGES, _addressed
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests.conftest import Client, wait_for_state, wait_until
from tests.test_model_json import AGENT, USER
from tests.test_runtime import CountingStore
from tests.test_streaming import frames, open_stream, send_params


def send(client: Client, text: str, **message: Any) -> dict[str, Any]:
    params: dict[str, Any] = {
        "message": {"role": "ROLE_USER", "parts": [{"text": text}], **message}
    }
    configuration = message.pop("configuration", None)
    params["message"].pop("configuration", None)
    if configuration is not None:
        params["configuration"] = configuration
    task: dict[str, Any] = client.result("SendMessage", params, version="1.0")["task"]
    return task


def test_a_message_addressed_to_its_task_keeps_every_other_field() -> None:
    # Each field holds a value of its own: one the copy forgot (a field added to Message,
    # say) would come back as its default.
    values: dict[str, Any] = {f.name: ("sent", f.name) for f in fields(Message)}
    sent = Message(**values)
    task = Task(id="t-1", context_id="c-1", status=TaskStatus(state=TaskState.SUBMITTED))
    addressed = _addressed(sent, task)
    assert (addressed.task_id, addressed.context_id) == ("t-1", "c-1")
    kept = {f.name for f in fields(Message)} - {"task_id", "context_id"}
    assert {n: getattr(addressed, n) for n in kept} == {n: getattr(sent, n) for n in kept}


def test_multi_turn_continues_the_same_task(client: Client) -> None:
    first = send(client, "I need a new phone", messageId="a")
    assert first["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    second = send(
        client, "iPhone please", messageId="b", taskId=first["id"], contextId=first["contextId"]
    )
    assert second["id"] == first["id"]
    assert second["status"]["state"] == "TASK_STATE_COMPLETED"
    assert "iPhone" in second["artifacts"][0]["parts"][0]["text"]
    texts = [m["parts"][0]["text"] for m in second["history"]]
    assert texts == ["I need a new phone", "Select a phone type (iPhone/Android)", "iPhone please"]


def test_context_is_inferred_from_the_task(client: Client) -> None:
    first = send(client, "new phone", messageId="a")
    second = send(client, "Android", messageId="b", taskId=first["id"])
    assert second["contextId"] == first["contextId"]


def test_auth_required_continues_like_input_required(make_client: Any) -> None:
    auth = make_client(handler="tests.handlers.auth")
    first = send(auth, "open the vault", messageId="a")
    assert first["status"]["state"] == "TASK_STATE_AUTH_REQUIRED"
    second = send(auth, "token is ready", messageId="b", taskId=first["id"])
    assert second["status"]["state"] == "TASK_STATE_COMPLETED"


def test_terminal_task_refuses_messages(client: Client) -> None:
    done = send(client, "hello", messageId="a")
    error = client.error(
        "SendMessage",
        {
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": "more"}],
                "messageId": "b",
                "taskId": done["id"],
            }
        },
        version="1.0",
    )
    assert error["code"] == -32004
    assert "follow-up" in error["message"]
    unchanged = client.result("GetTask", {"id": done["id"]}, version="1.0")
    assert len(unchanged["history"]) == 1


def test_follow_up_in_the_same_context_is_a_new_task(client: Client) -> None:
    done = send(client, "hello", messageId="a")
    follow = send(
        client, "again", messageId="b", contextId=done["contextId"], referenceTaskIds=[done["id"]]
    )
    assert follow["id"] != done["id"]
    assert follow["contextId"] == done["contextId"]
    assert follow["history"][0]["referenceTaskIds"] == [done["id"]]


def test_context_mismatch_is_refused(client: Client) -> None:
    waiting = send(client, "new phone", messageId="a")
    error = client.error(
        "SendMessage",
        {
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
                "messageId": "b",
                "taskId": waiting["id"],
                "contextId": "other",
            }
        },
        version="1.0",
    )
    assert error["code"] == -32602


def test_unknown_task_id_is_not_found(client: Client) -> None:
    error = client.error(
        "SendMessage",
        {
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": "x"}],
                "messageId": "b",
                "taskId": "nope",
            }
        },
        version="1.0",
    )
    assert error["code"] == -32001
    assert client.error("GetTask", {"id": "nope"}, version="1.0")["code"] == -32001
    assert client.error("CancelTask", {"id": "nope"}, version="1.0")["code"] == -32001


def test_cancel_rules(client: Client) -> None:
    waiting = send(client, "new phone", messageId="a")
    canceled = client.result("CancelTask", {"id": waiting["id"]}, version="1.0")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    error = client.error("CancelTask", {"id": waiting["id"]}, version="1.0")
    assert error["code"] == -32002
    assert error["data"][0]["reason"] == "TASK_NOT_CANCELABLE"
    assert client.error("tasks/cancel", {"id": waiting["id"]})["code"] == -32002


@pytest.mark.parametrize(("length", "expected"), [(None, 3), (0, 0), (1, 1), (2, 2), (10, 3)])
def test_history_length(client: Client, length: int | None, expected: int) -> None:
    first = send(client, "new phone", messageId="a")
    send(client, "Android", messageId="b", taskId=first["id"])
    params: dict[str, Any] = {"id": first["id"]}
    if length is not None:
        params["historyLength"] = length
    task = client.result("GetTask", params, version="1.0")
    history = task.get("history", [])
    assert len(history) == expected
    if expected:
        assert history[-1]["parts"][0]["text"] == "Android"  # the most recent ones
    snake = client.result("GetTask", {"id": first["id"], "history_length": 1}, version="1.0")
    assert len(snake["history"]) == 1


def test_send_history_length_zero(client: Client) -> None:
    task = send(client, "hello", messageId="a", configuration={"historyLength": 0})
    assert "history" not in task


def test_list_filters_and_pages(client: Client) -> None:
    ids = [send(client, f"hello {i}", messageId=f"m{i}", contextId="ctx-a")["id"] for i in range(5)]
    waiting = send(client, "new phone", messageId="w", contextId="ctx-b")
    page = client.result("ListTasks", {"contextId": "ctx-a", "pageSize": 2}, version="1.0")
    assert page["totalSize"] == 5 and page["pageSize"] == 2
    listed = list(page["tasks"])
    while page["nextPageToken"]:
        page = client.result(
            "ListTasks",
            {"contextId": "ctx-a", "pageSize": 2, "pageToken": page["nextPageToken"]},
            version="1.0",
        )
        listed += page["tasks"]
    assert sorted(t["id"] for t in listed) == sorted(ids)  # each once
    stamps = [t["status"]["timestamp"] for t in listed]
    assert stamps == sorted(stamps, reverse=True)  # newest first
    assert "artifacts" not in page["tasks"][0]  # includeArtifacts defaults to false
    with_artifacts = client.result(
        "ListTasks", {"contextId": "ctx-a", "include_artifacts": True}, version="1.0"
    )
    assert all(t["artifacts"] for t in with_artifacts["tasks"])
    by_state = client.result("ListTasks", {"status": "TASK_STATE_INPUT_REQUIRED"}, version="1.0")
    assert [t["id"] for t in by_state["tasks"]] == [waiting["id"]]
    everything = client.result("ListTasks", {}, version="1.0")
    assert everything["totalSize"] == 6 and everything["nextPageToken"] == ""


def test_list_status_timestamp_after(client: Client) -> None:
    send(client, "old", messageId="a")
    cut = client.result("ListTasks", {}, version="1.0")["tasks"][0]["status"]["timestamp"]
    # Timestamps have the wire's millisecond precision: the next task must get a later one.
    after_cut = datetime.fromisoformat(cut.replace("Z", "+00:00"))
    wait_until(lambda: utc_now() > after_cut, 1, lambda: "the clock stood still")
    new = send(client, "new", messageId="b")
    after = client.result("ListTasks", {"statusTimestampAfter": cut}, version="1.0")
    assert [t["id"] for t in after["tasks"]] == [new["id"]]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pageSize": 0}, "params.pageSize"),
        ({"pageSize": 101}, "params.pageSize"),
        ({"pageToken": "garbage"}, "params.pageToken"),
        ({"status": "TASK_STATE_SLEEPING"}, "params.status"),
        ({"statusTimestampAfter": "yesterday"}, "params.statusTimestampAfter"),
    ],
)
def test_list_bad_params(client: Client, params: dict[str, Any], field: str) -> None:
    error = client.error("ListTasks", params, version="1.0")
    assert error["code"] == -32602
    assert field in error["message"]


def test_page_token_is_bound_to_its_filters(client: Client) -> None:
    for i in range(3):
        send(client, "x", messageId=f"m{i}", contextId="c1")
    token = client.result("ListTasks", {"contextId": "c1", "pageSize": 1}, version="1.0")[
        "nextPageToken"
    ]
    error = client.error("ListTasks", {"contextId": "c2", "pageToken": token}, version="1.0")
    assert error["code"] == -32602


@pytest.mark.parametrize(
    "forged",
    ['["2026-01-01T00:00:00+00:00","t",Infinity,"f"]', "[" * 5000 + "]" * 5000],
)
def test_a_forged_page_token_is_invalid_params_naming_it(client: Client, forged: str) -> None:
    token = base64.urlsafe_b64encode(forged.encode()).decode()
    error = client.error("ListTasks", {"pageToken": token}, version="1.0")
    assert error["code"] == -32602, error
    assert error["data"][0]["fieldViolations"][0]["field"] == "params.pageToken"


def test_owners_see_only_their_tasks(make_client: Any) -> None:
    app = make_client(auth="api-key", api_keys={hashed("key-a"): "alice", hashed("key-b"): "bob"})
    alice = {"X-API-Key": "key-a"}
    bob = {"X-API-Key": "key-b"}
    params = {"message": {"role": "ROLE_USER", "parts": [{"text": "new phone"}], "messageId": "a"}}
    task = app.result("SendMessage", params, version="1.0", headers=alice)["task"]
    assert app.error("GetTask", {"id": task["id"]}, version="1.0", headers=bob)["code"] == -32001
    assert app.error("CancelTask", {"id": task["id"]}, version="1.0", headers=bob)["code"] == -32001
    follow = {
        "message": {
            "role": "ROLE_USER",
            "parts": [{"text": "iPhone"}],
            "messageId": "b",
            "taskId": task["id"],
        }
    }
    assert app.error("SendMessage", follow, version="1.0", headers=bob)["code"] == -32001
    assert app.result("ListTasks", {}, version="1.0", headers=bob)["totalSize"] == 0
    assert (
        app.result("GetTask", {"id": task["id"]}, version="1.0", headers=alice)["id"] == task["id"]
    )


def test_missing_or_wrong_api_key_is_401(make_client: Any) -> None:
    app = make_client(auth="api-key", api_keys={hashed("key-a"): "alice"})
    for headers in ({}, {"X-API-Key": "wrong"}):
        response = app.post(
            {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}, headers
        )
        assert response.status_code == 401
        assert "X-API-Key" in response.json()["error"]["message"]
        assert response.headers["WWW-Authenticate"]


def test_resent_message_gets_the_first_result(client: Client) -> None:
    first = send(client, "hello", messageId="same")
    again = send(client, "hello", messageId="same")
    assert again["id"] == first["id"]
    assert again["history"] == first["history"]
    assert client.result("ListTasks", {}, version="1.0")["totalSize"] == 1


def test_resent_follow_up_adds_no_history(client: Client) -> None:
    first = send(client, "new phone", messageId="a")
    send(client, "Android", messageId="b", taskId=first["id"])
    again = send(client, "Android", messageId="b", taskId=first["id"])
    assert len(again["history"]) == 3


def test_a_reused_message_id_with_other_content_is_a_new_message(client: Client) -> None:
    """A client that reuses a messageId for other content (the A2A TCK does) gets its new
    message processed, never the older message's task; each one's resend still gets its own
    first result."""
    hello = send(client, "hello", messageId="same")
    phone = send(client, "new phone", messageId="same")
    assert phone["id"] != hello["id"]
    assert phone["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # the handler ran on it
    assert send(client, "hello", messageId="same")["id"] == hello["id"]
    assert send(client, "new phone", messageId="same")["id"] == phone["id"]
    assert client.result("ListTasks", {}, version="1.0")["totalSize"] == 2


@pytest.mark.parametrize(
    "change",
    [
        {"parts": [{"text": "hello "}]},
        {"parts": [{"text": "hello"}, {"text": ""}]},
        {"parts": [{"data": {"text": "hello"}}]},
        {"contextId": "ctx-2"},
        {"metadata": {"urgent": True}},
        {"extensions": ["https://example.com/ext"]},
        {"referenceTaskIds": ["other"]},
    ],
)
def test_any_change_of_content_makes_a_new_message(client: Client, change: dict[str, Any]) -> None:
    """The same messageId with the smallest change of content or address is processed."""
    first = send(client, "hello", messageId="b")
    assert send(client, "hello", messageId="b")["id"] == first["id"]
    changed = send(client, "hello", messageId="b", **change)
    assert changed["id"] != first["id"]
    assert changed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert send(client, "hello", messageId="b", **change)["id"] == changed["id"]


def test_the_same_message_to_another_task_is_a_new_message(client: Client) -> None:
    waiting = [send(client, "new phone", messageId=f"w{i}") for i in range(2)]
    for task in waiting:
        answered = send(client, "Android", messageId="b", taskId=task["id"])
        assert (answered["id"], answered["status"]["state"]) == (task["id"], "TASK_STATE_COMPLETED")


def test_a_resend_after_the_client_moved_on_is_a_new_message(client: Client) -> None:
    """A client that spoke again in the task, or canceled it, had the first answer: the same
    message again is no retry (the A2A TCK reuses its messages so), and is processed."""
    first = send(client, "new phone", messageId="p")
    assert send(client, "new phone", messageId="p")["id"] == first["id"]  # still a retry
    send(client, "Android", messageId="q", taskId=first["id"])
    second = send(client, "new phone", messageId="p")
    assert second["id"] != first["id"]
    assert second["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert send(client, "new phone", messageId="p")["id"] == second["id"]
    client.result("CancelTask", {"id": second["id"]}, version="1.0")
    third = send(client, "new phone", messageId="p")
    assert third["id"] not in (first["id"], second["id"])
    assert send(client, "new phone", messageId="p")["id"] == third["id"]
    # A task that finished without the client acting is still the first send's answer.
    done = send(client, "hello", messageId="h")
    assert send(client, "hello", messageId="h")["id"] == done["id"]
    assert client.result("ListTasks", {}, version="1.0")["totalSize"] == 4


def test_a_task_the_client_named_with_a_messages_own_id_is_no_send_of_it(
    make_client: Any,
) -> None:
    """A message that starts a task gives it an id derived from the message (the task is its
    record): a task the client made under that id itself (v0.1 names its tasks) is not
    taken for the message's first send, and the message is processed."""
    derived = send(make_client(), "hello", messageId="m")["id"]  # the id, as elsewhere
    client = make_client()
    named = client.result("tasks/send", {"id": derived, "message": user("new phone", "n")})
    assert named["id"] == derived
    processed = send(client, "hello", messageId="m")
    assert processed["id"] != derived
    assert processed["status"]["state"] == "TASK_STATE_COMPLETED"
    assert send(client, "hello", messageId="m")["id"] == processed["id"]  # its resend
    assert (
        client.result("GetTask", {"id": derived}, version="1.0")["history"][0]["messageId"] == "n"
    )


def test_the_push_config_sent_with_a_message_is_part_of_it(make_client: Any) -> None:
    app = make_client(push_notifications=True, push_allowed_hosts=("hooks.example.com",))
    bare = send(app, "new phone", messageId="p")
    hook = {"taskPushNotificationConfig": {"url": "https://hooks.example.com/a", "id": "c"}}
    with_hook = send(app, "new phone", messageId="p", configuration=hook)
    assert with_hook["id"] != bare["id"]
    assert send(app, "new phone", messageId="p", configuration=hook)["id"] == with_hook["id"]
    listed = app.result(
        "ListTaskPushNotificationConfigs", {"taskId": with_hook["id"]}, version="1.0"
    )
    assert [c["id"] for c in listed["configs"]] == ["c"]


def test_a_resend_in_another_dialect_is_the_same_message(client: Client) -> None:
    """One message has one digest whichever version's shapes carry it."""
    parts_v1 = [
        {"text": "hello"},
        {"data": {"n": 1, "none": None}, "metadata": {"k": "v"}},
        {"raw": "aGk=", "filename": "hi.txt", "mediaType": "text/plain"},
        {"url": "https://example.com/a.png", "mediaType": "image/png"},
    ]
    parts_v03 = [
        {"kind": "text", "text": "hello"},
        {"kind": "data", "data": {"n": 1, "none": None}, "metadata": {"k": "v"}},
        {"kind": "file", "file": {"bytes": "aGk=", "name": "hi.txt", "mimeType": "text/plain"}},
        {"kind": "file", "file": {"uri": "https://example.com/a.png", "mimeType": "image/png"}},
    ]
    first = client.result(
        "SendMessage",
        {"message": {"role": "ROLE_USER", "messageId": "x", "parts": parts_v1}},
        version="1.0",
    )["task"]
    again = client.result(
        "message/send",
        {"message": {"kind": "message", "role": "user", "messageId": "x", "parts": parts_v03}},
    )
    assert again["id"] == first["id"]
    assert client.result("ListTasks", {}, version="1.0")["totalSize"] == 1


_texts = st.text(alphabet=st.characters(codec="utf-8"), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_texts, inner, max_size=3),
    max_leaves=8,
)
_objects = st.dictionaries(_texts, _json, max_size=3)
# (kind, value) pairs: a text part's text, a data part's object.
_parts = st.lists(
    st.tuples(st.just("text"), _texts) | st.tuples(st.just("data"), _objects),
    min_size=1,
    max_size=4,
)


def _wire(version: str, parts: list[tuple[str, Any]], metadata: dict[str, Any] | None) -> Any:
    """One message as a client of `version` sends it."""
    message: dict[str, Any]
    if version == "1.0":
        message = {"role": "ROLE_USER", "parts": [{kind: value} for kind, value in parts]}
    else:
        message = {
            "kind": "message",
            "role": "user",
            "parts": [{"kind": kind, kind: value} for kind, value in parts],
        }
    message.update(messageId="m", contextId="ctx")
    if metadata is not None:
        message["metadata"] = metadata
    return {"message": message}


@settings(max_examples=200, deadline=None)
@given(_parts, st.none() | _objects, _parts)
def test_a_messages_key_is_one_in_every_dialect_and_its_own(
    parts: list[tuple[str, Any]], metadata: dict[str, Any] | None, others: list[tuple[str, Any]]
) -> None:
    keys = {
        version: message_key(decode.send(_wire(version, parts, metadata), None)[0])
        for version in ("1.0", "0.3")
    }
    assert keys["1.0"] == keys["0.3"]
    other = message_key(decode.send(_wire("1.0", others, metadata), None)[0])
    # Equal JSON, equal key (True and 1 are equal in Python, not in JSON).
    same = json.dumps(others, sort_keys=True) == json.dumps(parts, sort_keys=True)
    assert (other == keys["1.0"]) == same


def test_a_messages_key_is_the_one_the_pydantic_models_made() -> None:
    """Keys are stored (a task's id is derived from its first message's): a resend across
    the change from the pydantic models is still recognised. Digests made on their code."""
    sent = SendRequest(
        message=USER,
        task_id="t-1",
        context_id="c-1",
        session_id=None,
        create_if_missing=False,
        history_length=None,
        blocking=True,
        metadata=None,
        push_config=InlinePushConfig(
            url="https://example.com/hook",
            token="tok",
            authentication=PushAuthentication(schemes=("Bearer", "Basic"), credentials="secret"),
            id="p-1",
        ),
    )
    assert message_key(sent).digest == (
        "43d0c79390e7b0398e23f6a57230a91e849a77b51af5224c074422123465aed6"
    )
    bare = replace(sent, message=AGENT, task_id=None, context_id=None, push_config=None)
    assert message_key(bare).digest == (
        "b0746c05274e3f0d397bdb6450458568babc88fc7e571419bcfd1855257f4c7b"
    )
    # The task ids derived from them are stored too (a new task's id is its first message's).
    assert message_key(sent).task_id("alice") == "aace6df3-e7a1-58c5-9150-12dd06ced6a9"
    assert message_key(bare).task_id("bob") == "df39f0cf-b1a6-53e6-aca1-6244bb004155"


# Any JSON value a message's content may hold, NaN and non-ASCII text too (json.loads reads both).
CONTENT = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=12,
)


@given(content=st.dictionaries(st.text(), CONTENT, max_size=4))
def test_a_keys_digest_is_of_the_text_json_dumps_made(content: dict[str, Any]) -> None:
    """The digests stored so far were of json.dumps' sorted, compact, ASCII text: the encoder
    built once writes the same, whatever the content."""
    expected = json.dumps(content, sort_keys=True, separators=(",", ":"))
    assert _canonical(content) == expected


def test_deduplication_can_be_turned_off(make_client: Any) -> None:
    app = make_client(deduplicate_messages=False)
    assert send(app, "hi", messageId="same")["id"] != send(app, "hi", messageId="same")["id"]


def test_non_blocking_send_returns_at_once_then_completes(make_client: Any) -> None:
    app = make_client(handler="tests.handlers.slow")
    started = time.monotonic()
    task = send(
        app, "steps=10 delay=0.05", messageId="a", configuration={"returnImmediately": True}
    )
    assert time.monotonic() - started < 0.4
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    wait_for_state(app.app.service.ports.store, "anonymous", task["id"], TaskState.COMPLETED)
    got = app.result("GetTask", {"id": task["id"]}, version="1.0")
    assert got["status"]["state"] == "TASK_STATE_COMPLETED"
    assert got["artifacts"][0]["parts"] == [{"text": "done"}]


def test_v03_blocking_false_is_non_blocking(make_client: Any) -> None:
    app = make_client(handler="tests.handlers.slow")
    params = {
        "message": {
            "role": "user",
            "parts": [{"kind": "text", "text": "steps=20 delay=0.05"}],
            "messageId": "a",
        },
        "configuration": {"blocking": False},
    }
    started = time.monotonic()
    task = app.result("message/send", params)
    assert time.monotonic() - started < 0.5
    assert task["status"]["state"] in ("submitted", "working")


def test_message_to_a_working_task_joins_its_history(make_client: Any) -> None:
    app = make_client(handler="tests.handlers.slow")
    task = send(
        app, "steps=20 delay=0.05", messageId="a", configuration={"returnImmediately": True}
    )
    wait_for_state(app.app.service.ports.store, "anonymous", task["id"], TaskState.WORKING)
    joined = send(app, "by the way", messageId="b", taskId=task["id"])
    assert joined["id"] == task["id"]
    assert any(m["parts"][0]["text"] == "by the way" for m in joined["history"])


def v03_field(client: Client, method: str, params: dict[str, Any]) -> str:
    """The field a v0.x error names (its free-form `data`)."""
    field: str = client.error(method, params)["data"]["field"]
    return field


def user(text: str, message_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
        "messageId": message_id,
        **fields,
    }


def test_service_errors_name_the_field_the_caller_sent(client: Client) -> None:
    done = send(client, "hello", messageId="a")
    waiting = send(client, "new phone", messageId="b")
    sent: dict[str, list[tuple[dict[str, Any], str]]] = {
        "message/send": [
            ({"message": user("x", "c", taskId="missing")}, "params.message.taskId"),
            ({"message": user("x", "d", taskId=done["id"])}, "params.message.taskId"),
            ({"message": user("x", "e"), "taskId": "missing"}, "params.taskId"),  # the seeds'
            (
                {"message": user("x", "f", taskId=waiting["id"], contextId="other")},
                "params.message.contextId",
            ),
        ],
        "tasks/send": [({"id": done["id"], "message": user("x", "g")}, "params.id")],
        "tasks/get": [({"id": "missing"}, "params.id")],
        "tasks/cancel": [({"id": done["id"]}, "params.id")],
        "tasks/resubscribe": [({"id": done["id"]}, "params.id")],
        "messages/list": [({"taskId": "missing"}, "params.id")],
    }
    for method, cases in sent.items():
        for params, field in cases:
            assert v03_field(client, method, params) == field, (method, params)
    error = client.error("ListTasks", {"pageToken": "garbage"}, version="1.0")
    assert error["data"][0]["fieldViolations"][0]["field"] == "params.pageToken"


def test_a_refused_push_url_names_the_config_url_however_it_was_sent(make_client: Any) -> None:
    push = make_client(push_notifications=True)
    task = send(push, "new phone", messageId="a")
    hook = {"url": "http://127.0.0.1/hook"}
    set_params = {"taskId": task["id"], "pushNotificationConfig": hook}
    inline = {"message": user("x", "b"), "configuration": {"pushNotificationConfig": hook}}
    for method, params in (
        ("tasks/pushNotificationConfig/set", set_params),
        ("message/send", inline),
    ):
        error = push.error(method, params)
        assert error["code"] == -32602 and "loopback" in error["message"]
        assert error["data"]["field"] == "pushNotificationConfig.url"


class LeaseWatch(MemoryTaskStore):
    """The memory store, keeping the first lease a worker took (and saying when)."""

    def __init__(self) -> None:
        super().__init__()
        self.taken = threading.Event()
        self.lease: Lease | None = None

    def commit(
        self, current: StoredTask, task: Task, events: Sequence[Event], **kwargs: Any
    ) -> StoredTask:
        stored = super().commit(current, task, events, **kwargs)
        if stored.lease is not None and stored.lease.holder and not self.taken.is_set():
            self.lease = stored.lease
            self.taken.set()
        return stored


@pytest.mark.parametrize(("attempts", "final"), [(1, True), (3, False)])
def test_the_in_process_worker_queue_makes_the_attempts_the_setting_says(
    attempts: int, final: bool
) -> None:
    """A2A_WORK_MAX_ATTEMPTS reaches the embedded backend's queue: with one attempt, the
    worker's first delivery is the last (and its lease says so)."""
    store = LeaseWatch()
    app = build(Settings(handler="tests.handlers.long", work_max_attempts=attempts), store=store)
    try:
        client = Client(app)
        params = {
            "message": {"role": "ROLE_USER", "parts": [{"text": "artifacts=1 delay=0"}]},
            "configuration": {"returnImmediately": True},
        }
        client.result("SendMessage", params, version="1.0")
        assert store.taken.wait(10)
        assert store.lease is not None and store.lease.final is final
    finally:
        app.close()


class Gate:
    """A handler whose every turn waits until the test opens the gate named by its message's
    text, then ends as the text's prefix says: `ask:` asks, `fail:` fails, else completes.
    It records the messages it ran, in order."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.started: queue.Queue[str] = queue.Queue()
        self._gates: dict[str, threading.Event] = {}
        self._lock = threading.Lock()
        self._closed = False  # the test is over: no turn waits any more

    def _gate(self, text: str) -> threading.Event:
        with self._lock:
            return self._gates.setdefault(text, threading.Event())

    def open(self, text: str) -> None:
        self._gate(text).set()

    def open_all(self) -> None:
        self._closed = True
        with self._lock:
            gates = list(self._gates.values())
        for gate in gates:
            gate.set()

    def next_started(self) -> str:
        return self.started.get(timeout=10)

    def handle(self, ctx: Context) -> None:
        text = ctx.text
        with self._lock:
            self.ran.append(text)
        self.started.put(text)
        if not self._closed and not self._gate(text).wait(10):
            raise RuntimeError(f"the test never opened {text}")
        if text.startswith("ask:"):
            ctx.ask(f"what about {text}?")
        elif text.startswith("fail:"):
            ctx.fail(f"failed {text}")
        else:
            ctx.complete(f"done {text}")


@dataclass
class Gated:
    """An app whose handler is a Gate, and the first message's task, running."""

    client: Client
    gate: Gate
    task_id: str
    first: threading.Thread | None  # the blocking send running the first turn inline
    store: CountingStore

    def send(self, text: str, message_id: str | None = None) -> dict[str, Any]:
        return send(self.client, text, messageId=message_id or text, taskId=self.task_id)

    def stored(self) -> StoredTask:
        stored = self.client.app.service.ports.store.get("anonymous", self.task_id)
        assert stored is not None
        return stored

    def wait_state(self, state: TaskState) -> None:
        wait_for_state(self.client.app.service.ports.store, "anonymous", self.task_id, state)

    def close(self) -> None:
        self.gate.open_all()  # nothing waits on after the test
        self.client.app.close()

    def settle(self) -> None:
        """Every turn ran out: the inline send answered, the in-process queue drained."""
        if self.first is not None:
            self.first.join(10)
            assert not self.first.is_alive()
        queue = self.client.app.service.ports.turns.queue
        assert isinstance(queue, InlineQueue) and queue.join(10)


def start(mode: str, first: str = "first") -> Gated:
    """An app on a Gate whose message `first` runs inline in a blocking send (`mode`
    "inline") or on the worker ("background"), started and waiting at its gate."""
    gate = Gate()
    module = HandlerModule(name="gate", handle=gate.handle, info=AgentInfo(), skills=())
    store = CountingStore()
    app = Client(build(Settings(handler="functions.handlers.sample"), store, module))
    running: threading.Thread | None = None
    if mode == "inline":
        running = threading.Thread(target=lambda: send(app, first, messageId=first))
        running.start()
    else:
        send(app, first, messageId=first, configuration={"returnImmediately": True})
    assert gate.next_started() == first
    assert store.created.wait(10)  # an inline turn's task: by its commit timer
    page = store.list("anonymous", TaskQuery())
    assert len(page.tasks) == 1
    return Gated(app, gate, page.tasks[0].task.id, running, store)


@pytest.fixture(params=["inline", "background"])
def gated(request: pytest.FixtureRequest) -> Iterator[Gated]:
    made = start(request.param)
    yield made
    made.close()


def texts(task: dict[str, Any]) -> list[tuple[str, str]]:
    return [(m["role"], m["parts"][0]["text"]) for m in task.get("history", [])]


def test_a_message_to_a_working_task_is_its_next_turn(gated: Gated) -> None:
    joined = gated.send("second")
    assert joined["status"]["state"] == "TASK_STATE_WORKING"
    assert gated.stored().pending == ("second",)
    gated.gate.open("first")
    assert gated.gate.next_started() == "second"  # handed over when the first turn ended
    assert gated.stored().pending == ()
    gated.gate.open("second")
    gated.wait_state(TaskState.COMPLETED)
    gated.settle()
    assert gated.gate.ran == ["first", "second"]
    task = gated.client.result("GetTask", {"id": gated.task_id}, version="1.0")
    assert texts(task) == [
        ("ROLE_USER", "first"),
        ("ROLE_USER", "second"),
        ("ROLE_AGENT", "done first"),
    ]
    assert task["status"]["message"]["parts"][0]["text"] == "done second"


def test_messages_wait_in_order_each_its_own_turn(gated: Gated) -> None:
    gated.send("second")
    gated.send("third")
    for text in ("first", "second", "third"):
        gated.gate.open(text)
    gated.wait_state(TaskState.COMPLETED)
    gated.settle()
    assert gated.gate.ran == ["first", "second", "third"]


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_a_question_is_answered_by_the_waiting_message(mode: str) -> None:
    gated = start(mode, "ask:first")
    try:
        gated.send("second")
        gated.gate.open("ask:first")
        assert gated.gate.next_started() == "second"  # no input-required in between
        gated.gate.open("second")
        gated.wait_state(TaskState.COMPLETED)
        gated.settle()
        task = gated.client.result("GetTask", {"id": gated.task_id}, version="1.0")
        assert texts(task)[-1] == ("ROLE_AGENT", "what about ask:first?")
        states = [
            e.event.status.state
            for e in gated.client.app.service.ports.store.events("anonymous", gated.task_id)
            if isinstance(e.event, StatusUpdate)
        ]
        assert TaskState.INPUT_REQUIRED not in states
    finally:
        gated.close()


def test_a_hand_over_that_loses_its_race_to_a_third_message_still_hands_over(
    gated: Gated,
) -> None:
    """The commit that hands the task over to the waiting message loses its race to another
    message (issue 27): it is made again from the task as it is then, and still hands over,
    instead of leaving the task `submitted` with nobody to run what waits."""
    joined = [gated.send("second")]

    def third(current: StoredTask, task: Task) -> None:
        lease = current.lease
        if lease is not None and not lease.holder and lease.message_id == "second":
            gated.store.meanwhile = None  # this once: the hand-over's first try
            joined.append(gated.send("third"))

    gated.store.meanwhile = third
    for text in ("first", "second", "third"):
        gated.gate.open(text)
    gated.wait_state(TaskState.COMPLETED)
    gated.settle()
    assert [j["status"]["state"] for j in joined] == ["TASK_STATE_WORKING"] * 2
    assert gated.gate.ran == ["first", "second", "third"]
    assert gated.stored().pending == () and gated.stored().lease is None


@pytest.mark.parametrize("mode", ["inline", "background"])
def test_a_turn_that_fails_the_task_runs_no_waiting_message(mode: str) -> None:
    gated = start(mode, "fail:first")
    try:
        gated.send("second")
        gated.gate.open("fail:first")
        gated.wait_state(TaskState.FAILED)
        gated.settle()
        assert gated.gate.ran == ["fail:first"]
        stored = gated.stored()
        assert stored.pending == () and stored.lease is None
    finally:
        gated.close()


def test_a_cancel_drops_the_waiting_messages(gated: Gated) -> None:
    gated.send("second")
    canceled = gated.client.result("CancelTask", {"id": gated.task_id}, version="1.0")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    gated.gate.open("first")
    gated.settle()
    assert gated.gate.ran == ["first"]
    stored = gated.stored()
    assert stored.task.status.state is TaskState.CANCELED
    assert stored.pending == () and stored.lease is None


def test_a_resent_waiting_message_waits_once(gated: Gated) -> None:
    first = gated.send("second", message_id="m2")
    again = gated.send("second", message_id="m2")
    assert again["id"] == first["id"] == gated.task_id
    assert gated.stored().pending == ("m2",)
    assert texts(again).count(("ROLE_USER", "second")) == 1
    gated.gate.open("first")
    gated.gate.open("second")
    gated.wait_state(TaskState.COMPLETED)
    gated.settle()
    assert gated.gate.ran == ["first", "second"]


def test_too_many_waiting_messages_are_refused_clearly(gated: Gated) -> None:
    limit = MAX_PENDING_MESSAGES
    for n in range(limit):
        gated.send(f"more-{n}")
    before = gated.stored()
    error = gated.client.error(
        "SendMessage",
        {
            "message": {
                "role": "ROLE_USER",
                "parts": [{"text": "one too many"}],
                "messageId": "over",
                "taskId": gated.task_id,
            }
        },
        version="1.0",
    )
    assert error["code"] == -32602
    assert f"the limit ({limit})" in error["message"] and "cancel it" in error["message"]
    after = gated.stored()
    assert after.version == before.version and len(after.pending) == limit
    gated.client.result("CancelTask", {"id": gated.task_id}, version="1.0")


def test_a_streamed_turn_that_hands_over_streams_the_next_turn_to_its_end() -> None:
    """The stream does not end at the first turn's end: the task is not done, so a 0.3 or
    1.0 client keeps reading until the message that waited was answered too."""
    gate = Gate()
    module = HandlerModule(name="gate", handle=gate.handle, info=AgentInfo(), skills=())
    client = Client(build(Settings(handler="functions.handlers.sample"), MemoryTaskStore(), module))
    try:
        response = open_stream(client, "SendStreamingMessage", send_params("first", "first"))
        events = frames(response)
        task_id = next(events).data["result"]["task"]["id"]
        assert gate.next_started() == "first"
        send(client, "second", messageId="second", taskId=task_id)
        gate.open("first")
        gate.open("second")
        states = [
            e.data["result"]["statusUpdate"]["status"]["state"]
            for e in events
            if "statusUpdate" in e.data["result"]
        ]
        assert states[-1] == "TASK_STATE_COMPLETED"
        assert "TASK_STATE_COMPLETED" not in states[:-1]
        assert "TASK_STATE_SUBMITTED" in states  # the hand-over, between the turns
        assert gate.ran == ["first", "second"]
    finally:
        gate.open_all()
        client.app.close()


def test_a_resend_while_the_first_run_works_is_answered_by_it_without_errors(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The resend runs the handler too (no look-up before it: the task's creation is the
    check); its first commit finds the first run's task, and the resend stops quietly and is
    answered with that task, as it stands."""
    gated = start("inline")
    store = gated.client.app.service.ports.store
    counting = getattr(store, "inner", store)
    assert isinstance(counting, CountingStore)
    before = counting.commits
    try:
        with caplog.at_level(logging.WARNING):
            resent: list[dict[str, Any]] = []
            again = threading.Thread(
                target=lambda: resent.append(send(gated.client, "first", messageId="first"))
            )
            again.start()
            assert gated.gate.next_started() == "first"  # the resend's own run, at the gate
            # Its commit timer tries to make the task while the handler still works.
            wait_until(lambda: counting.commits > before, 5, lambda: "the resend never committed")
            gated.gate.open("first")
            again.join(10)
            gated.settle()
        assert resent and resent[0]["id"] == gated.task_id  # as it stood then (a resend)
        gated.wait_state(TaskState.COMPLETED)
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
        task = gated.client.result("GetTask", {"id": gated.task_id}, version="1.0")
        assert texts(task) == [("ROLE_USER", "first")]  # the resend added nothing
    finally:
        gated.close()


def test_a_handler_that_must_not_run_twice_is_not_run_for_a_resend() -> None:
    """RERUN_SAFE = False: the blocking send stores its task before the handler runs, so a
    resend sent while the first run works is refused by that write and never runs it."""
    gate = Gate()
    module = HandlerModule(
        name="gate", handle=gate.handle, info=AgentInfo(), skills=(), rerun_safe=False
    )
    client = Client(build(Settings(handler="functions.handlers.sample"), MemoryTaskStore(), module))
    first = threading.Thread(target=lambda: send(client, "first", messageId="first"))
    try:
        first.start()
        assert gate.next_started() == "first"
        again = send(client, "first", messageId="first")  # answered at once: nothing ran
        assert again["status"]["state"] == "TASK_STATE_WORKING"
        gate.open("first")
        first.join(10)
        assert gate.ran == ["first"]
        task = client.result("GetTask", {"id": again["id"]}, version="1.0")
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    finally:
        gate.open_all()
        client.app.close()
