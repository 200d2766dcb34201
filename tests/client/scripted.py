"""A small scripted agent for the CLI tests: it serves the documents a test gives it (a card,
a JWKS) and answers each JSON-RPC method with the answers a test queued for it (JSON, or an
event stream), recording every request it gets. For what the kit's own agent cannot be made
to do: a hostile card, an `UNSPECIFIED` state, a stream that fails."""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Request:
    method: str  # the HTTP method
    path: str
    headers: dict[str, str]
    body: Any  # the JSON of a POST, None for a GET


@dataclass(frozen=True)
class Stream:
    """An answer written as server-sent events: each JSON-RPC result, then `error` frames."""

    results: list[Any]
    error: str | None = None


@dataclass(frozen=True)
class Failure:
    """An answer that is a JSON-RPC error."""

    code: int
    message: str


def task(state: str, task_id: str = "t-1", context_id: str = "c-1") -> dict[str, Any]:
    return {"id": task_id, "contextId": context_id, "status": {"state": f"TASK_STATE_{state}"}}


def card(url: str, **extra: Any) -> dict[str, Any]:
    """A 1.0 card whose JSON-RPC endpoint is `url`."""
    return {
        "name": "Scripted",
        "description": "a test's agent",
        "version": "1",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [],
        "supportedInterfaces": [
            {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        ],
        **extra,
    }


class ScriptedAgent:
    """Serves on 127.0.0.1 until `close()`; `url` is its origin."""

    def __init__(self) -> None:
        self.documents: dict[str, Any] = {}
        self.answers: dict[str, deque[Any]] = defaultdict(deque)
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                agent._record(self, None)
                found = self.path in agent.documents
                self._send(200 if found else 404, agent.documents.get(self.path))

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                agent._record(self, body)
                method = body.get("method") if isinstance(body, dict) else None
                with agent._lock:
                    queued = agent.answers[str(method)]
                    answer = queued.popleft() if len(queued) > 1 else queued[0]
                rpc_id = body.get("id") if isinstance(body, dict) else None
                if isinstance(answer, Stream):
                    self._stream(answer, rpc_id)
                elif isinstance(answer, Failure):
                    error = {"code": answer.code, "message": answer.message}
                    self._send(200, {"jsonrpc": "2.0", "id": rpc_id, "error": error})
                else:
                    self._send(200, {"jsonrpc": "2.0", "id": rpc_id, "result": answer})

            def _send(self, status: int, value: Any) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, stream: Stream, rpc_id: Any) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for index, result in enumerate(stream.results):
                    frame = json.dumps({"jsonrpc": "2.0", "id": rpc_id, "result": result})
                    self.wfile.write(f"id: {index}\ndata: {frame}\n\n".encode())
                if stream.error is not None:
                    self.wfile.write(f"event: error\ndata: {stream.error}\n\n".encode())
                self.wfile.flush()
                self.close_connection = True

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def _record(self, handler: BaseHTTPRequestHandler, body: Any) -> None:
        headers = dict(handler.headers.items())
        with self._lock:
            self.requests.append(Request(handler.command, handler.path, headers, body))

    def serve_card(self, value: dict[str, Any]) -> None:
        self.documents["/.well-known/agent-card.json"] = value

    def answer(self, method: str, *answers: Any) -> None:
        """Queue answers to `method`, in order; the last one answers again and again."""
        self.answers[method].extend(answers)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
