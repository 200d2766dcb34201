"""Signed agent cards (A2A 1.0 §8.4): JWS over the card in JCS, every card and style, the
JWKS that verifies them, re-signing per URL, the checks of a hostile signature."""

from __future__ import annotations

import base64
import dataclasses
import json
from typing import Any

import jwt
import pytest
import rfc8785
from cryptography.hazmat.primitives.asymmetric import ec
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st

from shared.agent import Extension, load_handler_module
from shared.app import build
from shared.card_signing import (
    ALGORITHMS,
    CardSigner,
    SignatureProblem,
    canonical,
    check,
    jwks_key,
)
from shared.settings import Settings, SettingsError
from shared.signing_keys import SigningKeyError, b64url, jwks
from tests.conftest import Client
from tests.test_card import KEY, MEMBERS, MODES, PATHS
from tests.test_push_signing import EC_KEY, RSA_KEY, pem

CARD: dict[str, Any] = {
    "name": "Agent",
    "description": "",
    "capabilities": {"streaming": False, "pushNotifications": False},
    "skills": [],
}


# RFC 8785 §3.2.2 (the example of primitive values) and §3.2.3 (property sorting, by UTF-16
# code units): the library's output checked against the RFC's own canonical forms.
RFC8785_PRIMITIVES = (
    '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],'
    ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",'
    ' "literals": [null, true, false]}'
)
RFC8785_PRIMITIVES_CANONICAL = (
    '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],'
    '"string":"\u20ac$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}'
)
RFC8785_SORTING = {
    "\u20ac": "Euro Sign",
    "\r": "Carriage Return",
    "\ufb33": "Hebrew Letter Dalet With Dagesh",
    "1": "One",
    "\U0001f600": "Emoji: Grinning Face",
    "\u0080": "Control",
    "\u00f6": "Latin Small Letter O With Diaeresis",
}
RFC8785_SORTED = ["\r", "1", "\u0080", "\u00f6", "\u20ac", "\U0001f600", "\ufb33"]


def test_jcs_is_rfc_8785s_own_examples() -> None:
    assert rfc8785.dumps(json.loads(RFC8785_PRIMITIVES)) == RFC8785_PRIMITIVES_CANONICAL.encode()
    assert list(json.loads(rfc8785.dumps(RFC8785_SORTING))) == RFC8785_SORTED


def test_the_payload_is_the_card_without_its_signatures() -> None:
    signed = {**CARD, "signatures": [{"protected": "e30", "signature": "AA"}]}
    assert canonical(signed) == canonical(CARD) == rfc8785.dumps(CARD)
    assert b"signatures" not in canonical(signed)


