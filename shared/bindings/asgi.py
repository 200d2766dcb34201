"""The functions' server side: an app served as an ASGI app on functions-framework's stack
(uvicorn's event loop), on the function's own pool of threads.

functions-framework serves a function marked `functions_framework.aio.http` with uvicorn's
event loop instead of gunicorn's threaded worker: a request's bytes are parsed and written
by the loop, and no server thread is handed the connection. Under the threaded worker, a
bare function costs ~0.9 ms of CPU a request at 16 concurrent clients, most of it the
threads' hand-offs; on the loop it costs ~0.2 ms (README, "Performance").

The apps (`shared.bindings.http.HttpApp`, `queue_target.QueueTargetApp`) are synchronous:
one `wire.Request` in, one `wire.Answer` out. `Front` reads the request on the loop (the
body first, no more than A2A_MAX_BODY_BYTES + 1 bytes, whatever the request declares, so no
pool thread waits on a slow client), gives it to its app on a thread of the function's own
pool (THREADS of them, the function's concurrency: a handler may block for as long as its
turn runs, which the loop must never do), and writes the answer from the loop.

A streamed answer (server-sent events) holds a pool thread for its life, as a server thread
held it under gunicorn: that thread makes each chunk once the loop has written the one
before (a slow client holds back its own stream, never the memory). A client that goes away
is noticed at once (http.disconnect), and its stream is closed at its next chunk, which
frees its slot.
"""

from __future__ import annotations

import asyncio
import queue
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from shared.bindings.wire import Answer, Headers, Request

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

App = Callable[[Request], Answer]


async def read_body(receive: Receive, limit: int) -> bytes:
    """The body, or its first `limit + 1` bytes: enough for the app to refuse it as too
    large, without holding what a client sends past the limit."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            break
        chunk: bytes = message.get("body", b"")
        if chunk:
            chunks.append(chunk[: limit + 1 - size])
            size += len(chunks[-1])
        if not message.get("more_body", False) or size > limit:
            break
    return b"".join(chunks)


class Front:
    """An app served by an `aio` function, as an ASGI app: the request read on the loop, the
    app run on the pool (`threads` threads), its answer written by the loop.

    functions-framework awaits what the function returns as `answer(scope, receive, send)`
    (starlette's `request_response`), so the function returns its Front itself: the front
    reads the request from the scope, as any ASGI app does, and the tests drive this very
    app (tests/asgi_transport.py)."""

    def __init__(self, app: Callable[[], App], threads: int, max_body: int) -> None:
        self.app = app  # built at the first request, on a pool thread
        self.max_body = max_body
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="a2a")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = await self.request(scope, receive)
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(self.pool, self._answer, request)
        bodiless = answer.status < 200 or answer.status in (204, 304)
        fields = [
            (n.lower().encode("latin-1"), v.encode("latin-1")) for n, v in answer.headers.items()
        ]
        if answer.chunks is None and not bodiless:
            fields.append((b"content-length", str(len(answer.body)).encode()))
        await send({"type": "http.response.start", "status": answer.status, "headers": fields})
        head = request.method == "HEAD"
        if answer.chunks is not None:
            await self._stream(() if head else answer.chunks, answer.close, receive, send)
        else:
            body = b"" if head or bodiless else answer.body
            await send({"type": "http.response.body", "body": body})

    async def request(self, scope: Scope, receive: Receive) -> Request:
        """The request, its body read here, the one place: not at all when its declared
        length is over the limit (the app refuses that length), else up to one byte past
        the limit, however it is framed."""
        headers = Headers.of(scope["headers"])
        declared = headers.declared_length()
        body = b""
        if declared is None or declared <= self.max_body:
            body = await read_body(receive, self.max_body)
        return Request(scope, headers, body)

    def _answer(self, request: Request) -> Answer:
        """On a pool thread: the app's answer."""
        return self.app()(request)

    async def _stream(
        self, chunks: Iterable[bytes], close: Callable[[], None], receive: Receive, send: Send
    ) -> None:
        """Write a streamed answer: its chunks made on a pool thread (`_make`), each handed
        to the loop, written, and answered (go on, or stop: the client left) before the next
        is made."""
        loop = asyncio.get_running_loop()
        ready: asyncio.Queue[bytes | None] = asyncio.Queue()  # the maker's chunks, then None
        answers: queue.SimpleQueue[bool] = queue.SimpleQueue()  # one to each chunk

        def written(chunk: bytes) -> bool:  # on the pool thread
            loop.call_soon_threadsafe(ready.put_nowait, chunk)
            return answers.get()

        made = loop.run_in_executor(self.pool, _make, chunks, close, written)
        made.add_done_callback(lambda _: ready.put_nowait(None))
        left = asyncio.ensure_future(_disconnect(receive))
        chunk: bytes | None = b""
        try:
            while (chunk := await ready.get()) is not None:
                going = False
                try:
                    if not left.done():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                        going = True
                finally:
                    answers.put(going)  # the one answer to this chunk, however its write went
        finally:
            # However the writing ended (the server cancelling the request at its shutdown),
            # the maker is told to stop at its next chunk and closes the stream; the loop
            # waits for that, so every chunk handed to it is answered.
            gone = left.done()
            left.cancel()
            while chunk is not None:
                if (chunk := await ready.get()) is not None:
                    answers.put(False)
        await made  # what the app's stream raised, if it did
        if not gone:
            await send({"type": "http.response.body", "body": b""})


async def _disconnect(receive: Receive) -> None:
    """Until the client went away."""
    while (await receive())["type"] != "http.disconnect":
        pass


def _make(
    chunks: Iterable[bytes], close: Callable[[], None], written: Callable[[bytes], bool]
) -> None:
    """On a pool thread: each chunk, once the one before was written, until the last or the
    client's leaving; then the stream is closed, here, on the thread that made its chunks,
    however it ended."""
    try:
        for chunk in chunks:
            if not written(chunk):
                break
    finally:
        close()
