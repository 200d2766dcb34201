"""The functions' front (shared/bindings/asgi.py) as uvicorn drives it: what of the body
came with the head handed over, the rest read on the loop only when the app asks, within
the limit, the deadline and the instance's room; the app run on the pool, its answer written
as werkzeug wrote it, and a stream made one chunk at a time, closed on its own thread
however it ends."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from shared.bindings.asgi import PIECE, Front
from shared.bindings.wire import Answer, BodyRefused, Request
from shared.pause import Pause

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

    front = Front(lambda: app, 2, max_body, read_seconds=30, max_buffered=10_000)
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
    bodies: list[bytes] = []

    def app(request: Request) -> Answer:
        bodies.append(request.body)
        return card(request)

    _, [request] = serve(app, "POST", [(b"content-length", b"101")], body=b"x" * 101)
    assert bodies[-1] == b"" and request.headers.declared_length() == 101
    serve(app, "POST", [(b"content-length", b"100")], body=b"x" * 100)
    assert bodies[-1] == b"x" * 100


class Chunks:
    """A stream of `count` chunks of `size` bytes (chunk n: its last digit), which records,
    for each chunk, how many pieces were written before it was made, and the thread that
    made and closed it."""

    def __init__(self, count: int, sent: list[Message], size: int) -> None:
        self.count = count
        self.sent = sent
        self.size = size
        self.written_before: list[int] = []
        self.threads: set[int] = set()
        self.closed_on: int | None = None

    def __iter__(self) -> Iterator[bytes]:
        for number in range(self.count):
            self.threads.add(threading.get_ident())
            self.written_before.append(sum(1 for m in self.sent if m.get("more_body")))
            yield str(number % 10).encode() * self.size

    def close(self) -> None:
        self.closed_on = threading.get_ident()


def stream(
    count: int,
    method: str = "GET",
    leave_after: int | None = None,
    cancel_after: int | None = None,
    size: int = PIECE,
) -> Any:
    """Serve a stream of `count` chunks of `size` bytes, which never pauses; the client
    leaves after `leave_after` pieces of it, or the server cancels the request after
    `cancel_after`."""
    sent: list[Message] = []
    chunks = Chunks(count, sent, size)
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
        served = asyncio.ensure_future(
            Front(lambda: app, 2, 100, read_seconds=30, max_buffered=10_000)(
                scope(method), receive, send
            )
        )
        await asyncio.wait([served])
        assert served.cancelled() == (cancel_after is not None)

    asyncio.run(serve())
    return sent, chunks


def test_a_stream_that_never_pauses_is_made_a_piece_at_a_time_on_pool_threads() -> None:
    half = PIECE // 2
    sent, chunks = stream(6, size=half)
    # Two chunks a piece, the next piece made once the one before was written.
    expected = [b"0" * half + b"1" * half, b"2" * half + b"3" * half, b"4" * half + b"5" * half]
    assert [m["body"] for m in sent[1:]] == [*expected, b""]
    assert chunks.written_before == [0, 0, 1, 1, 2, 2]
    assert not any(name == b"content-length" for name, _ in sent[0]["headers"])
    loop = threading.get_ident()
    assert loop not in chunks.threads and chunks.closed_on not in (None, loop)  # on the pool


def test_a_client_that_leaves_ends_its_stream_before_the_next_piece() -> None:
    sent, chunks = stream(100, leave_after=2)
    assert [m["body"][:1] for m in sent[1:]] == [b"0", b"1"]  # nothing after, not even the end
    assert len(chunks.written_before) == 2  # nothing made after the client left
    assert chunks.closed_on not in (None, threading.get_ident())


def test_a_stream_s_chunks_up_to_each_pause_are_one_step_and_one_piece() -> None:
    """A stream's frames come in bunches (its opening, a turn's last events and its end):
    each bunch is made in one step of a pool thread and written in one piece."""
    sent: list[Message] = []
    made_on: list[tuple[str, int]] = []

    def chunks() -> Iterator[bytes | Pause]:
        for bunch in (b"ab", b"c", b"de"):
            for chunk in bunch:
                made_on.append((chr(chunk), threading.get_ident()))
                yield bytes([chunk])
            yield Pause(0)  # over at once

    def app(request: Request) -> Answer:
        return Answer(200, chunks=chunks())

    async def receive() -> Message:
        if not sent:
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)

    front = Front(lambda: app, 4, 100, read_seconds=30, max_buffered=10_000)
    asyncio.run(asyncio.wait_for(front(scope(), receive, send), 30))
    assert [m["body"] for m in sent[1:]] == [b"ab", b"c", b"de", b""]
    threads = dict(made_on)
    assert threads["a"] == threads["b"] and threads["d"] == threads["e"]


def test_a_request_the_server_cancels_ends_its_stream_on_the_pool() -> None:
    """As uvicorn cancels what is still running at its shutdown: no chunk is made after,
    the stream is closed on a pool thread, and the request ends after it."""
    sent, chunks = stream(100, cancel_after=3)
    assert [m["body"][:1] for m in sent[1:]] == [b"0", b"1", b"2"]  # nothing after, not the end
    assert len(chunks.written_before) <= 4
    assert chunks.closed_on not in (None, threading.get_ident())


def paused_stream(leave: bool) -> tuple[list[Message], list[str]]:
    """Serve a stream that writes a chunk, pauses (600 s, for ever to a test), and writes
    another once woken: woken by another thread, or the client leaves during the pause.
    What was sent, and what the stream saw (`made`: its chunks; `busy`: pool threads taken
    during the pause; `closed`)."""
    sent: list[Message] = []
    seen: list[str] = []
    pause = Pause(600)
    front = Front(lambda: app, 1, 100, read_seconds=30, max_buffered=10_000)
    paused = threading.Event()  # "0" was written: the stream waits out its pause

    def chunks() -> Iterator[bytes | Pause]:
        yield b"0"
        yield pause
        yield b"1"

    def app(request: Request) -> Answer:
        return Answer(200, chunks=chunks(), close=lambda: seen.append("closed"))

    async def receive() -> Message:
        if not sent:
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.get_running_loop().run_in_executor(None, paused.wait)
        # The one pool thread is free while the stream pauses: a request would get it.
        free = front.pool.submit(threading.get_ident).result(10)
        seen.append(f"free {free is not None}")
        if leave:
            return {"type": "http.disconnect"}
        threading.Thread(target=pause.wake).start()
        await asyncio.Event().wait()  # stays
        raise AssertionError("unreachable")

    async def send(message: Message) -> None:
        sent.append(message)
        if message.get("body") == b"0":
            paused.set()

    asyncio.run(asyncio.wait_for(front(scope(), receive, send), 30))
    return sent, seen


def test_a_paused_stream_holds_no_thread_and_goes_on_when_woken() -> None:
    sent, seen = paused_stream(leave=False)
    assert [m["body"] for m in sent[1:]] == [b"0", b"1", b""]
    assert seen == ["free True", "closed"]


def test_a_client_that_leaves_during_a_pause_ends_its_stream_at_once() -> None:
    sent, seen = paused_stream(leave=True)
    assert [m["body"] for m in sent[1:]] == [b"0"]
    assert seen == ["free True", "closed"]


def test_a_head_s_stream_is_closed_unread() -> None:
    sent, chunks = stream(3, "HEAD")
    assert [m["body"] for m in sent[1:]] == [b""]
    assert chunks.written_before == [] and chunks.closed_on is not None


def pieces(body: bytes, piece: int) -> list[Message]:
    """The body as uvicorn hands it over: messages of `piece` bytes, the last saying so."""
    return [
        {"type": "http.request", "body": body[i : i + piece], "more_body": i + piece < len(body)}
        for i in range(0, len(body), piece)
    ] or [{"type": "http.request", "body": b"", "more_body": False}]


class Sender:
    """A client sending `messages` one at a time, each once the front asks for it (then,
    when `stall`, nothing more), counting how many the front asked for."""

    def __init__(self, messages: list[Message], stall: bool = False, late: bool = False) -> None:
        self.pending = list(messages)
        self.stall = stall
        self.late = late  # the first message comes after the head, not with it
        self.asked = 0

    async def receive(self) -> Message:
        self.asked += 1
        if self.late and self.asked == 1:
            for _ in range(3):  # a few turns of the loop: later than the head
                await asyncio.sleep(0)
        if self.pending:
            return self.pending.pop(0)
        if self.stall:
            await asyncio.Event().wait()  # sends nothing more, and stays
        return {"type": "http.disconnect"}


def read(
    sender: Sender,
    app: Any,
    *,
    max_body: int = 100,
    read_seconds: float = 30,
    max_buffered: int = 10_000,
    held: int = 0,
    max_owner_buffered: int | None = None,
    owners: dict[str, int] | None = None,
) -> tuple[list[Message], Front]:
    """What the front sends for one POST from `sender` to `app`, and the front (its
    `buffered` once the answer was written); `held`: bytes other requests hold."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    front = Front(
        lambda: app,
        2,
        max_body,
        read_seconds=read_seconds,
        max_buffered=max_buffered,
        max_owner_buffered=max_owner_buffered,
    )
    front.budget.held = held
    front.budget.owners.update(owners or {})
    asyncio.run(front(scope("POST"), sender.receive, send))
    return sent, front