def _decode(text: str) -> Any:
    return json.loads(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@pytest.mark.parametrize(("key", "alg"), [(EC_KEY, "ES256"), (RSA_KEY, "RS256")])
def test_a_signed_card_verifies_and_a_changed_one_does_not(key: str, alg: str) -> None:
    signer = CardSigner(key)
    signature = signer.sign(CARD, "https://agent.example/a/")
    header = _decode(signature["protected"])
    assert header == {
        "alg": alg,
        "typ": "JOSE",
        "kid": signer.key.kid,
        "jku": "https://agent.example/a/.well-known/jwks.json",
    }
    card = {**CARD, "signatures": [signature]}
    keys = jwks(signer.key)
    assert check(card, lambda h: jwks_key(keys, h)) == []
    # The JWS is the detached-payload form: with the payload put back it is an ordinary
    # compact JWS, which PyJWT verifies on its own.
    compact = f"{signature['protected']}.{b64url(canonical(CARD))}.{signature['signature']}"
    assert jwt.api_jws.decode(compact, jwt.PyJWK(signer.key.jwk).key, algorithms=[alg])
    changes: list[dict[str, Any]] = [{"name": "Other"}, {"description": " "}, {"skills": [{}]}]
    for changed in changes:
        [problem] = check({**card, **changed}, lambda h: jwks_key(keys, h))
        assert "does not verify" in problem
    other = jwks(CardSigner(pem(ec.generate_private_key(ec.SECP256R1()))).key)
    [problem] = check(card, lambda h: jwks_key(other, h))
    assert f"no key {signer.key.kid!r}" in problem


def _good() -> tuple[dict[str, Any], dict[str, Any]]:
    signer = CardSigner(EC_KEY)
    return {**CARD, "signatures": [signer.sign(CARD, "https://a/")]}, jwks(signer.key)


GOOD = _good()


def _forged(header: dict[str, Any]) -> str:
    return b64url(json.dumps(header).encode())


@pytest.mark.parametrize(
    ("signatures", "expected"),
    [
        (None, "no signatures"),
        ("x", "not a list"),
        (["x"], "not an object"),
        ([{"protected": 1, "signature": "AA"}], "must be strings"),
        ([{"protected": "e30=", "signature": "AA"}], "base64url"),
        ([{"protected": "!!", "signature": "AA"}], "base64url"),
        ([{"protected": b64url(b"[1]"), "signature": "AA"}], "not a JSON object"),
        ([{"protected": b64url(b"{"), "signature": "AA"}], "not base64url of JSON"),
        ([{"protected": _forged({"alg": "none", "kid": "k"}), "signature": ""}], "alg 'none'"),
        ([{"protected": _forged({"alg": "HS256", "kid": "k"}), "signature": "AA"}], "HS256"),
        ([{"protected": _forged({"alg": "ES256", "crit": ["b64"]}), "signature": ""}], "crit"),
    ],
)
def test_hostile_signatures_are_named_never_raised(signatures: Any, expected: str) -> None:
    card, keys = _good()
    card = {**card, "signatures": signatures}
    problems = check(card, lambda h: jwks_key(keys, h))
    assert len(problems) == 1 and expected in problems[0]


def test_a_key_for_another_algorithm_is_refused() -> None:
    card, _ = _good()
    rsa = CardSigner(RSA_KEY).key.jwk

    def find(header: dict[str, Any]) -> dict[str, Any]:
        return {**rsa, "kid": header["kid"]}

    [problem] = check(card, find)
    assert "is for RS256, not ES256" in problem
    [problem] = check(card, lambda h: {k: v for k, v in find(h).items() if k != "alg"})
    assert "unusable" in problem or "does not verify" in problem


def test_a_card_jcs_cannot_write_is_named() -> None:
    card, keys = _good()
    assert "canonicalized" in check({**card, "n": 2**60}, lambda h: jwks_key(keys, h))[0]


# -- through the functions' front ---------------------------------------------------------


def _served(client: Client, card: dict[str, Any]) -> list[str]:
    """The card's signatures checked with the JWKS its own `jku` names, read from the front."""

    def find(header: dict[str, Any]) -> Any:
        response = client.http.get(header["jku"])
        assert response.headers["Cache-Control"].startswith("public, max-age=")
        return jwks_key(response.json(), header)

    return check(card, find)


@pytest.mark.parametrize("style", ["hybrid", "v1"])
@pytest.mark.parametrize("key", [EC_KEY, RSA_KEY])
def test_every_card_served_verifies_with_the_served_jwks(
    make_client: Any, style: str, key: str
) -> None:
    client = make_client(
        handler=MEMBERS, card_style=style, card_signing_key=key, **MODES["api-key"]
    )
    public = client.http.get(PATHS[0]).json()
    cards = [
        public,
        client.result("GetExtendedAgentCard", {}, version="1.0", headers=KEY),
        client.result("agent/getAuthenticatedExtendedCard", headers=KEY),
        client.http.get("/extendedAgentCard", headers={**KEY, "A2A-Version": "1.0"}).json(),
        client.http.get("/v1/card", headers=KEY).json(),
    ]
    for card in cards:
        assert len(card["signatures"]) == 1
        assert _served(client, card) == []
    # The extended cards are signed as themselves, not with the public card's signature.
    assert cards[1]["signatures"] != public["signatures"]


def test_a_card_is_signed_only_for_the_public_url_whatever_host_the_caller_names(
    make_client: Any,
) -> None:
    client = make_client(
        card_signing_key=EC_KEY, public_url="https://agent.example/", **MODES["api-key"]
    )
    forged = [
        {"Host": "agent.evil.example"},
        {"X-Forwarded-Host": "agent.evil.example", "X-Forwarded-Proto": "https"},
        {"Host": "b.example:8443"},
        {},
    ]
    cards = [client.http.get(PATHS[0], headers=headers).json() for headers in forged]
    for card in cards:
        assert _decode(card["signatures"][0]["protected"])["jku"] == (
            "https://agent.example/.well-known/jwks.json"
        )
        assert {i["url"] for i in card["supportedInterfaces"]} == {"https://agent.example/"}
        assert card == cards[0]  # signed once, kept
    assert "evil" not in json.dumps(cards)
    # Under A2A_PUBLIC_URL's path, the JWKS is the agent's own, beneath it.
    under = make_client(card_signing_key=EC_KEY, public_url="https://agent.example/x/")
    card = under.http.get("/x/.well-known/agent-card.json").json()
    assert _decode(card["signatures"][0]["protected"])["jku"] == (
        "https://agent.example/x/.well-known/jwks.json"
    )
    assert under.http.get("/x/.well-known/jwks.json").json() == jwks(under.app.card.signer.key)


def test_a_signing_key_without_a_public_url_stops_the_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Else the card's URL would be the caller's Host or X-Forwarded-Host, and the agent's key
    # would sign a card for agent.evil.example that verifies against this agent's JWKS.
    monkeypatch.setenv("A2A_CARD_SIGNING_KEY", EC_KEY)
    monkeypatch.delenv("A2A_PUBLIC_URL", raising=False)
    with pytest.raises(SettingsError, match="A2A_CARD_SIGNING_KEY needs A2A_PUBLIC_URL"):
        Settings.from_env()
    monkeypatch.setenv("A2A_PUBLIC_URL", "https://agent.example/")
    assert Settings.from_env().card_signing_key == EC_KEY


def test_the_jwks_has_the_card_key_and_the_push_key_once_each(make_client: Any) -> None:
    assert "signatures" not in make_client().http.get(PATHS[0]).json()
    both = make_client(card_signing_key=EC_KEY, push_signing_key=RSA_KEY)
    keys = both.http.get("/.well-known/jwks.json").json()["keys"]
    assert sorted(k["alg"] for k in keys) == ["ES256", "RS256"]
    assert all("d" not in k for k in keys)  # never the private part
    same = make_client(card_signing_key=EC_KEY, push_signing_key=EC_KEY)
    assert len(same.http.get("/.well-known/jwks.json").json()["keys"]) == 1


@pytest.mark.parametrize("mode", ["none", *sorted(MODES)])
def test_the_signed_card_is_its_own_protojson_form(make_client: Any, mode: str) -> None:
    """§8.4.1: field presence. The strict card parsed into the official v1.0 types and written
    back is the same JSON: no default a verifier would strip before canonicalizing."""
    from a2a.types import AgentCard as ProtoCard

    client = make_client(card_signing_key=EC_KEY, card_style="v1", **MODES.get(mode, {}))
    card = client.http.get(PATHS[0]).json()
    proto = json_format.ParseDict(card, ProtoCard())
    assert json_format.MessageToDict(proto) == card


def test_the_official_sdks_verifier_accepts_the_strict_card(make_client: Any) -> None:
    """a2a-python's verifier (a2a.utils.signing) reads the card as v1.0 protobuf, so it sees
    the strict card as signed (it drops the hybrid card's v0.3 members, and empty objects)."""
    from a2a.types import AgentCard as ProtoCard
    from a2a.utils.signing import create_signature_verifier

    client = make_client(card_signing_key=EC_KEY, card_style="v1", **MODES["google"])
    card = client.http.get(PATHS[0]).json()
    keys = client.http.get("/.well-known/jwks.json").json()
    seen: list[tuple[str | None, str | None]] = []

    def key_provider(kid: str | None, jku: str | None) -> Any:
        seen.append((kid, jku))
        return jwt.PyJWK(dict(jwks_key(keys, {"kid": kid}))).key

    verify = create_signature_verifier(key_provider, ["ES256"])
    verify(json_format.ParseDict(card, ProtoCard()))  # raises unless one signature verifies
    assert seen == [(client.app.card.signer.key.kid, "http://localhost/.well-known/jwks.json")]


# -- a bad key setting ---------------------------------------------------------------------


@pytest.mark.parametrize("value", ["/no/such/key.pem", "not a key at all", "\n"])
def test_a_key_setting_that_is_no_pem_stops_the_start(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("A2A_CARD_SIGNING_KEY", value)
    with pytest.raises(SettingsError, match="A2A_CARD_SIGNING_KEY") as raised:
        Settings.from_env()
    assert "not a key at all" not in str(raised.value)  # a secret's value is never repeated


def test_a_key_file_is_read(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "card.pem"
    path.write_text(EC_KEY)
    monkeypatch.setenv("A2A_CARD_SIGNING_KEY", str(path))
    monkeypatch.setenv("A2A_PUBLIC_URL", "https://agent.example/")
    assert Settings.from_env().card_signing_key == EC_KEY


@pytest.mark.parametrize(
    "key",
    [
        pem(ec.generate_private_key(ec.SECP384R1())),
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    ],
)
def test_an_unusable_key_stops_the_build_naming_the_setting(key: str) -> None:
    with pytest.raises(SigningKeyError, match="A2A_CARD_SIGNING_KEY"):
        build(Settings(card_signing_key=key))


def test_signature_problem_is_an_exception_the_key_finder_raises() -> None:
    card, _ = _good()

    def refuse(header: dict[str, Any]) -> dict[str, Any]:
        raise SignatureProblem("the jku is on another host")

    assert check(card, refuse) == ["signatures[0]: the jku is on another host"]


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
B64 = st.binary(max_size=300).map(b64url)
JWKS = st.fixed_dictionaries(
    {"kty": st.sampled_from(["EC", "RSA", "OKP", "oct"]) | JSON},
    optional={
        "crv": st.sampled_from(["P-256", "P-384", "Ed25519"]) | JSON,
        **{member: B64 | JSON for member in ("x", "y", "n", "e", "k")},
        "alg": st.sampled_from(sorted(ALGORITHMS)) | JSON,
    },
)
HEADERS = st.fixed_dictionaries(
    {"alg": st.sampled_from(sorted(ALGORITHMS)) | JSON},
    optional={"kid": JSON, "jku": JSON, "crit": JSON, "jwk": JWKS | JSON},
)


@settings(max_examples=100, deadline=None)
@given(
    signatures=JSON,
    header=HEADERS,
    signature=B64 | st.text(max_size=20),
)
def test_no_signature_a_client_could_send_raises_or_verifies(
    signatures: Any, header: dict[str, Any], signature: str
) -> None:
    card, keys = GOOD
    forged = {"protected": b64url(json.dumps(header).encode()), "signature": signature}

    def find(header: dict[str, Any]) -> Any:  # as `a2a card --verify`: an embedded jwk first
        return header["jwk"] if isinstance(header.get("jwk"), dict) else jwks_key(keys, header)

    for value in (signatures, [forged], [forged, *card["signatures"]]):
        problems = check({**CARD, "signatures": value}, find)
        assert problems and all(isinstance(problem, str) for problem in problems)


def test_a_card_value_jcs_cannot_write_stops_the_build() -> None:
    module = load_handler_module("tests.handlers.extensions")
    huge = Extension(uri="urn:example:huge", params={"n": 2**60})  # past JSON's safe integers
    module = dataclasses.replace(module, extensions=(*module.extensions, huge))
    with pytest.raises(ValueError, match=r"A2A_CARD_SIGNING_KEY\): RFC 8785 cannot write"):
        build(Settings(card_signing_key=EC_KEY), module=module)
    build(Settings(), module=module).close()  # unsigned, the same card serves
