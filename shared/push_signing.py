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

import hashlib
import time
import uuid

from shared.signing_keys import SigningKey, SigningKeyError, b64url

__all__ = ["SIGNATURE_HEADER", "NotificationSigner", "SigningKeyError", "body_hash"]

SIGNATURE_HEADER = "X-A2A-Notification-Signature"
LIFETIME_SECONDS = 300


def body_hash(body: bytes) -> str:
    return b64url(hashlib.sha256(body).digest())


class NotificationSigner:
    def __init__(self, private_key_pem: str, *, issuer: str) -> None:
        # Imported here: only a deployment with a signing key pays for it at cold start.
        import jwt

        self.key = SigningKey(private_key_pem, setting="A2A_PUSH_SIGNING_KEY")
        self.algorithm = self.key.algorithm
        self.kid = self.key.kid
        self._issuer = issuer
        self._encode = jwt.encode

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
        return self._encode(
            claims, self.key.private_key, algorithm=self.algorithm, headers={"kid": self.kid}
        )
