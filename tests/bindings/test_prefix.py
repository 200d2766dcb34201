"""Served under a path (A2A_PUBLIC_URL=https://agent.example/agents/x): the card names it, and
every route answers with it (as a load balancer forwards) and without it (as a proxy that
takes it off forwards); hostile paths get clean 400s and 404s."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import requests

from tests import sse
from tests.conftest import Client, Server

pytestmark = pytest.mark.usefixtures("schema_checked")

PUBLIC = "https://agent.example/agents/x"
PREFIXES = ["/agents/x", ""]  # as the request arrives: with the path, or with it taken off
# A body's type, which a local agent (A2A_AUTH=none) asks of every POST with a body.
JSON_BODY = {"Content-Type": "application/json"}


@pytest.fixture
def served(make_client: Any) -> Client:
    client: Client = make_client(public_url=PUBLIC)
    return client


def post(client: Client, path: str, body: Any, **headers: str) -> httpx.Response:
    hdrs = {"Content-Type": "application/json", **headers}
    return client.http.post(path, content=json.dumps(body), headers=hdrs)


def rpc_send(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": f"m-{text}",
                "role": "user",
                "parts": [{"kind": "text", "text": text}],
            }
        },
    }


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_card_names_the_public_url_with_its_path(served: Client, prefix: str) -> None:
    card = served.http.get(f"{prefix}/.well-known/agent-card.json").json()
    assert card["url"] == PUBLIC
    assert {i["url"] for i in card["supportedInterfaces"]} == {PUBLIC}
    assert card["additionalInterfaces"] == [
        {"url": PUBLIC, "transport": "JSONRPC"},
        {"url": PUBLIC, "transport": "HTTP+JSON"},
    ]


@pytest.mark.parametrize("prefix", PREFIXES)
def test_json_rpc_at_the_public_url(served: Client, prefix: str) -> None:
    for path in (prefix or "/", f"{prefix}/"):
        answer = post(served, path, rpc_send("hello")).json()
        assert answer["result"]["status"]["state"] == "completed", answer


@pytest.mark.parametrize("prefix", PREFIXES)
def test_both_rest_bindings_under_the_path(served: Client, prefix: str) -> None:
    v1 = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    task = post(served, f"{prefix}/message:send", {"message": v1}, **{"A2A-Version": "1.0"})
    assert task.status_code == 200, task.content
    task_id = task.json()["task"]["id"]
    got = served.http.get(f"{prefix}/tasks/{task_id}", headers={"A2A-Version": "1.0"})
    assert got.json()["status"]["state"] == "TASK_STATE_COMPLETED"
    v03 = {"messageId": "m2", "role": "ROLE_USER", "content": [{"text": "hi"}]}
    sent = post(
        served, f"{prefix}/v1/message:send", {"message": v03, "configuration": {"blocking": True}}
    )
    assert sent.status_code == 200, sent.content
    read = served.http.get(f"{prefix}/v1/tasks/{sent.json()['task']['id']}").json()
    assert read["status"]["state"] == "TASK_STATE_COMPLETED"
    assert served.http.get(f"{prefix}/v1/nowhere").status_code == 404


@pytest.mark.parametrize("prefix", PREFIXES)
def test_the_seeds_event_stream_under_the_path(served: Client, prefix: str) -> None:
    done = post(served, prefix or "/", rpc_send("hello")).json()["result"]
    response = served.http.get(f"{prefix}/sse?taskId={done['id']}")
    assert response.status_code == 200, response.content
    (final,) = sse.parse(response.text)
    assert final.event == "task_update" and final.data["state"] == "completed"


def test_a_path_that_only_starts_like_the_prefix_keeps_it(served: Client) -> None:
    # /agents/xy is not /agents/x: nothing is taken off, and no route has that path.
    assert served.http.get("/agents/xy/v1/card").status_code == 404
    assert served.http.get("/agents/x").status_code == 405  # the root: POST JSON-RPC here


@pytest.mark.parametrize(
    "path",
    [
        "/agents/x/../v1/card",
        "/agents/x/./message:send",
        "/agents/x/%2e%2e/v1/card",
        "/agents/x/v1/tasks/a%2Fb",
        "/agents/x/v1/tasks/a%2fb:cancel",
        "/agents/x/tasks/%2E%2E/x:cancel",
    ],
)
@pytest.mark.parametrize("method", ["GET", "POST"])
def test_dot_segments_and_encoded_slashes_are_400(served: Client, path: str, method: str) -> None:
    # No route takes them, and a POST is not taken for JSON-RPC either.
    response = served.http.request(method, path, content=b"{}", headers=JSON_BODY)
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and "path" in error["message"]


def test_a_dot_segment_as_an_id_gets_the_id_rule(served: Client) -> None:
    for path in ("/agents/x/v1/tasks/..", "/v1/tasks/.", "/agents/x/tasks/.."):
        response = served.http.get(path)
        assert response.status_code == 400, response.content
        assert "'params.id'" in response.text


@pytest.mark.parametrize("method", ["GET", "POST", "DELETE"])
def test_a_very_long_path_is_refused_cleanly(served: Client, method: str) -> None:
    for path in (f"/agents/x/v1/tasks/{'a' * 20_000}", f"/agents/x/v1/{'a/' * 5_000}card"):
        response = served.http.request(method, path, content=b"{}", headers=JSON_BODY)
        assert response.status_code in (400, 404, 405), response.content[:300]
        assert len(response.content) < 2_000  # the path is not echoed back whole


def test_over_a_real_server(start_server: Any) -> None:
    server: Server = start_server(A2A_PUBLIC_URL=PUBLIC)
    card = requests.get(f"{server.url}/agents/x/.well-known/agent-card.json", timeout=10).json()
    assert card["url"] == PUBLIC
    answer = server.rpc(rpc_send("hello"), path="/agents/x")
    assert answer["result"]["status"]["state"] == "completed"
    # gunicorn's raw path: an encoded slash is seen even though the path is decoded.
    refused = requests.get(f"{server.url}/agents/x/v1/tasks/a%2Fb", timeout=10)
    assert refused.status_code == 400
