"""The functions' server side: an app served as an ASGI app on functions-framework's stack
(uvicorn's event loop, which parses and writes a request's bytes: a fifth of the CPU a
request of gunicorn's threaded worker, docs/performance.md), on the function's own threads.

The apps (`shared.bindings.http.HttpApp`, `queue_target.QueueTargetApp`) are synchronous:
one `wire.Request` in, one `wire.Answer` out. `Front` reads the request's head on the loop,
with the first message of its body when uvicorn received it with the head (never waited
for: a caller refused from its head is answered at once), runs the app on a thread of the
function's pool (THREADS: an app may block, the loop never does), and writes the answer from
the loop. The rest of a body is read on the loop only when the app asks (`Request.read`),
once it knows the caller, within a deadline, the limit (A2A_MAX_BODY_BYTES + 1 bytes) and
the room for bytes in flight (`_Body`, shared.bindings.budget), in which whole answers count
too until written, in pieces as the client takes them (`Front._pieces`). With `Expect:
100-continue`, nothing of the body is asked for with the head: a caller refused from its head
is never solicited.

An answer that waits for a turn (`Answer.later`) and a stream hold a pool thread only while
making a step (a stream's: its chunks up to a pause): the loop waits out their pauses
(shared.pause) until woken (the turn's end, a commit), their seconds pass, or a stream's
client leaves (noticed at once). So a thousand waiting turns or idle streams (bounded by
A2A_MAX_STREAMS, not THREADS) keep no request waiting for a thread, and a slow client holds
back its own stream, never the memory.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shared.bindings.budget import Budget
from shared.bindings.wire import Answer, BodyRefused, Headers, Request
from shared.pause import Pause, Waiting
from shared.settings import Settings

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
# ASGI's receive: an `async def` (uvicorn's, the tests' transport's), so a coroutine.
Receive = Callable[[], Coroutine[Any, Any, Message]]
Send = Callable[[Message], Awaitable[None]]

App = Callable[[Request], Answer]

# The seconds a client refused for want of room for its body is told to wait (Retry-After):
# bodies in flight take a moment to be let go of.
RETRY_AFTER = 1
# The pieces a whole answer is written in: uvicorn's high-water mark (its send() waits for
# the socket to drain below it), so the client's reading paces the writing.
PIECE = 64 * 1024
# Seconds past a body's deadline its reader on a pool thread waits for the loop: only a loop
# that stopped (the process going away) takes longer, and the thread must not outlive it.
LOOP_GONE = 5.0


class _Cut(Exception):
    """The client took no piece of its answer within A2A_ANSWER_WRITE_SECONDS."""


def _no_room(refusal: str) -> Answer:
    """The answer in place of one the budget has no room for (google.rpc.Status, as the
    head's refusals: the front knows no binding's shape)."""
    error = {"error": {"code": 503, "status": "UNAVAILABLE", "message": refusal}}
    headers = {"Content-Type": "application/json", "Retry-After": str(RETRY_AFTER)}
    return Answer(503, headers, json.dumps(error).encode())


class Front:
    """An app served by an `aio` function, as an ASGI app: functions-framework awaits what
    the function returns as `answer(scope, receive, send)` (starlette's `request_response`),
    so the function returns its Front, and the tests drive this very app
    (tests/asgi_transport.py).

    A body is read within `read_seconds` (A2A_BODY_READ_SECONDS) of being asked for. The
    bytes in flight are counted on the loop (`budget`): a body's as they come, until the app
    answered (it parsed them); an answer's until the client took its last byte; all of them
    within `max_buffered` (A2A_MAX_BUFFERED_BYTES), an owner's within `max_owner_buffered`
    (A2A_MAX_OWNER_BUFFERED_BYTES). Each piece of a whole answer is written within
    `write_seconds` (A2A_ANSWER_WRITE_SECONDS): a client that does not read holds what its
    socket holds and its counted answer, for that long at the most."""

    def __init__(
        self,
        app: Callable[[], App],
        threads: int,
        max_body: int,
        *,
        read_seconds: float,
        max_buffered: int,
        max_owner_buffered: int | None = None,
        write_seconds: float = 30.0,
    ) -> None:
        self.app = app  # built at the first request, on a pool thread
        self.max_body = max_body
        self.read_seconds = read_seconds
        self.write_seconds = write_seconds
        # The bytes held by the requests in flight (on the loop only).
        self.budget = Budget(
            max_buffered, max_buffered if max_owner_buffered is None else max_owner_buffered
        )
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="a2a")

    @classmethod
    def of(cls, app: Callable[[], App], settings: Settings) -> Front:
        """The front of `app` as the settings have it (THREADS, the body's limits)."""
        return cls(
            app,
            settings.threads,
            settings.max_body_bytes,
            read_seconds=settings.body_read_seconds,
            max_buffered=settings.buffered_limit,
            max_owner_buffered=settings.owner_buffered_limit,
            write_seconds=settings.answer_write_seconds,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        body = _Body(self, receive)
        try:
            request = await self.request(scope, body)
            loop = asyncio.get_running_loop()
            answer = await loop.run_in_executor(self.pool, self._answer, request)
            ended = body.done()  # the app parsed it: an answer waiting for a turn holds none
            if answer.later is not None:
                answer = await self._waited(answer.later)
            await self._write(request, answer, ended, receive, send)
        finally:
            body.release()

    async def request(self, scope: Scope, body: _Body) -> Request:
        """The request, with what of its body came with its head: nothing when its declared
        length is over the limit (the app refuses that length); else the first message if
        uvicorn holds it already, never waited for (an anonymous caller holds no request for
        the body's deadline before its 401). The rest is read when the app asks
        (`Request.read`, once it knows the caller), on the loop, the pool thread waiting,
        within the deadline, up to one byte past the limit however the body is framed."""
        headers = Headers.of(scope["headers"])
        declared = headers.declared_length()
        if declared is not None and declared > self.max_body:
            return Request(scope, headers, b"")
        first = b""
        if not _expects_continue(headers):
            first = body.first()
            if body.ended or (body.refused is None and len(first) > self.max_body):
                return Request(scope, headers, first)
        loop = asyncio.get_running_loop()

        def rest() -> bytes:  # on the app's pool thread, once it knows the caller
            reading = asyncio.run_coroutine_threadsafe(body.rest(made.owner), loop)
            try:  # the read ends by its deadline; past it, the loop itself is gone
                return reading.result(self.read_seconds + LOOP_GONE)
            except concurrent.futures.TimeoutError:
                reading.cancel()
                raise body.late() from None

        made = Request(scope, headers, first, rest)
        return made

    async def _write(
        self, request: Request, answer: Answer, ended: bool, receive: Receive, send: Send
    ) -> None:
        """Write the answer; when some of the body was left unread, the connection closes
        after it (uvicorn would otherwise read, and drop, the rest to reach the next
        request). A whole body is counted in the budget until written, or, when the caller
        (or the instance) holds as many bytes as it may, not written: 503 instead."""
        request.body = b""  # parsed: let go of, as its count was (`_Body.done`)
        head = request.method == "HEAD"
        bodiless = answer.status < 200 or answer.status in (204, 304)
        counted = 0 if head or bodiless or answer.chunks is not None else len(answer.body)
        if counted:
            refusal = self.budget.take(counted, request.owner, alone=True)
            if refusal is not None:
                answer, counted = _no_room(refusal), 0
        try:
            fields = _fields(answer, ended, bodiless)
            await send({"type": "http.response.start", "status": answer.status, "headers": fields})
            if answer.chunks is not None:
                await self._stream(() if head else answer.chunks, answer.close, receive, send)
            else:
                await self._pieces(b"" if head or bodiless else answer.body, send)
        except _Cut:  # the client took nothing within write_seconds
            pass  # uvicorn closes a connection whose answer was not completed
        finally:
            self.budget.give(counted, request.owner)

    async def _pieces(self, body: bytes, send: Send) -> None:
        """Write a whole body in pieces: uvicorn's send() waits until the socket took most
        of the one before, so a client that reads slowly (or not) holds its answer, not a
        copy of it in the transport's buffer too."""
        start = 0
        while len(body) - start > PIECE:
            await self._send(send, body[start : start + PIECE], more=True)
            start += PIECE
        await self._send(send, body[start:] if start else body)

    async def _send(self, send: Send, chunk: bytes, *, more: bool = False) -> None:
        """Send a piece of an answer, within write_seconds (`_Cut` past them)."""
        try:
            async with asyncio.timeout(self.write_seconds):
                await send({"type": "http.response.body", "body": chunk, "more_body": more})
        except TimeoutError:
            raise _Cut from None

    def _answer(self, request: Request) -> Answer:
        """On a pool thread: the app's answer."""
        return self.app()(request)

    async def _waited(self, later: Waiting[Answer]) -> Answer:
        """The answer of an app's work that waits (a blocking send's turn): each pause waited
        out here, holding no thread, each step after one made on a pool thread, until it
        answers. Its first step is taken here: it gives the pause its work stopped at on the
        pool thread (`shared.pause.begun`, `Later.rest`). A client that goes away meanwhile
        changes nothing: the work ends as it would."""
        loop = asyncio.get_running_loop()
        step = _step(later)
        while not isinstance(step, Answer):
            await _paused(loop, step)
            step = await loop.run_in_executor(self.pool, _step, later)
        return step

    async def _stream(
        self,
        chunks: Iterable[bytes | Pause],
        close: Callable[[], None],
        receive: Receive,
        send: Send,
    ) -> None:
        """Write a streamed answer: its chunks up to each pause made in one step of a pool
        thread (`_batch`) and written in one piece, once those before are written, each pause
        waited out here (`_paused`), until the end or the client's leaving; then the stream
        is closed on a pool thread, however the writing ended."""
        loop = asyncio.get_running_loop()
        made: Iterator[bytes | Pause] = iter(chunks)
        left = asyncio.ensure_future(_disconnect(receive))
        making: asyncio.Future[tuple[bytes, Pause | None, bool]] | None = None
        try:
            while not left.done():
                making = loop.run_in_executor(self.pool, _batch, made)
                data, pause, ended = await asyncio.shield(making)
                if data and not left.done():
                    await self._send(send, data, more=True)
                if ended:
                    break
                if pause is not None:
                    await _paused(loop, pause, left)
        finally:
            # However the writing ended (the server cancelling the request at its shutdown),
            # the chunks in the making are waited for: a generator is closed only when idle.
            gone = left.done()
            left.cancel()
            if making is not None and not making.done():
                await asyncio.wait([making])
                if not making.cancelled():
                    making.exception()  # retrieved: the stream's close is what matters now
            await loop.run_in_executor(self.pool, close)
        if not gone:
            await send({"type": "http.response.body", "body": b""})


def _batch(chunks: Iterator[bytes | Pause]) -> tuple[bytes, Pause | None, bool]:
    """On a pool thread: the stream's next chunks, up to its next pause, its end (True), or
    PIECE bytes (a stream that never pauses is made as its client takes it). Its frames come
    in bunches (its opening, a turn's last events and its end): a step a bunch, not a chunk."""
    made: list[bytes] = []
    size = 0
    while size < PIECE:
        chunk = next(chunks, None)
        if chunk is None or isinstance(chunk, Pause):
            return b"".join(made), chunk, chunk is None
        made.append(chunk)
        size += len(chunk)
    return b"".join(made), None, False


def _fields(answer: Answer, ended: bool, bodiless: bool) -> list[tuple[bytes, bytes]]:
    """The answer's header lines as ASGI has them, with what the front adds: `Connection:
    close` when some of the body was left unread, the length of a whole body."""
    fields = [(n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers.items()]
    if not ended:
        fields.append((b"connection", b"close"))
    if answer.chunks is None and not bodiless:
        fields.append((b"content-length", str(len(answer.body)).encode()))
    return fields


async def _paused(
    loop: asyncio.AbstractEventLoop, pause: Pause, left: asyncio.Future[None] | None = None
) -> None:
    """Until the pause is woken (from any thread), its seconds passed, or the client left
    (`left`, a stream's): on the loop, without a thread."""
    woken: asyncio.Future[None] = loop.create_future()

    def wake() -> None:  # any thread
        with contextlib.suppress(RuntimeError):  # the loop closed: the process goes away
            loop.call_soon_threadsafe(_settle, woken)

    pause.on_wake(wake)
    ways_out = [woken] if left is None else [woken, left]
    try:
        await asyncio.wait(ways_out, timeout=pause.seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        woken.cancel()


def _step(later: Waiting[Answer]) -> Answer | Pause:
    """On a pool thread: the work's next pause, or its answer."""
    try:
        return next(later)
    except StopIteration as done:
        answer: Answer = done.value
        return answer


def _settle(woken: asyncio.Future[None]) -> None:
    if not woken.done():
        woken.set_result(None)


class _Body:
    """One request's body as the front reads it, on the loop: the bytes come, counted in
    the front's budget (`held`: this request's share; the owner's once the app, knowing its
    caller, reads the rest), until the body ended, or went one byte past the limit, or its
    deadline passed, or the instance or the owner holds as many as it may. Once the app has
    answered, it has parsed them: they are let go of (`done`)."""

    def __init__(self, front: Front, receive: Receive) -> None:
        self.front = front
        self.receive = receive
        self.chunks: list[bytes] = []
        self.size = 0  # the bytes in `chunks`
        self.held = 0  # the bytes counted in the front's budget
        self.owner: str | None = None  # whose share `held` is counted in (None: the instance's)
        self.ended = False  # all of it came (or the client went away): nothing left unread
        self.refused: BodyRefused | None = None  # why the rest will not be read

    def first(self) -> bytes:
        """What came with the head: its first message when uvicorn holds it already, else
        nothing. uvicorn's receive() ends at its first step when it holds the message, so it
        is taken one step here, with no task and no turn of the loop; one that would wait is
        given up (as a task's cancel would), and `rest` asks again once the app knows the
        caller."""
        asking = self.receive()
        try:
            asking.send(None)
        except StopIteration as came:
            self._take(came.value)
        else:
            asking.close()
        return b"".join(self.chunks)

    def done(self) -> bool:
        """Whether the body was all read, once the app answered: its bytes are let go of (it
        parsed them; a stream it opened holds no body); one not all read closes the
        connection after the answer."""
        self.release()
        return self.ended

    def release(self) -> None:
        """Let go of the body's bytes and their count (once; again, nothing)."""
        self.front.budget.give(self.held, self.owner)
        self.held = 0
        self.chunks.clear()

    async def rest(self, owner: str | None) -> bytes:
        """The body, whole (its first `limit + 1` bytes), counted in `owner`'s share (the
        caller, known now: what came with the head moves there); raises BodyRefused."""
        if self.refused is not None:
            raise self.refused
        if owner is not None and self.owner is None:
            budget = self.front.budget
            budget.give(self.held, None)
            refusal = budget.take(self.held, owner)
            if refusal is not None:
                self.held = 0
                self.ended = False  # dropped: the connection closes after the answer
                raise BodyRefused(503, refusal, RETRY_AFTER)
            self.owner = owner
        try:
            async with asyncio.timeout(self.front.read_seconds):
                while not self.ended and self.size <= self.front.max_body:
                    self._take(await self.receive())
                    if self.refused is not None:
                        raise self.refused
        except TimeoutError:
            raise self.late() from None
        return b"".join(self.chunks)

    def _take(self, message: Message) -> None:
        """Keep a message's bytes (what of them is within one byte past the limit), counted;
        over the front's cap, none are kept and the rest is refused."""
        if message["type"] != "http.request":  # the client went away: nothing more comes
            self.ended = True
            return
        chunk: bytes = message.get("body", b"")
        self.ended = not message.get("more_body", False)
        if not chunk:
            return
        kept = chunk[: self.front.max_body + 1 - self.size]
        refusal = self.front.budget.take(len(kept), self.owner)
        if refusal is not None:
            self.refused = BodyRefused(503, refusal, RETRY_AFTER)
            self.ended = False  # what came is dropped: the connection closes after the answer
            return
        self.chunks.append(kept)
        self.size += len(kept)
        self.held += len(kept)

    def late(self) -> BodyRefused:
        """The refusal of a body that did not come within the deadline."""
        seconds = f"{self.front.read_seconds:g}"
        return BodyRefused(
            408,
            f"the body did not come within {seconds} s (A2A_BODY_READ_SECONDS): send it "
            "at once, after the headers",
        )


def _expects_continue(headers: Headers) -> bool:
    """Whether the client waits for `100 Continue` before it sends its body. uvicorn sends
    that at the app's first receive(): such a request's body is not asked for with its head,
    only when the app reads it, once it knows the caller, so a caller refused from its head
    gets its answer alone, and its body is never solicited."""
    expect = headers.get("expect")
    return expect is not None and expect.strip().lower() == "100-continue"


async def _disconnect(receive: Receive) -> None:
    """Until the client went away."""
    while (await receive())["type"] != "http.disconnect":
        pass
