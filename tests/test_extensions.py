"""Extensions: the A2A-Extensions header's parser and limits, activation of the agent's own,
the echo, the refusal of a message that leaves out a required one (1.0, 0.3, 0.1; JSON-RPC and
REST), the extensions a turn sees (in the request and on the worker), and the card's list."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from a2a.types import a2a_pb2
from hypothesis import given
from hypothesis import strategies as st

from shared import extensions
from shared.agent import Extension
from shared.errors import ExtensionSupportRequiredError, InvalidRequestError
from shared.model import Message, Part, Role, TaskState
from tests import schema, sse
from tests.conftest import Client, wait_for_state
from tests.handlers.extensions import EXTENSIONS
from tests.test_ids import text_id

# Every answer these tests get is valid in its version's official schema.
pytestmark = pytest.mark.usefixtures("schema_checked")

REQUIRED, OPTIONAL = (e.uri for e in EXTENSIONS)
HANDLER = "tests.handlers.extensions"
V1 = {"A2A-Version": "1.0"}
CARD = "/.well-known/agent-card.json"


def _user_message(*extensions: str) -> Message:
    return Message(message_id="m", role=Role.USER, parts=(Part(text="hi"),), extensions=extensions)


# -- the header ----------------------------------------------------------------------------

# What a URI in a header may be: visible ASCII, no comma (the list separator).
_uri = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters=","))
_uris = st.lists(_uri.filter(bool), max_size=extensions.MAX_URIS)
_ows = st.sampled_from(["", " ", "\t", "  "])


@given(_uris, st.data())
def test_the_header_names_its_uris_however_they_are_spread_and_spaced(
    uris: list[str], data: st.DataObject
) -> None:
    elements = [data.draw(_ows) + uri + data.draw(_ows) for uri in uris]
    elements += [data.draw(_ows)] * data.draw(st.integers(0, 2))  # empty elements are allowed
    elements = data.draw(st.permutations(elements))
    cut = data.draw(st.integers(0, len(elements)))
    lines = [",".join(elements[:cut]), ",".join(elements[cut:])]  # over two header lines
    assert extensions.requested(lines) == frozenset(uris)


@given(st.lists(st.text(max_size=300), max_size=8))
def test_any_header_value_gives_uris_or_a_client_error(values: list[str]) -> None:
    try:
        uris = extensions.requested(values)
    except InvalidRequestError as error:
        assert "the limit is" in error.message
    else:
        assert all(uri and uri == uri.strip(" \t") and "," not in uri for uri in uris)


def test_too_many_uris_or_characters_are_refused_naming_the_limit() -> None:
    many = ",".join(f"urn:x:{i}" for i in range(extensions.MAX_URIS + 1))
    with pytest.raises(InvalidRequestError, match=r"names 65 extensions; the limit is 64"):
        extensions.requested([many])
    extensions.requested([many.rsplit(",", 1)[0]])  # exactly the limit is served
    long = "urn:" + "x" * extensions.MAX_HEADER_CHARS
    with pytest.raises(InvalidRequestError, match=r"characters; the limit is 16384"):
        extensions.requested([long])


DECLARED = (
    Extension(uri="urn:a", required=True),
    Extension(uri="urn:b"),
    Extension(uri="urn:c", required=True),
)


def _headers(**values: list[str]) -> Any:
    named = {k.replace("_", "-").lower(): v for k, v in values.items()}
    return lambda name: named.get(name.lower(), [])


def test_activation_takes_the_declared_ones_in_their_order_and_names_the_missing() -> None:
    activation = extensions.activate(DECLARED, _headers(A2A_Extensions=["urn:zz, urn:b,urn:a"]))
    assert activation.active == ("urn:a", "urn:b")
    assert activation.missing == ("urn:c",)
    assert activation.echo() == {"A2A-Extensions": "urn:a,urn:b"}
    with pytest.raises(ExtensionSupportRequiredError) as refused:
        activation.require("1.0")
    assert refused.value.code == -32008
    assert "urn:c" in refused.value.message and "A2A-Extensions" in refused.value.message


def test_the_legacy_header_counts_and_is_echoed_under_its_own_name() -> None:
    activation = extensions.activate(
        DECLARED, _headers(X_A2A_Extensions=["urn:a"], A2A_Extensions=["urn:c"])
    )
    assert activation.missing == ()
    activation.require("0.3")
    assert activation.echo() == {"A2A-Extensions": "urn:a,urn:c", "X-A2A-Extensions": "urn:a,urn:c"}


def test_nothing_activated_echoes_nothing_and_records_nothing() -> None:
    activation = extensions.activate(DECLARED[1:2], _headers(A2A_Extensions=["urn:zz"]))
    assert activation.echo() == {}
    message = _user_message()
    assert activation.record(message) is message


def test_a_v01_client_gets_an_invalid_request_since_its_spec_gave_32008_another_meaning() -> None:
    activation = extensions.activate(DECLARED, _headers())
    with pytest.raises(InvalidRequestError) as refused:
        activation.require("0.1")
    assert refused.value.code == -32600 and "urn:a, urn:c" in refused.value.message


def test_recording_adds_the_activated_ones_once() -> None:
    activation = extensions.activate(DECLARED, _headers(A2A_Extensions=["urn:a,urn:b,urn:c"]))
    message = _user_message("urn:b", "urn:other")
    assert activation.record(message).extensions == ("urn:b", "urn:other", "urn:a", "urn:c")


# -- over the bindings ---------------------------------------------------------------------


def _message(text: str) -> dict[str, Any]:
    return {"messageId": text_id(text), "role": "ROLE_USER", "parts": [{"text": text}]}


def _v03_message(text: str) -> dict[str, Any]:
    return {
        "kind": "message",
        "messageId": text_id(text),
        "role": "user",
        "parts": [{"kind": "text", "text": text}],
    }


def _rpc(client: Client, method: str, params: Any, **headers: str) -> httpx.Response:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response: httpx.Response = client.post(body, headers)
    return response


def _rest(client: Client, path: str, body: Any, **headers: str) -> httpx.Response:
    hdrs = {"Content-Type": "application/json", **V1, **headers}
    return client.http.post(path, content=json.dumps(body), headers=hdrs)


def _artifact_text(task: dict[str, Any]) -> str:
    text: str = task["artifacts"][0]["parts"][0]["text"]
    return text


ASKED = {"A2A-Extensions": f"urn:unknown:x, {OPTIONAL},{REQUIRED}"}


@pytest.fixture
def agent(make_client: Any) -> Client:
    client: Client = make_client(handler=HANDLER)
    return client


def test_jsonrpc_1_0_activates_echoes_and_hands_the_turn_its_extensions(agent: Client) -> None:
    response = _rpc(agent, "SendMessage", {"message": _message("hi")}, **V1, **ASKED)
    task = response.json()["result"]["task"]
    assert _artifact_text(task) == "\n".join(sorted([REQUIRED, OPTIONAL]))
    # The activated ones, in the card's order; the unknown one is ignored, not echoed.
    assert response.headers["A2A-Extensions"] == f"{REQUIRED},{OPTIONAL}"
    assert "X-A2A-Extensions" not in response.headers
    # The message is recorded with them: its history shows what it was sent under.
    stored = agent.result("GetTask", {"id": task["id"]}, version="1.0")
    assert stored["history"][0]["extensions"] == [REQUIRED, OPTIONAL]


def test_an_optional_extension_not_asked_for_is_simply_inactive(agent: Client) -> None:
    response = _rpc(
        agent, "SendMessage", {"message": _message("hi")}, **V1, **{"A2A-Extensions": REQUIRED}
    )
    assert _artifact_text(response.json()["result"]["task"]) == REQUIRED
    assert response.headers["A2A-Extensions"] == REQUIRED


@pytest.mark.parametrize(
    ("method", "headers", "params"),
    [
        ("SendMessage", V1, {"message": _message("hi")}),
        ("SendStreamingMessage", V1, {"message": _message("hi")}),
        ("message/send", {}, {"message": _v03_message("hi")}),
        ("message/stream", {}, {"message": _v03_message("hi")}),
    ],
)
def test_a_message_without_a_required_extension_is_refused_with_32008(
    agent: Client, method: str, headers: dict[str, str], params: Any
) -> None:
    unknown_only = {"A2A-Extensions": "urn:unknown:x", "X-A2A-Extensions": OPTIONAL}
    for asked in ({}, unknown_only):
        response = _rpc(agent, method, params, **headers, **asked)
        assert (
            response.status_code == 200 and response.headers["Content-Type"] == "application/json"
        )
        error = response.json()["error"]
        assert error["code"] == -32008
        assert REQUIRED in error["message"]
        header = "A2A-Extensions" if method[0].isupper() else "X-A2A-Extensions"
        assert f"send {header}: {REQUIRED}" in error["message"]
    if method[0].isupper():  # 1.0: the ErrorInfo names the reason
        assert error["data"][0]["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    assert agent.http.get("/tasks", headers=V1).json()["tasks"] == []  # nothing stored


def test_a_v01_send_without_it_is_an_invalid_request(agent: Client) -> None:
    params = {"id": "t-01", "message": {"role": "user", "parts": [{"type": "text", "text": "x"}]}}
    error = agent.error("tasks/send", params)
    assert error["code"] == -32600 and REQUIRED in error["message"]


def test_jsonrpc_0_3_reads_the_legacy_header_and_echoes_it(agent: Client) -> None:
    response = _rpc(
        agent, "message/send", {"message": _v03_message("hi")}, **{"X-A2A-Extensions": REQUIRED}
    )
    result = response.json()["result"]
    assert result["kind"] == "task" and _artifact_text(result) == REQUIRED
    assert response.headers["X-A2A-Extensions"] == REQUIRED
    assert "A2A-Extensions" not in response.headers


def test_rest_activates_echoes_and_refuses_like_jsonrpc(agent: Client) -> None:
    served = _rest(agent, "/message:send", {"message": _message("hi")}, **ASKED)
    assert served.status_code == 200
    assert _artifact_text(served.json()["task"]) == "\n".join(sorted([REQUIRED, OPTIONAL]))
    assert served.headers["A2A-Extensions"] == f"{REQUIRED},{OPTIONAL}"
    refused = _rest(agent, "/message:send", {"message": _message("hi")})
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["status"] == "FAILED_PRECONDITION"
    assert error["details"][0]["reason"] == "EXTENSION_SUPPORT_REQUIRED"
    streamed = _rest(agent, "/message:stream", {"message": _message("s")})
    assert (
        streamed.status_code == 400 and streamed.headers["Content-Type"] == "application/a2a+json"
    )


def test_a_stream_echoes_its_extensions(agent: Client) -> None:
    response = _rest(agent, "/message:stream", {"message": _message("s")}, **ASKED)
    assert response.headers["Content-Type"].startswith("text/event-stream")
    assert response.headers["A2A-Extensions"] == f"{REQUIRED},{OPTIONAL}"
    frames = [e.data for e in sse.parse(response.text)]
    artifact = next(f["artifactUpdate"]["artifact"] for f in frames if "artifactUpdate" in f)
    assert artifact["parts"][0]["text"] == "\n".join(sorted([REQUIRED, OPTIONAL]))


def test_reads_are_not_refused(agent: Client) -> None:
    sent = _rpc(agent, "SendMessage", {"message": _message("hi")}, **V1, **ASKED)
    task_id = sent.json()["result"]["task"]["id"]
    assert agent.result("GetTask", {"id": task_id}, version="1.0")["id"] == task_id
    listed = agent.http.get("/tasks", headers=V1)
    assert listed.status_code == 200 and "A2A-Extensions" not in listed.headers


def test_a_turn_on_the_worker_sees_the_extensions_of_its_request(agent: Client) -> None:
    params = {"message": _message("later"), "configuration": {"returnImmediately": True}}
    response = _rpc(agent, "SendMessage", params, **V1, **{"A2A-Extensions": REQUIRED})
    task_id = response.json()["result"]["task"]["id"]
    wait_for_state(agent.app.service.ports.store, "anonymous", task_id, TaskState.COMPLETED)
    task = agent.result("GetTask", {"id": task_id}, version="1.0")
    assert _artifact_text(task) == REQUIRED


def test_an_agent_without_extensions_ignores_the_header(client: Client) -> None:
    response = _rpc(
        client, "SendMessage", {"message": _message("hi")}, **V1, **{"A2A-Extensions": "urn:x"}
    )
    assert "result" in response.json()
    assert "A2A-Extensions" not in response.headers


@pytest.mark.parametrize(
    "value",
    [
        ",".join(f"urn:x:{i}" for i in range(extensions.MAX_URIS + 1)),
        "urn:" + "x" * extensions.MAX_HEADER_CHARS,
    ],
)
def test_a_header_over_its_limits_is_a_client_error_on_every_binding(
    agent: Client, value: str
) -> None:
    header = {"A2A-Extensions": value}
    rpc = _rpc(agent, "SendMessage", {"message": _message("hi")}, **V1, **header)
    assert rpc.status_code == 400
    error = rpc.json()["error"]
    assert error["code"] == -32600 and "the limit is" in error["message"]
    rest = _rest(agent, "/message:send", {"message": _message("hi")}, **header)
    assert rest.status_code == 400
    assert rest.json()["error"]["status"] == "INVALID_ARGUMENT"
    seeds = agent.http.get("/sse?taskId=t", headers=header)
    assert seeds.status_code == 400 and seeds.json()["error"]["code"] == -32600


def test_garbage_in_the_header_is_ignored(agent: Client) -> None:
    garbage = "\x7f\x01,,;;==,\u00ff\u00e9, ,\t,%00"
    response = _rpc(
        agent, "SendMessage", {"message": _message("hi")}, **V1, **{"A2A-Extensions": garbage}
    )
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32008  # still missing the required one


# -- the card ------------------------------------------------------------------------------


@pytest.mark.parametrize("style", ["hybrid", "v1"])
def test_the_card_lists_the_extensions_in_every_style(make_client: Any, style: str) -> None:
    card = make_client(handler=HANDLER, card_style=style).http.get(CARD).json()
    *declared, kit = card["capabilities"]["extensions"]
    assert kit["uri"] == extensions.DELIVERY_STATUS.uri  # the kit's own, after the module's
    assert declared == [
        {"uri": REQUIRED, "description": "Messages are signed", "required": True},
        {
            "uri": OPTIONAL,
            "description": "Locations",  # not required: ProtoJSON leaves out a false bool
            "params": {"units": "metric"},
        },
    ]
    if style == "v1":
        schema.check_v1(a2a_pb2.AgentCard, card)
    else:
        schema.check_v0_3("AgentCard", card)


def test_a_card_without_extensions_has_no_list(make_client: Any) -> None:
    client = make_client(push_notifications=False)  # the kit's extension comes with push
    assert "extensions" not in client.http.get(CARD).json()["capabilities"]
