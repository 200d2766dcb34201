"""Every failure of a call is one ClientError line naming the problem and the fix (httpx's
MockTransport stands for the agent)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import httpx
import pytest

from shared.client.transport import ClientError, Transport

URL = "http://agent.test/"


def transport(answer: Callable[[httpx.Request], httpx.Response]) -> Transport:
    return Transport(http=httpx.Client(transport=httpx.MockTransport(answer)))


def test_a_json_rpc_error_names_its_code_and_message() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad id"}}
    with pytest.raises(ClientError) as caught:
        transport(lambda r: httpx.Response(200, json=error)).call(URL, "GetTask", {}, "1.0")
    assert str(caught.value) == "GetTask: InvalidParamsError (-32602): bad id"
    assert caught.value.code == -32602


def test_the_version_header_is_sent_for_1_0_only() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})

    client = transport(answer)
    client.call(URL, "GetTask", {"id": "t"}, "1.0")
    client.call(URL, "tasks/get", {"id": "t"}, "0.3")
    assert seen[0].headers["A2A-Version"] == "1.0"
    assert "A2A-Version" not in seen[1].headers
    assert json.loads(seen[0].content)["params"] == {"id": "t"}


FROM = "HTTP {} from http://agent.test/"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (
            httpx.Response(401, json={"error": "no key"}),
            FROM.format(401) + ": no key; pass",
        ),
        (
            httpx.Response(403, text="Forbidden"),
            FROM.format(403) + ": Forbidden; these",
        ),
        (
            httpx.Response(302, headers={"location": "https://in"}),
            FROM.format(302) + " (to https://in)",
        ),
        (
            httpx.Response(500, text="<html>boom</html>"),
            FROM.format(500) + ": Internal Server",
        ),
        (httpx.Response(200, text="not json"), "answered with something that is not JSON"),
        (httpx.Response(200, json=[1]), "answered with JSON that is not an object"),
        (httpx.Response(200, json={"jsonrpc": "2.0", "id": 1}), "neither result nor error"),
    ],
)
def test_http_failures_are_one_clear_line(response: httpx.Response, expected: str) -> None:
    with pytest.raises(ClientError) as caught:
        transport(lambda r: response).call(URL, "GetTask", {}, "1.0")
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_stream_error_frame_ends_the_stream_with_its_words() -> None:
    body = (
        'id: 1\ndata: {"jsonrpc":"2.0","id":1,"result":{"task":{}}}\n\n'
        'event: error\ndata: {"error":"gone"}\n\n'
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"Content-Type": "text/event-stream"})

    events = transport(answer).stream(URL, "SubscribeToTask", {"id": "t"}, "1.0")
    first = next(events)
    assert (first.id, first.result) == ("1", {"task": {}})
    with pytest.raises(ClientError, match=re.escape('the stream failed: {"error":"gone"}')):
        next(events)


def test_keep_alive_comments_between_events_are_no_events() -> None:
    frame = '"jsonrpc":"2.0","id":1,"result":{{"statusUpdate":{{"n":{}}}}}'
    body = (
        ": before any id\n\n"
        f"id: 1\ndata: {{{frame.format(1)}}}\n\n"
        ": keep-alive\n\n: keep-alive\n\n"  # after an id: httpx-sse makes events of these
        f"id: 2\ndata: {{{frame.format(2)}}}\n\n"
        ": keep-alive\n\n"
    )

    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=body, headers={"Content-Type": "text/event-stream"})

    events = list(transport(answer).stream(URL, "SubscribeToTask", {"id": "t"}, "1.0"))
    assert [(e.id, e.result) for e in events] == [
        ("1", {"statusUpdate": {"n": 1}}),
        ("2", {"statusUpdate": {"n": 2}}),
    ]


def test_an_error_before_the_stream_is_a_json_rpc_error() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32004, "message": "task is completed"}}
    events = transport(lambda r: httpx.Response(200, json=error)).stream(
        URL, "SubscribeToTask", {}, "1.0"
    )
    with pytest.raises(ClientError) as caught:
        next(events)
    assert caught.value.code == -32004


def test_a_url_without_scheme_is_named() -> None:
    client = Transport()
    with pytest.raises(ClientError, match="must start with http"):
        client.get_json("agent.test/card")
    client.close()
