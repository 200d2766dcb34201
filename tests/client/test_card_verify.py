"""`a2a card --verify`: a signed agent's card verifies with the JWKS it serves; a changed card,
a key elsewhere, a card without signatures fail, exit 1, and say which signature and why."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from shared.card_signing import CardSigner
from shared.signing_keys import jwks
from tests.client.conftest import Cli
from tests.conftest import Server, free_port
from tests.test_push_signing import EC_KEY

CARD: dict[str, Any] = {
    "name": "Signed",
    "description": "d",
    "version": "1",
    "capabilities": {},
    "defaultInputModes": ["text/plain"],
    "defaultOutputModes": ["text/plain"],
    "skills": [],
    "supportedInterfaces": [
        {"url": "http://127.0.0.1/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ],
}


class Documents:
    """A tiny HTTP server answering GETs of its paths with their JSON (an agent's card and
    JWKS, as a test wants them)."""

    def __init__(self) -> None:
        self.paths: dict[str, Any] = {}
        documents = self.paths

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = json.dumps(documents.get(self.path)).encode()
                self.send_response(200 if self.path in documents else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def serve_signed(self, card: dict[str, Any], jku_base: str | None = None) -> None:
        signer = CardSigner(EC_KEY)
        signed = {**card, "signatures": [signer.sign(card, jku_base or self.url + "/")]}
        self.paths["/.well-known/agent-card.json"] = signed
        self.paths["/.well-known/jwks.json"] = jwks(signer.key)


@pytest.fixture
def documents() -> Iterator[Documents]:
    served = Documents()
    yield served
    served.server.shutdown()
    served.server.server_close()


def test_a_signed_agents_card_verifies(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()  # a signed card is signed for A2A_PUBLIC_URL alone
    url = f"http://localhost:{port}"
    server = Server({"A2A_CARD_SIGNING_KEY": EC_KEY, "A2A_PUBLIC_URL": url}, port=port)
    try:
        cli = Cli(server.url, tmp_path, capsys, monkeypatch)
        out = cli.ok("card", "--verify")
        kid = CardSigner(EC_KEY).key.kid
        assert out.splitlines()[-1] == (
            f"signatures: 1 verified (kid {kid!r} from {server.url}/.well-known/jwks.json)"
        )
    finally:
        server.stop()


def test_a_changed_card_fails_naming_the_signature(
    documents: Documents,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    documents.serve_signed(CARD)
    *_, verified = cli.ok("--json", "card", "--verify").splitlines()
    jku = f"{documents.url}/.well-known/jwks.json"
    assert json.loads(verified) == {"verified": [{"kid": CardSigner(EC_KEY).key.kid, "key": jku}]}
    documents.paths["/.well-known/agent-card.json"]["name"] = "Changed"
    run = cli("card", "--verify")
    assert run.code == 1
    assert "a2a: error: the card's signatures do not verify: signatures[0]: does not verify" in (
        run.err
    )


def test_a_key_off_the_agents_origin_is_not_fetched(
    documents: Documents,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    documents.serve_signed(CARD, jku_base="https://keys.example/")
    run = cli("card", "--verify")
    assert run.code == 1
    assert "its jku https://keys.example/.well-known/jwks.json is not on the agent's origin" in (
        run.err
    )


def test_an_unsigned_card_fails_verification_only_when_asked(
    documents: Documents,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    documents.paths["/.well-known/agent-card.json"] = CARD
    assert cli("card").code == 0
    run = cli("card", "--verify")
    assert run.code == 1 and "the card has no signatures" in run.err
