"""The soak's webhook receiver: every POST recorded (path, body, what it answered, when),
answered 200, or 500 while failing, or held unanswered while hanging (faults.py sets which).
Each push config gets a path of its own (`/hook/<owner>/<config id>`), so the ledger reads what
each one received."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.conftest import free_port
from tests.webhook import Received

HANG_LIMIT = 60.0  # seconds a hung POST is held at most (the fault's window ends sooner)


class Receiver:
    def __init__(self) -> None:
        self.port = free_port()
        self.received: list[Received] = []
        self.mode = "ok"  # "ok", "fail" (500) or "hang"
        self._lock = threading.Lock()
        self._released = threading.Event()
        self._released.set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if receiver.mode == "hang":
                    receiver._released.wait(HANG_LIMIT)
                status = 500 if receiver.mode == "fail" else 200
                with receiver._lock:
                    receiver.received.append(
                        Received(self.path, dict(self.headers), body, status, time.time())
                    )
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True).start()

    def url(self, owner: str, config_id: str) -> str:
        return f"http://localhost:{self.port}/hook/{owner}/{config_id}"

    def set_mode(self, mode: str) -> None:
        if mode == "hang":
            self._released.clear()
        self.mode = mode
        if mode != "hang":
            self._released.set()

    def accepted(self) -> dict[str, list[Any]]:
        """Each path's accepted bodies (JSON), in the order they came."""
        with self._lock:
            got: dict[str, list[Any]] = {}
            for post in self.received:
                if 200 <= post.status < 300:
                    got.setdefault(post.path, []).append(post.json)
            return got

    def close(self) -> None:
        self.set_mode("ok")
        self._server.shutdown()
        self._server.server_close()
