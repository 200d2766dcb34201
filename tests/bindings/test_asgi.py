"""The ASGI front's request, as the apps read it (shared/bindings/asgi.py): what uvicorn hands
over becomes the environ gunicorn made, so the apps read every request as they did."""

from __future__ import annotations

import asyncio
from typing import Any

import flask
from hypothesis import given
from hypothesis import strategies as st

from shared.bindings.asgi import declared_length, environ, read_body


def scope(
    path: str = "/", raw: bytes | None = None, query: bytes = b"", headers: Any = ()
) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "http_version": "1.1",
        "scheme": "http",
        "path": path,
        "raw_path": raw if raw is not None else path.encode(),
        "query_string": query,
        "root_path": "",
        "server": ("127.0.0.1", 8080),
        "client": ("10.0.0.7", 50000),
        "headers": list(headers),
    }


def test_the_request_reads_as_under_gunicorn() -> None:
    request = flask.Request(
        environ(
            scope(
                "/tasks/ä b",
                raw=b"/tasks/%C3%A4%20b",
                query=b"historyLength=2&x=%2F",
                headers=[
                    (b"host", b"agent.example:8080"),
                    (b"content-type", b"application/json"),
                    (b"content-length", b"2"),
                    (b"a2a-extensions", b"urn:a"),
                    (b"a2a-extensions", b"urn:b"),
                ],
            ),
            b"{}",
        )
    )
    assert request.path == "/tasks/ä b"
    assert request.environ["RAW_URI"] == "/tasks/%C3%A4%20b?historyLength=2&x=%2F"
    assert request.args.to_dict() == {"historyLength": "2", "x": "/"}
    assert request.host == "agent.example:8080"
    assert request.content_type == "application/json"
    assert request.content_length == 2
    assert request.get_data() == b"{}"
    assert request.headers.get("A2A-Extensions") == "urn:a,urn:b"  # repeated: joined
    assert request.remote_addr == "10.0.0.7"


def test_a_header_named_with_an_underscore_is_dropped() -> None:
    """As gunicorn drops it: X_Forwarded_Host would otherwise read as X-Forwarded-Host and
    choose the URL the agent card names."""
    made = environ(
        scope(headers=[(b"x_forwarded_host", b"evil.example"), (b"x-forwarded-proto", b"https")]),
        b"",
    )
    assert "HTTP_X_FORWARDED_HOST" not in made
    assert made["HTTP_X_FORWARDED_PROTO"] == "https"


def test_a_header_s_key_is_its_name_s_in_any_case_its_lines_joined() -> None:
    """Each name's key is made once (a bounded cache): the same in every case it comes in,
    and a name holding `_` is dropped however often it comes."""
    for _ in range(2):  # made, then found
        made = environ(
            scope(
                headers=[
                    (b"X-Trace-Me", b"1"),
                    (b"x-trace-me", b"2"),
                    (b"X_Trace_Me", b"3"),
                    (b"Content-Type", b"application/json"),
                ]
            ),
            b"",
        )
        assert made["HTTP_X_TRACE_ME"] == "1,2"
        assert made["CONTENT_TYPE"] == "application/json"
        assert "HTTP_CONTENT_TYPE" not in made


def test_a_body_not_read_is_no_body() -> None:
    """Declared over the limit, the body is left unread: the app refuses the length."""
    request = flask.Request(environ(scope(headers=[(b"content-length", b"99999999")]), None))
    assert request.content_length == 99999999
    assert request.get_data() == b""


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=40), st.integers(1, 16))
def test_the_body_is_read_up_to_one_byte_past_the_limit(
    body: bytes, limit: int, piece: int
) -> None:
    messages = [
        {"type": "http.request", "body": body[i : i + piece], "more_body": i + piece < len(body)}
        for i in range(0, len(body), piece)
    ] or [{"type": "http.request", "body": b"", "more_body": False}]
    pending = iter(messages)

    async def receive() -> dict[str, Any]:
        return next(pending, {"type": "http.disconnect"})

    read = asyncio.run(read_body(receive, limit))
    assert read == body[: limit + 1]


def test_a_declared_length_is_read_only_when_usable() -> None:
    assert declared_length(scope(headers=[(b"content-length", b"12")])) == 12
    assert declared_length(scope(headers=[(b"content-length", b"1e3")])) is None
    assert declared_length(scope()) is None


@given(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="?#"), max_size=30).map(
        lambda text: "/" + text
    ),
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z][a-z0-9-]{0,15}", fullmatch=True),
            st.binary(max_size=20).map(lambda value: value.replace(b"\r", b"").replace(b"\n", b"")),
        ),
        max_size=6,
    ),
)
def test_any_request_uvicorn_hands_over_reads_back(path: str, headers: list[Any]) -> None:
    encoded = [(name.encode(), value) for name, value in headers]
    request = flask.Request(environ(scope(path, headers=encoded), b""))
    assert request.path == path
    for name, value in headers:
        if name not in ("content-type", "content-length"):
            assert value.decode("latin-1") in (request.headers.get(name) or "")
