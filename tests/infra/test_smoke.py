"""`infra.smoke` against a minimal in-process A2A v1.0 agent (card, send, get, cancel)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from infra.smoke import main
from tests.conftest import Server

TASK = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}


class FakeAgent(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []

    def log_message(self, format: str, *args: Any) -> None:
        return None

    def reply(self, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        url = f"http://{self.headers['Host']}/rpc"
        interface = {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        card = {"name": "fake", "supportedInterfaces": [interface], "capabilities": {}}
        self.reply(card)

    def do_POST(self) -> None:
        request = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeAgent.seen.append((request["method"], self.headers.get("A2A-Version")))
        results: dict[str, Any] = {"SendMessage": {"task": TASK}, "GetTask": TASK}
        if request["method"] in results:
            self.reply(
                {"jsonrpc": "2.0", "id": request["id"], "result": results[request["method"]]}
            )
        else:
            error = {"code": -32002, "message": "Task cannot be canceled"}
            self.reply({"jsonrpc": "2.0", "id": request["id"], "error": error})


@pytest.fixture
def agent_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeAgent)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_smoke_checks_card_send_get_cancel(
    agent_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeAgent.seen.clear()
    assert main([agent_url]) == 0
    out = capsys.readouterr().out
    assert "skip SendStreamingMessage" in out
    assert "smoke passed" in out
    methods = [method for method, _ in FakeAgent.seen]
    assert methods == ["SendMessage", "GetTask", "SendMessage", "CancelTask"]
    assert {version for _, version in FakeAgent.seen} == {"1.0"}


def test_smoke_fails_clearly_when_nothing_answers(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["http://127.0.0.1:9", "--timeout", "2"]) == 1
    assert capsys.readouterr().err.startswith("FAIL ConnectionError")


def test_smoke_passes_against_the_real_agent(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([server.url]) == 0
    out = capsys.readouterr().out
    assert "ok   SendMessage" in out and "ok   GetTask" in out and "ok   CancelTask" in out
    assert "smoke passed" in out
