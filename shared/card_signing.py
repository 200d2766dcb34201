"""Signed agent cards (A2A 1.0 §8.4): the signature a card carries, and checking one.

With A2A_CARD_SIGNING_KEY set (a PEM private key, or the path of a file holding one: EC P-256
for ES256, RSA for RS256; shared.signing_keys), every card the agent serves, the public one
and the extended one in each style, carries `signatures: [{protected, signature}]`: a JWS
(RFC 7515) with a detached payload, the card without its `signatures` in the JSON
Canonicalization Scheme (RFC 8785, by the `rfc8785` library). The signing input is
BASE64URL(protected) "." BASE64URL(JCS(card)); the protected header is
{alg, typ: "JOSE", kid, jku}, `kid` the key's RFC 7638 thumbprint and `jku` the agent's
`/.well-known/jwks.json` under the card's own URL, which serves the public key.

The spec signs a card's ProtoJSON form: a field without presence at its default is left out
before canonicalizing (§8.4.1). shared.card writes its cards so already (it never writes
`"required": false` nor an empty StringList), so the card as served is what is signed, and
a verifier that strips defaults first (the A2A TCK's) reaches the same bytes.

`check` is the verifier's side (`a2a card --verify`): every signature checked against a key
the caller's `find_key` gives for its protected header (the `jku`'s JWKS, or an embedded
`jwk`), every failure named.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

from shared.signing_keys import SigningKey, b64url

SETTING = "A2A_CARD_SIGNING_KEY"
JWKS_PATH = "/.well-known/jwks.json"
# What a card's signature may use: asymmetric algorithms only (an HMAC "verified" with a
# public key is the classic JOSE confusion; "none" signs nothing).
ALGORITHMS = frozenset(
    {"ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "EdDSA"}
)


class SignatureProblem(Exception):
    """Why one signature cannot be checked, or does not verify: the message says."""


def jwks_url(base_url: str) -> str:
    """Where the agent at `base_url` (a card's URL) serves its public keys."""
    return base_url.rstrip("/") + JWKS_PATH


def canonical(card: Mapping[str, Any]) -> bytes:
    """The signed payload: the card without `signatures`, in RFC 8785's canonical form."""
    import rfc8785

    return rfc8785.dumps({k: v for k, v in card.items() if k != "signatures"})


class CardSigner:
    """Signs cards with the key of A2A_CARD_SIGNING_KEY (SigningKeyError names it)."""

    def __init__(self, private_key_pem: str) -> None:
        self.key = SigningKey(private_key_pem, setting=SETTING)

    def sign(self, card: Mapping[str, Any], base_url: str) -> dict[str, str]:
        """The AgentCardSignature of `card`, served at `base_url`."""
        header = {
            "alg": self.key.algorithm,
            "typ": "JOSE",
            "kid": self.key.kid,
            "jku": jwks_url(base_url),
        }
        protected = b64url(json.dumps(header, separators=(",", ":")).encode())
        signing_input = f"{protected}.{b64url(canonical(card))}".encode()
        return {"protected": protected, "signature": b64url(self.key.sign(signing_input))}


KeyFinder = Callable[[dict[str, Any]], Mapping[str, Any]]


def check(card: Mapping[str, Any], find_key: KeyFinder) -> list[str]:
    """What is wrong with the card's signatures, one line each: empty when there is at least
    one and every one verifies. `find_key` maps a protected header to its public JWK, or
    raises SignatureProblem."""
    signatures = card.get("signatures")
    if not signatures:
        return ["the card has no signatures"]
    if not isinstance(signatures, list):
        return ["the card's signatures is not a list"]
    try:
        payload = canonical(card)
    except ValueError as exc:  # a value JCS cannot write (a NaN, an integer past 2**53)
        return [f"the card cannot be canonicalized (RFC 8785): {exc}"]
    problems = []
    for index, entry in enumerate(signatures):
        try:
            verify_one(entry, payload, find_key)
        except SignatureProblem as problem:
            problems.append(f"signatures[{index}]: {problem}")
    return problems


def verify_one(entry: object, payload: bytes, find_key: KeyFinder) -> None:
    """Raises SignatureProblem unless `entry` is a signature of `payload`."""
    import jwt

    if not isinstance(entry, dict):
        raise SignatureProblem("not an object")
    protected, signature = entry.get("protected"), entry.get("signature")
    if not isinstance(protected, str) or not isinstance(signature, str):
        raise SignatureProblem("`protected` and `signature` must be strings")
    header = _json_object(protected)
    alg = header.get("alg")
    if not isinstance(alg, str) or alg not in ALGORITHMS:
        raise SignatureProblem(f"alg {alg!r} is not one of {', '.join(sorted(ALGORITHMS))}")
    if "crit" in header:  # RFC 7515 §4.1.11: extensions this verifier does not know
        raise SignatureProblem(f"crit {header['crit']!r}: no critical extension is understood")
    jwk = find_key(header)
    if jwk.get("alg") not in (None, alg):
        raise SignatureProblem(f"the key {header.get('kid')!r} is for {jwk['alg']}, not {alg}")
    try:
        key = jwt.PyJWK(dict(jwk), algorithm=alg)
        valid = key.Algorithm.verify(
            f"{protected}.{b64url(payload)}".encode(), key.key, _b64decode(signature)
        )
    except jwt.PyJWTError as exc:
        raise SignatureProblem(f"the key {header.get('kid')!r} is unusable: {exc}") from None
    if not valid:
        raise SignatureProblem(
            f"does not verify with key {header.get('kid')!r}: the card was changed after it "
            "was signed, or signed by another key"
        )


def _b64decode(text: str) -> bytes:
    if not text.isascii() or any(c in text for c in "+/="):
        raise SignatureProblem("not base64url without padding")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise SignatureProblem("not base64url without padding") from None


def _json_object(protected: str) -> dict[str, Any]:
    try:
        header = json.loads(_b64decode(protected))
    except (ValueError, RecursionError):
        raise SignatureProblem("the protected header is not base64url of JSON") from None
    if not isinstance(header, dict):
        raise SignatureProblem("the protected header is not a JSON object")
    return header


def jwks_key(jwks: Mapping[str, Any], header: Mapping[str, Any]) -> Mapping[str, Any]:
    """The key of a JWKS that `header`'s `kid` names (SignatureProblem when none does)."""
    keys = jwks.get("keys")
    if not isinstance(keys, list):
        raise SignatureProblem("the JWKS has no `keys` list")
    kid = header.get("kid")
    for key in keys:
        if isinstance(key, dict) and key.get("kid") == kid:
            return key
    raise SignatureProblem(f"no key {kid!r} in the JWKS")