def reading(request: Request) -> Answer:
    """An app that reads the body and answers it (or why it could not be read)."""
    try:
        return Answer(200, {}, request.read())
    except BodyRefused as refused:
        retry = {} if refused.retry_after is None else {"Retry-After": str(refused.retry_after)}
        return Answer(refused.status, retry, refused.message.encode())


def refusing(request: Request) -> Answer:
    """An app that refuses the request without reading its body (as a 401 does)."""
    return Answer(401, {}, b"no")


def test_a_body_whole_in_its_first_message_is_handed_over_with_the_head() -> None:
    seen: list[bytes] = []

    def app(request: Request) -> Answer:
        seen.append(request.body)  # before any read: what came with the head
        return reading(request)

    sender = Sender(pieces(b"x" * 40, 64))
    sent, front = read(sender, app)
    assert seen == [b"x" * 40] and sent[-1]["body"] == b"x" * 40
    assert sender.asked == 1  # nothing read after the first message
    assert (b"connection", b"close") not in sent[0]["headers"]  # the connection goes on
    assert front.budget.held == 0


def test_the_rest_of_a_body_is_read_only_when_the_app_asks() -> None:
    body = bytes(range(90))
    refused = Sender(pieces(body, 10))
    sent, front = read(refused, refusing)
    assert refused.asked == 1 and sent[0]["status"] == 401
    # The rest was left unread: uvicorn closes the connection rather than read it.
    assert (b"connection", b"close") in sent[0]["headers"]
    assert front.budget.held == 0
    served = Sender(pieces(body, 10))
    sent, front = read(served, reading)
    assert served.asked == 9 and sent[-1]["body"] == body
    assert (b"connection", b"close") not in sent[0]["headers"]
    assert front.budget.held == 0


