"""Signing push notifications: a JWT per delivery, and the JWKS that verifies it.

With a signing key configured (A2A_PUSH_SIGNING_KEY: a PEM private key, EC P-256 for ES256
or RSA for RS256; on Cloud Functions, mount it from Secret Manager into that variable), each
notification carries `X-A2A-Notification-Signature: <JWT>`. The JWT names its key (`kid`, the
RFC 7638 thumbprint), and claims `iss` (the agent), `aud` (the webhook URL), `iat`, `exp`,
`jti` (unique per delivery, so a receiver can refuse replays), `taskId`, and `bodySha256` (the
base64url SHA-256 of the exact body posted), so the signature covers the payload.
The public keys are published at `/.well-known/jwks.json` on the `a2a` function.
"""

from __future__ import annotations

import base64
import hashlib
import json
import time
import uuid
from typing import Any

SIGNATURE_HEADER = "X-A2A-Notification-Signature"
LIFETIME_SECONDS = 300


class SigningKeyError(ValueError):
    """The configured signing key cannot be used; the message says why."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def body_hash(body: bytes) -> str:
    return _b64url(hashlib.sha256(body).digest())


class NotificationSigner:
    def __init__(self, private_key_pem: str, *, issuer: str) -> None:
        # Imported here: only a deployment with a signing key pays for them at cold start.
        import jwt
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        try:
            key = serialization.load_pem_private_key(private_key_pem.encode(), password=None)
        except (ValueError, TypeError) as exc:
            raise SigningKeyError(
                f"A2A_PUSH_SIGNING_KEY is not an unencrypted PEM private key ({exc})"
            ) from None
        if isinstance(key, ec.EllipticCurvePrivateKey) and isinstance(key.curve, ec.SECP256R1):
            self.algorithm = "ES256"
            algorithm: Any = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256)
        elif isinstance(key, rsa.RSAPrivateKey) and key.key_size >= 2048:
            self.algorithm = "RS256"
            algorithm = jwt.algorithms.RSAAlgorithm(jwt.algorithms.RSAAlgorithm.SHA256)
        else:
            raise SigningKeyError(
                "A2A_PUSH_SIGNING_KEY must be an EC P-256 key (ES256) or an RSA key of 2048 "
                "bits or more (RS256); make one with `openssl ecparam -name prime256v1 "
                "-genkey -noout | openssl pkcs8 -topk8 -nocrypt`"
            )
        self._key = key
        self._issuer = issuer
        self._encode = jwt.encode
        public: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
        # RFC 7638: the thumbprint hashes the required members in lexicographic order.
        required = {"EC": ("crv", "kty", "x", "y"), "RSA": ("e", "kty", "n")}[public["kty"]]
        canonical = json.dumps({k: public[k] for k in required}, separators=(",", ":"))
        self.kid = _b64url(hashlib.sha256(canonical.encode()).digest())
        self._jwk = {**public, "kid": self.kid, "use": "sig", "alg": self.algorithm}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self._jwk]}

    def sign(self, *, task_id: str, body: bytes, audience: str, now: float | None = None) -> str:
        issued = int(now if now is not None else time.time())
        claims = {
            "iss": self._issuer,
            "aud": audience,
            "iat": issued,
            "exp": issued + LIFETIME_SECONDS,
            "jti": str(uuid.uuid4()),
            "taskId": task_id,
            "bodySha256": body_hash(body),
        }
        return self._encode(claims, self._key, algorithm=self.algorithm, headers={"kid": self.kid})
