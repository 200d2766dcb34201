"""`a2a card get --verify`: a signed agent's card verifies with the JWKS it serves; a changed
card, a key elsewhere, a key the card carries itself (unless pinned) fail, exit 1, and say
which signature and why; a card without signatures is reported as such (signing is optional)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec

from shared.card_signing import CardSigner, canonical
from shared.client.card_trust import thumbprint
from shared.signing_keys import SigningKey, b64url, jwks
from tests.client.conftest import Cli
from tests.client.scripted import ScriptedAgent
from tests.conftest import Server, free_port
from tests.test_push_signing import EC_KEY
from tests.test_push_signing import pem as pem_of

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


def serve_signed(agent: ScriptedAgent, card: dict[str, Any], jku_base: str | None = None) -> None:
    """Serve `card` signed by EC_KEY, its `jku` under `jku_base` (the agent's own by
    default), and the JWKS."""
    signer = CardSigner(EC_KEY)
    signed = {**card, "signatures": [signer.sign(card, jku_base or agent.url + "/")]}
    agent.serve_card(signed)
    agent.documents["/.well-known/jwks.json"] = jwks(signer.key)


@pytest.fixture
def documents() -> Iterator[ScriptedAgent]:
    served = ScriptedAgent()
    yield served
    served.close()


def self_signed(card: dict[str, Any], pem: str = EC_KEY) -> dict[str, Any]:
    """`card` signed by a key it carries in the signature's header (a `jwk`, no `jku`)."""
    key = SigningKey(pem, setting="test")
    header = {"alg": key.algorithm, "typ": "JOSE", "kid": key.kid, "jwk": key.jwk}
    protected = b64url(json.dumps(header, separators=(",", ":")).encode())
    signing_input = f"{protected}.{b64url(canonical(card))}".encode()
    signature = {"protected": protected, "signature": b64url(key.sign(signing_input))}
    return {**card, "signatures": [signature]}


def test_a_signed_agents_card_verifies(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    port = free_port()  # a signed card is signed for A2A_PUBLIC_URL alone
    url = f"http://localhost:{port}"
    server = Server({"A2A_CARD_SIGNING_KEY": EC_KEY, "A2A_PUBLIC_URL": url}, port=port)
    try:
        cli = Cli(server.url, tmp_path, capsys, monkeypatch)
        out = cli.ok("card", "get", "--verify")
        kid = CardSigner(EC_KEY).key.kid
        assert out.splitlines()[-1] == (
            f"Signatures: 1 verified (kid {kid!r} from {server.url}/.well-known/jwks.json)"
        )
        assert "Signatures: present, not checked (--verify)" in cli.ok("card", "get")
    finally:
        server.stop()


def test_a_card_signed_by_its_own_embedded_key_does_not_verify_unless_pinned(
    documents: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    # Issue 36's repro: anyone can sign a card with a key of their own and embed it.
    forged = self_signed({**CARD, "name": "Payments agent (official)"})
    documents.documents["/.well-known/agent-card.json"] = forged
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    run = cli("card", "get", "--verify")
    assert run.code == 1 and run.out == "", run
    key = SigningKey(EC_KEY, setting="test")
    assert thumbprint(key.jwk) == key.kid  # the kit's kid is the RFC 7638 thumbprint
    assert run.err.startswith(
        "a2a: error: A2AFN_SIGNATURE_UNVERIFIED: the card's signatures do not verify: "
        f"signatures[0]: it is signed by the key it carries itself (thumbprint {key.kid}), "
        "which vouches for nothing"
    ), run.err
    as_json = cli("-o", "json", "card", "get", "--verify")
    assert json.loads(as_json.out)["error"]["code"] == "A2AFN_SIGNATURE_UNVERIFIED"
    # The user who knows the key pins it, by thumbprint or in a JWKS file.
    pinned = cli.ok("card", "get", "--verify", f"--trust-key={key.kid}")
    assert (
        f"Signatures: 1 verified (kid {key.kid!r} from embedded jwk {key.kid} (pinned))" in pinned
    )
    other = SigningKey(EC_KEY, setting="test").kid[::-1]
    assert cli("card", "get", "--verify", f"--trust-key={other}").code == 1
    trusted = tmp_path / "jwks.json"
    trusted.write_text(json.dumps(jwks(key)))
    assert cli("card", "get", "--verify", "--trust-jwks", str(trusted)).code == 0
    # A changed card does not verify even with its key pinned.
    documents.documents["/.well-known/agent-card.json"] = {**forged, "name": "Changed"}
    assert cli("card", "get", "--verify", f"--trust-key={key.kid}").code == 1


def test_a_key_whose_thumbprint_starts_with_a_dash_is_pinned_as_the_error_says(
    documents: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """A thumbprint is base64url: one in 64 starts with '-', which `--trust-key -x...` would
    take for an option. The failure names the form that passes it, and that form pins it."""
    pem = next(
        key
        for key in (pem_of(ec.generate_private_key(ec.SECP256R1())) for _ in range(5000))
        if SigningKey(key, setting="test").kid.startswith("-")
    )
    documents.documents["/.well-known/agent-card.json"] = self_signed(CARD, pem)
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    refused = cli("card", "get", "--verify")
    [named] = re.findall(r"\((--trust-key=\S+):", refused.err)
    assert named == f"--trust-key={SigningKey(pem, setting='test').kid}"
    assert "(pinned)" in cli.ok("card", "get", "--verify", named)


def test_a_changed_card_fails_naming_the_signature(
    documents: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    serve_signed(documents, CARD)
    verified = cli("-o", "json", "card", "get", "--verify")
    assert verified.code == 0 and json.loads(verified.out)["name"] == "Signed"
    jku = f"{documents.url}/.well-known/jwks.json"
    kid = CardSigner(EC_KEY).key.kid
    assert verified.err == f"a2a: signatures: 1 verified (kid {kid!r} from {jku})\n"
    documents.documents["/.well-known/agent-card.json"]["name"] = "Changed"
    run = cli("card", "get", "--verify")
    assert run.code == 1
    assert "the card's signatures do not verify: signatures[0]: does not verify" in run.err


def test_a_key_off_the_agents_origin_is_not_fetched(
    documents: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    serve_signed(documents, CARD, jku_base="https://keys.example/")
    run = cli("card", "get", "--verify")
    assert run.code == 1
    assert (
        "its jku https://keys.example/.well-known/jwks.json is not on the origin the card came "
        f"from (http://127.0.0.1:{documents.server.server_port}): not fetched"
    ) in run.err
    # Nor is one named by a card read from a file: a file has no origin to vouch for it.
    serve_signed(documents, CARD)
    card_file = tmp_path / "card.json"
    card_file.write_text(json.dumps(documents.documents["/.well-known/agent-card.json"]))
    local = cli("card", "get", "--verify", url=str(card_file))
    assert local.code == 1 and "(a local file): not fetched" in local.err


def test_an_unsigned_card_is_reported_as_such_not_failed(
    documents: ScriptedAgent,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    cli = Cli(documents.url, tmp_path, capsys, monkeypatch)
    documents.documents["/.well-known/agent-card.json"] = CARD
    assert "Signatures: absent" in cli.ok("card", "get")
    run = cli("card", "get", "--verify")
    assert run.code == 0 and run.out.splitlines()[-1] == "Signatures: absent", run
    assert run.err == "a2a: warning: the card carries no signatures: there is nothing to verify\n"