def test_a_body_that_does_not_come_within_the_deadline_is_refused_408() -> None:
    # The first piece comes, then nothing: the rest is waited for within the deadline.
    sent, front = read(Sender(pieces(b"x" * 90, 10)[:2], stall=True), reading, read_seconds=0.05)
    assert sent[0]["status"] == 408
    assert b"A2A_BODY_READ_SECONDS" in sent[-1]["body"]
    assert (b"connection", b"close") in sent[0]["headers"]
    # Nothing comes at all: an app that reads waits for the first message within the
    # deadline too.
    sent, front = read(Sender([], stall=True), reading, read_seconds=0.05)
    assert sent[0]["status"] == 408 and front.budget.held == 0


def test_a_request_whose_body_has_not_come_is_answered_without_waiting_for_it() -> None:
    """The first round's bar: an anonymous request that announces a body and sends only its
    head gets its 401 at once, not after the body's deadline (here an hour)."""
    started = time.monotonic()
    sender = Sender([], stall=True)
    sent, front = read(sender, refusing, read_seconds=3600)
    assert sent[0]["status"] == 401 and time.monotonic() - started < 5
    assert (b"connection", b"close") in sent[0]["headers"]  # the body was never read
    assert front.budget.held == 0
    # A body that comes after its head is read when the app asks, as the rest of one.
    seen: list[bytes] = []

    def app(request: Request) -> Answer:
        seen.append(request.body)  # before any read: nothing had come with the head
        return reading(request)

    late = Sender(pieces(b"y" * 30, 64), late=True)
    sent, front = read(late, app)
    assert seen == [b""] and sent[-1]["body"] == b"y" * 30
    assert (b"connection", b"close") not in sent[0]["headers"] and front.budget.held == 0


def test_a_body_over_the_instance_s_room_is_refused_503_and_its_bytes_let_go() -> None:
    # Others hold 950 of 1,000 bytes: a body of 40 fits, one of 60 does not (with its
    # first message or after).
    sent, front = read(Sender(pieces(b"x" * 40, 64)), reading, max_buffered=1000, held=950)
    assert sent[0]["status"] == 200 and front.budget.held == 950
    for piece in (64, 20):
        sent, front = read(Sender(pieces(b"x" * 60, piece)), reading, max_buffered=1000, held=950)
        assert sent[0]["status"] == 503
        assert (b"retry-after", b"1") in sent[0]["headers"]
        assert b"A2A_MAX_BUFFERED_BYTES" in sent[-1]["body"]
        assert (b"connection", b"close") in sent[0]["headers"]
        assert front.budget.held == 950  # what this request held is let go


@given(st.binary(max_size=64), st.integers(min_value=0, max_value=40), st.integers(1, 16))
def test_the_body_is_read_up_to_one_byte_past_the_limit(
    body: bytes, limit: int, piece: int
) -> None:
    sent, front = read(Sender(pieces(body, piece)), reading, max_body=limit)
    assert sent[-1]["body"] == body[: limit + 1]
    assert front.budget.held == 0


def owned_by(owner: str, app: Any) -> Any:
    """`app`, its caller authenticated as `owner` first (as shared.bindings.http does)."""

    def authenticated(request: Request) -> Answer:
        request.owner = owner
        made: Answer = app(request)
        return made

    return authenticated


