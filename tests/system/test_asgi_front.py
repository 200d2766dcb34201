"""The functions as served (functions-framework's ASGI stack, shared/bindings/asgi.py), over
real sockets: what a client can do to the server's side of a request."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

from tests.conftest import Server, wait_until

SEND = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "SendMessage",
    "params": {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}},
}


def test_a_body_over_the_limit_is_refused_however_it_is_framed(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(A2A_HANDLER="functions.handlers.echo", A2A_MAX_BODY_BYTES="2000")
    body = json.dumps({**SEND, "pad": "x" * 5000}).encode()
    # Declared: refused by its length, with nothing read.
    declared = http.client.HTTPConnection("localhost", server.port, timeout=30)
    declared.putrequest("POST", "/")
    declared.putheader("Content-Type", "application/json")
    declared.putheader("Content-Length", "50000000")
    declared.endheaders()
    answer = declared.getresponse()
    assert answer.status == 413
    assert "A2A_MAX_BODY_BYTES" in json.loads(answer.read())["error"]["message"]
    declared.close()
    # Chunked (no length): read one byte past the limit, then refused.
    status, answer = _post_chunked(server, body, 1500, {})
    assert status == 413
    assert "A2A_MAX_BODY_BYTES" in answer["error"]["message"]
    # Within the limit, chunked too: served.
    _, answer = _post_chunked(server, json.dumps(SEND).encode(), 10, {"A2A-Version": "1.0"})
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


def _post_chunked(
    server: Server, body: bytes, cut: int, headers: dict[str, str]
) -> tuple[int, Any]:
    """POST `body` to / in two chunks (cut at `cut`), without a length: status and JSON."""
    connection = http.client.HTTPConnection("localhost", server.port, timeout=30)
    connection.request(
        "POST",
        "/",
        iter([body[:cut], body[cut:]]),
        {"Content-Type": "application/json", **headers},
        encode_chunked=True,
    )
    answer = connection.getresponse()
    try:
        return answer.status, json.loads(answer.read())
    finally:
        connection.close()


def test_a_header_named_with_an_underscore_does_not_choose_the_card_s_url(
    start_server: Callable[..., Server],
) -> None:
    server = start_server()
    connection = http.client.HTTPConnection("localhost", server.port, timeout=30)
    connection.request(
        "GET", "/.well-known/agent-card.json", headers={"X_Forwarded_Host": "evil.example"}
    )
    card = json.loads(connection.getresponse().read())
    connection.close()
    assert "evil.example" not in json.dumps(card)
    assert f"localhost:{server.port}" in card["supportedInterfaces"][0]["url"]


Opened = tuple[http.client.HTTPConnection, http.client.HTTPResponse]


def _asking(server: Server) -> str:
    """A task of the phone order agent that waits for input: its id."""
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "new phone"}]}
    send = {**SEND, "params": {"message": message}}
    task = server.rpc(send, {"A2A-Version": "1.0"})["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    return str(task["id"])


def _subscribe(server: Server, task_id: str) -> Opened | None:
    """A subscription to the task, once its first event came; None when refused (the
    answer read)."""
    subscribe = json.dumps(
        {"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}}
    )
    connection = http.client.HTTPConnection("localhost", server.port, timeout=30)
    connection.request(
        "POST", "/", subscribe, {"Content-Type": "application/json", "A2A-Version": "1.0"}
    )
    answer = connection.getresponse()
    if answer.getheader("Content-Type", "").startswith("text/event-stream"):
        while not answer.readline().startswith(b"data:"):
            pass
        return connection, answer
    assert "A2A_MAX_STREAMS" in answer.read().decode()
    connection.close()
    return None


def test_idle_streams_hold_no_thread(start_server: Callable[..., Server]) -> None:
    """More streams waiting than the function has THREADS: a plain request still gets a
    thread at once, and every stream still gets its task's next events."""
    server = start_server(
        THREADS="2",
        A2A_MAX_STREAMS="8",
        A2A_MAX_STREAMS_PER_OWNER="8",
        A2A_STREAM_KEEPALIVE_SECONDS="600",
        A2A_STREAM_IDLE_SECONDS="600",
    )
    task_id = _asking(server)
    streams = [_subscribe(server, task_id) for _ in range(6)]
    # Each held a thread while it waited, the pool's 2 would be taken, and this would wait
    # for 600 s: the card, and a send that runs its handler.
    card = http.client.HTTPConnection("localhost", server.port, timeout=10)
    card.request("GET", "/.well-known/agent-card.json")
    assert card.getresponse().status == 200
    card.close()
    answer = {
        "messageId": "m-2",
        "taskId": task_id,
        "role": "ROLE_USER",
        "parts": [{"text": "iPhone"}],
    }
    done = server.rpc({**SEND, "params": {"message": answer}}, {"A2A-Version": "1.0"})
    assert done["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    for opened in streams:  # each woken by the commit: its events, to the task's end
        assert opened is not None
        lines: list[bytes] = []
        while b"TASK_STATE_COMPLETED" not in (line := opened[1].readline()):
            assert line, f"the stream ended early: {lines}"
            lines.append(line)
        opened[1].close()
        opened[0].close()


def test_a_stream_whose_client_went_away_frees_its_slot_at_once(
    start_server: Callable[..., Server],
) -> None:
    server = start_server(
        A2A_MAX_STREAMS="1", A2A_STREAM_KEEPALIVE_SECONDS="600", A2A_STREAM_IDLE_SECONDS="600"
    )
    task_id = _asking(server)

    def open_stream() -> Opened | None:
        return _subscribe(server, task_id)

    held = open_stream()
    assert held is not None
    assert open_stream() is None  # the one slot is held
    held[1].close()  # the client goes away: its waiting stream ends then, not at a keep-alive
    held[0].close()

    def slot_free() -> bool:
        opened = open_stream()
        if opened is not None:
            opened[1].close()
            opened[0].close()
        return opened is not None

    wait_until(slot_free, 10, lambda: f"the slot stayed held:\n{server.output()}")


def test_answers_without_a_body_are_written_as_werkzeug_wrote_them(
    start_server: Callable[..., Server],
) -> None:
    """A HEAD, a 304 and an error: the same headers a GET would give, and no body."""
    server = start_server()
    path = "/.well-known/agent-card.json"
    connection = http.client.HTTPConnection("localhost", server.port, timeout=30)
    connection.request("GET", path)
    full = connection.getresponse()
    body = full.read()
    assert full.status == 200 and int(full.getheader("Content-Length", "0")) == len(body) > 0
    connection.request("HEAD", path)
    head = connection.getresponse()
    assert head.read() == b""
    assert (head.status, head.getheader("Content-Length")) == (200, str(len(body)))
    connection.request("GET", path, headers={"If-None-Match": full.getheader("ETag", "")})
    unchanged = connection.getresponse()
    assert (unchanged.status, unchanged.read()) == (304, b"")
    assert unchanged.getheader("ETag") == full.getheader("ETag")
    connection.request("DELETE", path)
    refused = connection.getresponse()
    assert refused.status == 405
    assert "GET" in json.loads(refused.read())["error"]["message"]
    connection.close()
