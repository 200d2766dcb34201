"""shared/adk.py: ADK agents served as handlers, offline (custom agents and a scripted model in
tests/adk/agents.py), through the JSON-RPC API on the embedded backend.

Importing ADK takes seconds: this module imports it once (its handler modules share it)."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Callable
from threading import Event
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.adk import (
    PARTIAL,
    QUESTION,
    REPLAY_TEXT,
    UnusableMessage,
    _from_user_turn,
    rebuild,
    user_content,
)
from shared.app import build
from shared.identity.api_key import hashed
from shared.model import Message, Part, Role
from shared.settings import Settings
from shared.store.memory import MemoryTaskStore
from tests import sse
from tests.adk import agents
from tests.conftest import Client
from tests.flags import flag

V1 = "1.0"


# Every answer these clients get is checked against its version's official schema.


CUSTOM = "tests.adk.custom"


@pytest.fixture
def custom(make_client: Callable[..., Client], schema_checked: None) -> Client:
    return make_client(handler=CUSTOM)


@pytest.fixture
def scripted(make_client: Callable[..., Client], schema_checked: None) -> Client:
    return make_client(handler="tests.adk.scripted")


def message(
    *parts: dict[str, Any], task_id: str | None = None, context_id: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"messageId": str(uuid.uuid4()), "role": "ROLE_USER", "parts": parts}
    if task_id is not None:
        body["taskId"] = task_id
    if context_id is not None:
        body["contextId"] = context_id
    return body


def send(
    client: Client,
    *parts: dict[str, Any],
    task_id: str | None = None,
    context_id: str | None = None,
    headers: dict[str, str] | None = None,
) -> dict[str, Any]:
    sent = {"message": message(*parts, task_id=task_id, context_id=context_id)}
    result = client.result("SendMessage", sent, version=V1, headers=headers)
    task: dict[str, Any] = result["task"]
    return task


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


def status_text(task: dict[str, Any]) -> str:
    return "".join(p.get("text", "") for p in task["status"]["message"]["parts"])


def artifact_parts(task: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [a["parts"] for a in task.get("artifacts", [])]


# -- multi-turn: the session rebuilt from the task's history -------------------------------


def test_a_long_running_call_asks_and_the_answer_resumes_with_the_first_turn_seen(
    scripted: Client,
) -> None:
    first = send(scripted, {"text": "please order a phone"})
    assert state(first) == "TASK_STATE_INPUT_REQUIRED"
    assert "ask_approval" in status_text(first)
    call = next(p for p in first["status"]["message"]["parts"] if "data" in p)
    assert call["data"]["name"] == "ask_approval" and call["data"]["args"] == {"item": "phone"}
    assert call["metadata"]["adk_type"] == "function_call"

    second = send(scripted, {"text": "yes, go ahead"}, task_id=first["id"])
    assert state(second) == "TASK_STATE_COMPLETED"
    # The model of the second turn saw the first turn's request and the call it made.
    [[answer]] = [p for p in artifact_parts(second) if "text" in p[0]]
    assert answer["text"] == (
        'ask_approval gave {"result": "yes, go ahead"} for \'please order a phone\''
    )


def test_an_adk_client_answers_with_a_function_response_part(scripted: Client) -> None:
    first = send(scripted, {"text": "order"})
    call = next(p for p in first["status"]["message"]["parts"] if "data" in p)["data"]
    response = {"id": call["id"], "name": call["name"], "response": {"approved": True}}
    second = send(
        scripted,
        {"data": response, "metadata": {"adk_type": "function_response"}},
        task_id=first["id"],
    )
    assert state(second) == "TASK_STATE_COMPLETED"
    assert any('{"approved": true}' in p[0].get("text", "") for p in artifact_parts(second))


def test_a_0_3_client_gets_the_question_and_answers_it(scripted: Client) -> None:
    def send_03(text: str, task_id: str | None = None) -> dict[str, Any]:
        sent: dict[str, Any] = {
            "kind": "message",
            "messageId": str(uuid.uuid4()),
            "role": "user",
            "parts": [{"kind": "text", "text": text}],
        }
        if task_id is not None:
            sent["taskId"] = task_id
        task: dict[str, Any] = scripted.result("message/send", {"message": sent}, version="0.3")
        return task

    first = send_03("order")
    assert first["status"]["state"] == "input-required"
    [question, call] = first["status"]["message"]["parts"]
    assert question["kind"] == "text" and call["kind"] == "data"
    assert call["metadata"]["adk_type"] == "function_call"
    second = send_03("yes", first["id"])
    assert second["status"]["state"] == "completed"


def test_an_answer_to_a_call_nobody_made_asks_again_naming_it(scripted: Client) -> None:
    first = send(scripted, {"text": "order"})
    wrong = {"id": "no-such-call", "name": "ask_approval", "response": {}}
    again = send(
        scripted,
        {"data": wrong, "metadata": {"adk_type": "function_response"}},
        task_id=first["id"],
    )
    assert state(again) == "TASK_STATE_INPUT_REQUIRED"
    assert "'no-such-call', which is not waiting" in status_text(again)
    # The question still stands, and a plain answer still answers it.
    done = send(scripted, {"text": "ok"}, task_id=first["id"])
    assert state(done) == "TASK_STATE_COMPLETED"


def test_a_custom_agent_asks_and_sees_only_the_conversation_on_the_next_turn(
    custom: Client,
) -> None:
    first = send(custom, {"text": "ask me"})
    assert state(first) == "TASK_STATE_INPUT_REQUIRED"
    assert status_text(first).startswith("Which color?")
    second = send(custom, {"data": {"color": "blue"}}, task_id=first["id"])
    # The data part (an object) is the response; the question is not replayed as a turn.
    assert artifact_parts(second) == [
        [{"text": 'color {"color": "blue"}; seen [\'user: ask me\']'}]
    ]


def test_a_request_for_credentials_waits_in_auth_required(custom: Client) -> None:
    first = send(custom, {"text": "auth"})
    assert state(first) == "TASK_STATE_AUTH_REQUIRED"
    call = next(p for p in first["status"]["message"]["parts"] if "data" in p)
    assert call["data"]["name"] == "adk_request_credential"
    response = {
        "id": call["data"]["id"],
        "name": "adk_request_credential",
        "response": {"token": "t"},
    }
    second = send(
        custom,
        {"data": response, "metadata": {"adk_type": "function_response"}},
        task_id=first["id"],
    )
    assert artifact_parts(second) == [[{"text": 'signed in with {"token": "t"}'}]]


# -- a context's tasks: one conversation ---------------------------------------------------


def test_a_new_task_in_the_context_continues_its_conversation(custom: Client) -> None:
    first = send(custom, {"text": "hello"})
    assert artifact_parts(first) == [[{"text": "seen ['user: hello']"}]]
    # The first task completed: the next message with its contextId starts a second task.
    second = send(custom, {"text": "again"}, context_id=first["contextId"])
    assert second["id"] != first["id"]
    said = "seen ['user: hello', \"scenes: seen ['user: hello']\", 'user: again']"
    assert artifact_parts(second) == [[{"text": said}]]
    # Another context starts afresh.
    assert artifact_parts(send(custom, {"text": "other"})) == [[{"text": "seen ['user: other']"}]]


def test_a_question_left_open_in_another_task_is_not_answered_by_this_one(
    custom: Client,
) -> None:
    asked = send(custom, {"text": "ask me"})
    assert state(asked) == "TASK_STATE_INPUT_REQUIRED"
    then = send(custom, {"text": "blue"}, context_id=asked["contextId"])
    # The scene (the context's first text) asks again: this message answered no earlier call.
    assert state(then) == "TASK_STATE_INPUT_REQUIRED"
    assert status_text(then).startswith("Which color?")


def test_another_owners_tasks_in_a_context_of_the_same_id_are_never_seen(
    make_client: Callable[..., Client], schema_checked: None
) -> None:
    keys = {hashed("key-a"): "alice", hashed("key-m"): "mallory"}
    app = make_client(handler=CUSTOM, auth="api-key", api_keys=keys)
    alice, mallory = {"X-API-Key": "key-a"}, {"X-API-Key": "key-m"}
    secret = send(app, {"text": "my pin is 1234"}, context_id="shared-ctx", headers=alice)
    assert secret["contextId"] == "shared-ctx"
    # Mallory reuses the context id: her agent sees her own conversation only, both ways.
    probe = send(app, {"text": "what was said?"}, context_id="shared-ctx", headers=mallory)
    assert artifact_parts(probe) == [[{"text": "seen ['user: what was said?']"}]]
    mine = send(app, {"text": "and?"}, context_id="shared-ctx", headers=alice)
    [[answer]] = artifact_parts(mine)
    assert "1234" in answer["text"] and "what was said" not in answer["text"]


@pytest.mark.parametrize(("handler", "reads"), [("functions.handlers.echo", 0), (CUSTOM, 2)])
def test_only_a_handler_that_asks_for_its_context_reads_it(handler: str, reads: int) -> None:
    store = MemoryTaskStore()
    client = Client(build(Settings(handler=handler), store=store))
    try:
        first = send(client, {"text": "hello"})
        store.cost.reset()
        send(client, {"text": "again"}, context_id=first["contextId"])
        # Memory bills as Firestore would: the list is one query (its task, and the count).
        assert store.cost.reads == reads
    finally:
        client.app.close()


def test_only_the_newest_of_a_long_context_is_replayed_from_a_user_turn() -> None:
    # The bound may cut a turn: the session starts at its next user message.
    agent = Message(message_id="a", role=Role.AGENT, parts=(Part(text="late answer"),))
    user = Message(message_id="u", role=Role.USER, parts=(Part(text="next"),))
    assert _from_user_turn([agent, user, agent]) == [user, agent]
    assert _from_user_turn([agent]) == []


# -- streaming and outputs -----------------------------------------------------------------


def stream(client: Client, *parts: dict[str, Any]) -> list[dict[str, Any]]:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {"message": message(*parts)},
    }
    response = client.post(body, {"A2A-Version": V1})
    return [e.data["result"] for e in sse.parse(response.text)]


def chunks(frames: list[dict[str, Any]]) -> list[tuple[str, str, bool, bool]]:
    """Each artifact update of a stream: (artifact id, its text, append, lastChunk)."""
    return [
        (
            u["artifact"]["artifactId"],
            "".join(p.get("text", "") for p in u["artifact"]["parts"]),
            u.get("append", False),
            u.get("lastChunk", False),
        )
        for u in (f["artifactUpdate"] for f in frames if "artifactUpdate" in f)
    ]


def test_streamed_text_comes_as_chunks_of_the_answer_then_the_whole_as_its_last(
    custom: Client,
) -> None:
    frames = stream(custom, {"text": "stream"})
    streamed = chunks(frames)
    [answer] = {artifact_id for artifact_id, *_ in streamed}
    # As ADK's own A2A executor streams: chunks appended, then the complete response
    # replacing them as the last chunk (what an ADK RemoteA2aAgent records as the answer).
    assert [c[1:] for c in streamed] == [
        ("Hel", False, False),
        ("lo ", True, False),
        ("world", True, False),
        ("Hello world", False, True),
    ]
    # The partial text is no status message: only the complete event is a step.
    statuses = [f["statusUpdate"]["status"] for f in frames if "statusUpdate" in f]
    steps = [s["message"]["parts"] for s in statuses if "message" in s]
    assert [[p["text"] for p in step] for step in steps] == [["Hello world"]]
    assert statuses[-1]["state"] == "TASK_STATE_COMPLETED"
    task = custom.result("GetTask", {"id": frames[0]["task"]["id"]}, version=V1)
    assert task["artifacts"] == [
        {"artifactId": answer, "name": "scenes", "parts": [{"text": "Hello world"}]}
    ]


def test_each_authors_partial_text_streams_into_its_own_artifact(custom: Client) -> None:
    frames = stream(custom, {"text": "duet"})
    updates = [f["artifactUpdate"]["artifact"] for f in frames if "artifactUpdate" in f]
    ids = {a["name"]: a["artifactId"] for a in updates}
    assert sorted(ids) == ["alto", "bass"] and ids["alto"] != ids["bass"]
    by_author = {
        name: [
            (text, append, last) for aid, text, append, last in chunks(frames) if aid == ids[name]
        ]
        for name in ids
    }
    assert by_author == {
        "alto": [("la ", False, False), ("la", True, False), ("la la", False, True)],
        "bass": [("do ", False, False), ("do", True, False), ("do do", False, True)],
    }
    task = custom.result("GetTask", {"id": frames[0]["task"]["id"]}, version=V1)
    assert {a["name"]: a["parts"] for a in task["artifacts"]} == {
        "alto": [{"text": "la la"}],
        "bass": [{"text": "do do"}],
    }


def test_streamed_text_whose_complete_event_has_none_is_kept_and_closed(custom: Client) -> None:
    frames = stream(custom, {"text": "cut"})
    streamed = chunks(frames)
    answer = streamed[0][0]
    texts = [(text, append, last) for aid, text, append, last in streamed if aid == answer]
    assert texts == [("half an", False, False), ("", True, True)]
    task = custom.result("GetTask", {"id": frames[0]["task"]["id"]}, version=V1)
    stored = {a["artifactId"]: a["parts"] for a in task["artifacts"]}
    assert stored[answer] == [{"text": "half an"}]


def test_a_tool_result_is_a_data_artifact_and_the_model_streams_its_answer(
    scripted: Client,
) -> None:
    frames = stream(scripted, {"text": "weather in Paris?"})
    artifacts = [f["artifactUpdate"]["artifact"] for f in frames if "artifactUpdate" in f]
    assert artifacts[0]["name"] == "get_weather"
    assert artifacts[0]["parts"] == [{"data": {"city": "Paris", "sky": "sunny"}}]
    streamed = chunks(frames)[1:]
    *partial, last = streamed
    answer = last[1]
    assert answer.startswith("get_weather gave") and last[2:] == (False, True)
    assert len(partial) > 5 and all(c[2] for c in partial[1:]) and not partial[0][2]
    assert "".join(c[1] for c in partial).strip() == answer
    # The tool call is a step (a working status message with the call as a data part).
    steps = [
        p
        for f in frames
        if "statusUpdate" in f and "message" in f["statusUpdate"]["status"]
        for p in f["statusUpdate"]["status"]["message"]["parts"]
    ]
    assert any((p.get("metadata") or {}).get("adk_type") == "function_call" for p in steps)
    assert not any((p.get("metadata") or {}).get(PARTIAL) for p in steps)
    assert frames[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_files_go_both_ways(custom: Client) -> None:
    made = send(custom, {"text": "file"})
    assert artifact_parts(made) == [
        [
            {
                "raw": base64.b64encode(agents.PNG).decode(),
                "filename": "chart.png",
                "mediaType": "image/png",
            }
        ],
        [{"url": "https://example.com/r.pdf", "mediaType": "application/pdf"}],
    ]
    png = base64.b64encode(agents.PNG).decode()
    seen = send(
        custom,
        {"text": "parts"},
        {"raw": png, "mediaType": "image/png", "filename": "a.png"},
        {"url": "https://example.com/b.pdf", "mediaType": "application/pdf"},
        {"data": [1, "two", None]},
    )
    said = 'text parts; inline image/png 48; file https://example.com/b.pdf; text [1, "two", null]'
    assert artifact_parts(seen) == [[{"text": said}]]


# -- cancel --------------------------------------------------------------------------------


def in_background(client: Client, text: str) -> str:
    """The id of the task a background send of `text` starts."""
    params = {"message": message({"text": text}), "configuration": {"returnImmediately": True}}
    return str(client.result("SendMessage", params, version=V1)["task"]["id"])


def cancel_once(client: Client, task_id: str, started: Event, stopped: Event) -> None:
    """Cancel the task once `started` is set: `stopped` (set where the agent's run, or the
    model's call, saw CancelledError) within 2 s (generous: the shared machine), and the task
    canceled."""
    assert started.wait(20), "the agent did not start"
    canceled = time.monotonic()
    result = client.result("CancelTask", {"id": task_id}, version=V1)
    assert result["status"]["state"] == "TASK_STATE_CANCELED"
    assert stopped.wait(2), "the run was not cancelled"
    assert time.monotonic() - canceled < 2
    got = client.result("GetTask", {"id": task_id}, version=V1)
    assert got["status"]["state"] == "TASK_STATE_CANCELED"


def test_cancel_stops_a_run_waiting_on_its_model(custom: Client) -> None:
    task_id = in_background(custom, "block")
    cancel_once(custom, task_id, flag(task_id, "blocking"), flag(task_id, "cancelled"))


# -- hostile input and odd output ----------------------------------------------------------


def test_a_message_over_the_size_limit_is_refused_before_the_agent(custom: Client) -> None:
    error = custom.error("SendMessage", {"message": message({"text": "x" * 1_000_000})}, version=V1)
    assert error["code"] == -32602 and "A2A_MAX_MESSAGE_BYTES" in error["message"]


@pytest.mark.parametrize(
    ("part", "says"),
    [
        ({"data": {"name": "f"}, "metadata": {"adk_type": "function_response"}}, "without an 'id'"),
        (
            {"data": {"id": "c", "response": 3}, "metadata": {"adk_type": "function_response"}},
            "not a function response",
        ),
        (
            {"data": {"id": "c", "response": {}}, "metadata": {"adk_type": "function_response"}},
            "not waiting for an answer (waiting: none)",
        ),
    ],
)
def test_an_unusable_part_rejects_the_task_saying_why(
    custom: Client, part: dict[str, Any], says: str
) -> None:
    task = send(custom, {"text": "hello"}, part)
    assert state(task) == "TASK_STATE_REJECTED"
    assert says in status_text(task)


def test_bytes_that_are_not_base64_are_refused_at_the_front_door(custom: Client) -> None:
    error = custom.error(
        "SendMessage",
        {"message": message({"text": "hello"}, {"raw": "not base64!", "mediaType": "image/png"})},
        version=V1,
    )
    assert error["code"] == -32602
    assert "message.parts[1].raw' is not base64" in error["message"]


def test_stored_bytes_that_are_not_base64_are_named_not_sent() -> None:
    # A history written before the front door checked bytes can still hold such a part.
    stored = Message(role=Role.USER, message_id="m", parts=(Part(raw="not base64!"),))
    with pytest.raises(UnusableMessage, match="part 1 of the message holds bytes that are not"):
        user_content(stored, {})


def test_url_safe_and_unpadded_base64_is_read_as_protojson_allows(custom: Client) -> None:
    task = send(custom, {"text": "parts"}, {"raw": "-_8", "mediaType": "application/x-b"})
    assert artifact_parts(task) == [[{"text": "text parts; inline application/x-b 2"}]]


def test_what_json_cannot_carry_becomes_text(custom: Client) -> None:
    task = send(custom, {"text": "nan"})
    assert state(task) == "TASK_STATE_COMPLETED"
    assert artifact_parts(task) == [[{"data": {"result": "{'value': nan, 'odd': {1, 2}}"}}]]


def test_a_huge_answer_is_chunked_and_its_replay_cut(custom: Client) -> None:
    task = send(custom, {"text": "huge"})
    assert state(task) == "TASK_STATE_COMPLETED"
    [artifact] = task["artifacts"]
    assert "".join(p["text"] for p in artifact["parts"]) == "x" * 3_000_000
    replayed = [p for m in task["history"] for p in m["parts"] if m["role"] == "ROLE_AGENT"]
    assert [len(p["text"]) for p in replayed] == [REPLAY_TEXT]
    assert replayed[0]["metadata"]["adk_truncated"] is True


def test_a_big_tool_result_and_file_are_artifacts_and_replayed_cut(custom: Client) -> None:
    task = send(custom, {"text": "big"})
    assert state(task) == "TASK_STATE_COMPLETED"
    [[result], [file]] = artifact_parts(task)
    assert result["data"] == {"rows": "r" * 300_000}
    assert len(base64.b64decode(file["raw"])) == 300_000
    [replayed] = [m for m in task["history"] if m["role"] == "ROLE_AGENT"]
    response, described = replayed["parts"]
    assert response["metadata"]["adk_truncated"] is True
    assert (
        response["data"]["id"] == "b-1"
        and len(response["data"]["response"]["result"]) == REPLAY_TEXT
    )
    assert described["text"] == "[a file (application/x-big, 300000 bytes): an artifact]"


def test_an_agent_that_raises_fails_the_task_with_a_reference(custom: Client) -> None:
    task = send(custom, {"text": "boom"})
    assert state(task) == "TASK_STATE_FAILED"
    assert "reference" in status_text(task) and "broke" not in status_text(task)


# -- the conversions, on any input ---------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
metadata = st.none() | st.fixed_dictionaries(
    {},
    optional={
        "adk_type": st.sampled_from(["function_call", "function_response", "genai_part", "x"]),
        "adk_is_long_running": st.booleans(),
        PARTIAL: st.booleans(),
        QUESTION: st.booleans(),
    },
)
parts = st.one_of(
    st.builds(Part, text=st.text(max_size=30), metadata=metadata),
    st.builds(Part, data=json_values, metadata=metadata),
    st.builds(Part, raw=st.text(max_size=12), media_type=st.none() | st.text(max_size=8)),
    st.builds(Part, url=st.text(max_size=30), media_type=st.none() | st.text(max_size=8)),
)
messages = st.builds(
    Message,
    message_id=st.uuids().map(str),
    role=st.sampled_from(Role),
    parts=st.lists(parts, min_size=1, max_size=4).map(tuple),
)


@settings(max_examples=50)
@given(st.lists(messages, max_size=5), messages)
def test_any_history_rebuilds_and_any_message_converts_or_says_why(
    history: list[Message], last: Message
) -> None:
    pending: dict[str, Any] = {}
    events = rebuild(history, "agent", pending)
    assert all(e.content is not None and e.content.parts for e in events)
    try:
        content = user_content(last, pending)
    except UnusableMessage as exc:
        assert str(exc).startswith("part ")
        return
    assert content.role == "user" and content.parts
    for part in content.parts:
        json.dumps(part.model_dump(mode="json", exclude_none=True))


# -- the sample ----------------------------------------------------------------------------


def test_the_sample_serves_its_card_without_credentials(
    make_client: Callable[..., Client], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("GOOGLE_API_KEY", "GEMINI_API_KEY", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)
    sample = make_client(handler="functions.handlers.adk_sample")
    card = sample.http.get("/.well-known/agent-card.json")
    assert card.status_code == 200
    assert card.json()["name"] == "ADK sample agent"
    assert [s["id"] for s in card.json()["skills"]] == ["book-room"]


def test_a_part_that_cannot_be_read_back_does_not_shift_the_others() -> None:
    call = {"id": "c-1", "name": "ask", "args": {}}
    agent = Message(
        message_id="a",
        role=Role.AGENT,
        parts=(
            Part(data={"args": "not an object"}, metadata={"adk_type": "function_call"}),
            Part(data=call, metadata={"adk_type": "function_call", "adk_is_long_running": True}),
        ),
    )
    pending: dict[str, Any] = {}
    [event] = rebuild([agent], "agent", pending)
    assert event.long_running_tool_ids == {"c-1"} and list(pending) == ["c-1"]
    assert event.content is not None and event.content.parts is not None
    [part] = event.content.parts
    assert part.function_call is not None and part.function_call.id == "c-1"