def test_an_owner_s_bodies_are_bounded_by_its_share_others_are_not() -> None:
    """Issue 36 item 2: one owner's requests cannot hold the room of the others'."""
    # alice holds 30 of her 50 bytes elsewhere: her 40-byte body is refused, bob's is read.
    for piece in (64, 10):
        sent, front = read(
            Sender(pieces(b"x" * 40, piece)),
            owned_by("alice", reading),
            max_owner_buffered=50,
            owners={"alice": 30},
            held=30,
        )
        assert sent[0]["status"] == 503
        assert b"A2A_MAX_OWNER_BUFFERED_BYTES" in sent[-1]["body"]
        assert front.budget.held == 30 and front.budget.owners == {"alice": 30}
    sent, front = read(
        Sender(pieces(b"x" * 40, 10)),
        owned_by("bob", reading),
        max_owner_buffered=50,
        owners={"alice": 30},
        held=30,
    )
    assert sent[0]["status"] == 200 and sent[-1]["body"] == b"x" * 40
    assert front.budget.owners == {"alice": 30}


def test_a_body_s_bytes_are_let_go_once_parsed_while_its_stream_goes_on() -> None:
    """Issue 36 item 2: streams opened with bodies padded to the limit held their bytes for
    as long as they lived; the app has parsed the body once it answers."""
    seen: list[tuple[int, bytes]] = []
    fronts: list[Front] = []

    def app(request: Request) -> Answer:
        request.owner = "alice"
        request.read()

        def chunks() -> Iterator[bytes]:
            seen.append((fronts[0].budget.held, request.body))
            yield b"data: 1\n\n"

        return Answer(200, {}, chunks=chunks())

    sender = Sender(pieces(b" " * 90, 10), stall=True)
    front = Front(lambda: app, 2, 100, read_seconds=30, max_buffered=10_000)
    fronts.append(front)
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    asyncio.run(front(scope("POST"), sender.receive, send))
    assert seen == [(0, b"")]  # while the stream is written, nothing of the body is held
    assert sent[1]["body"] == b"data: 1\n\n"


def answering(size: int) -> Any:
    return owned_by("alice", lambda request: Answer(200, {}, b"a" * size))


def test_answers_are_counted_in_the_budget_while_written() -> None:
    """Issue 36 item 1: answers made whole and held for clients that do not read them."""
    # Others hold 6,000 of 10,000 bytes: an answer of 5,000 does not fit; 503, Retry-After.
    sent, front = read(Sender(pieces(b"", 1)), answering(5000), held=6000)
    assert sent[0]["status"] == 503 and (b"retry-after", b"1") in sent[0]["headers"]
    assert b"A2A_MAX_BUFFERED_BYTES" in sent[-1]["body"] and front.budget.held == 6000
    # alice holds her share elsewhere: hers does not fit either.
    sent, front = read(
        Sender(pieces(b"", 1)), answering(5000), max_owner_buffered=6000, owners={"alice": 2000}
    )
    assert sent[0]["status"] == 503 and b"A2A_MAX_OWNER_BUFFERED_BYTES" in sent[-1]["body"]
    assert front.budget.owners == {"alice": 2000}
    # Alone, an answer goes out whatever its size: every stored value can be read back.
    sent, front = read(Sender(pieces(b"", 1)), answering(30_000), max_owner_buffered=6000)
    assert sent[0]["status"] == 200 and b"".join(m.get("body", b"") for m in sent[1:]) == (
        b"a" * 30_000
    )
    assert front.budget.held == 0 and front.budget.owners == {}


def test_a_big_answer_is_written_in_pieces_each_once_the_one_before_was_taken() -> None:
    held: list[int] = []
    fronts: list[Front] = []

    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            held.append(fronts[0].budget.owners.get("alice", 0))
            sent.append(message)

    sent: list[Message] = []
    front = Front(lambda: answering(200 * 1024), 2, 100, read_seconds=30, max_buffered=1 << 20)
    fronts.append(front)
    asyncio.run(front(scope("GET"), Sender([]).receive, send))
    assert [len(m["body"]) for m in sent] == [65536, 65536, 65536, 8192]
    assert [m["more_body"] for m in sent] == [True, True, True, False]
    assert held == [200 * 1024] * 4  # counted until its last piece is taken
    assert front.budget.held == 0


def test_a_client_that_takes_nothing_is_cut_off_and_its_answer_let_go() -> None:
    async def send(message: Message) -> None:
        if message["type"] == "http.response.body":
            await asyncio.Event().wait()  # the socket is full: the client reads nothing

    front = Front(
        lambda: answering(100_000),
        2,
        100,
        read_seconds=30,
        max_buffered=1 << 20,
        write_seconds=0.05,
    )
    asyncio.run(front(scope("GET"), Sender([]).receive, send))  # returns: cut off
    assert front.budget.held == 0 and front.budget.owners == {}
