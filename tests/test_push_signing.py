"""Push notification signatures: ES256 and RS256 JWTs that the published JWKS verifies."""

from __future__ import annotations

import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shared.push_signing import NotificationSigner, SigningKeyError, body_hash


def pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


EC_KEY = pem(ec.generate_private_key(ec.SECP256R1()))
RSA_KEY = pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))


@pytest.mark.parametrize(("key", "alg"), [(EC_KEY, "ES256"), (RSA_KEY, "RS256")])
def test_signature_verifies_with_the_jwks(key: str, alg: str) -> None:
    signer = NotificationSigner(key, issuer="https://agent.example.com/")
    body = json.dumps({"statusUpdate": {"taskId": "t1"}}).encode()
    token = signer.sign(task_id="t1", body=body, audience="https://hook.example.com/x")
    header = jwt.get_unverified_header(token)
    jwk = signer.key.jwk
    assert jwk["kid"] == header["kid"]
    assert jwk["alg"] == alg and header["alg"] == alg
    claims = jwt.decode(
        token,
        jwt.PyJWK(jwk).key,
        algorithms=[alg],
        audience="https://hook.example.com/x",
        issuer="https://agent.example.com/",
    )
    assert claims["taskId"] == "t1"
    assert claims["bodySha256"] == body_hash(body)
    assert claims["exp"] - claims["iat"] == 300
    assert (
        claims["jti"]
        != jwt.decode(
            signer.sign(task_id="t1", body=body, audience="a"), options={"verify_signature": False}
        )["jti"]
    )


def test_a_tampered_body_does_not_match() -> None:
    signer = NotificationSigner(EC_KEY, issuer="i")
    token = signer.sign(task_id="t", body=b'{"a":1}', audience="a")
    claims = jwt.decode(token, options={"verify_signature": False})
    assert claims["bodySha256"] != body_hash(b'{"a":2}')


def test_kid_is_stable_for_a_key() -> None:
    assert NotificationSigner(EC_KEY, issuer="a").kid == NotificationSigner(EC_KEY, issuer="b").kid


@pytest.mark.parametrize(
    "key",
    [
        "not a key",
        pem(ec.generate_private_key(ec.SECP384R1())),
        pem(rsa.generate_private_key(public_exponent=65537, key_size=1024)),
    ],
)
def test_unusable_keys_are_refused_with_the_fix(key: str) -> None:
    with pytest.raises(SigningKeyError, match="A2A_PUSH_SIGNING_KEY"):
        NotificationSigner(key, issuer="i")


def test_jwks_is_published(make_client: Any) -> None:
    unsigned = make_client().http.get("/.well-known/jwks.json")
    assert unsigned.status_code == 200 and unsigned.json() == {"keys": []}
    signed = make_client(push_signing_key=EC_KEY).http.get("/.well-known/jwks.json").json()
    assert signed["keys"][0]["kty"] == "EC" and signed["keys"][0]["use"] == "sig"
    assert "d" not in signed["keys"][0]  # never the private part
