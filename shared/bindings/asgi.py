"""The functions served on functions-framework's ASGI stack (uvicorn), and the thread pool
their WSGI apps run on.

functions-framework serves a function marked `functions_framework.aio.http` with uvicorn's
event loop instead of gunicorn's threaded worker: a request's bytes are parsed and written
by the loop, and no server thread is handed the connection. Under the threaded worker, a
bare function costs ~0.9 ms of CPU a request at 16 concurrent clients, most of it the
threads' hand-offs; on the loop it costs ~0.2 ms (README, "Performance").

The apps themselves (`shared.bindings.http.HttpApp`, `queue_target.QueueTargetApp`) stay
what they were: synchronous, one werkzeug request in, one response out, so one code serves
whichever way they are called (tests drive them through Flask's test client). `Front`
gives each request to its app on a thread of the function's own pool (THREADS of them, the
function's concurrency): a handler may block for as long as its turn runs, which the loop
must never do. The loop reads the body first (no more than A2A_MAX_BODY_BYTES + 1 bytes,
whatever the request declares), so no pool thread waits on a slow client.

A streamed answer (server-sent events) holds a pool thread for its life, as it held a server
thread before: its next chunk is made once the loop has written the last (a slow client
holds back its own stream, never the memory). A client that goes away is noticed at once
(http.disconnect), and its stream is closed at its next chunk, which frees its slot.
"""

from __future__ import annotations

import asyncio
import functools
import io
import threading
from collections.abc import Awaitable, Callable, Iterable, Iterator, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import flask
import werkzeug
from starlette.requests import Request
from starlette.responses import Response

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


WsgiApp = Callable[[flask.Request], werkzeug.Response]
_END = object()  # after a stream's last chunk


def environ(scope: Scope, body: bytes | None) -> dict[str, Any]:
    """The WSGI environ of an ASGI request, as gunicorn makes it: the path decoded (as
    latin-1 text of its UTF-8 bytes), the raw path in RAW_URI, headers as HTTP_* (repeated
    ones joined by commas); a header whose name holds `_` is dropped, as gunicorn drops it,
    so that `X_Forwarded_For` cannot pass for `X-Forwarded-For`. `body` None: not read (its
    declared length is over the limit)."""
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client")
    raw = scope.get("raw_path") or scope["path"].encode()
    query: bytes = scope.get("query_string", b"")
    result: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"],
        "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
        "PATH_INFO": scope["path"].encode().decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": (raw + b"?" + query if query else raw).decode("latin-1"),
        "SERVER_NAME": str(server[0]),
        "SERVER_PORT": str(server[1]) if server[1] is not None else "80",
        "SERVER_PROTOCOL": "HTTP/" + scope.get("http_version", "1.1"),
        "REMOTE_ADDR": client[0] if client else "",
        "wsgi.url_scheme": scope.get("scheme", "http"),
        "wsgi.input": io.BytesIO(body or b""),
        # Read to its end, however the client framed it (werkzeug reads no body without a
        # length otherwise, and a chunked body has none).
        "wsgi.input_terminated": body is not None,
        "wsgi.errors": io.StringIO(),
        "wsgi.multithread": True,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        "wsgi.version": (1, 0),
    }
    for name, value in scope["headers"]:
        key = _environ_key(name)
        if key is None:
            continue
        text = value.decode("latin-1")
        result[key] = result[key] + "," + text if key in result else text
    return result


# Clients send the same few header names again and again: each one's key is made once (a
# quarter of an environ's cost), and a client's made-up names only cycle through the bound.
@functools.lru_cache(maxsize=256)
def _environ_key(name: bytes) -> str | None:
    """A header's environ key (`HTTP_X_Y` for `x-y`, the body's two without the prefix);
    None for a name holding `_`, which gunicorn drops."""
    key = name.decode("latin-1").upper()
    if "_" in key:
        return None
    key = key.replace("-", "_")
    return key if key in ("CONTENT_TYPE", "CONTENT_LENGTH") else "HTTP_" + key


