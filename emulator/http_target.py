"""A tiny recording HTTP server on 127.0.0.1: the dispatch target in emulator tests.

Cloud Tasks (and later push delivery) POSTs to it; tests read what arrived and when. The path
chooses the answer: /fail/... answers 500, /slow/<seconds>/... sleeps and then answers 200,
anything else answers 200 at once. Standard library only.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any


@dataclass
class Hit:
    """One request the target received; started and ended are time.time() values."""

    method: str
    path: str
    headers: Message  # case-insensitive, as HTTP headers are
    body: bytes
    started: float
    ended: float = 0.0


@dataclass
class HttpTarget:
    """The server and what it received; start with HttpTarget.start(), stop with close()."""

    server: ThreadingHTTPServer
    thread: threading.Thread
    hits: list[Hit] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @classmethod
    def start(cls) -> HttpTarget:
        """Serve on a free port of 127.0.0.1, one thread per request (slow ones overlap)."""
        holder: list[HttpTarget] = []
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(lambda: holder[0]))
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        holder.append(cls(server, thread))
        thread.start()
        return holder[0]

    def url(self, path: str) -> str:
        """The absolute URL of path on this server."""
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def received(self, prefix: str) -> list[Hit]:
        """The hits whose path starts with prefix, in arrival order."""
        with self.lock:
            return [hit for hit in self.hits if hit.path.startswith(prefix)]

    def wait_for(self, prefix: str, count: int, timeout: float = 10.0) -> list[Hit]:
        """The hits under prefix once count of them have been answered; fails at timeout."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            hits = self.received(prefix)
            if len(hits) >= count and all(hit.ended for hit in hits[:count]):
                return hits
            time.sleep(0.02)
        raise AssertionError(f"{prefix}: {len(self.received(prefix))} requests, wanted {count}")

    def close(self) -> None:
        """Stop serving and release the port."""
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def __enter__(self) -> HttpTarget:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _handler(target: Any) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            hit = Hit(self.command, self.path, self.headers, self.rfile.read(length), time.time())
            recorder: HttpTarget = target()
            with recorder.lock:
                recorder.hits.append(hit)
            parts = self.path.strip("/").split("/")
            if parts[0] == "slow":
                time.sleep(float(parts[1]))
            hit.ended = time.time()
            self.send_response(500 if parts[0] == "fail" else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_POST = do_GET = do_PUT = do_PATCH = do_DELETE = _answer

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler
