"""A real webhook receiver for push tests: records every POST, answers as scripted, and can
go down (every connection reset before a request is read, and counted) and come back up on
the same port. Tests wait on what it received, never for a while."""

from __future__ import annotations

import json
import socket
import socketserver
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
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


class _Resetting(socketserver.ThreadingTCPServer):
    """Takes each connection and resets it at once: a webhook that is down."""

    allow_reuse_address = True
    daemon_threads = True

    def shutdown_request(self, request: Any) -> None:
        self.close_request(request)  # no FIN first: the linger of 0 makes close() a reset


class Webhook:
    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[Received] = []
        self.refused = 0  # connections reset while down
        self.answers: deque[int] = deque()  # scripted statuses, then 200
        self._changed = threading.Condition()
        self._server: socketserver.BaseServer | None = None
        self.up()

    def url(self, path: str = "/hook") -> str:
        return f"http://localhost:{self.port}{path}"

    def up(self) -> None:
        """Answer POSTs (scripted statuses first, then 200)."""
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with hook._changed:
                    status = hook.answers.popleft() if hook.answers else 200
                    hook.received.append(
                        Received(self.path, dict(self.headers), body, status, time.time())
                    )
                    hook._changed.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.close()
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._serve(server)

    def down(self) -> None:
        """Reset every connection before reading a request: no POST reaches `received`."""
        hook = self

        class Reset(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                self.request.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                with hook._changed:
                    hook.refused += 1
                    hook._changed.notify_all()

        self.close()
        self._serve(_Resetting(("127.0.0.1", self.port), Reset))

    def close(self) -> None:
        """Stop listening altogether (connections are refused)."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _serve(self, server: socketserver.BaseServer) -> None:
        # Polls for shutdown() this often: a stopping webhook holds a test up no longer.
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        self._server = server

    def accepted(self) -> list[Received]:
        with self._changed:
            return self._accepted()

    def wait_accepted(self, count: int, timeout: float = 20.0) -> list[Received]:
        with self._changed:
            if not self._changed.wait_for(lambda: len(self._accepted()) >= count, timeout):
                raise AssertionError(
                    f"the webhook accepted {len(self._accepted())} of {count} in {timeout} s"
                )
            return self._accepted()

    def wait_until(
        self, done: Callable[[list[Received]], bool], timeout: float = 20.0
    ) -> list[Received]:
        """The accepted POSTs, once `done(accepted)` holds."""
        with self._changed:
            if not self._changed.wait_for(lambda: done(self._accepted()), timeout):
                raise AssertionError(f"the webhook's {len(self._accepted())} POSTs in {timeout} s")
            return self._accepted()

    def wait_refused(self, count: int, timeout: float = 20.0) -> None:
        with self._changed:
            if not self._changed.wait_for(lambda: self.refused >= count, timeout):
                raise AssertionError(f"{self.refused} of {count} connections in {timeout} s")

    def _accepted(self) -> list[Received]:
        return [r for r in self.received if 200 <= r.status < 300]
