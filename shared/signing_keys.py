"""A private key that signs what the agent publishes (push notifications, the agent card).

One rule for both settings that hold one (A2A_PUSH_SIGNING_KEY, A2A_CARD_SIGNING_KEY): an
unencrypted PEM private key, EC P-256 (ES256) or RSA of 2048 bits or more (RS256); its
public half as a JWK whose `kid` is its RFC 7638 thumbprint, so the same key always has the
same `kid` and a receiver finds it in the agent's JWKS (`/.well-known/jwks.json`).
The JOSE work is PyJWT's (and cryptography's), imported only when a key is configured.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

MAKE_ONE = (
    "make one with `openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 "
    "-nocrypt`"
)


class SigningKeyError(ValueError):
    """The configured signing key cannot be used; the message names the setting and says why."""


def b64url(data: bytes) -> str:
    """Base64url without padding (RFC 7515 §2)."""
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


class SigningKey:
    """A loaded private key: its JWS algorithm, `kid` and public JWK, and `sign`."""

    def __init__(self, private_key_pem: str, *, setting: str) -> None:
        import jwt
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        try:
            key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(
                f"{setting} is not an unencrypted PEM private key ({exc}); {MAKE_ONE}"
            ) from None
        algorithm: Any
        if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
            self.algorithm = "ES256"
            algorithm = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256)
        elif isinstance(key, rsa.RSAPrivateKey) and key.key_size >= 2048:
            self.algorithm = "RS256"
            algorithm = jwt.algorithms.RSAAlgorithm(jwt.algorithms.RSAAlgorithm.SHA256)
        else:
            raise SigningKeyError(
                f"{setting} must be an EC P-256 key (ES256) or an RSA key of 2048 bits or more "
                f"(RS256); {MAKE_ONE}"
            )
        self.private_key = key
        self._algorithm = algorithm
        public: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
        # RFC 7638: the thumbprint hashes the required members in lexicographic order.
        required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n")}[public["kty"]]
        canonical = json.dumps({k: public[k] for k in required}, separators=(",", ":"))
        self.kid = b64url(hashlib.sha256(canonical.encode()).digest())
        self.jwk: dict[str, Any] = {**public, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def sign(self, signing_input: bytes) -> bytes:
        """The JWS signature of `signing_input` (ES256: r || s, as RFC 7518 §3.4 has it)."""
        signature: bytes = self._algorithm.sign(signing_input, self.private_key)
        return signature


def jwks(*keys: SigningKey | None) -> dict[str, Any]:
    """The JWKS of the configured keys, each once (one key may sign both)."""
    found = {key.kid: key.jwk for key in keys if key is not None}
    return {"keys": list(found.values())}
