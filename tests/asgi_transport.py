"""An httpx transport that serves each request with an ASGI app in this process, as uvicorn
would: the tests' clients reach the functions' very front (shared/bindings/asgi.py) this way.

httpx's own ASGITransport is async only, and Starlette's TestClient reads an answer whole
before it returns, so an endless event stream would never come back. Here the app runs on
one event loop thread (the process's, shared by every transport, as one server's); the
test's thread gets the answer once its head is sent, then each chunk of its body as the app
sends it; closing the answer early (a client that goes away) sends the app `http.disconnect`
and waits for the app to end.

httpx takes `.` and `..` segments out of a URL's path; a request whose `target` extension
(httpcore's name) gives its path as sent is sent as that, as curl's --path-as-is does
(`HttpClient` sets it).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, MutableMapping
from typing import Any
from urllib.parse import quote, unquote

import httpx

Message = MutableMapping[str, Any]
AsgiApp = Callable[
    [
        MutableMapping[str, Any],
        Callable[[], Coroutine[Any, Any, Message]],
        Callable[[Message], Awaitable[None]],
    ],
    Coroutine[Any, Any, None],
]

# Longer than any test waits for an answer's next piece: a hang fails, naming what hung.
PATIENCE = 60.0
CLIENT = ("127.0.0.1", 50000)
_ENDED: Message = {"type": "ended"}  # after the app's last message: its run is over


_LOOP: list[asyncio.AbstractEventLoop] = []  # started at the first request
_STARTING = threading.Lock()


def _loop() -> asyncio.AbstractEventLoop:
    with _STARTING:
        if not _LOOP:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="asgi-loop", daemon=True).start()
            _LOOP.append(loop)
        return _LOOP[0]


class AsgiTransport(httpx.BaseTransport):
    """Serves every request with `app` on the event loop thread."""

    def __init__(self, app: AsgiApp) -> None:
        self.app = app
        self.loop = _loop()
        self.open: set[_Exchange] = set()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        exchange = _Exchange(self, request.read())
        scope = _scope(request)
        exchange.served = asyncio.run_coroutine_threadsafe(
            self.app(scope, exchange.receive, exchange.send), self.loop
        )
        exchange.served.add_done_callback(lambda _: exchange.messages.put(_ENDED))
        start = exchange.next_message(f"{request.method} {request.url}: no answer")
        assert start["type"] == "http.response.start", start
        self.open.add(exchange)
        headers = [(bytes(name), bytes(value)) for name, value in start.get("headers", [])]
        return httpx.Response(start["status"], headers=headers, stream=exchange, request=request)

    def close(self) -> None:
        """Let go of every answer still open (the client closes)."""
        for exchange in list(self.open):
            exchange.close()


class HttpClient(httpx.Client):
    """The tests' httpx client: a relative URL's path is sent as it is written (what a URL
    cannot hold percent-encoded, as httpx does), `.` and `..` segments included; `opened`
    gives an answer whose body is read as the test reads it. Header values are sent as
    latin-1 text."""

    def opened(self, method: str, url: str, **kwargs: Any) -> httpx.Response:
        """The answer once its head came; its body comes as the test iterates it. Closing
        it early is the client going away; the client's end closes what is still open."""
        return self.send(self.build_request(method, url, **kwargs), stream=True)

    def build_request(self, method: str, url: Any, **kwargs: Any) -> httpx.Request:
        headers = kwargs.get("headers")
        if isinstance(headers, Mapping):  # latin-1 text, as HTTP/1.1 carries it (httpx: ASCII)
            kwargs["headers"] = {
                name: value.encode("latin-1") if isinstance(value, str) else value
                for name, value in headers.items()
            }
        request = super().build_request(method, url, **kwargs)
        if isinstance(url, str) and url.startswith("/"):
            path = quote(url.split("#", 1)[0].split("?", 1)[0], safe="/%:@!$&'()*+,;=~")
            query = request.url.query
            request.extensions["target"] = path.encode() + (b"?" + query if query else b"")
        return request


def target(request: httpx.Request) -> bytes:
    """The request's target as sent: its path and query."""
    sent: bytes = request.extensions.get("target") or request.url.raw_path
    return sent


def _scope(request: httpx.Request) -> dict[str, Any]:
    """The ASGI scope uvicorn makes of this request: the path percent-decoded from the raw
    target, the headers as sent (lower-case names), the server the Host names, the peer
    CLIENT unless the request's `client` extension names another (`(address, port)`)."""
    raw_path, _, query = target(request).partition(b"?")
    port = request.url.port or (443 if request.url.scheme == "https" else 80)
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": request.method,
        "scheme": request.url.scheme,
        "path": unquote(raw_path.decode("ascii")),
        "raw_path": raw_path,
        "query_string": query,
        "root_path": "",
        "headers": [(name.lower(), value) for name, value in request.headers.raw],
        "server": (request.url.host, port),
        "client": request.extensions.get("client", CLIENT),
    }


class _Exchange(httpx.SyncByteStream):
    """One request served: its body handed to the app, the app's messages handed to the
    test's thread, and the client's leaving handed back."""

    served: concurrent.futures.Future[None]  # the app's run

    def __init__(self, transport: AsgiTransport, body: bytes) -> None:
        self.transport = transport
        self.body: bytes | None = body
        self.messages: queue.Queue[Message] = queue.Queue()
        self.left = asyncio.Event()  # the client went away (or read the whole answer)
        self.ended = False

    async def receive(self) -> Message:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.left.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        self.messages.put(message)

    def next_message(self, what: str) -> Message:
        """The app's next message; what the app raised is raised here, in the test."""
        try:
            message = self.messages.get(timeout=PATIENCE)
        except queue.Empty:
            raise AssertionError(f"{what} within {PATIENCE} s") from None
        if message is _ENDED:
            self.served.result()  # raises what the app raised
            raise AssertionError(f"{what}: the app ended")
        return message

    def __iter__(self) -> Iterator[bytes]:
        while not self.ended:
            message = self.next_message("the answer's body stopped")
            assert message["type"] == "http.response.body", message
            self.ended = not message.get("more_body", False)
            if message.get("body"):
                yield message["body"]

    def close(self) -> None:
        """The client is done: if the body has not ended, it goes away (http.disconnect);
        either way the app's run is waited for, so what it frees is free once this returns."""
        self.transport.open.discard(self)
        self.transport.loop.call_soon_threadsafe(self.left.set)
        self.served.result(PATIENCE)
