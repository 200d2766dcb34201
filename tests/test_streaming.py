"""Streaming in process: frames per version, errors before the first frame, resume by
Last-Event-ID, keep-alives, the deadline, the per-instance and per-owner stream limits, and
slots that go back on every exit (HEAD, a client gone before the first byte, an error)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator
from typing import Any

import httpx
import pytest

from shared.bindings import sse as sse_binding
from shared.errors import StreamLimitError
from shared.identity.api_key import hashed
from shared.model import Message
from shared.ports import TaskStore
from shared.service.tasks import AHEAD_OF_LOG
from shared.settings import Settings
from shared.stream_slots import StreamSlots
from tests import sse
from tests.conftest import Client

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

V1 = {"A2A-Version": "1.0"}
MakeClient = Callable[..., Client]
# A stream whose client went away ends at its next chunk (shared/bindings/asgi.py), and a
# test's close waits for that: a keep-alive every 50 ms makes it come soon.
PROMPT = {"stream_keepalive": 0.05}


@pytest.fixture
def client(make_client: MakeClient) -> Client:
    return make_client(**PROMPT)


def send_params(text: str, message_id: str, **message: Any) -> dict[str, Any]:
    msg = {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}], **message}
    return {"message": msg}


def open_stream(
    client: Client, method: str, params: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 5, "method": method, "params": params}
    response = client.http.opened(
        "POST",
        "/",
        content=json.dumps(body),
        headers={"Content-Type": "application/json", **V1, **(headers or {})},
    )
    assert response.status_code == 200
    return response


def frames(response: httpx.Response) -> Generator[sse.Event, None, None]:
    """Events as the server sends them (the body is read as the test reads the events);
    closing them closes the answer: the client goes away."""
    assert is_stream(response), response.read()
    buffer = ""

    def lines() -> Iterator[str]:
        nonlocal buffer
        for chunk in response.iter_bytes():
            buffer += chunk.decode()
            *complete, buffer = buffer.split("\n")
            yield from complete

    try:
        yield from sse.events(lines())
    finally:
        response.close()


def is_stream(response: httpx.Response) -> bool:
    return response.headers["Content-Type"].startswith("text/event-stream")


def kinds(events: list[sse.Event]) -> list[str]:
    return [next(iter(e.data["result"])) for e in events]


def json_error(response: httpx.Response) -> dict[str, Any]:
    response.read()
    assert response.headers["Content-Type"] == "application/json", response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def logged_seqs(store: TaskStore, task_id: str, after: int) -> list[int]:
    """The seqs a stream sends after its snapshot: the log's status and artifact events."""
    logged = store.events("anonymous", task_id, after)
    return [e.seq for e in logged if not isinstance(e.event, Message)]


@pytest.fixture
def slow(make_client: MakeClient) -> Client:
    return make_client(handler="tests.handlers.slow")


def test_v1_stream_opens_with_the_task_and_ends_after_its_final_state(slow: Client) -> None:
    events = list(
        frames(open_stream(slow, "SendStreamingMessage", send_params("steps=3 delay=0", "m1")))
    )
    assert kinds(events) == ["task"] + ["statusUpdate"] * 3 + ["artifactUpdate", "statusUpdate"]
    assert {e.data["id"] for e in events} == {5}
    task = events[0].data["result"]["task"]
    assert events[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    # Every status and artifact event of the log, once, in order, each with its seq as id.
    assert [int(e.id or "") for e in events[1:]] == logged_seqs(
        slow.app.service.ports.store, task["id"], int(events[0].id or "")
    )
    assert "final" not in json.dumps([e.data for e in events])  # 1.0 has no `final`


def test_v0_1_stream_has_only_status_and_artifact_events(slow: Client) -> None:
    params = {
        "id": "t-1",
        "message": {"role": "user", "parts": [{"type": "text", "text": "steps=1"}]},
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "tasks/sendSubscribe", "params": params}
    events = sse.parse(slow.post(body).text)
    results = [e.data["result"] for e in events]
    assert [sorted(r) for r in results] == [
        ["final", "id", "status"],
        ["artifact", "id"],
        ["final", "id", "status"],
    ]
    assert results[1]["artifact"] == {"parts": [{"type": "text", "text": "done"}], "index": 0}
    assert [r.get("final") for r in results] == [False, None, True]


def test_errors_before_the_first_frame_are_plain_json(client: Client) -> None:
    missing = open_stream(client, "SubscribeToTask", {"id": "no-such-task"})
    assert json_error(missing)["code"] == -32001
    done = client.result("SendMessage", send_params("hi", "m1"), version="1.0")["task"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert json_error(open_stream(client, "SubscribeToTask", {"id": done["id"]}))["code"] == -32004
    follow_up = send_params("more", "m2", taskId=done["id"])
    assert json_error(open_stream(client, "SendStreamingMessage", follow_up))["code"] == -32004
    assert json_error(open_stream(client, "SendStreamingMessage", {}))["code"] == -32602
    bad_resume = open_stream(client, "SubscribeToTask", {"id": done["id"]}, {"Last-Event-ID": "x"})
    assert json_error(bad_resume)["code"] == -32602


def test_streams_are_not_batched(client: Client) -> None:
    body = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendStreamingMessage",
            "params": send_params("a", "m"),
        }
    ]
    [answer] = client.post(body, V1).json()
    assert answer["error"]["code"] == -32600


