"""Who may call the worker: Cloud Tasks, proven by the OIDC token on its request.

In production Cloud Tasks sends `Authorization: Bearer <ID token>` signed by Google for the
configured service account and addressed to the target URL; `GoogleTokens` checks it with
google-auth against Google's published certificates (cached for an hour). The Cloud Tasks
emulator cannot sign as Google: it sends a token of the same shape signed HS256 with a
secret it shares with the worker (emulator/oidc.py describes it), which `EmulatorTokens`
checks with the standard library. Anything else is refused before any work is done.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Callable, Collection, Mapping
from typing import Any, Protocol

from shared.clock import SYSTEM, Clock

GOOGLE_ISSUERS = frozenset({"accounts.google.com", "https://accounts.google.com"})
GOOGLE_CERTS_URL = "https://www.googleapis.com/oauth2/v1/certs"
_CERTS_TTL = 3600.0  # seconds; Google rotates its keys over days
_LEEWAY = 60  # seconds of clock skew tolerated on exp and iat


class TokenRefused(Exception):
    """No valid token; the message says what is wrong (it goes to the log), `reason` says it
    in a few words fit for the caller (never the token or its claims)."""

    def __init__(self, message: str, reason: str = "invalid token") -> None:
        super().__init__(message)
        self.reason = reason


class TokenVerifier(Protocol):
    def verify(self, token: str, audience: str | Collection[str]) -> Mapping[str, Any]:
        """The token's claims. Raises TokenRefused unless it is Cloud Tasks' for `audience`
        (or one of them)."""
        ...


def bearer(authorization: str | None) -> str:
    """The token of an `Authorization: Bearer <token>` header."""
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise TokenRefused("no Authorization: Bearer token", "no token")
    return token.strip()


def _check_claims(
    claims: Mapping[str, Any],
    audience: str | Collection[str],
    email: str | None,
    issuers: frozenset[str],
) -> None:
    if claims.get("iss") not in issuers:
        raise TokenRefused(f"issuer {claims.get('iss')!r} is not Google", "wrong issuer")
    accepted = {_same_url(a) for a in ([audience] if isinstance(audience, str) else audience)}
    if _same_url(claims.get("aud")) not in accepted:
        raise TokenRefused(f"audience {claims.get('aud')!r} is not {audience}", "wrong audience")
    if email is not None and (claims.get("email") != email or not claims.get("email_verified")):
        raise TokenRefused(f"e-mail {claims.get('email')!r} is not {email}", "wrong account")


def _same_url(url: object) -> object:
    # https://worker.example and https://worker.example/ name the same target.
    return url.rstrip("/") if isinstance(url, str) else url


class EmulatorTokens:
    """HS256 tokens of the Cloud Tasks emulator, signed with the shared secret."""

    def __init__(self, secret: str, email: str | None) -> None:
        self._secret = secret.encode()
        self._email = email

    def verify(self, token: str, audience: str | Collection[str]) -> Mapping[str, Any]:
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenRefused("not a JWT", "not a JWT")
        try:
            header = json.loads(_unb64(parts[0]))
            claims = json.loads(_unb64(parts[1]))
            signature = _unb64(parts[2])
        except ValueError as exc:
            raise TokenRefused(f"undecodable JWT ({exc})", "not a JWT") from None
        if not isinstance(header, dict) or not isinstance(claims, dict):
            raise TokenRefused("the JWT's header and payload must be JSON objects")
        if header.get("alg") != "HS256":
            raise TokenRefused(
                f"alg {header.get('alg')!r}: only HS256 tokens are accepted",
                "unsupported algorithm",
            )
        signed = f"{parts[0]}.{parts[1]}".encode("ascii", "replace")
        expected = hmac.new(self._secret, signed, hashlib.sha256).digest()
        # Constant time: the comparison must say nothing about the secret.
        if not hmac.compare_digest(expected, signature):
            raise TokenRefused("bad signature", "bad signature")
        exp = claims.get("exp")
        if not isinstance(exp, int) or exp + _LEEWAY < time.time():
            raise TokenRefused("token expired", "expired")
        _check_claims(claims, audience, self._email, frozenset({"https://accounts.google.com"}))
        return claims


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


CertsFetcher = Callable[[], Mapping[str, str]]


def fetch_google_certs(url: str = GOOGLE_CERTS_URL) -> Mapping[str, str]:
    """Google's current signing certificates for ID tokens: key id -> PEM."""
    import google.auth.transport.requests

    try:
        response = google.auth.transport.requests.Request()(url, method="GET", timeout=10)
    except Exception as exc:  # any transport failure: no keys, so no token passes
        raise TokenRefused(f"cannot fetch {url} ({exc})", "signing keys unavailable") from None
    if response.status != 200:
        raise TokenRefused(
            f"cannot fetch Google's certificates (HTTP {response.status})",
            "signing keys unavailable",
        )
    certs: dict[str, str] = json.loads(response.data)
    return certs


# google-auth's messages, mapped to the few words a caller may read (the rest is logged).
_GOOGLE_REASONS = (
    ("expired", "expired"),
    ("too early", "not yet valid"),
    ("audience", "wrong audience"),
    ("certificate for key id", "unknown signing key"),
    ("signature", "bad signature"),
    ("algorithm", "unsupported algorithm"),
)


def _google_reason(message: str) -> str:
    lowered = message.lower()
    return next((reason for key, reason in _GOOGLE_REASONS if key in lowered), "invalid token")


class GoogleTokens:
    """Google-signed ID tokens: Cloud Tasks' for one service account (`email`), or any
    verified account's (`email=None`, the `google` identity mode)."""

    def __init__(
        self,
        email: str | None,
        fetch_certs: CertsFetcher = fetch_google_certs,
        clock: Clock = SYSTEM,
    ) -> None:
        self._email = email
        self._clock = clock
        self._fetch = fetch_certs
        self._lock = threading.Lock()
        self._certs: Mapping[str, str] = {}
        self._fetched = float("-inf")

    def verify(self, token: str, audience: str | Collection[str]) -> Mapping[str, Any]:
        from google.auth import exceptions, jwt

        try:
            claims: Mapping[str, Any] = jwt.decode(  # type: ignore[no-untyped-call]
                token,
                certs=self._current_certs(token),
                audience=None,  # _check_claims checks it (one of several, trailing slash or not)
                clock_skew_in_seconds=_LEEWAY,
            )
        except (exceptions.GoogleAuthError, ValueError) as exc:
            raise TokenRefused(
                f"invalid Google ID token ({exc})", _google_reason(str(exc))
            ) from None
        _check_claims(claims, audience, self._email, GOOGLE_ISSUERS)
        return claims

    def _current_certs(self, token: str) -> Mapping[str, str]:
        """The cached certificates; fetched again when old or when they lack the token's key
        (Google rotated), at most once a minute so bad tokens cannot make us hammer Google."""
        from google.auth import jwt

        try:
            kid = jwt.decode_header(token).get("kid")  # type: ignore[no-untyped-call]
        except ValueError as exc:
            raise TokenRefused(f"not a JWT ({exc})", "not a JWT") from None
        with self._lock:
            age = self._clock.monotonic() - self._fetched
            if age > _CERTS_TTL or (kid not in self._certs and age > 60):
                self._certs = self._fetch()
                self._fetched = self._clock.monotonic()
            return self._certs
