"""The request as the apps read it (shared/bindings/wire.py): what uvicorn hands over reads as
the WSGI stack read it before (werkzeug, here the oracle), without it."""

from __future__ import annotations

import string
import time
from typing import Any

import werkzeug
from hypothesis import given
from hypothesis import strategies as st
from werkzeug.test import EnvironBuilder

from shared.bindings.wire import Answer, Headers, Request


def scope(
    *,
    path: str = "/",
    raw: bytes | None = None,
    query: bytes = b"",
    headers: Any = (),
    server: tuple[str, int | None] | None = ("127.0.0.1", 8080),
    scheme: str = "http",
) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "post",
        "http_version": "1.1",
        "scheme": scheme,
        "path": path,
        "raw_path": raw if raw is not None else path.encode(),
        "query_string": query,
        "root_path": "",
        "server": server,
        "client": ("10.0.0.7", 50000),
        "headers": list(headers),
    }


def request(body: bytes = b"", **kwargs: Any) -> Request:
    made = scope(**kwargs)
    return Request(made, Headers.of(made["headers"]), body)


def test_the_request_reads_as_under_gunicorn() -> None:
    read = request(
        b"{}",
        path="/tasks/ä b",
        raw=b"/tasks/%C3%A4%20b",
        query=b"historyLength=2&x=%2F&x=3",
        headers=[
            (b"host", b"agent.example:8080"),
            (b"content-type", b"application/json"),
            (b"content-length", b"2"),
            (b"a2a-extensions", b"urn:a"),
            (b"a2a-extensions", b"urn:b"),
        ],
    )
    assert read.method == "POST"
    assert read.path == "/tasks/ä b"
    assert read.raw_path == "/tasks/%C3%A4%20b"
    assert read.args == {"historyLength": "2", "x": "/"}  # a name's first value
    assert read.query("x") == "/" and read.query("missing") is None
    assert read.host == "agent.example:8080"
    assert read.scheme == "http"
    assert read.headers.get("Content-Type") == "application/json"
    assert read.headers.declared_length() == 2
    assert read.body == b"{}"
    assert read.headers.get("A2A-Extensions") == "urn:a,urn:b"  # repeated: joined
    assert read.headers.values("a2a-extensions") == ["urn:a,urn:b"]
    assert read.headers.values("X-A2A-Extensions") == []
    assert read.remote_addr == "10.0.0.7"


def test_a_header_named_with_an_underscore_is_dropped() -> None:
    """As gunicorn drops it: X_Forwarded_Host would otherwise read as X-Forwarded-Host and
    choose the URL the agent card names."""
    read = request(
        headers=[(b"x_forwarded_host", b"evil.example"), (b"X-Forwarded-Proto", b"https")]
    )
    assert read.headers.get("X-Forwarded-Host") is None
    assert read.headers.get("x_forwarded_host") is None
    assert read.headers.get("X-Forwarded-Proto") == "https"


def test_a_header_is_its_name_s_in_any_case_its_lines_joined() -> None:
    read = request(headers=[(b"X-Trace-Me", b"1"), (b"x-trace-me", b"2"), (b"X_Trace_Me", b"3")])
    assert read.headers.get("x-TRACE-me") == "1,2"


def test_one_name_repeated_many_times_is_joined_in_linear_time() -> None:
    """Issue 36 item 3: 60,000 lines of one name (1.7 MB) took 17.8 s of the loop's CPU when
    each repeat copied the value so far; joined once, they take milliseconds."""
    lines = [(b"X-Pad", b"p" * 20)] * 60_000
    started = time.process_time()
    joined = Headers.of(lines).get("x-pad")
    assert time.process_time() - started < 1.0
    assert joined == ",".join(["p" * 20] * 60_000)


def test_a_declared_length_is_read_only_when_usable() -> None:
    def declared(*lines: tuple[bytes, bytes]) -> int | None:
        return Headers.of(lines).declared_length()

    assert declared((b"content-length", b"12")) == 12
    assert declared((b"content-length", b"1e3")) is None
    assert declared((b"content-length", "²".encode("latin-1"))) is None  # a digit, not ASCII
    assert declared((b"content-length", b"12"), (b"transfer-encoding", b"chunked")) is None
    assert declared() is None


