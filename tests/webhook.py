"""A real webhook receiver for push tests: records every POST, answers as scripted, and can
go down (refusing connections) and come back up on the same port."""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered
    at: float  # time.time() of arrival

    @property
    def json(self) -> Any:
        return json.loads(self.body)


class Webhook:
    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[Received] = []
        self.answers: deque[int] = deque()  # scripted statuses, then 200
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.up()

    def url(self, path: str = "/hook") -> str:
        return f"http://localhost:{self.port}{path}"

    def up(self) -> None:
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hook._lock:
                    status = hook.answers.popleft() if hook.answers else 200
                    hook.received.append(
                        Received(self.path, dict(self.headers), body, status, time.time())
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server

    def down(self) -> None:
        """Stop listening: connections are refused until up() again."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def accepted(self) -> list[Received]:
        with self._lock:
            return [r for r in self.received if 200 <= r.status < 300]

    def wait_accepted(self, count: int, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.accepted()
            if len(got) >= count:
                return got
            time.sleep(0.05)
        raise AssertionError(
            f"the webhook accepted {len(self.accepted())} of {count} in {timeout} s"
        )
