"""The OIDC-shaped token the Cloud Tasks emulator sends, and how to check it.

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

A worker in emulator mode verifies it with `verify_token(token, secret, audience=...)`.
Standard library only: the launcher imports this inside the tasks venv.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

ISSUER = "https://accounts.google.com"
DEFAULT_LIFETIME = 3600


class TokenError(ValueError):
    """A token that is malformed, unsigned where a signature is required, wrong, or expired."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


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


def bearer_token(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header value."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenError("missing or malformed Authorization: Bearer header")
    return token.strip()


def verify_token(
    token: str,
    secret: str | None,
    *,
    audience: str | None = None,
    email: str | None = None,
    now: float | None = None,
    leeway: int = 60,
) -> dict[str, Any]:
    """Check a token from make_token and return its claims.

    With a secret, only an HS256 token signed with it passes (an unsigned one is refused);
    without, only an unsigned one. audience and email, when given, must match exactly.
    """
    parts = token.split(".")
    if len(parts) != 3:
        raise TokenError("not a JWT (expected three dot-separated parts)")
    try:
        header = json.loads(_unb64(parts[0]))
        claims: dict[str, Any] = json.loads(_unb64(parts[1]))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TokenError(f"undecodable JWT: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(claims, dict):
        raise TokenError("JWT header and payload must be JSON objects")
    alg = header.get("alg")
    if secret:
        if alg != "HS256":
            raise TokenError(f"expected an HS256 token, got alg {alg!r}")
        expected = _sign(parts[0] + "." + parts[1], secret)
        # Constant time, so the comparison says nothing about the secret.
        if not hmac.compare_digest(expected, parts[2]):
            raise TokenError("bad signature")
    elif alg != "none" or parts[2]:
        raise TokenError("no secret to check a signed token with")
    current = time.time() if now is None else now
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp + leeway < current:
        raise TokenError("token expired")
    if claims.get("iss") != ISSUER:
        raise TokenError(f"unexpected issuer {claims.get('iss')!r}")
    if audience is not None and claims.get("aud") != audience:
        raise TokenError(f"audience {claims.get('aud')!r} is not {audience!r}")
    if email is not None and claims.get("email") != email:
        raise TokenError(f"email {claims.get('email')!r} is not {email!r}")
    return claims