def test_the_host_is_the_header_s_or_the_server_s_without_the_default_port() -> None:
    assert request(headers=[(b"host", b"agent.example:80")]).host == "agent.example"
    assert request(headers=[(b"host", b"agent.example:443")]).host == "agent.example:443"
    assert request(headers=[(b"host", b"a.example:443")], scheme="https").host == "a.example"
    assert request().host == "127.0.0.1:8080"
    assert request(server=("::1", 8080)).host == "[::1]:8080"
    assert request(server=None).host == ""
    assert request(server=("/run/socket", None)).host == ""
    for junk in (b"evil.example/x", b'a"b', b"a.example:99999", b"", b"a.example:0"):
        assert request(headers=[(b"host", junk)]).host == "", junk


def test_an_answer_closes_once() -> None:
    closed: list[int] = []
    answer = Answer(200, chunks=iter([b"x"]), close=lambda: closed.append(1))
    answer.close()
    answer.close()
    assert closed == [1]
    Answer(204).close()  # whole: nothing to let go of


NAMES = ["Content-Type", "Content-Length", "A2A-Extensions", "Host", "traceparent", "X_Y"]
names = st.sampled_from(NAMES) | st.text(string.ascii_letters + "-_", min_size=1, max_size=12)
header_lists = st.lists(st.tuples(names, st.text(string.printable.strip(), max_size=20)))
queries = st.sampled_from(["", "a=1", "A2A-Version=1.0&a=2&a=3", "a", "a=%2F+b", "=x&&b="])


def gunicorn_environ(lines: list[tuple[str, str]], query: str) -> dict[str, Any]:
    """The WSGI environ gunicorn made of a request: a header under HTTP_<NAME> (the body's two
    without the prefix), its lines joined with commas, a name holding `_` dropped."""
    environ: dict[str, Any] = {
        **EnvironBuilder().get_environ(),
        "QUERY_STRING": query,
        "SERVER_NAME": "localhost",
        "SERVER_PORT": "80",
    }
    del environ["HTTP_HOST"]
    for name, value in lines:
        if "_" in name:
            continue
        key = name.upper().replace("-", "_")
        key = key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key
        environ[key] = environ[key] + "," + value if key in environ else value
    return environ


# The apps ask for header names as HTTP spells them (werkzeug read `X_Y` as `X-Y`'s key).
asked_names = names.filter(lambda name: "_" not in name)


@given(sent=header_lists, asked=asked_names, query=queries)
def test_every_read_agrees_with_werkzeug(
    sent: list[tuple[str, str]], asked: str, query: str
) -> None:
    """Headers, the query and the host read as werkzeug read them from gunicorn's environ."""
    oracle = werkzeug.Request(gunicorn_environ(sent, query))
    lines = [(name.encode(), value.encode()) for name, value in sent]
    read = request(query=query.encode(), headers=lines, server=("localhost", 80))
    assert read.headers.get(asked) == oracle.headers.get(asked)
    for name in ("a", "b", "", "A2A-Version", "missing"):
        assert read.query(name) == (oracle.args.get(name) if query else None)
    assert read.args == oracle.args.to_dict()
    assert read.host == oracle.host


@given(
    st.text(st.characters(exclude_categories=["Cs"], exclude_characters="?#"), max_size=30).map(
        lambda text: "/" + text
    ),
    st.lists(
        st.tuples(
            st.from_regex(r"[a-zA-Z][a-zA-Z0-9_-]{0,15}", fullmatch=True),
            st.binary(max_size=20).map(lambda value: value.replace(b"\r", b"").replace(b"\n", b"")),
        ),
        max_size=6,
    ),
)
def test_any_request_uvicorn_hands_over_reads_back(path: str, headers: list[Any]) -> None:
    read = request(path=path, headers=[(name.encode(), value) for name, value in headers])
    assert read.path == "/" + path.lstrip("/")  # its leading slashes one, as werkzeug made them
    for name, value in headers:
        got = read.headers.get(name)
        if "_" in name:
            assert got is None
        else:
            assert got is not None and value.decode("latin-1") in got