def test_drop_and_resume_loses_and_repeats_nothing(slow: Client) -> None:
    store = slow.app.service.ports.store
    stream = frames(
        open_stream(slow, "SendStreamingMessage", send_params("steps=12 delay=0.02", "m1"))
    )
    first = [next(stream) for _ in range(4)]
    stream.close()  # the client went away mid-task
    task_id = first[0].data["result"]["task"]["id"]
    last = first[-1].id or ""
    # Resume by header, then by the params member and the query for clients without headers.
    rest = list(
        frames(open_stream(slow, "SubscribeToTask", {"id": task_id}, {"Last-Event-ID": last}))
    )
    assert "task" not in kinds(rest)  # a resumed stream sends no snapshot again
    got = [int(e.id or "") for e in first[1:] + rest]
    assert got == logged_seqs(store, task_id, int(first[0].id or ""))
    assert rest[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

    # The task has ended: a resume from before its end still gets the end, then nothing.
    again = list(frames(open_stream(slow, "SubscribeToTask", {"id": task_id, "lastEventId": last})))
    assert [e.id for e in again] == [e.id for e in rest]
    body = {"jsonrpc": "2.0", "id": 1, "method": "SubscribeToTask", "params": {"id": task_id}}
    response = slow.http.post(f"/?lastEventId={rest[-1].id}", json=body, headers=V1)
    assert json_error(response)["code"] == -32004


def test_a_resume_ahead_of_the_log_goes_on_from_there_and_one_past_any_event_is_refused(
    make_client: MakeClient,
) -> None:
    """A streamed send sends each event ahead of its commit: a client may resume from an id
    the log holds only a moment later. An id no stream can have sent is refused, by name."""
    client = make_client(stream_idle=0.2)
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    stored = client.app.service.ports.store.get("anonymous", task["id"])
    assert stored is not None
    params = {"id": task["id"]}
    # Ahead of the log: accepted, and nothing new comes (the stream ends when idle).
    ahead = open_stream(
        client, "SubscribeToTask", params, {"Last-Event-ID": str(stored.last_seq + 1)}
    )
    assert list(frames(ahead)) == []
    for past in (stored.last_seq + AHEAD_OF_LOG + 1, 10**23):
        after = {"Last-Event-ID": str(past)}
        error = json_error(open_stream(client, "SubscribeToTask", params, after))
        assert error["code"] == -32602 and "Last-Event-ID" in error["message"]


def test_a_resume_of_an_ended_task_ahead_of_its_log_is_told_how_it_ended(
    client: Client,
) -> None:
    """The events a stream sent ahead of a commit that a cancel stopped are not in the log:
    a resume after them is told the task's end."""
    task = client.result("SendMessage", send_params("I want a new phone", "m1"), version="1.0")
    task_id = task["task"]["id"]
    client.result("CancelTask", {"id": task_id}, version="1.0")
    stored = client.app.service.ports.store.get("anonymous", task_id)
    assert stored is not None
    after = {"Last-Event-ID": str(stored.last_seq + 2)}
    error = json_error(open_stream(client, "SubscribeToTask", {"id": task_id}, after))
    assert error["code"] == -32004 and "canceled" in error["message"]


def test_subscribe_opens_with_a_snapshot_and_waits_for_the_next_move(client: Client) -> None:
    waiting = client.result("SendMessage", send_params("I want a new phone", "m1"), version="1.0")
    task = waiting["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    stream = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    opening = next(stream)
    assert opening.data["result"]["task"]["id"] == task["id"]
    answer = send_params("Android", "m2", taskId=task["id"])
    client.result("SendMessage", answer, version="1.0")
    rest = list(stream)
    assert kinds(rest) == ["statusUpdate", "artifactUpdate", "statusUpdate"]
    assert rest[-1].data["result"]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_keepalive_and_deadline(make_client: MakeClient) -> None:
    client = make_client(stream_keepalive=0.05, stream_seconds=0.4)
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    response = open_stream(client, "SubscribeToTask", {"id": task["id"]})
    text = response.read().decode()  # ends at the deadline, without an error
    assert text.count(": keep-alive\n\n") >= 3
    assert len(sse.parse(text)) == 1  # the snapshot, then only keep-alives
    # The client resubscribes, and the stream goes on.
    again = open_stream(client, "SubscribeToTask", {"id": task["id"]})
    assert kinds(list(frames(again))) == ["task"]


def test_a_stream_over_the_limit_gets_a_clear_error(make_client: MakeClient) -> None:
    client = make_client(max_streams=1, **PROMPT)
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    held = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    next(held)
    error = json_error(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    assert error["code"] == -32000
    assert "A2A_MAX_STREAMS" in error["message"]
    held.close()  # the slot is free again
    assert kinds([next(frames(open_stream(client, "SubscribeToTask", {"id": task["id"]})))]) == [
        "task"
    ]


def test_a_stream_on_a_task_waiting_for_input_ends_when_idle(make_client: MakeClient) -> None:
    client = make_client(stream_idle=0.2)
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    started = time.monotonic()
    assert kinds(list(frames(open_stream(client, "SubscribeToTask", {"id": task["id"]})))) == [
        "task"
    ]
    assert 0.15 < time.monotonic() - started < 5


def test_head_on_stream_routes_is_refused_and_holds_no_slot(client: Client) -> None:
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    for path in (f"/sse?taskId={task['id']}", f"/tasks/{task['id']}:subscribe"):
        for _ in range(client.app.streams.slots.limit + 1):
            response = client.http.head(path, headers=V1)
            assert response.status_code == 405
            assert response.headers["Allow"] == "GET" or "GET" in response.headers["Allow"]
    assert client.app.streams.slots.held == 0
    # Streaming still works: no slot leaked.
    assert kinds([next(frames(open_stream(client, "SubscribeToTask", {"id": task["id"]})))]) == [
        "task"
    ]


@pytest.mark.parametrize("route", ["jsonrpc", "rest", "seed"])
def test_a_client_gone_before_the_first_byte_frees_its_slot(client: Client, route: str) -> None:
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    slots = client.app.streams.slots
    for _ in range(slots.limit + 1):
        if route == "jsonrpc":
            response = open_stream(client, "SubscribeToTask", {"id": task["id"]})
        elif route == "rest":
            response = client.http.opened("GET", f"/tasks/{task['id']}:subscribe", headers=V1)
        else:
            response = client.http.opened("GET", f"/sse?taskId={task['id']}")
        assert is_stream(response)
        assert slots.held == 1
        response.close()  # what the server does when the client is gone: nothing was read
        assert slots.held == 0


def test_an_error_before_the_first_frame_frees_its_slot(client: Client, monkeypatch: Any) -> None:
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    slots = client.app.streams.slots

    def broken_tail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("tail exploded")

    monkeypatch.setattr(client.app.service.ports.store, "tail", broken_tail)
    params = {"id": task["id"], "lastEventId": "0"}  # resuming: the tail is the first read
    text = open_stream(client, "SubscribeToTask", params).read().decode()
    assert "event: error" in text and "tail exploded" not in text
    assert slots.held == 0
    monkeypatch.setattr(client.app.service.ports.store, "get", broken_tail)
    error = client.error("SubscribeToTask", {"id": task["id"]}, version="1.0")
    assert error["code"] == -32603
    assert slots.held == 0


def test_one_owner_cannot_take_every_stream(make_client: MakeClient) -> None:
    client = make_client(
        auth="api-key",
        api_keys={hashed("ka"): "alice", hashed("kb"): "bob"},
        max_streams=3,
        max_owner_streams=1,
        **PROMPT,
    )
    alice, bob = {"X-API-Key": "ka"}, {"X-API-Key": "kb"}
    ids = {}
    for who, key in (("alice", alice), ("bob", bob)):
        sent = client.result(
            "SendMessage", send_params("new phone", "m1"), version="1.0", headers=key
        )
        ids[who] = sent["task"]["id"]
    held = frames(open_stream(client, "SubscribeToTask", {"id": ids["alice"]}, alice))
    next(held)
    error = json_error(open_stream(client, "SubscribeToTask", {"id": ids["alice"]}, alice))
    assert error["code"] == -32000
    assert "A2A_MAX_STREAMS_PER_OWNER" in error["message"]
    other = frames(open_stream(client, "SubscribeToTask", {"id": ids["bob"]}, bob))
    assert kinds([next(other)]) == ["task"]
    assert client.app.streams.slots.held == 2
    held.close()
    other.close()


KEYS = {hashed("ka"): "alice", hashed("kb"): "bob"}


def test_the_owner_limit_defaults_to_a_quarter_of_the_instance_limit() -> None:
    assert Settings(auth="api-key", api_keys=KEYS, threads=80).owner_stream_limit == 230
    assert Settings(auth="api-key", api_keys=KEYS, max_streams=12).owner_stream_limit == 3
    # At least two on a small instance (a send's stream and a subscription), or its limit.
    assert Settings(auth="api-key", api_keys=KEYS, max_streams=6).owner_stream_limit == 2
    assert Settings(auth="api-key", api_keys=KEYS, max_streams=1).owner_stream_limit == 1
    assert Settings(max_streams=6, max_owner_streams=9).owner_stream_limit == 6
    assert Settings(max_streams=6, max_owner_streams=2).owner_stream_limit == 2
    # With no identity every caller is one owner: the instance's limit is everyone's.
    assert Settings(max_streams=6).owner_stream_limit == 6


def test_with_the_defaults_four_owners_each_get_their_share() -> None:
    # The deployed a2a: THREADS=80, 920 streams. One owner holding all it may leaves every
    # other owner as many (the finding: bob took 5 of 6, alice was refused at her second).
    settings = Settings(auth="api-key", api_keys=KEYS, threads=80)
    slots = StreamSlots(settings.stream_limit, settings.owner_stream_limit)
    held = {owner: 0 for owner in ("bob", "alice", "carol", "dave")}
    for owner in held:
        while True:
            try:
                slots.open(owner, _empty)
            except StreamLimitError as exc:  # the owner's share; the last, the instance's too
                full = slots.held == settings.stream_limit
                assert ("A2A_MAX_STREAMS)" if full else "A2A_MAX_STREAMS_PER_OWNER") in str(exc)
                break
            held[owner] += 1
    assert set(held.values()) == {settings.owner_stream_limit}
    assert slots.held == 4 * settings.owner_stream_limit <= settings.stream_limit


def test_two_owners_streams_with_the_default_share(make_client: MakeClient) -> None:
    client = make_client(auth="api-key", api_keys=KEYS, max_streams=8)  # a share of 2
    keys = {"alice": {"X-API-Key": "ka"}, "bob": {"X-API-Key": "kb"}}
    ids = {
        who: client.result(
            "SendMessage", send_params("new phone", "m1"), version="1.0", headers=key
        )["task"]["id"]
        for who, key in keys.items()
    }
    opened = []
    for _ in range(2):
        stream = frames(open_stream(client, "SubscribeToTask", {"id": ids["bob"]}, keys["bob"]))
        assert kinds([next(stream)]) == ["task"]
        opened.append(stream)
    error = json_error(open_stream(client, "SubscribeToTask", {"id": ids["bob"]}, keys["bob"]))
    assert error["code"] == -32000 and "A2A_MAX_STREAMS_PER_OWNER" in error["message"]
    for _ in range(2):
        stream = frames(open_stream(client, "SubscribeToTask", {"id": ids["alice"]}, keys["alice"]))
        assert kinds([next(stream)]) == ["task"]
        opened.append(stream)
    assert client.app.streams.slots.held == 4
    for stream in opened:
        stream.close()
    assert client.app.streams.slots.held == 0


def test_a_slot_goes_back_on_every_exit() -> None:
    def two() -> Generator[None, None, None]:
        yield None
        yield None

    def failing() -> Generator[None, None, None]:
        raise RuntimeError("before the first frame")
        yield None

    slots = StreamSlots(2)
    slots.open("o", two).close()  # never started
    assert slots.held == 0
    assert list(slots.open("o", two)) == [None, None]  # exhausted
    assert slots.held == 0
    with pytest.raises(RuntimeError):
        next(slots.open("o", failing))
    assert slots.held == 0
    with pytest.raises(ValueError):
        slots.open("o", _raise)
    assert slots.held == 0
    # A response closed before its first chunk (HEAD, a client gone) closes its stream.
    stream = slots.open("o", two)
    answer = sse_binding.response(sse_binding.task_updates(stream), stream)
    assert slots.held == 1
    answer.close()
    assert slots.held == 0
    held = [slots.open("o", two), slots.open("p", two)]
    with pytest.raises(StreamLimitError, match="A2A_MAX_STREAMS"):
        slots.open("q", two)
    for stream in held:
        stream.close()
        stream.close()  # twice: released once
    assert slots.held == 0


def _raise() -> Any:
    raise ValueError("make failed")


def test_a_stopping_instance_ends_its_streams_at_once_and_resumably(client: Client) -> None:
    task = client.result("SendMessage", send_params("new phone", "m1"), version="1.0")["task"]
    stream = frames(open_stream(client, "SubscribeToTask", {"id": task["id"]}))
    assert kinds([next(stream)]) == ["task"]  # then it waits for news (input-required)
    started = time.monotonic()
    client.app.close()  # what SIGTERM does (functions/main.py)
    assert list(stream) == []  # ended without an error event: the client resubscribes
    assert time.monotonic() - started < 1
    assert client.app.streams.slots.held == 0


def _empty() -> Generator[None, None, None]:
    yield from ()
