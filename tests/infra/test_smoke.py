"""`infra.smoke` against a minimal in-process A2A v1.0 agent (card, send, get, cancel)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from infra.smoke import SmokeFailed, identity_token, main
from shared.identity.api_key import hashed
from tests.conftest import Server

TASK = {"id": "t1", "contextId": "c1", "status": {"state": "TASK_STATE_COMPLETED"}}


class FakeAgent(BaseHTTPRequestHandler):
    seen: ClassVar[list[tuple[str, str | None]]] = []
    # As IAM in front of a function: this Authorization header or 403, card included.
    required: ClassVar[str | None] = None

    def refused(self) -> bool:
        if FakeAgent.required is None or self.headers.get("Authorization") == FakeAgent.required:
            return False
        self.send_response(403)
        self.send_header("Content-Length", "0")
        self.end_headers()
        return True

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
        if self.refused():
            return
        url = f"http://{self.headers['Host']}/rpc"
        interface = {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
        card = {"name": "fake", "supportedInterfaces": [interface], "capabilities": {}}
        self.reply(card)

    def do_POST(self) -> None:
        if self.refused():
            return
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
    FakeAgent.required = None
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


def test_behind_iam_the_smoke_sends_an_identity_token(
    agent_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    FakeAgent.required = "Bearer id-token"
    monkeypatch.setenv("TOKEN", "id-token")
    FakeAgent.seen.clear()
    assert main([agent_url]) == 0
    assert "smoke passed" in capsys.readouterr().out
    assert len(FakeAgent.seen) == 4
    monkeypatch.setenv("TOKEN", "stale")
    assert main([agent_url]) == 1
    assert "HTTP 403" in capsys.readouterr().err


class Ran:
    """A stand-in for subprocess.run: gcloud's answers, in order."""

    def __init__(self, *answers: tuple[int, str]) -> None:
        self.answers = list(answers)
        self.argv: list[list[str]] = []

    def __call__(self, argv: list[str], **kwargs: Any) -> Any:
        self.argv.append(argv)
        code, out = self.answers.pop(0)
        return type("Done", (), {"returncode": code, "stdout": out})()


def test_the_identity_token_comes_from_gcloud() -> None:
    service_account = Ran((0, "sa-token\n"))
    assert identity_token("https://a2a.example", service_account) == "sa-token"
    assert service_account.argv == [
        ["gcloud", "auth", "print-identity-token", "--audiences=https://a2a.example"]
    ]
    user = Ran((1, ""), (0, "user-token\n"))  # --audiences is for service accounts only
    assert identity_token("https://a2a.example", user) == "user-token"
    with pytest.raises(SmokeFailed, match=r"gcloud auth login.*TOKEN="):
        identity_token("https://a2a.example", Ran((1, ""), (1, "")))


def test_an_api_key_agent_gets_the_key_its_card_asks_for(
    start_server: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    key = "smoke-key-" + "k" * 32
    server = start_server(A2A_AUTH="api-key", A2A_API_KEYS=f"smoke:{hashed(key)}")
    assert main([server.url]) == 1
    assert "API_KEY=" in capsys.readouterr().err
    monkeypatch.setenv("API_KEY", key)
    assert main([server.url]) == 0
    assert "smoke passed" in capsys.readouterr().out
