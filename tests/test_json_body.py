"""The front door: every malformed body is a parse or invalid-request error, in each binding."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shared import json_body as body
from shared.errors import InvalidRequestError, JSONParseError
from tests.conftest import Client

V1 = {"A2A-Version": "1.0", "Content-Type": "application/json"}

PARSE_ERRORS = [
    b'{"jsonrpc": "2.0", "id": NaN, "method": "GetTask"}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"x": Infinity}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"x": -Infinity}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "\\ud800"}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"\\udfff": 1}}',
    b'{"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "a\\udc00\\ud800"}}',
    b'{"id": 1, "method": "GetTask", "params": {"id": "\xed\xa0\x80"}}',  # raw surrogate bytes
    b"\xef\xbb\xbf{}",  # a BOM
]
INVALID = [
    b"[" * 10_000 + b"]" * 10_000,
    b'{"a":' * 65 + b"1" + b"}" * 65,
    b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "GetTask"}',
    b"[" + b"0," * body.MAX_ITEMS + b"0]",
]


@pytest.mark.parametrize("data", PARSE_ERRORS)
def test_parse_errors(data: bytes) -> None:
    with pytest.raises(JSONParseError):
        body.parse(data)


@pytest.mark.parametrize("data", INVALID)
def test_invalid_requests(data: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        body.parse(data)


def test_error_messages_name_the_rule() -> None:
    with pytest.raises(InvalidRequestError, match="deeper than 64"):
        body.parse(b"[" * 65 + b"]" * 65)
    with pytest.raises(InvalidRequestError, match="'id' appears twice"):
        body.parse(b'{"id": 1, "id": 2}')
    with pytest.raises(JSONParseError, match="NaN is not JSON"):
        body.parse(b"[NaN]")
    with pytest.raises(JSONParseError, match="lone UTF-16 surrogate"):
        body.parse(b'["\\ud800"]')


def test_what_passes_is_plain_json() -> None:
    assert body.parse(b"[" * 64 + b"]" * 64) is not None  # exactly the limit
    # A valid pair, an escaped backslash before "ud800", brackets and quotes inside strings.
    data = b'{"a": "\\ud83d\\ude00", "b": "\\\\ud800", "c": "[[[{\\"", "d": [1.5, -2e3]}'
    assert body.parse(data) == {"a": "\U0001f600", "b": "\\ud800", "c": '[[[{"', "d": [1.5, -2e3]}
    assert body.parse(b'{"a": {"k": 1}, "b": {"k": 2}}') == {"a": {"k": 1}, "b": {"k": 2}}


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=5), c, max_size=4),
        max_leaves=30,
    )
)
def test_any_json_reads_back_or_is_refused_cleanly(value: Any) -> None:
    """Generated text may hold lone surrogates: those are refused, anything else round-trips."""
    data = json.dumps(value).encode()
    try:
        parsed = body.parse(data)
    except JSONParseError:
        with pytest.raises(UnicodeEncodeError):
            json.dumps(value, ensure_ascii=False).encode()
        return
    assert parsed == value


@settings(max_examples=300, derandomize=True, deadline=None)
@given(
    st.text(alphabet='[]{}",:\\ab', max_size=200)
    | st.integers(0, 80).map(lambda n: "[" * n + "]" * n)
    | st.integers(0, 80).map(lambda n: '{"a":' * n + "1" + "}" * n)
)
def test_a_small_body_skips_only_the_skeleton_it_would_pass(text: str) -> None:
    """The shape check's shortcut (few bytes, few brackets) leaves out the skeleton's pass
    only where the skeleton finds nothing to refuse."""
    try:
        body._check_skeleton(text)
        refused = False
    except InvalidRequestError:
        refused = True
    try:
        body._check_shape(text)
        assert not refused, "the shortcut let through what the skeleton refuses"
    except InvalidRequestError:
        assert refused


@pytest.mark.parametrize("data", PARSE_ERRORS + INVALID)
def test_jsonrpc_answers_each_in_its_code(client: Client, data: bytes) -> None:
    response = client.post(data)
    assert response.status_code == 200
    answer = json.loads(response.content)  # valid JSON: no NaN can come back
    assert answer["id"] is None
    expected = -32700 if data in PARSE_ERRORS else -32600
    assert answer["error"]["code"] == expected


@pytest.mark.parametrize("data", PARSE_ERRORS + INVALID)
def test_rest_answers_400(client: Client, data: bytes) -> None:
    response = client.http.post("/message:send", content=data, headers=V1)
    assert response.status_code == 400
    error = json.loads(response.content)["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    expected = "INVALID_JSON" if data in PARSE_ERRORS else "INVALID_REQUEST"
    assert error["details"][0]["reason"] == expected


def test_an_unsupported_content_type_with_a_deep_body_is_no_500(client: Client) -> None:
    response = client.post(b"[" * 10_000, headers={"Content-Type": "text/plain"})
    assert response.status_code == 200
    assert response.json()["error"]["code"] == -32005


def test_batches_are_capped(make_client: Any) -> None:
    small = make_client(max_batch=2)
    request = {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}
    assert len(small.post([request, request]).json()) == 2
    answer = small.post([request] * 3).json()
    assert answer["error"]["code"] == -32600
    assert "A2A_MAX_BATCH" in answer["error"]["message"]
    assert "3 requests; the limit is 2" in answer["error"]["message"]
    listed = small.result("ListTasks", {}, version="1.0")
    assert listed["totalSize"] == 0  # nothing of the refused batch ran


@pytest.mark.parametrize(
    "data",
    [
        b'"' + b'\\"' * 1_000_000,  # every quote escaped, never closed
        b'"' + b'\\"' * 1_000_000 + b"\\",
        b'"' * 2_000_000,
        b'{"a":' * 400_000,
    ],
)
def test_hostile_bodies_cost_linear_time(data: bytes) -> None:
    """2 MB that a scan retrying from every quote would take hours over: well under a second
    in one pass (the bound leaves room for a loaded machine)."""
    started = time.monotonic()
    with pytest.raises((JSONParseError, InvalidRequestError)):
        body.parse(data)
    assert time.monotonic() - started < 5