def declared_length(scope: Scope) -> int | None:
    """The request's Content-Length, when it sends a usable one."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            return int(value) if value.isdigit() else None
    return None


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


class Answer(Response):
    """An app's response, as the loop writes it: status, headers, and the body whole or, for
    a streamed one, the chunks a pool thread makes one at a time. (A Starlette response, as
    functions-framework asks of an `aio` function, that writes itself.)"""

    # super().__init__ is not called: it would render a body and its headers again.
    def __init__(
        self,
        pool: ThreadPoolExecutor,
        status: int,
        headers: list[tuple[bytes, bytes]],
        body: bytes = b"",
        chunks: Iterable[bytes] | None = None,
    ) -> None:
        self.pool = pool
        self.status_code = status
        self.fields = headers
        self.body = body
        self.chunks = chunks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send(
            {"type": "http.response.start", "status": self.status_code, "headers": self.fields}
        )
        if self.chunks is None:
            await send({"type": "http.response.body", "body": self.body})
        else:
            await _Stream(self.pool, self.chunks).send_all(receive, send)


class _Stream:
    """A streamed body: made on a pool thread, written by the loop, chunk after chunk."""

    def __init__(self, pool: ThreadPoolExecutor, chunks: Iterable[bytes]) -> None:
        self.pool = pool
        self.chunks = chunks
        self.loop = asyncio.get_running_loop()
        self.ready: asyncio.Queue[object] = asyncio.Queue()
        self.written = threading.Semaphore(0)  # one per chunk written (or not to be)
        self.gone = threading.Event()  # the client left, or the loop stopped writing

    def _make(self) -> None:
        """On a pool thread: each chunk, once the one before is written; then the end. The
        app's iterable is closed here, on the thread that made its chunks, however it ends."""
        try:
            iterator: Iterator[bytes] = iter(self.chunks)
            for chunk in iterator:
                self.loop.call_soon_threadsafe(self.ready.put_nowait, chunk)
                self.written.acquire()
                if self.gone.is_set():
                    break
        finally:
            try:
                close = getattr(self.chunks, "close", None)
                if close is not None:
                    close()
            finally:
                self.loop.call_soon_threadsafe(self.ready.put_nowait, _END)

    async def send_all(self, receive: Receive, send: Send) -> None:
        made = self.loop.run_in_executor(self.pool, self._make)
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            while (chunk := await self.ready.get()) is not _END:
                if not self.gone.is_set():
                    assert isinstance(chunk, bytes)
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
                self.written.release()
            if not self.gone.is_set():
                await send({"type": "http.response.body", "body": b""})
        finally:
            # However this ends (the client gone, the server cancelling the request at its
            # shutdown), the maker is let go and closes the app's stream at its next chunk.
            self.gone.set()
            self.written.release()
            watcher.cancel()
        await made

    async def _watch(self, receive: Receive) -> None:
        """Wait for the client to go: its stream then stops at its next chunk."""
        while (await receive())["type"] != "http.disconnect":
            pass
        self.gone.set()
        self.written.release()


class Front:
    """An app served by an `aio` function: the body read on the loop, the app run on the
    pool (`threads` threads), its answer written by the loop."""

    def __init__(self, app: Callable[[], WsgiApp], threads: int, max_body: int) -> None:
        self.app = app  # built at the first request, on a pool thread
        self.max_body = max_body
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="a2a")

    async def __call__(self, request: Request) -> Answer:
        scope = request.scope
        declared = declared_length(scope)
        body = None
        if declared is None or declared <= self.max_body:
            body = await read_body(request.receive, self.max_body)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.pool, self._answer, environ(scope, body))

    def _answer(self, env: dict[str, Any]) -> Answer:
        """On a pool thread: the app's response, with its body unless it is streamed."""
        response = self.app()(flask.Request(env))
        if response.is_streamed:  # closed by its stream, however that ends
            chunks, status, headers = response.get_wsgi_response(env)
            return Answer(self.pool, _code(status), _fields(headers), chunks=chunks)
        try:
            if response.status_code == 200 and env["REQUEST_METHOD"] != "HEAD":
                # What werkzeug's get_wsgi_response gives (most answers), without its pass
                # over the headers: a 200's, its length included, are final as they are.
                fields = _fields(response.headers.to_wsgi_list())
                return Answer(self.pool, 200, fields, body=response.get_data())
            body, status, headers = response.get_wsgi_response(env)
            return Answer(self.pool, _code(status), _fields(headers), body=b"".join(body))
        finally:
            response.close()


def _code(status: str) -> int:
    return int(status.split(" ", 1)[0])


def _fields(headers: Iterable[tuple[str, str]]) -> list[tuple[bytes, bytes]]:
    return [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
