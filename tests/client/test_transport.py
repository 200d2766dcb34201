"""Every failure of a call is one ClientError line naming the problem and the fix (httpx's
MockTransport stands for the agent)."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Callable

import httpx
import pytest

from shared.client.errors import (
    AUTH_FAILED,
    CREDENTIALS_MISSING,
    TIMEOUT,
    UNREACHABLE,
    ClientError,
)
from shared.client.transport import REDACTED, Transport, origin

URL = "http://agent.test/"


def transport(answer: Callable[[httpx.Request], httpx.Response]) -> Transport:
    return Transport(http=httpx.Client(transport=httpx.MockTransport(answer)))


def test_a_json_rpc_error_names_its_code_and_message() -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "bad id"}}
    with pytest.raises(ClientError) as caught:
        transport(lambda r: httpx.Response(200, json=error)).call(URL, "GetTask", {}, "1.0")
    assert str(caught.value) == "GetTask: InvalidParamsError (-32602): bad id"
    assert caught.value.code == -32602
    assert caught.value.envelope() == {
        "error": {
            "code": "InvalidParamsError",
            "message": "GetTask: InvalidParamsError (-32602): bad id",
            "hint": None,
            "a2aCode": -32602,
        }
    }


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
            FROM.format(401) + ": no key",
        ),
        (
            httpx.Response(403, text="Forbidden"),
            FROM.format(403) + ": Forbidden",
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
        client.get_json("agent.test/card", "1.0")
    client.close()


def test_credentials_go_only_to_trusted_origins() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": {}})

    client = transport(answer)
    client.credentials = {"X-API-Key": "k", "Authorization": "Bearer t"}
    client.trusted = {"http://agent.test:80"}
    client.call("http://agent.test/rpc", "GetTask", {}, "1.0")
    for elsewhere in ("http://agent.test:8081/", "https://agent.test/", "http://evil.test/"):
        client.call(elsewhere, "GetTask", {}, "1.0")
    assert seen[0].headers["X-API-Key"] == "k" and seen[0].headers["Authorization"] == "Bearer t"
    for request in seen[1:]:
        assert "X-API-Key" not in request.headers and "Authorization" not in request.headers


def test_origins_are_compared_with_their_ports_written() -> None:
    assert (
        origin("http://Agent.Test/x") == origin("http://agent.test:80/y") == "http://agent.test:80"
    )
    assert origin("https://agent.test") == "https://agent.test:443"
    assert origin("http://[::1]:8080/") == "http://[::1]:8080"
    assert origin("file:///etc/passwd") is None and origin("not a url") is None


@pytest.mark.parametrize(
    ("credentials", "trusted", "expected"),
    [({}, set(), CREDENTIALS_MISSING), ({"X-API-Key": "k"}, {"http://agent.test:80"}, AUTH_FAILED)],
)
def test_a_401_says_whether_credentials_were_missing_or_refused(
    credentials: dict[str, str], trusted: set[str], expected: str
) -> None:
    client = transport(lambda r: httpx.Response(401, json={"error": "no"}))
    client.credentials, client.trusted = credentials, trusted
    with pytest.raises(ClientError) as caught:
        client.call(URL, "GetTask", {}, "1.0")
    assert caught.value.error == expected and caught.value.exit_status == 4


def test_a_401_from_an_untrusted_origin_names_the_flag_that_trusts_it() -> None:
    client = transport(lambda r: httpx.Response(401, json={"error": "no"}))
    client.credentials, client.trusted = {"X-API-Key": "k"}, {"http://card.test:80"}
    with pytest.raises(ClientError) as caught:
        client.call(URL, "GetTask", {}, "1.0")
    assert caught.value.error == CREDENTIALS_MISSING
    assert "--send-credentials-to http://agent.test:80" in str(caught.value.hint)


def test_the_debug_log_never_shows_a_credential_or_service_parameter() -> None:
    secrets = ("key-123", "tok-456", "svc-789")

    def answer(request: httpx.Request) -> httpx.Response:
        # An agent echoing them back: the log must not show them either.
        return httpx.Response(200, json={"jsonrpc": "2.0", "id": 1, "result": list(secrets)})

    log = io.StringIO()
    client = Transport(http=httpx.Client(transport=httpx.MockTransport(answer)), debug=log)
    client.headers = {"X-Trace": "svc-789"}
    client.credentials = {"X-API-Key": "key-123", "Authorization": "Bearer tok-456"}
    client.trusted = {"http://agent.test:80"}
    client.call(URL, "SendMessage", {"echo": list(secrets)}, "1.0")
    written = log.getvalue()
    assert "> POST http://agent.test/" in written and "< 200 after" in written
    assert written.count(REDACTED) >= 6
    for secret in secrets:
        assert secret not in written


def test_an_expired_deadline_is_a_timeout_before_any_request() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={})

    client = transport(answer)
    client.deadline = time.monotonic() - 1
    with pytest.raises(ClientError) as caught:
        client.call(URL, "GetTask", {}, "1.0")
    assert caught.value.error == TIMEOUT and caught.value.exit_status == 5 and seen == []


def test_an_agent_out_of_reach_is_unreachable() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with pytest.raises(ClientError) as caught:
        transport(refuse).call(URL, "GetTask", {}, "1.0")
    assert caught.value.error == UNREACHABLE and caught.value.exit_status == 3
