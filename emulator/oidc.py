"""The OIDC-shaped token the Cloud Tasks emulator sends, and how it is minted.

Real Cloud Tasks puts `Authorization: Bearer <Google-signed ID token>` on HTTP tasks that have
an `oidc_token`. The emulator cannot sign as Google, so it sends a JWT of the same shape:

    header  {"alg": "HS256", "typ": "JWT"}     (or {"alg": "none"} when no secret is set)
    payload {"iss": "https://accounts.google.com",
             "aud": <oidc_token.audience, or the task's URL when unset>,
             "sub": <service account email>, "email": <service account email>,
             "email_verified": true, "iat": <now>, "exp": <now + 3600>,
             "emulator": true}
    signature  HMAC-SHA256 over "<header>.<payload>" with the shared secret
               ($CLOUD_TASKS_EMULATOR_SECRET of the launcher), base64url without padding;
               empty for alg "none".

The worker checks it with `shared.tasks_auth.EmulatorTokens` (HS256 with the secret only: an
unsigned token is always refused). Standard library only: the launcher imports this inside
the tasks venv.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

ISSUER = "https://accounts.google.com"
DEFAULT_LIFETIME = 3600


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _sign(signing_input: str, secret: str) -> str:
    return _b64(hmac.new(secret.encode(), signing_input.encode("ascii"), hashlib.sha256).digest())


def make_token(
    email: str,
    audience: str,
    secret: str | None,
    *,
    lifetime: int = DEFAULT_LIFETIME,
    now: float | None = None,
) -> str:
    """A JWT naming the service account and audience; HS256 with secret, else unsigned."""
    issued = int(time.time() if now is None else now)
    header = {"alg": "HS256" if secret else "none", "typ": "JWT"}
    payload = {
        "iss": ISSUER,
        "aud": audience,
        "sub": email,
        "email": email,
        "email_verified": True,
        "iat": issued,
        "exp": issued + lifetime,
        "emulator": True,
    }
    signing_input = (
        _b64(json.dumps(header, separators=(",", ":")).encode())
        + "."
        + _b64(json.dumps(payload, separators=(",", ":")).encode())
    )
    return signing_input + "." + (_sign(signing_input, secret) if secret else "")
