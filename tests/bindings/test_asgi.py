"""The functions' front (shared/bindings/asgi.py) as uvicorn drives it: the body read on the
loop within the limit, the app run on the pool, its answer written as werkzeug wrote it, and
a stream made one chunk at a time, closed on its own thread however it ends."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator, MutableMapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.bindings.asgi import Front, read_body
from shared.bindings.wire import Answer, Request

Message = MutableMapping[str, Any]


def scope(method: str = "GET", headers: Any = ()) -> dict[str, Any]:
    return {
        "type": "http",
        "method": method,
        "scheme": "http",
        "path": "/",
        "raw_path": b"/",
        "query_string": b"",
        "server": ("127.0.0.1", 8080),
        "client": ("127.0.0.1", 50000),
        "headers": list(headers),
    }


def serve(
    answer: Any, method: str = "GET", headers: Any = (), body: bytes = b"", max_body: int = 100
) -> tuple[list[Message], list[Request]]:
    """What the front sends for one request to an app answering `answer(request)`; and the
    requests the app got."""
    seen: list[Request] = []

    def app(request: Request) -> Answer:
        seen.append(request)
        made: Answer = answer(request)
        return made

    sent: list[Message] = []
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def receive() -> Message:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    front = Front(lambda: app, 2, max_body)
    asyncio.run(front(scope(method, headers), receive, send))
    return sent, seen


def card(request: Request) -> Answer:
    return Answer(200, {"Content-Type": "application/json", "ETag": '"x"'}, b'{"a":1}')


def test_a_whole_answer_has_its_length_and_a_head_the_same_headers_without_a_body() -> None:
    got, _ = serve(card)
    head, _ = serve(card, "HEAD")
    assert got[0]["headers"] == head[0]["headers"]
    assert (b"content-length", b"7") in got[0]["headers"]
    assert (b"etag", b'"x"') in got[0]["headers"]
    assert [m["body"] for m in got[1:]] == [b'{"a":1}']
    assert [m["body"] for m in head[1:]] == [b""]


def test_no_body_and_no_length_on_a_204_or_a_304() -> None:
    for status in (204, 304):
        sent, _ = serve(lambda request, status=status: Answer(status, {"ETag": '"x"'}))
        assert sent[0]["status"] == status
        assert not any(name == b"content-length" for name, _ in sent[0]["headers"])
        assert [m["body"] for m in sent[1:]] == [b""]


def test_a_body_declared_over_the_limit_is_not_read() -> None:
    _, [request] = serve(card, "POST", [(b"content-length", b"101")], body=b"x" * 101)
    assert request.body == b"" and request.headers.declared_length() == 101
    _, [request] = serve(card, "POST", [(b"content-length", b"100")], body=b"x" * 100)
    assert request.body == b"x" * 100


class Chunks:
    """A stream that records, for each chunk, how many chunks were written before it was
    made, and the thread that made and closed it."""

    def __init__(self, count: int, sent: list[Message]) -> None:
        self.count = count
        self.sent = sent
        self.written_before: list[int] = []
        self.threads: set[int] = set()
        self.closed_on: int | None = None

    def __iter__(self) -> Iterator[bytes]:
        for number in range(self.count):
            self.threads.add(threading.get_ident())
            self.written_before.append(sum(1 for m in self.sent if m.get("more_body")))
            yield f"{number}".encode()

    def close(self) -> None:
        self.closed_on = threading.get_ident()


def stream(
    count: int, method: str = "GET", leave_after: int | None = None, cancel_after: int | None = None
) -> Any:
    """Serve a stream of `count` chunks; the client leaves after `leave_after` of them, or
    the server cancels the request after `cancel_after`."""
    sent: list[Message] = []
    chunks = Chunks(count, sent)
    left = asyncio.Event()  # the client goes
    heard = asyncio.Event()  # and the front was told

    def app(request: Request) -> Answer:
        return Answer(
            200, {"Content-Type": "text/event-stream"}, chunks=iter(chunks), close=chunks.close
        )

    body = [{"type": "http.request", "body": b"", "more_body": False}]

    async def receive() -> Message:
        if body:
            return body.pop()
        await left.wait()
        heard.set()
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        sent.append(message)
        written = sum(1 for m in sent if m.get("more_body"))
        if written == leave_after:  # the client leaves while this chunk is written
            left.set()
            await heard.wait()
        if written == cancel_after:  # the server cancels the request's task (this one)
            task = asyncio.current_task()
            assert task is not None
            task.cancel()

    async def serve() -> None:
        served = asyncio.ensure_future(Front(lambda: app, 2, 100)(scope(method), receive, send))
        await asyncio.wait([served])
        assert served.cancelled() == (cancel_after is not None)

    asyncio.run(serve())
    return sent, chunks


def test_a_stream_is_made_one_chunk_after_the_other_on_one_thread() -> None:
    sent, chunks = stream(5)
    assert [m["body"] for m in sent[1:]] == [b"0", b"1", b"2", b"3", b"4", b""]
    assert chunks.written_before == [0, 1, 2, 3, 4]  # each made once the one before was written
    assert not any(name == b"content-length" for name, _ in sent[0]["headers"])
    assert len(chunks.threads) == 1 and chunks.closed_on in chunks.threads
    assert threading.get_ident() not in chunks.threads  # never on the loop's thread


def test_a_client_that_leaves_ends_its_stream_at_the_next_chunk() -> None:
    sent, chunks = stream(100, leave_after=2)
    assert [m["body"] for m in sent[1:]] == [b"0", b"1"]  # nothing after, not even the end
    assert len(chunks.written_before) == 3  # the next chunk was made, and not written
    assert chunks.closed_on in chunks.threads


def test_a_request_the_server_cancels_ends_its_stream_on_its_own_thread() -> None:
    """As uvicorn cancels what is still running at its shutdown: the maker is told to stop
    at its next chunk, closes the stream there, and the request ends after it."""
    sent, chunks = stream(100, cancel_after=3)
    assert [m["body"] for m in sent[1:]] == [b"0", b"1", b"2"]  # nothing after, not the end
    assert len(chunks.written_before) <= 4 and chunks.closed_on in chunks.threads


def test_a_head_s_stream_is_closed_unread() -> None:
    sent, chunks = stream(3, "HEAD")
    assert [m["body"] for m in sent[1:]] == [b""]
    assert chunks.written_before == [] and chunks.closed_on is not None


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
