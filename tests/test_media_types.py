"""An agent takes the parts its declarations name (A2A 1.0.1 S1 §5.4: another type is
ContentTypeNotSupportedError, -32005, HTTP 400), and any part when it declares none."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shared import media_types
from shared.errors import ContentTypeNotSupportedError
from shared.model import Message, Part, Role
from tests.conftest import Client

V1 = {"A2A-Version": "1.0"}
PNG = {"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "a.png"}


@pytest.fixture
def pictures(make_client: Callable[..., Client]) -> Client:
    return make_client(handler="tests.handlers.pictures")


def send(client: Client, *parts: dict[str, Any]) -> dict[str, Any]:
    message = {"messageId": "m1", "role": "ROLE_USER", "parts": list(parts)}
    return client.rpc("SendMessage", {"message": message}, version="1.0")


def test_declared_types_and_ranges_are_taken(pictures: Client) -> None:
    pdf = {"url": "https://example.com/a.pdf", "mediaType": "application/pdf"}
    answer = send(pictures, {"text": "look"}, PNG, pdf)
    text = answer["result"]["task"]["status"]["message"]["parts"][0]["text"]
    assert text == "text, image/png, application/pdf"  # image/* and the skill's own mode


def test_another_type_is_refused_before_anything_is_stored(pictures: Client) -> None:
    answer = send(pictures, {"text": "look"}, {"data": {"a": 1}})
    error = answer["error"]
    assert error["code"] == -32005
    assert "part 1 is application/json" in error["message"]
    assert "image/*" in error["message"] and "application/pdf" in error["message"]
    listed = pictures.rpc("ListTasks", {}, version="1.0")["result"]
    assert listed["tasks"] == []


def test_rest_refuses_it_with_400_content_type_not_supported(pictures: Client) -> None:
    body = {"message": {"messageId": "m2", "role": "ROLE_USER", "parts": [{"data": [1]}]}}
    response = pictures.http.post(
        "/message:send",
        content=json.dumps(body),
        headers={"Content-Type": "application/a2a+json", **V1},
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    assert error["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"


def test_an_agent_that_declares_nothing_takes_any_part(make_client: Any) -> None:
    echo = make_client(handler="functions.handlers.echo")
    answer = send(echo, {"data": {"a": 1}}, PNG)
    assert answer["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    card = echo.http.get("/.well-known/agent-card.json").json()
    assert card["defaultInputModes"] == ["text/plain"]  # what clients assume


def test_the_sample_takes_the_seeds_files(client: Client) -> None:
    pdf = {"raw": "JVBERi0=", "mediaType": "application/pdf"}
    answer = send(client, {"text": "Analyze the attached report"}, pdf)
    assert "result" in answer, answer


TYPES = st.from_regex(r"[a-z]{1,8}/[a-z0-9.+-]{1,12}", fullmatch=True)


@given(TYPES, st.sampled_from(["", "; charset=utf-8", ";q=1"]))
def test_a_range_takes_what_it_names(media_type: str, parameters: str) -> None:
    kind = media_type.split("/", maxsplit=1)[0]
    sent = media_type.upper() + parameters
    assert media_types.takes(frozenset({media_type}), sent)
    assert media_types.takes(frozenset({f"{kind}/*"}), sent)
    assert media_types.takes(frozenset({"*/*"}), sent)
    assert not media_types.takes(frozenset({f"{kind}x/*", f"{media_type}x"}), sent)


@given(st.text(max_size=300))
def test_any_part_type_is_taken_or_refused_with_a_bounded_message(media_type: str) -> None:
    message = Message(message_id="m", role=Role.USER, parts=(Part(url="u", media_type=media_type),))
    try:
        media_types.check(frozenset({"text/plain"}), message)
    except ContentTypeNotSupportedError as error:
        assert len(error.message) < 400
