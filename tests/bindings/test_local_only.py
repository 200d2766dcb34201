"""An agent that asks no credentials (A2A_AUTH=none, `make run`) serves only this machine: a
rebound DNS name's Host, another page's Origin and a POST's body of no JSON type are refused,
in each binding's error shape (finding 3 of issue 25); one that asks credentials serves them."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.bindings.local_only import LONGEST_ADDRESS, _loopback, _loopback_address
from shared.identity.api_key import hashed
from tests.conftest import Client

REBOUND = {"Host": "rebind.attacker.example"}
CROSS_SITE = {"Origin": "https://attacker.example"}
JSON_TYPE = {"Content-Type": "application/json"}
SEND_V1 = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}}
SEND_V03 = {"message": {"messageId": "m-1", "role": "ROLE_USER", "content": [{"text": "hi"}]}}
RPC = {
    "jsonrpc": "2.0",
    "id": 7,
    "method": "message/send",
    "params": {
        "message": {
            "kind": "message",
            "messageId": "m-1",
            "role": "user",
            "parts": [{"kind": "text", "text": "hi"}],
        }
    },
}


def request(client: Client, binding: str, headers: dict[str, str]) -> httpx.Response:
    """The binding's request, with `headers` over a JSON body's type."""
    if binding == "seeds-sse":
        return client.http.get("/sse?taskId=nope", headers=headers)
    if binding == "card":
        return client.http.get("/.well-known/agent-card.json", headers=headers)
    path, body = {
        "jsonrpc": ("/", RPC),
        "rest-1.0": ("/message:send", SEND_V1),
        "rest-0.3": ("/v1/message:send", SEND_V03),
    }[binding]
    sent = {**JSON_TYPE, **headers}
    return client.http.post(path, content=json.dumps(body), headers=sent)


def refusal(response: httpx.Response, binding: str, status: int) -> str:
    """The refusal's message, after checking the binding's error shape; `status` is what the
    HTTP bindings answer (JSON-RPC answers -32005 with 200, as it answers it elsewhere)."""
    body: dict[str, Any] = response.json()
    if binding in ("jsonrpc", "seeds-sse"):
        assert body["jsonrpc"] == "2.0" and "result" not in body
        code = -32005 if status == 400 else -32600
        assert body["error"]["code"] == code
        expected = 200 if status == 400 else status
        assert response.status_code == expected, response.content
        message: str = body["error"]["message"]
        return message
    assert response.status_code == status, response.content
    if binding == "rest-0.3":  # v0.3's REST error: the JSON-RPC error object, bare
        assert body["code"] == (-32005 if status == 400 else -32600)
        message = body["message"]
        return message
    error = body["error"]  # 1.0's (and the card's): google.rpc.Status
    grpc = "INVALID_ARGUMENT" if status == 400 else "PERMISSION_DENIED"
    assert (error["code"], error["status"]) == (status, grpc)
    message = error["message"]
    return message


BINDINGS = ["jsonrpc", "rest-1.0", "rest-0.3", "seeds-sse", "card"]


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_rebound_dns_name_is_refused(client: Client, binding: str) -> None:
    message = refusal(request(client, binding, REBOUND), binding, 403)
    assert "rebind.attacker.example" in message and "A2A_AUTH=api-key" in message
    assert "localhost" in message  # the names it does serve


@pytest.mark.parametrize("binding", BINDINGS)
def test_a_page_of_another_origin_is_refused(client: Client, binding: str) -> None:
    message = refusal(request(client, binding, CROSS_SITE), binding, 403)
    assert "Origin: https://attacker.example" in message and "A2A_AUTH=api-key" in message
    # Another port of this machine is another page too (another local server's).
    other_port = refusal(
        request(client, binding, {"Origin": "http://localhost:3000"}), binding, 403
    )
    assert "http://localhost:3000" in other_port


@pytest.mark.parametrize("binding", ["jsonrpc", "rest-1.0", "rest-0.3"])
def test_a_post_without_a_json_type_is_refused(client: Client, binding: str) -> None:
    # A page's form or no-cors fetch sends text/plain, a form type, or (fetch) none.
    message = refusal(request(client, binding, {"Content-Type": ""}), binding, 400)
    assert "send Content-Type: application/json" in message and "none was sent" in message
    form = request(client, binding, {"Content-Type": "application/x-www-form-urlencoded"})
    assert "application/x-www-form-urlencoded" in refusal(form, binding, 400)


def test_the_request_is_refused_before_it_is_run(client: Client) -> None:
    for headers in (REBOUND, CROSS_SITE, {"Content-Type": ""}):
        request(client, "jsonrpc", headers)
    assert client.result("ListTasks", {}, version="1.0")["tasks"] == []


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Host": "localhost:8080"},
        {"Host": "127.0.0.1:9"},
        {"Host": "127.1.2.3"},
        {"Host": "[::1]:8080"},
        {"Host": "LOCALHOST"},
        {"Origin": "http://localhost"},  # the console's own fetches (same origin)
        {"Host": "127.0.0.1:8080", "Origin": "http://127.0.0.1:8080"},
        {"Content-Type": "application/a2a+json"},
        {"Content-Type": "application/json; charset=utf-8"},
    ],
)
@pytest.mark.parametrize("binding", BINDINGS)
def test_this_machines_callers_are_served(
    client: Client, binding: str, headers: dict[str, str]
) -> None:
    response = request(client, binding, headers)
    assert response.status_code in (200, 404), response.content  # the seeds' task: not found
    assert "A2A_AUTH" not in response.text


PEERS = ["10.0.0.5", "192.168.1.20", "8.8.8.8", "fe80::1", "2001:db8::5", "::ffff:10.0.0.5"]


@pytest.mark.parametrize("peer", PEERS)
@pytest.mark.parametrize("binding", BINDINGS)
def test_a_loopback_host_from_another_machine_is_refused(
    client: Client, binding: str, peer: str
) -> None:
    # Issue 36, item 4: any non-browser client writes `Host: localhost` itself; what says
    # the caller is this machine is the connection's own address (the scope's client).
    sent = request(client, binding, {"Host": "localhost:8080", "X-Forwarded-For": "127.0.0.1"})
    assert sent.status_code in (200, 404), sent.content  # the same request from loopback
    response = client.http.request(
        sent.request.method,
        sent.request.url,
        content=sent.request.content,
        headers=sent.request.headers,
        extensions={"client": (peer, 40000)},
    )
    message = refusal(response, binding, 403)
    assert f"not one from {peer}" in message and "A2A_AUTH=api-key" in message


@pytest.mark.parametrize("peer", ["127.0.0.1", "127.9.8.7", "::1", "::ffff:127.0.0.1"])
def test_every_loopback_peer_is_served(client: Client, peer: str) -> None:
    card = client.http.get("/.well-known/agent-card.json", extensions={"client": (peer, 1)})
    assert card.status_code == 200, card.content


def test_the_names_asked_about_are_parsed_once_and_kept_within_bounds() -> None:
    """Every request's peer and Host are asked whether they are the loopback: an address is
    parsed once and kept, at most 1,024 of them; a name too long to be an address (a Host
    of a caller's choosing) is neither parsed nor kept."""
    _loopback_address.cache_clear()
    assert not _loopback("127.0.0.1." + "1" * LONGEST_ADDRESS)
    assert _loopback_address.cache_info().currsize == 0
    assert [_loopback(name) for name in ("127.0.0.1", "[::1]", "::ffff:127.0.0.1", "10.0.0.1")] == [
        True,
        True,
        True,
        False,
    ]
    assert _loopback("127.0.0.1") and _loopback_address.cache_info().hits == 1
    for i in range(2000):
        assert not _loopback(f"10.0.{i // 256}.{i % 256}")
    assert _loopback_address.cache_info().currsize == 1024


def test_a_request_from_another_machine_is_refused_before_it_is_run(client: Client) -> None:
    sent = client.http.post(
        "/",
        content=json.dumps(RPC),
        headers={**JSON_TYPE, "Host": "localhost"},
        extensions={"client": ("10.0.0.5", 40000)},
    )
    assert sent.json()["error"]["code"] == -32600
    assert client.result("ListTasks", {}, version="1.0")["tasks"] == []


def test_a_request_without_a_peer_address_is_refused(client: Client) -> None:
    # A server that reports no peer (a Unix socket's): not known to be this machine.
    card = client.http.get("/.well-known/agent-card.json", extensions={"client": None})
    assert card.status_code == 403 and "an unknown address" in card.text


def test_an_empty_post_needs_no_type(client: Client) -> None:
    # REST's cancel and subscribe carry nothing but their path; clients send them so.
    for path in ("/tasks/nope:cancel", "/v1/tasks/nope:cancel"):
        assert client.http.post(path).status_code == 404
    assert (
        client.http.post("/tasks/nope:cancel", headers={"Content-Type": "text/plain"}).status_code
        == 400
    )


def test_the_public_urls_host_and_origin_are_served(make_client: Any) -> None:
    client = make_client(public_url="https://agent.example/a2a")
    headers = {"Host": "agent.example", "Origin": "https://agent.example"}
    card = client.http.get("/a2a/.well-known/agent-card.json", headers=headers)
    assert card.status_code == 200 and card.json()["url"] == "https://agent.example/a2a"
    sent = client.post(RPC, headers, path="/a2a")
    assert sent.json()["result"]["kind"] == "task", sent.content
    # Another page sent to its host is another page still.
    response = client.post(RPC, {**headers, "Origin": "https://attacker.example"}, path="/a2a")
    assert response.status_code == 403
    assert client.http.get("/", headers=REBOUND).status_code == 403
    # A published address is served whoever connects (a deployed agent's peer is the
    # platform's front end); a loopback name still is this machine's own alone.
    lan = {"client": ("10.0.0.5", 40000)}
    path = "/a2a/.well-known/agent-card.json"
    assert client.http.get(path, headers=headers, extensions=lan).status_code == 200
    local = {"Host": "localhost"}
    assert client.http.get(path, headers=local, extensions=lan).status_code == 403


def test_a_loopback_public_url_serves_loopback_peers_only(make_client: Any) -> None:
    # make dev's a2a: A2A_PUBLIC_URL=http://localhost:PORT/, listening on loopback.
    client = make_client(public_url="http://localhost:8080/")
    headers = {"Host": "localhost:8080"}
    card = client.http.get("/.well-known/agent-card.json", headers=headers)
    assert card.status_code == 200, card.content
    lan = {"client": ("192.168.1.20", 40000)}
    refused = client.http.get("/.well-known/agent-card.json", headers=headers, extensions=lan)
    assert refused.status_code == 403 and "not one from 192.168.1.20" in refused.text


def test_an_agent_that_asks_credentials_checks_none_of_it(make_client: Any) -> None:
    client = make_client(auth="api-key", api_keys={hashed("k1"): "alice"})
    key = {"X-API-Key": "k1"}
    for headers in (REBOUND, CROSS_SITE, {"Content-Type": ""}):
        response = request(client, "jsonrpc", {**key, **headers})
        assert response.status_code == 200, response.content
        assert response.json()["result"]["kind"] == "task"
    no_type = client.http.post("/message:send", content=json.dumps(SEND_V1), headers=key)
    assert no_type.status_code == 200, no_type.content  # a body's type defaults to JSON
    lan = client.http.post(
        "/",
        content=json.dumps(RPC),
        headers={**key, **JSON_TYPE},
        extensions={"client": ("10.0.0.5", 1)},
    )
    assert lan.status_code == 200 and lan.json()["result"]["kind"] == "task", lan.content


@settings(max_examples=200, deadline=None)
@given(
    host=st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), max_size=40),
    origin=st.none() | st.text(st.characters(min_codepoint=0x20, max_codepoint=0xFF), max_size=40),
    content_type=st.none()
    | st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=30),
)
def test_no_host_origin_or_type_gets_a_5xx(
    local_client: Client, host: str, origin: str | None, content_type: str | None
) -> None:
    headers = {"Host": host}
    if origin is not None:
        headers["Origin"] = origin
    if content_type is not None:
        headers["Content-Type"] = content_type
    response = local_client.http.post("/", content=json.dumps(RPC), headers=headers)
    assert response.status_code < 500, response.content
    assert "-32603" not in response.text


@pytest.fixture(scope="module")
def local_client() -> Any:
    """One client for the property test's examples (a fresh app each would be slow)."""
    from shared.app import build
    from shared.settings import Settings
    from shared.store.memory import MemoryTaskStore

    client = Client(build(Settings(handler="functions.handlers.sample"), store=MemoryTaskStore()))
    yield client
    client.http.close()
    client.app.close()
